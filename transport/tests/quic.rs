//! End-to-end tests of the QUIC integration on loopback.

#![cfg(feature = "quic")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{connect, endpoints, raise_probes, router_relay, transfer, Dir, Relay};
use ecnq::quic::report::{self, Repr};
use ecnq::quic::{CongestionControl, DatagramError, PeerMode};
use ecnq::{Ecn, Feedback, LoadFactor, Mode, Scheme, SchemeTag};

const MB: usize = 1 << 20;
const VCP: CongestionControl = CongestionControl::Ecnq(Scheme::Vcp);

fn is_classic(mode: Option<Mode>) -> bool {
    matches!(
        mode,
        Some(Mode::SlowStart | Mode::CongestionAvoidance | Mode::Recovery)
    )
}

fn vcp_tos(ecn: Ecn) -> u8 {
    SchemeTag::new(Scheme::Vcp.wire().id()).tos(ecn)
}

/// The last TOS byte of a data packet, presence probes (Not-ECT) left out.
fn last_data(tos: &[u8]) -> Option<u8> {
    tos.iter()
        .rev()
        .find(|&&t| Ecn::from_tos(t) != Ecn::NotEct)
        .copied()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_controller_moves_10_mb_intact() {
    for cc in CongestionControl::all() {
        let (client, server) = endpoints(cc, cc, "[::1]:0");
        let (c, s) = connect(&client, &server, server.local_addr().unwrap()).await;
        transfer(&c, &s, 10 * MB, 1).await;
        let sender = c.congestion_stats();
        let receiver = s.congestion_stats();
        assert_eq!(sender.controller, cc);
        if let Some(scheme) = cc.router_assisted() {
            assert!(sender.reports_received > 0, "{cc}: {sender:?}");
            assert_eq!(sender.reports_rejected, 0, "{cc}");
            assert!(sender.path_load.is_some(), "{cc}");
            assert!(receiver.reports_sent >= sender.reports_received, "{cc}");
            let counts = receiver.ecn_received;
            assert_eq!(counts[Ecn::Ce.bits() as usize], 0, "{cc}");
            if scheme.wire().sends_probes() {
                // No router on loopback: the presence probes arrive
                // unraised, and the sender runs Cubic with ECT(0).
                assert_eq!(sender.mode, PeerMode::ClassicNoRouter, "{cc}: {sender:?}");
                assert!(
                    sender.peer_unraised_probes.is_some_and(|n| n > 100),
                    "{cc}: {sender:?}"
                );
                assert!(
                    counts[Ecn::Ect0.bits() as usize] > 2000,
                    "{cc}: {receiver:?}"
                );
            } else {
                // The data packets arrive with the scheme's base codepoint.
                assert_eq!(sender.mode, PeerMode::Ecnq, "{cc}: {sender:?}");
                let base = scheme.wire().base_ecn();
                assert!(counts[base.bits() as usize] > 5000, "{cc}: {receiver:?}");
            }
        } else {
            assert_eq!(sender.mode, PeerMode::Unassisted, "{cc}");
            assert_eq!(sender.reports_received, 0, "{cc}");
            assert_eq!(receiver.ecn_received[Ecn::Ect1.bits() as usize], 0, "{cc}");
        }
        let socket = server.socket().stats();
        assert_eq!(
            (socket.truncated_control, socket.missing_tos),
            (0, 0),
            "{cc}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ecn_survives_gro_merged_receives_ipv4_and_dual_stack() {
    for bind in ["127.0.0.1:0", "[::]:0"] {
        let (client, server) = endpoints(VCP, VCP, bind);
        let port = server.local_addr().unwrap().port();
        let target = format!("127.0.0.1:{port}").parse().unwrap();
        let (c, s) = connect(&client, &server, target).await;
        transfer(&c, &s, 4 * MB, 2).await;
        let socket = server.socket().stats();
        assert!(
            socket.gro_receives > 0,
            "{bind}: no GRO receive happened: {socket:?}"
        );
        assert_eq!(
            (socket.truncated_control, socket.missing_tos),
            (0, 0),
            "{bind}"
        );
        let stats = s.congestion_stats();
        // Every data packet was counted with its real codepoint: VCP's
        // ECT(1), then (no router on loopback) Cubic's ECT(0), and the
        // presence probes' Not-ECT.
        let counts = stats.ecn_received;
        assert!(
            counts[Ecn::Ect1.bits() as usize] + counts[Ecn::Ect0.bits() as usize] > 2000,
            "{bind}: {stats:?}"
        );
        assert!(counts[Ecn::NotEct.bits() as usize] > 0, "{bind}: {stats:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tos_byte_on_the_wire_carries_tag_and_scheme_code() {
    let (client, server) = endpoints(VCP, VCP, "127.0.0.1:0");
    let relay = router_relay(server.local_addr().unwrap());
    let (c, s) = connect(&client, &server, relay.addr).await;
    transfer(&c, &s, MB, 3).await;
    // The client's first packet goes out before it knows the server: tag +
    // quinn's ECT(0). The server answers knowing the client runs ecnq, so
    // its first flight is presence probes: tag + Not-ECT.
    assert_eq!(relay.tos(Dir::ToServer)[0], vcp_tos(Ecn::Ect0));
    assert_eq!(relay.tos(Dir::ToClient)[0], vcp_tos(Ecn::NotEct));
    for dir in [Dir::ToServer, Dir::ToClient] {
        let tos = relay.tos(dir);
        // Once the peer is known to run ecnq: tag + VCP's low-load code ECT(1).
        let ect1 = tos.iter().filter(|&&t| t == vcp_tos(Ecn::Ect1)).count();
        assert!(ect1 > tos.len() / 2, "{dir:?}: {} of {}", ect1, tos.len());
        assert!(tos
            .iter()
            .all(|&t| SchemeTag::from_tos(t) == SchemeTag::new(1)));
        // Presence probes, which the router raised.
        assert!(tos.contains(&vcp_tos(Ecn::NotEct)), "{dir:?}");
    }
    assert_eq!(c.congestion_stats().mode, PeerMode::Ecnq);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remarked_overload_reaches_the_sender_law() {
    let (client, server) = endpoints(VCP, VCP, "127.0.0.1:0");
    // A router in overload: every ECN-capable client→server packet, and
    // every presence probe it raises, leaves with CE.
    let relay = Relay::start(server.local_addr().unwrap(), |dir, tos| match dir {
        Dir::ToServer if Ecn::from_tos(raise_probes(tos)).is_ect() => tos | Ecn::Ce.bits(),
        _ => raise_probes(tos),
    });
    let (c, s) = connect(&client, &server, relay.addr).await;
    transfer(&c, &s, 2 * MB, 4).await;
    let receiver = s.congestion_stats();
    assert_eq!(
        receiver.local_estimate.map(|f| f.level),
        Some(2),
        "{receiver:?}"
    );
    let sender = c.congestion_stats();
    assert_eq!(
        sender.mode,
        PeerMode::Ecnq,
        "CE must not count as classic congestion"
    );
    assert_eq!(sender.path_load.map(|f| f.level), Some(2), "{sender:?}");
    assert!(sender.decreases >= 1, "{sender:?}");
    // MD (×0.875, then a t_p hold) keeps the window far below a free path's.
    let (free_client, free_server) = endpoints(VCP, VCP, "127.0.0.1:0");
    let (fc, fs) = connect(
        &free_client,
        &free_server,
        free_server.local_addr().unwrap(),
    )
    .await;
    transfer(&fc, &fs, 2 * MB, 4).await;
    let free = fc.congestion_stats();
    assert!(
        sender.window < free.window,
        "overloaded {} vs free {}",
        sender.window,
        free.window
    );
    assert_eq!(free.decreases, 0, "{free:?}");
}

/// A plain quinn endpoint (quinn's own socket and NewReno) on 127.0.0.1.
fn vanilla_server(cert: &ecnq::quic::SelfSigned) -> quinn::Endpoint {
    let identity = cert.identity();
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(identity.chain, identity.key)
    .unwrap();
    tls.alpn_protocols = vec![b"ecnq-test".to_vec()];
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap();
    let config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    quinn::Endpoint::server(config, "127.0.0.1:0".parse().unwrap()).unwrap()
}

fn vanilla_client(cert: &ecnq::quic::SelfSigned) -> quinn::Endpoint {
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .with_root_certificates(cert.roots())
    .with_no_client_auth();
    tls.alpn_protocols = vec![b"ecnq-test".to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    endpoint
}

async fn vanilla_sink(endpoint: quinn::Endpoint) -> (quinn::Connection, Vec<u8>) {
    let connection = endpoint.accept().await.unwrap().await.unwrap();
    let mut stream = connection.accept_uni().await.unwrap();
    let data = stream.read_to_end(64 * MB).await.unwrap();
    (connection, data)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ecnq_client_falls_back_against_vanilla_server() {
    let cert = ecnq::quic::SelfSigned::new(&["localhost"]).unwrap();
    let vanilla = vanilla_server(&cert);
    let relay = Relay::start(vanilla.local_addr().unwrap(), |_, tos| tos);
    let client = ecnq::quic::Endpoint::client(
        "127.0.0.1:0".parse().unwrap(),
        cert.roots(),
        common::options(VCP),
    )
    .unwrap();
    let data = common::pattern(4 * MB, 5);
    let sink = tokio::spawn(vanilla_sink(vanilla.clone()));
    let c = client.connect(relay.addr, "localhost").await.unwrap();
    let mut stream = c.open_uni().await.unwrap();
    stream.write_all(&data).await.unwrap();
    stream.finish().unwrap();
    let (_server_side, received) = sink.await.unwrap();
    assert!(received == data, "payload corrupted");
    let stats = c.congestion_stats();
    assert_eq!(stats.mode, PeerMode::ClassicPeerNotEcnq, "{stats:?}");
    assert!(
        is_classic(stats.law_mode),
        "the law must have been replaced: {stats:?}"
    );
    assert_eq!(stats.reports_received, 0);
    // After the fallback the client sends untagged ECT(0): quinn's ECN
    // validation kept passing against the vanilla peer.
    let tos = relay.tos(Dir::ToServer);
    assert_eq!(tos[0], vcp_tos(Ecn::Ect0));
    assert_eq!(
        *tos.last().unwrap(),
        SchemeTag::UNTAGGED.tos(Ecn::Ect0),
        "{tos:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ecnq_server_falls_back_against_vanilla_client() {
    let cert = ecnq::quic::SelfSigned::new(&["localhost"]).unwrap();
    let server = ecnq::quic::Endpoint::server(
        "127.0.0.1:0".parse().unwrap(),
        cert.identity(),
        common::options(VCP),
    )
    .unwrap();
    let vanilla = vanilla_client(&cert);
    let data = common::pattern(4 * MB, 6);
    let addr = server.local_addr().unwrap();
    let (accepted, connected) = tokio::join!(server.accept(), async {
        vanilla.connect(addr, "localhost").unwrap().await.unwrap()
    });
    let s = accepted.unwrap().unwrap();
    let send = async {
        let mut stream = s.open_uni().await.unwrap();
        stream.write_all(&data).await.unwrap();
        stream.finish().unwrap();
        stream.stopped().await.unwrap();
    };
    let recv = async {
        let mut stream = connected.accept_uni().await.unwrap();
        stream.read_to_end(64 * MB).await.unwrap()
    };
    let ((), received) = tokio::join!(send, recv);
    assert!(received == data, "payload corrupted");
    let stats = s.congestion_stats();
    assert_eq!(stats.mode, PeerMode::ClassicPeerNotEcnq, "{stats:?}");
    // The vanilla client's quinn kept ECN on: its packets arrive ECT(0).
    let [not_ect, ect1, ect0, ce] = stats.ecn_received;
    assert!(ect0 > 10 && not_ect + ect1 + ce == 0, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn application_datagrams_arrive_intact_beside_reports() {
    let (client, server) = endpoints(VCP, VCP, "[::1]:0");
    let (c, s) = connect(&client, &server, server.local_addr().unwrap()).await;
    let bulk = transfer(&c, &s, 4 * MB, 7);
    let datagrams = async {
        for i in 0u32..50 {
            let up = Bytes::from(format!("up-{i}-").repeat(10));
            let down = Bytes::from(format!("down-{i}-").repeat(10));
            c.send_datagram(up.clone()).unwrap();
            s.send_datagram(down.clone()).unwrap();
            assert_eq!(s.read_datagram().await.unwrap(), up);
            assert_eq!(c.read_datagram().await.unwrap(), down);
        }
    };
    tokio::join!(bulk, datagrams);
    let stats = c.congestion_stats();
    assert!(
        stats.reports_received > 0 && stats.reports_rejected == 0,
        "{stats:?}"
    );
    // The report magic is reserved.
    let fake = Bytes::from(report::MAGIC.to_vec());
    assert!(matches!(
        c.send_datagram(fake),
        Err(DatagramError::Reserved)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_reports_are_counted_and_ignored() {
    let (client, server) = endpoints(VCP, VCP, "127.0.0.1:0");
    let relay = router_relay(server.local_addr().unwrap());
    let (c, s) = connect(&client, &server, relay.addr).await;
    transfer(&c, &s, MB, 8).await;
    let before = c.congestion_stats();
    assert!(before.reports_received > 0);
    let overload = |sequence: u32| Repr {
        scheme: Scheme::Vcp.wire(),
        sequence,
        feedback: Feedback {
            level: 2,
            load: LoadFactor::new(1.5),
            fairing: false,
        },
        counts: [0, 0, 0, 0],
        unraised_probes: 0,
    };
    let good = overload(u32::MAX / 4).to_bytes();
    let mut bad = vec![
        good[..20].to_vec(),    // truncated
        good[..5].to_vec(),     // truncated before the version
        report::MAGIC.to_vec(), // magic only
    ];
    let mut version = good.clone();
    version[4] = 9;
    bad.push(version);
    let mut level = good.clone();
    level[12..14].copy_from_slice(&7u16.to_be_bytes());
    bad.push(level);
    let mut load = good.clone();
    load[14..18].copy_from_slice(&u32::MAX.to_be_bytes());
    bad.push(load);
    let mut scheme = good.clone();
    scheme[5] = 4; // BMCC: not what this sender runs
    bad.push(scheme);
    // Codepoint counts far below what the peer already reported: regression.
    bad.push(good.clone());
    let sent = bad.len() as u64;
    for datagram in bad {
        // Straight through quinn: the ecnq wrapper refuses the magic.
        s.quinn().send_datagram(datagram.into()).unwrap();
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while c.congestion_stats().reports_rejected < sent && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let after = c.congestion_stats();
    assert!(after.reports_rejected >= sent, "{after:?}");
    assert_eq!(
        after.path_load.map(|f| f.level),
        Some(0),
        "a bad report got through"
    );
    assert_eq!(after.decreases, before.decreases);
    assert_eq!(after.mode, PeerMode::Ecnq);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sender_falls_back_when_reports_stop_and_resumes_when_they_return() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    let (client, server) = endpoints(VCP, VCP, "127.0.0.1:0");
    // After the handshake the path starts bleaching DSCP towards the server,
    // behind an ecnq router (which raises the client's presence probes):
    // the server can no longer tell the client's scheme, so its reports
    // stop. Later the path heals.
    let forwarded = AtomicUsize::new(0);
    let healed = Arc::new(AtomicBool::new(false));
    let heal = healed.clone();
    let relay = Relay::start(server.local_addr().unwrap(), move |dir, tos| match dir {
        Dir::ToServer
            if forwarded.fetch_add(1, Ordering::Relaxed) > 20 && !heal.load(Ordering::Relaxed) =>
        {
            raise_probes(tos) & 0b11
        }
        _ => raise_probes(tos),
    });
    let (c, s) = connect(&client, &server, relay.addr).await;
    // Keep data flowing past the report timeout (500 ms at least).
    let started = tokio::time::Instant::now();
    let mut seed = 9;
    while c.congestion_stats().mode == PeerMode::Ecnq && started.elapsed() < Duration::from_secs(5)
    {
        transfer(&c, &s, MB, seed).await;
        seed += 1;
    }
    let stats = c.congestion_stats();
    assert_eq!(stats.mode, PeerMode::ClassicReportsStopped, "{stats:?}");
    // Reports flowed before the bleaching, then the law was replaced.
    assert!(
        stats.reports_received > 0 && is_classic(stats.law_mode),
        "{stats:?}"
    );
    // The server, which saw the tag in the handshake, still runs VCP.
    assert_eq!(s.congestion_stats().mode, PeerMode::Ecnq);
    // Still tagged, but with quinn's own codepoint: quinn's ECN validation
    // kept passing while the client sent VCP's ECT(1) (the server's socket
    // told its quinn ECT(0)), or quinn would now send Not-ECT. The fallback
    // may come with the transfer's last ACK, after the client's last packet,
    // so one more transfer shows what the client sends now.
    transfer(&c, &s, MB, seed).await;
    seed += 1;
    assert_eq!(c.congestion_stats().mode, PeerMode::ClassicReportsStopped);
    let sent = relay.tos(Dir::ToServer);
    assert!(sent.contains(&vcp_tos(Ecn::Ect1)));
    assert_eq!(last_data(&sent), Some(vcp_tos(Ecn::Ect0)));
    // The path heals: reports come back and so does the scheme.
    healed.store(true, Ordering::Relaxed);
    let healing = tokio::time::Instant::now();
    while c.congestion_stats().mode != PeerMode::Ecnq && healing.elapsed() < Duration::from_secs(5)
    {
        transfer(&c, &s, MB, seed).await;
        seed += 1;
    }
    let stats = c.congestion_stats();
    assert_eq!(stats.mode, PeerMode::Ecnq, "{stats:?}");
    // The VCP law is back: its packets carry VCP's own codepoint again.
    transfer(&c, &s, MB, seed).await;
    assert_eq!(
        last_data(&relay.tos(Dir::ToServer)),
        Some(vcp_tos(Ecn::Ect1))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_packet_tos_read_back_on_ipv6_ipv4_and_dual_stack() {
    let cert = ecnq::quic::SelfSigned::new(&["localhost"]).unwrap();
    for (client_bind, listener_bind) in [
        ("[::]:0", "[::1]:0"),
        ("[::1]:0", "[::1]:0"),
        ("0.0.0.0:0", "127.0.0.1:0"),
        ("[::]:0", "127.0.0.1:0"),
    ] {
        let listener = common::tos_reading_socket(listener_bind);
        let target = listener.local_addr().unwrap();
        let client = ecnq::quic::Endpoint::client(
            client_bind.parse().unwrap(),
            cert.roots(),
            common::options(VCP),
        )
        .unwrap();
        // The handshake never completes; only the Initial matters.
        let connecting = tokio::spawn(async move {
            let _ = client.connect(target, "localhost").await;
        });
        let (len, tos) = tokio::task::spawn_blocking(move || common::recv_tos(&listener))
            .await
            .unwrap();
        assert!(
            len >= 1200,
            "{client_bind} → {listener_bind}: Initial of {len} bytes"
        );
        assert_eq!(tos, vcp_tos(Ecn::Ect0), "{client_bind} → {listener_bind}");
        connecting.abort();
    }
}

#[cfg(feature = "qlog")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qlog_files_are_written_when_asked() {
    // Not there yet: the endpoint makes it.
    let dir = std::env::temp_dir().join(format!("ecnq-qlog-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cert = ecnq::quic::SelfSigned::new(&["localhost"]).unwrap();
    let options = common::options(VCP).qlog_dir(&dir);
    let server =
        ecnq::quic::Endpoint::server("[::1]:0".parse().unwrap(), cert.identity(), options.clone())
            .unwrap();
    let client =
        ecnq::quic::Endpoint::client("[::]:0".parse().unwrap(), cert.roots(), options).unwrap();
    let (c, s) = connect(&client, &server, server.local_addr().unwrap()).await;
    transfer(&c, &s, MB, 11).await;
    // The client's file is named after the server's address.
    let server_port = format!("_{}-", server.local_addr().unwrap().port());
    let (client_mode, server_mode) = (c.congestion_stats().mode, s.congestion_stats().mode);
    c.close(0u32.into(), b"");
    client.wait_idle().await;
    drop((c, s, client, server));
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(files.len(), 2, "one qlog per connection end");
    for file in &files {
        let name = file.file_name().into_string().unwrap();
        let mode = match name.contains(&server_port) {
            true => client_mode,
            false => server_mode,
        };
        let text = std::fs::read_to_string(file.path()).unwrap();
        // JSON-SEQ: every record whole, quinn's and ecnq's.
        let records: Vec<serde_json::Value> = text
            .split('\x1e')
            .filter(|r| !r.is_empty())
            .map(|r| serde_json::from_str(r).unwrap())
            .collect();
        assert!(records.iter().any(|r| r["name"] == "transport:packet_sent"));
        // Each end's last mode in its trace is the one its stats give.
        let modes: Vec<_> = records
            .iter()
            .filter(|r| r["name"] == "ecnq:mode_updated")
            .map(|r| r["data"]["new"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            modes.last(),
            Some(&format!("{mode:?}")),
            "{name}: {modes:?}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Packets from the peer per codepoint, summed.
fn packets_received(stats: &ecnq::quic::CongestionStats) -> u64 {
    stats.ecn_received.iter().sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_connections_from_one_address_keep_their_own_state() {
    let (client, server) = endpoints(VCP, VCP, "127.0.0.1:0");
    let relay = router_relay(server.local_addr().unwrap());
    let addr = relay.addr;
    let (a, sa) = connect(&client, &server, addr).await;
    let (b, sb) = connect(&client, &server, addr).await;
    assert_eq!(
        sa.remote_address(),
        sb.remote_address(),
        "one source address"
    );
    tokio::join!(
        transfer(&a, &sa, 4 * MB, 21),
        transfer(&b, &sb, MB, 22),
        transfer(&sb, &b, MB, 23)
    );
    for (sender, receiver) in [(&a, &sa), (&b, &sb), (&sb, &b)] {
        let stats = sender.congestion_stats();
        assert_eq!(stats.mode, PeerMode::Ecnq, "{stats:?}");
        assert!(stats.reports_received > 0, "{stats:?}");
        assert_eq!(stats.reports_rejected, 0, "{stats:?}");
        let decoded = receiver.congestion_stats();
        assert!(decoded.local_estimate.is_some(), "{decoded:?}");
    }
    // Each server-side state counted its own connection's packets: four
    // times the data, about four times the packets.
    let (na, nb) = (
        packets_received(&sa.congestion_stats()),
        packets_received(&sb.congestion_stats()),
    );
    assert!(na > 3 * nb && nb > 700, "{na} vs {nb} packets");
    // On the client, the server's 1 MB reached b's state, not a's. quinn's
    // server moves to the client's second connection ID at once, so this
    // needs the IDs issued after the handshake bound right.
    let cb = packets_received(&b.congestion_stats());
    assert!(cb > 700, "{cb} packets");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_rebinds_mid_transfer_keeps_its_connection_and_feedback() {
    let (client, server) = endpoints(VCP, VCP, "[::1]:0");
    let (c, s) = connect(&client, &server, server.local_addr().unwrap()).await;
    let before_port = s.remote_address().port();
    let len = 24 * MB;
    let data = common::pattern(len, 24);
    let send = async {
        let mut stream = c.open_uni().await.unwrap();
        stream.write_all(&data).await.unwrap();
        stream.finish().unwrap();
        stream.stopped().await.unwrap();
    };
    let receive = async {
        let mut stream = s.accept_uni().await.unwrap();
        let mut received = Vec::with_capacity(len);
        let mut at_rebind = None;
        while let Some(chunk) = stream.read_chunk(usize::MAX, true).await.unwrap() {
            received.extend_from_slice(&chunk.bytes);
            if at_rebind.is_none() && received.len() >= len / 4 {
                at_rebind = Some((c.congestion_stats(), s.congestion_stats()));
                client.rebind("[::]:0".parse().unwrap()).unwrap();
            }
        }
        (received, at_rebind.expect("rebound"))
    };
    let ((), (received, (client_then, server_then))) = tokio::join!(send, receive);
    assert!(received == data, "payload corrupted");
    assert_ne!(
        s.remote_address().port(),
        before_port,
        "the server saw the move"
    );
    let (client_now, server_now) = (c.congestion_stats(), s.congestion_stats());
    // Router feedback still in use: no router on loopback, which the
    // client's presence probes may have told it by now.
    assert!(
        matches!(client_now.mode, PeerMode::Ecnq | PeerMode::ClassicNoRouter),
        "{client_now:?}"
    );
    // Reports kept coming (Cubic, which stands in for VCP on loopback,
    // moves the rest of the data in a tenth of a second: one report or a
    // few).
    assert!(
        client_now.reports_received > client_then.reports_received,
        "feedback after the move: {} then {} reports",
        client_then.reports_received,
        client_now.reports_received
    );
    // The server kept decoding the client's tagged packets on the new path,
    // under the same state: more than half the data, at most 1500 bytes a
    // packet. The stream had 3/4 of it still to read at the move, but the
    // server had already decoded what was in its receive buffers then; since
    // the client learns within its first round trips that loopback has no
    // ecnq router and runs Cubic on from its slow start, that is more than
    // it was, though fewer than the packets 3/4 of the data would need.
    let moved = packets_received(&server_now) - packets_received(&server_then);
    assert!(
        moved as usize > len / 2 / 1500,
        "{moved} packets decoded after the move"
    );
    // And the client kept decoding the server's packets (its ACKs and reports).
    assert!(packets_received(&client_now) > packets_received(&client_then) + 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_direction_runs_its_own_scheme() {
    let bmcc = CongestionControl::Ecnq(Scheme::Bmcc);
    let (client, server) = endpoints(VCP, bmcc, "127.0.0.1:0");
    let relay = router_relay(server.local_addr().unwrap());
    let (c, s) = connect(&client, &server, relay.addr).await;
    tokio::join!(transfer(&c, &s, 2 * MB, 12), transfer(&s, &c, 2 * MB, 13));
    let (cs, ss) = (c.congestion_stats(), s.congestion_stats());
    assert_eq!((cs.mode, ss.mode), (PeerMode::Ecnq, PeerMode::Ecnq));
    assert!(cs.reports_received > 0 && ss.reports_received > 0);
    assert_eq!(cs.reports_rejected + ss.reports_rejected, 0);
    // Each receiver decoded the other's scheme: VCP's ECT(1), BMCC's ECT(0).
    assert!(ss.ecn_received[Ecn::Ect1.bits() as usize] > 1000, "{ss:?}");
    assert!(cs.ecn_received[Ecn::Ect0.bits() as usize] > 1000, "{cs:?}");
    assert_eq!(ss.local_estimate.map(|f| f.level), Some(0), "VCP low load");
    // BMCC's level is the estimate in units of 1/10 000: no VCP decoder here.
    assert!(cs.local_estimate.is_some_and(|f| f.level > 2), "{cs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feedback_mode_survives_an_idle_pause() {
    let (client, server) = endpoints(VCP, VCP, "127.0.0.1:0");
    let relay = router_relay(server.local_addr().unwrap());
    let (c, s) = connect(&client, &server, relay.addr).await;
    transfer(&c, &s, MB, 14).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let reports = |x: &ecnq::quic::Connection| x.congestion_stats().reports_sent;
    let before = reports(&c) + reports(&s);
    // Longer than the report timeout: no data, so no reports are due, and
    // none are sent (reports answering reports would never stop).
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        reports(&c) + reports(&s) - before <= 2,
        "reports while idle"
    );
    transfer(&c, &s, MB, 15).await;
    let stats = c.congestion_stats();
    assert_eq!(stats.mode, PeerMode::Ecnq, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_server_decodes_each_client_by_its_own_tag() {
    // Two schemes that send no presence probes, so that they stay on their
    // laws with no router on loopback.
    let erc = CongestionControl::Ecnq(Scheme::Erc);
    let prague = CongestionControl::Ecnq(Scheme::Prague);
    let cert = ecnq::quic::SelfSigned::new(&["localhost"]).unwrap();
    let server = ecnq::quic::Endpoint::server(
        "[::1]:0".parse().unwrap(),
        cert.identity(),
        common::options(VCP),
    )
    .unwrap();
    let client = |cc| {
        ecnq::quic::Endpoint::client("[::]:0".parse().unwrap(), cert.roots(), common::options(cc))
            .unwrap()
    };
    let (client_a, client_b) = (client(erc), client(prague));
    let addr = server.local_addr().unwrap();
    let (a, sa) = connect(&client_a, &server, addr).await;
    let (b, sb) = connect(&client_b, &server, addr).await;
    tokio::join!(transfer(&a, &sa, 2 * MB, 16), transfer(&b, &sb, 2 * MB, 17));
    // Both clients got reports for their own scheme from the same server socket.
    for (client, server_side, base) in [(&a, &sa, Ecn::Ect0), (&b, &sb, Ecn::Ect1)] {
        let stats = client.congestion_stats();
        assert_eq!(stats.mode, PeerMode::Ecnq, "{stats:?}");
        assert!(
            stats.reports_received > 0 && stats.reports_rejected == 0,
            "{stats:?}"
        );
        let seen = server_side.congestion_stats().ecn_received;
        assert!(seen[base.bits() as usize] > 1000, "{seen:?}");
    }
}

/// A corruption that turns the unprotected type bits of a client's long
/// header packet into Retry: only a server sends one, so the server's
/// socket discards the datagram before quinn (which would close the
/// connection with PROTOCOL_VIOLATION), and the client's retransmission
/// completes the handshake. The client's second long header datagram is
/// the one corrupted: it reaches a connection the server already has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_initial_corrupted_to_retry_is_discarded() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let (client, server) = endpoints(VCP, VCP, "127.0.0.1:0");
    let long_headers = AtomicU32::new(0);
    let mangle = move |dir, datagram: &mut [u8]| {
        let long = datagram.first().is_some_and(|b| b & 0x80 != 0);
        if dir == Dir::ToServer && long && long_headers.fetch_add(1, Ordering::Relaxed) == 1 {
            datagram[0] |= 0x30;
        }
    };
    let relay = Relay::start_with(server.local_addr().unwrap(), |_, tos| tos, mangle);
    let connected = connect(&client, &server, relay.addr);
    let (c, s) = tokio::time::timeout(Duration::from_secs(20), connected)
        .await
        .expect("the handshake completes");
    transfer(&c, &s, MB, 7).await;
    let socket = server.socket().stats();
    assert_eq!(socket.discarded, 1, "{socket:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_are_verified_against_the_client_roots() {
    let (client, _) = endpoints(VCP, VCP, "[::1]:0");
    let (_, other_server) = endpoints(VCP, VCP, "[::1]:0");
    let addr = other_server.local_addr().unwrap();
    let (result, _) = tokio::join!(client.connect(addr, "localhost"), async {
        let incoming = other_server.accept().await;
        drop(incoming)
    });
    let error = result.unwrap_err().to_string();
    assert!(error.contains("invalid peer certificate"), "{error}");
}

/// A relay that clears the ECN field of the first `clear` datagrams to
/// the client (the server's flight, as an erc router writes its start
/// code) or of all of them (a path that bleaches ECN), raising probes.
fn clearing_relay(server: &ecnq::quic::Endpoint, clear: u64) -> Relay {
    use std::sync::atomic::{AtomicU64, Ordering};
    let to_client = AtomicU64::new(0);
    Relay::start(server.local_addr().unwrap(), move |dir, tos| {
        let tos = raise_probes(tos);
        match dir {
            Dir::ToClient if to_client.fetch_add(1, Ordering::Relaxed) < clear => tos & !0b11,
            _ => tos,
        }
    })
}

/// erc's start code on the real stack: a router that clears the server's
/// first datagram (its Initial and first Handshake packet, coalesced)
/// leaves it Not-ECT in the client's counts, and the server reads one
/// cleared datagram; an untouched path reads none. Here the flight is
/// that one datagram (a small certificate), and the client's handshake
/// ACKs carry counts only once an ECT(0) packet has come (quinn's rule),
/// so a cleared flight may also read as no counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erc_server_reads_the_start_code_from_its_clients_counts() {
    const ERC: CongestionControl = CongestionControl::Ecnq(Scheme::Erc);
    for clear in [0, 1] {
        let (client, server) = endpoints(ERC, ERC, "127.0.0.1:0");
        let relay = clearing_relay(&server, clear);
        let (c, s) = connect(&client, &server, relay.addr).await;
        transfer(&s, &c, MB, 21).await;
        let stats = s.congestion_stats();
        match clear {
            0 => assert_eq!(stats.start_code, Some(0), "{stats:?}"),
            _ => assert!(matches!(stats.start_code, Some(1) | None), "{stats:?}"),
        }
        assert_eq!(stats.mode, PeerMode::Ecnq, "{stats:?}");
    }
}

/// quinn keeps sending ECN past a start code, and still stops on a path
/// that bleaches it: a server running quinn's Cubic sends quinn's own
/// codepoint, ECT(0) to the end behind a cleared first datagram, Not-ECT
/// once it has seen every datagram come Not-ECT in its 1-RTT counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_code_leaves_quinn_sending_ecn() {
    const ERC: CongestionControl = CongestionControl::Ecnq(Scheme::Erc);
    for (clear, ect_at_end) in [(1, true), (u64::MAX, false)] {
        let (client, server) = endpoints(ERC, CongestionControl::Cubic, "127.0.0.1:0");
        let relay = clearing_relay(&server, clear);
        let (c, s) = connect(&client, &server, relay.addr).await;
        transfer(&s, &c, MB, 22).await;
        let sent = relay.tos(Dir::ToClient);
        let last = &sent[sent.len() - 50..];
        let ect = last
            .iter()
            .filter(|&&tos| Ecn::from_tos(tos) == Ecn::Ect0)
            .count();
        assert_eq!(
            ect == last.len(),
            ect_at_end,
            "clear {clear}: {ect} of {}",
            last.len()
        );
        assert_eq!(
            ect == 0,
            !ect_at_end,
            "clear {clear}: {ect} of {}",
            last.len()
        );
    }
}

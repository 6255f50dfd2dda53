//! The UDP relay on loopback, without root: marking as the scheme says (TOS
//! byte read and written per packet, both directions, many clients), rate
//! and delay accuracy of the emulated link.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use ecnq::router::bottleneck::Discipline;
use ecnq::router::MarkingMode;
use ecnq::tos_io::{enable_recv_tos, send_with_tos, set_buffers};
use ecnq::{Ecn, Scheme, SchemeTag, WireScheme};
use ecnq_shim::io::relay::{Relay, RelayConfig, RelayReport};
use ecnq_shim::io::sessions::SessionLimits;
use ecnq_shim::link::router_config;
use ecnq_shim::link::spec::LinkSpec;
use ecnq_shim::link::Direction;
use ecnq_shim::observe::Observers;
use ecnq_shim::observe::PcapWriter;
use ecnq_shim::observe::StatsSink;

mod common;
use common::{assert_overload_marks, one_way_delays_ms, receive_all, send, steady_rate};

/// A relay running on its own runtime thread.
struct RunningRelay {
    addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    handle: thread::JoinHandle<RelayReport>,
}

impl RunningRelay {
    fn start(
        target: SocketAddr,
        spec: &str,
        mode: MarkingMode,
        observers: Observers,
    ) -> RunningRelay {
        let sessions = SessionLimits {
            max: 16,
            ..SessionLimits::default()
        };
        RunningRelay::start_with(target, spec, mode, observers, sessions)
    }

    fn start_with(
        target: SocketAddr,
        spec: &str,
        mode: MarkingMode,
        observers: Observers,
        sessions: SessionLimits,
    ) -> RunningRelay {
        let spec: LinkSpec = spec.parse().expect("valid spec");
        let mut router = router_config(&spec);
        router.mode = mode;
        let direction = Direction {
            spec,
            router,
            queue: Discipline::default(),
        };
        let config = RelayConfig {
            // Same family as the target.
            listen: SocketAddr::new(
                if target.is_ipv6() {
                    std::net::Ipv6Addr::LOCALHOST.into()
                } else {
                    std::net::Ipv4Addr::LOCALHOST.into()
                },
                0,
            ),
            target,
            up: direction.clone(),
            down: direction,
            seed: 7,
            sessions,
        };
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let handle = thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let relay = Relay::bind(config, observers).unwrap();
                addr_tx.send(relay.local_addr().unwrap()).unwrap();
                relay
                    .run(async {
                        let _ = stop_rx.await;
                    })
                    .await
                    .unwrap()
            })
        });
        let addr = addr_rx.recv().unwrap();
        RunningRelay { addr, stop, handle }
    }

    fn stop(self) -> RelayReport {
        let _ = self.stop.send(());
        self.handle.join().unwrap()
    }
}

/// A blocking socket that reports TOS bytes.
fn tos_socket() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    enable_recv_tos(&s, false).unwrap();
    set_buffers(&s, 8 << 20);
    s
}

#[test]
fn relay_marks_as_the_scheme_says_both_ways() {
    let server = tos_socket();
    let relay = RunningRelay::start(
        server.local_addr().unwrap(),
        "rate 2mbit limit 100kb",
        MarkingMode::Auto,
        Observers::default(),
    );
    let client = tos_socket();
    let vcp = SchemeTag::new(1);
    // 4 Mbit/s offered to a 2 Mbit/s link for 0.8 s: VCP sees overload after
    // the first 200 ms interval (its queue's share is a third of the link);
    // the classic queue holds packets long enough for CoDel, and the L4S
    // queue for its 1 ms step.
    // Payload byte 0 says which kind the packet is.
    let kinds = [
        (b'v', vcp.tos(Ecn::Ect1)),
        (b'c', SchemeTag::UNTAGGED.tos(Ecn::Ect0)),
        (b'n', SchemeTag::UNTAGGED.tos(Ecn::NotEct)),
        (b'l', SchemeTag::UNTAGGED.tos(Ecn::Ect1)),
    ];
    let start = Instant::now();
    let mut sent = 0u32;
    while start.elapsed() < Duration::from_millis(800) {
        // 500-byte payloads, one per ms: 4 Mbit/s.
        let (kind, tos) = kinds[sent as usize % kinds.len()];
        let mut payload = vec![kind; 500];
        payload[1..5].copy_from_slice(&sent.to_be_bytes());
        send(&client, relay.addr, &payload, tos);
        sent += 1;
        let due = start + Duration::from_millis(u64::from(sent));
        thread::sleep(due.saturating_duration_since(Instant::now()));
    }
    let got = receive_all(&server, Duration::from_millis(1500), usize::MAX);
    assert!(got.len() > 300, "only {} of {sent} arrived", got.len());
    assert_overload_marks(&got, vcp);
    let of = |kind: u8| got.iter().filter(move |r| r.payload[0] == kind);
    // Untagged ECT(1) is L4S traffic: its own queue, CE beyond 1 ms of the link,
    // so most of it is marked where CoDel marks a few classic packets.
    let l4s = [Ecn::Ect1, Ecn::Ce].map(|ecn| SchemeTag::UNTAGGED.tos(ecn));
    assert!(of(b'l').all(|r| l4s.contains(&r.tos)));
    let ce_fraction = |kind: u8| {
        let ce = of(kind).filter(|r| Ecn::from_tos(r.tos) == Ecn::Ce).count();
        ce as f64 / of(kind).count().max(1) as f64
    };
    let (l4s_ce, classic_ce) = (ce_fraction(b'l'), ce_fraction(b'c'));
    assert!(
        l4s_ce > 0.5 && l4s_ce > 2.0 * classic_ce,
        "CE on L4S {l4s_ce:.2}, on classic ECT {classic_ce:.2}"
    );

    // The way back: the server answers three packets with a VCP tag and
    // ECT(1); the (idle) down link keeps the low-load code.
    let upstream = got[0].from;
    for i in 0..3u8 {
        send(&server, upstream, &[b'r', i], vcp.tos(Ecn::Ect1));
    }
    let replies = receive_all(&client, Duration::from_millis(500), 3);
    assert_eq!(replies.len(), 3);
    assert!(replies
        .iter()
        .all(|r| r.tos == vcp.tos(Ecn::Ect1) && r.from == relay.addr));
    // Presence probes come out raised: VCP's Not-ECT to its base
    // codepoint, MCP's probe bit (tag 12) cleared, fairing bits kept.
    let mcp = SchemeTag {
        fairing: true,
        ..SchemeTag::new(Scheme::Mcp.wire().id())
    };
    let mcp_probe = SchemeTag { probe: true, ..mcp };
    send(&server, upstream, b"p", vcp.tos(Ecn::NotEct));
    send(&server, upstream, b"q", mcp_probe.tos(Ecn::NotEct));
    let raised = receive_all(&client, Duration::from_millis(500), 2);
    let tos_of = |kind: u8| raised.iter().find(|r| r.payload[0] == kind).map(|r| r.tos);
    assert_eq!(tos_of(b'p'), Some(vcp.tos(Ecn::Ect1)));
    assert_eq!(tos_of(b'q'), Some(mcp.tos(Ecn::NotEct)));

    let report = relay.stop();
    assert_eq!(report.sessions.opened, 1);
    assert_eq!(report.up.counters.arrivals, u64::from(sent));
    assert!(
        report.up.marks.get(Scheme::Vcp.wire(), Ecn::Ce) > 50,
        "{:?}",
        report.up.marks
    );
    assert_eq!(report.down.counters.departures, 5);
}

#[test]
fn relay_serves_many_clients() {
    let server = tos_socket();
    let relay = RunningRelay::start(
        server.local_addr().unwrap(),
        "delay 1ms",
        MarkingMode::Off,
        Observers::default(),
    );
    let clients: Vec<UdpSocket> = (0..5).map(|_| tos_socket()).collect();
    for (i, c) in clients.iter().enumerate() {
        for j in 0..10u8 {
            send(c, relay.addr, &[i as u8, j], 0x05);
        }
    }
    // Echo everything back with a TOS that names the client.
    let got = receive_all(&server, Duration::from_millis(500), 50);
    assert_eq!(got.len(), 50);
    for r in &got {
        send(&server, r.from, &r.payload, r.payload[0] << 2 | 0b01);
    }
    for (i, c) in clients.iter().enumerate() {
        let replies = receive_all(c, Duration::from_millis(500), 10);
        assert_eq!(replies.len(), 10, "client {i}");
        for r in &replies {
            assert_eq!(
                (r.payload[0], r.tos),
                (i as u8, (i as u8) << 2 | 1),
                "client {i}"
            );
        }
    }
    let report = relay.stop();
    assert_eq!(report.sessions.opened, 5);
}

/// Timing-sensitive tests take this lock so they do not compete for the
/// CPU with each other (the other tests of this file are light).
static TIMING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn timing_lock() -> std::sync::MutexGuard<'static, ()> {
    TIMING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Saturates a link of `rate` bit/s with 1200-byte payloads for `duration`
/// and measures the rate the receiver sees, in bit/s on the wire.
fn measured_rate(spec: &str, rate: f64, duration: Duration) -> f64 {
    let _serial = timing_lock();
    let server = tos_socket();
    let relay = RunningRelay::start(
        server.local_addr().unwrap(),
        spec,
        MarkingMode::Auto,
        Observers::default(),
    );
    let client = tos_socket();
    let wire = 1200.0 + 28.0;
    // Offer 120 % of the rate, in 1 ms batches.
    let per_ms = (rate * 1.2 / 8.0 / wire / 1000.0).ceil() as u64;
    let payload = vec![0u8; 1200];
    let receiver =
        thread::spawn(move || receive_all(&server, Duration::from_millis(1000), usize::MAX));
    // A 50 ms head start keeps the link busy through short sender stalls.
    for _ in 0..(rate * 0.05 / 8.0 / wire) as u64 {
        send(&client, relay.addr, &payload, 0x06);
    }
    let start = Instant::now();
    let mut batch = 0u64;
    while start.elapsed() < duration {
        for _ in 0..per_ms {
            send(&client, relay.addr, &payload, 0x06);
        }
        batch += 1;
        thread::sleep(
            (start + Duration::from_millis(batch)).saturating_duration_since(Instant::now()),
        );
    }
    let got = receiver.join().unwrap();
    let report = relay.stop();
    assert_eq!(
        report.up.counters.drops_overflow, 0,
        "the buffer must hold the excess"
    );
    assert!(got.iter().all(|r| r.len == 1200));
    steady_rate(&got, wire, rate)
}

#[test]
fn relay_rate_is_accurate_at_10_mbit() {
    let rate = measured_rate("rate 10mbit limit 10000", 10e6, Duration::from_millis(1000));
    eprintln!("10 Mbit/s link: measured {:.4} Mbit/s", rate / 1e6);
    assert!((rate / 10e6 - 1.0).abs() < 0.02, "measured {rate:.0} bit/s");
}

#[test]
fn relay_rate_is_accurate_at_100_mbit() {
    let rate = measured_rate(
        "rate 100mbit limit 100000",
        100e6,
        Duration::from_millis(1000),
    );
    eprintln!("100 Mbit/s link: measured {:.4} Mbit/s", rate / 1e6);
    assert!(
        (rate / 100e6 - 1.0).abs() < 0.02,
        "measured {rate:.0} bit/s"
    );
}

#[test]
fn relay_adds_the_configured_delay() {
    let _serial = timing_lock();
    let server = tos_socket();
    let relay = RunningRelay::start(
        server.local_addr().unwrap(),
        "delay 20ms",
        MarkingMode::Auto,
        Observers::default(),
    );
    let client = tos_socket();
    let delays = one_way_delays_ms(&client, relay.addr, server);
    relay.stop();
    let median = delays[delays.len() / 2];
    eprintln!(
        "delay 20ms: min {:.3} ms, median {median:.3} ms, max {:.3} ms",
        delays[0],
        delays[delays.len() - 1]
    );
    assert!(delays[0] >= 20.0, "min {}", delays[0]);
    assert!(median - 20.0 < 1.0, "median added delay {median:.3} ms");
}

#[test]
fn stats_lines_pcap_and_final_counters() {
    let server = tos_socket();
    let tmp = |ext: &str| {
        std::env::temp_dir().join(format!("ecnq-shim-relay-{}.{ext}", std::process::id()))
    };
    let (stats_path, pcap_path) = (tmp("jsonl"), tmp("pcap"));
    let observers = Observers {
        stats: Some(Arc::new(StatsSink::new(Box::new(
            std::fs::File::create(&stats_path).unwrap(),
        )))),
        pcap: Some(Arc::new(PcapWriter::create(&pcap_path).unwrap())),
        interval: Duration::from_millis(100),
        ..Observers::default()
    };
    let relay = RunningRelay::start(
        server.local_addr().unwrap(),
        "rate 10mbit",
        MarkingMode::Auto,
        observers,
    );
    let client = tos_socket();
    for _ in 0..30 {
        send(&client, relay.addr, &[7; 100], 0x05);
        thread::sleep(Duration::from_millis(10));
    }
    let report = relay.stop();
    let text = std::fs::read_to_string(&stats_path).unwrap();
    let pcap = std::fs::read(&pcap_path).unwrap();
    let _ = (
        std::fs::remove_file(&stats_path),
        std::fs::remove_file(&pcap_path),
    );

    let up: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("\"dir\":\"up\""))
        .collect();
    assert!(up.len() >= 2, "{text}");
    let last_up = up.last().unwrap();
    assert!(last_up.contains("\"final\":true"));
    assert!(last_up.contains("\"arrivals\":30"), "{last_up}");
    assert!(last_up.contains("\"utilization\":"), "{last_up}");
    assert_eq!(report.up.counters.departures, 30);

    // pcap: 24-byte header, then 30 records of 16 + 20 (IPv4) + 8 (UDP) + 100
    // bytes, each an IPv4 packet to the server with the TOS byte sent.
    assert_eq!(pcap.len(), 24 + 30 * (16 + 128));
    let first = &pcap[24 + 16..24 + 16 + 128];
    assert_eq!((first[0], first[1]), (0x45, 0x05));
    assert_eq!(&first[16..20], &[127, 0, 0, 1]);
    assert_eq!(
        u16::from_be_bytes([first[22], first[23]]),
        server.local_addr().unwrap().port()
    );
    assert_eq!(&first[28..], &[7; 100]);
}

#[test]
fn relay_over_ipv6_keeps_the_traffic_class() {
    let Ok(server) = UdpSocket::bind("[::1]:0") else {
        eprintln!("skipped: no IPv6 loopback");
        return;
    };
    enable_recv_tos(&server, true).unwrap();
    let relay = RunningRelay::start(
        server.local_addr().unwrap(),
        "delay 1ms",
        MarkingMode::Forced(WireScheme::CLASSIC),
        Observers::default(),
    );
    let client = UdpSocket::bind("[::1]:0").unwrap();
    enable_recv_tos(&client, true).unwrap();
    let tc = SchemeTag::new(4).tos(Ecn::Ect0);
    for i in 0..5u8 {
        send_with_tos(&client, &[i; 40], Some(relay.addr), tc, true).unwrap();
    }
    let got = receive_all(&server, Duration::from_millis(500), 5);
    assert_eq!(got.len(), 5);
    assert!(got.iter().all(|r| r.tos == tc && r.len == 40));
    send_with_tos(&server, b"back", Some(got[0].from), tc, true).unwrap();
    let back = receive_all(&client, Duration::from_millis(500), 1);
    assert_eq!((back.len(), back[0].tos), (1, tc));
    let report = relay.stop();
    // 40 bytes + UDP + IPv6 header.
    assert_eq!(report.up.counters.arrival_bytes, 5 * (40 + 8 + 40));
}

#[test]
fn a_full_session_table_evicts_the_idlest() {
    let server = tos_socket();
    // The test relay allows 16 sessions.
    let relay = RunningRelay::start(
        server.local_addr().unwrap(),
        "",
        MarkingMode::Auto,
        Observers::default(),
    );
    let clients: Vec<UdpSocket> = (0..20).map(|_| tos_socket()).collect();
    for c in &clients {
        send(c, relay.addr, b"x", 0);
        // Distinct activity stamps (milliseconds): the oldest go first.
        thread::sleep(Duration::from_millis(2));
    }
    let got = receive_all(&server, Duration::from_millis(500), 20);
    // The last client's session is still there: its reply gets back.
    send(&server, got[19].from, b"back", 0);
    assert_eq!(
        receive_all(&clients[19], Duration::from_millis(500), 1).len(),
        1
    );
    let report = relay.stop();
    let s = report.sessions;
    assert_eq!(
        (got.len(), s.opened, s.evicted, s.refused()),
        (20, 20, 4, 0)
    );
    assert_eq!(s.active, 16, "open at the end");
}

#[test]
fn one_source_address_gets_a_bounded_share() {
    let server = tos_socket();
    let sessions = SessionLimits {
        max: 16,
        per_source: 3,
        ..SessionLimits::default()
    };
    let relay = RunningRelay::start_with(
        server.local_addr().unwrap(),
        "",
        MarkingMode::Auto,
        Observers::default(),
        sessions,
    );
    // Five ports of 127.0.0.1, then one of 127.0.0.2 (loopback is all of 127/8).
    let mut clients: Vec<UdpSocket> = (0..5).map(|_| tos_socket()).collect();
    clients.push(UdpSocket::bind("127.0.0.2:0").unwrap());
    for c in &clients {
        send(c, relay.addr, b"x", 0);
    }
    let got = receive_all(&server, Duration::from_millis(500), 6);
    let report = relay.stop();
    assert_eq!(got.len(), 4);
    assert_eq!(report.sessions.refused_source, 2);
}

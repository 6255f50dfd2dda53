//! Bulk throughput on loopback, measured in one run: vanilla quinn (Cubic,
//! quinn's own socket) as the baseline, then ecnq's socket with every
//! controller, no remarking router in between. Prints each median and its
//! ratio to the baseline (goal: ecnq ≥ 0.95 × vanilla). ecnq's `bbr` is the
//! core's BBR law (the simulator's), not quinn's: beside vanilla quinn's BBR
//! its row compares two implementations, not one socket with another.
//!
//! `cargo bench -p ecnq --bench quic_throughput [-- MBYTES ROUNDS [CC,CC,…]]`
//! (the optional list limits the ecnq runs to those controllers).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ecnq::quic::{CongestionControl, Endpoint, Options, SelfSigned};

const ALPN: &[u8] = b"ecnq-bench";

fn main() {
    // `cargo bench` passes `--bench`; the numbers are the optional arguments.
    let numbers: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let mbytes = numbers.first().copied().unwrap_or(64);
    let rounds = numbers.get(1).copied().unwrap_or(5);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let cert = SelfSigned::new(&["localhost"]).expect("certificate");
    let data = Arc::new(vec![0x5a_u8; mbytes << 20]);
    let configs = stacks(&selected_controllers());
    let mut samples = vec![Vec::new(); configs.len()];
    // Rounds interleave the configurations so that drift in machine load
    // hits all of them alike.
    for _ in 0..rounds {
        for (config, samples) in configs.iter().zip(&mut samples) {
            let elapsed = runtime.block_on(async {
                match config {
                    Stack::Vanilla(cc) => vanilla(&cert, *cc, &data).await,
                    Stack::Ecnq(cc) => ecnq(&cert, *cc, &data).await,
                }
            });
            samples.push(data.len() as f64 * 8.0 / elapsed.as_secs_f64() / 1e6);
        }
    }
    println!("bulk transfer on loopback, {mbytes} MiB per run, median of {rounds} runs");
    print_table(&configs, &mut samples);
}

/// The controllers named by the optional list argument (all without one);
/// exits with status 2 on an unknown name.
fn selected_controllers() -> Vec<CongestionControl> {
    let only: Option<Vec<CongestionControl>> = std::env::args()
        .skip(1)
        .find(|a| a.chars().any(|c| c.is_ascii_alphabetic()) && !a.starts_with('-'))
        .map(|list| {
            list.split(',')
                .map(|name| name.parse::<CongestionControl>())
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()
        .unwrap_or_else(|e| {
            eprintln!("error: {e}");
            std::process::exit(2)
        });
    CongestionControl::all()
        .into_iter()
        .filter(|cc| only.as_ref().is_none_or(|only| only.contains(cc)))
        .collect()
}

/// The runs of a round: the baseline first, then vanilla quinn with the
/// other quinn controllers `selected`, then ecnq with each of them.
fn stacks(selected: &[CongestionControl]) -> Vec<Stack> {
    let mut configs = vec![Stack::Vanilla(CongestionControl::Cubic)];
    configs.extend(
        selected
            .iter()
            .filter(|cc| matches!(cc, CongestionControl::NewReno | CongestionControl::Bbr))
            .map(|cc| Stack::Vanilla(*cc)),
    );
    configs.extend(selected.iter().map(|cc| Stack::Ecnq(*cc)));
    configs
}

/// Prints each stack's median throughput, its ratio to the baseline's
/// median and its median ratio to the baseline run of the same round.
fn print_table(configs: &[Stack], samples: &mut [Vec<f64>]) {
    // Each run's ratio to the baseline run of the same round: less exposed
    // to load that changes between rounds than a ratio of medians.
    let paired: Vec<f64> = samples
        .iter()
        .map(|s| {
            median(
                &mut s
                    .iter()
                    .zip(&samples[0])
                    .map(|(x, base)| x / base)
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    let medians: Vec<f64> = samples.iter_mut().map(|s| median(s)).collect();
    println!(
        "{:<28} {:>12} {:>8} {:>14}",
        "stack", "Mbit/s", "ratio", "paired ratio"
    );
    for ((config, m), p) in configs.iter().zip(&medians).zip(&paired) {
        let name = match config {
            Stack::Vanilla(cc) => format!("vanilla quinn ({cc})"),
            Stack::Ecnq(cc) => format!("ecnq socket + {cc}"),
        };
        println!("{name:<28} {m:>12.0} {:>8.3} {p:>14.3}", m / medians[0]);
    }
}

/// What one run measures.
#[derive(Clone, Copy)]
enum Stack {
    /// quinn's own socket and one of its controllers.
    Vanilla(CongestionControl),
    /// An ecnq endpoint.
    Ecnq(CongestionControl),
}

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn tls_server(cert: &SelfSigned) -> quinn::ServerConfig {
    let identity = cert.identity();
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .expect("TLS 1.3")
    .with_no_client_auth()
    .with_single_cert(identity.chain, identity.key)
    .expect("certificate");
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).expect("QUIC TLS");
    quinn::ServerConfig::with_crypto(Arc::new(crypto))
}

fn tls_client(cert: &SelfSigned) -> quinn::ClientConfig {
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .expect("TLS 1.3")
    .with_root_certificates(cert.roots())
    .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("QUIC TLS");
    quinn::ClientConfig::new(Arc::new(crypto))
}

/// Time to move `data` over one stream, from the first byte written to the
/// receiver's last byte read.
async fn timed(send: quinn::SendStream, recv: quinn::AcceptBi<'_>, data: &[u8]) -> Duration {
    let started = Instant::now();
    let mut send = send;
    let writer = async {
        send.write_all(data).await.expect("write");
        send.finish().expect("finish");
    };
    let reader = async {
        let (_, mut stream) = recv.await.expect("accept_bi");
        let mut total = 0;
        let mut buf = vec![0u8; 1 << 16];
        while let Some(n) = stream.read(&mut buf).await.expect("read") {
            total += n;
        }
        assert_eq!(total, data.len());
    };
    tokio::join!(writer, reader);
    started.elapsed()
}

async fn vanilla(cert: &SelfSigned, cc: CongestionControl, data: &[u8]) -> Duration {
    let server = quinn::Endpoint::server(tls_server(cert), "[::1]:0".parse().unwrap())
        .expect("server endpoint");
    let mut client = quinn::Endpoint::client("[::]:0".parse().unwrap()).expect("client endpoint");
    let mut transport = quinn::TransportConfig::default();
    match cc {
        CongestionControl::NewReno => {
            transport.congestion_controller_factory(Arc::new(
                quinn::congestion::NewRenoConfig::default(),
            ));
        }
        CongestionControl::Bbr => {
            transport
                .congestion_controller_factory(Arc::new(quinn::congestion::BbrConfig::default()));
        }
        _ => {} // quinn's default: Cubic
    }
    let mut config = tls_client(cert);
    config.transport_config(Arc::new(transport));
    client.set_default_client_config(config);
    let addr = server.local_addr().unwrap();
    let (c, s) = tokio::join!(
        async { client.connect(addr, "localhost").unwrap().await.unwrap() },
        async { server.accept().await.unwrap().await.unwrap() }
    );
    let (send, _) = c.open_bi().await.unwrap();
    let elapsed = timed(send, s.accept_bi(), data).await;
    c.close(0u32.into(), b"");
    elapsed
}

async fn ecnq(cert: &SelfSigned, cc: CongestionControl, data: &[u8]) -> Duration {
    let options = Options::new(cc).alpn(&[ALPN]);
    let server = Endpoint::server("[::1]:0".parse().unwrap(), cert.identity(), options.clone())
        .expect("server endpoint");
    let client = Endpoint::client("[::]:0".parse().unwrap(), cert.roots(), options)
        .expect("client endpoint");
    let addr = server.local_addr().unwrap();
    let (c, s) = tokio::join!(client.connect(addr, "localhost"), server.accept());
    let (c, s) = (c.unwrap(), s.unwrap().unwrap());
    let (send, _) = c.open_bi().await.unwrap();
    let elapsed = timed(send, s.quinn().accept_bi(), data).await;
    c.close(0u32.into(), b"");
    elapsed
}

//! Faults on the path, each a transfer that must deliver every byte
//! (issue 22): a link that loses 10 % or 30 % of packets (the
//! quic-interop-runner's handshakeloss level, handshake included), a 2 s
//! outage in the middle, reordering and corruption. QUIC's AEAD rejects a
//! corrupted packet, so bytes counted at the server are bytes intact. Each
//! test also checks from the shim's counters that the fault happened. A
//! shim restarted mid-transfer is `testbed.rs`'s
//! `transfer_survives_a_shim_restart`.
//!
//! Then faults a forwarder makes in front of the server: handshakes lost
//! for longer than a connection attempt waits, a path that never lets a
//! flow in, and a loss burst that leaves thousands of holes in a stream.

use std::time::Duration;

use ecnq::quic::CongestionControl;
use ecnq_examples::perf::client::{self, StreamRun};
use ecnq_examples::perf::loopback::{LinkSample, LinkSeries, LoopbackBed, RelayChain};
use tokio::time::Instant;

/// One fault test at a time: they are real-time runs on a 2-core machine.
static MACHINE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Sends `bytes` with erc through one relay shim whose link is `spec`,
/// within `limit`; checks the server received every byte and returns the
/// run, its duration and the shim's last sample of the link.
async fn transfer(spec: &str, bytes: u64, limit: Duration) -> (StreamRun, Duration, LinkSample) {
    let _machine = MACHINE.lock().await;
    let bed = LoopbackBed::ecnq().await.expect("bed");
    let link: ecnq_shim::link::spec::LinkSpec = spec.parse().expect("valid spec");
    let chain = RelayChain::start(&[link], bed.server()).expect("relay");
    let mut config = bed.client_config(chain.entry, CongestionControl::DEFAULT, 0.0);
    config.request.bytes = bytes;
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let start = Instant::now();
    let run = tokio::time::timeout(limit, client::run_stream(&config, 1, start, tx))
        .await
        .unwrap_or_else(|_| panic!("`{spec}`: no end within {limit:?}"))
        .unwrap_or_else(|e| panic!("`{spec}`: {e}"));
    let took = start.elapsed();
    let links: Vec<LinkSeries> = chain.stop().await;
    assert_eq!(
        run.local_total.bytes, bytes,
        "`{spec}`: the client sent all"
    );
    assert_eq!(
        run.peer_result.bytes, bytes,
        "`{spec}`: the server received every byte"
    );
    let last = links[0].samples.last().cloned().expect("the shim reported");
    println!(
        "`{spec}`: {bytes} bytes in {:.1} s; shim: {} arrivals, {} dropped, {} blackholed, {} corrupted, {} reordered",
        took.as_secs_f64(),
        last.arrivals,
        last.drops,
        last.blackholed,
        last.corrupted,
        last.reordered
    );
    (run, took, last)
}

/// A transfer through a link that loses `percent` % of packets; the shim
/// must have lost within 5 points of that.
async fn transfer_with_loss(percent: f64, bytes: u64, limit: Duration) {
    let spec = format!("rate 20mbit delay 5ms loss {percent}% limit 100");
    let (_, _, link) = transfer(&spec, bytes, limit).await;
    let lost = link.drops / link.arrivals * 100.0;
    assert!((lost - percent).abs() < 5.0, "the link lost {lost:.1} %");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_survives_ten_percent_loss() {
    transfer_with_loss(10.0, 1 << 20, Duration::from_secs(60)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_and_transfer_survive_thirty_percent_loss() {
    transfer_with_loss(30.0, 256 << 10, Duration::from_secs(90)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_survives_a_two_second_outage() {
    // Up for 0.5 s (the handshake and the first data), dark for 2 s, once.
    let (_, took, link) = transfer(
        "rate 20mbit delay 5ms limit 100 blackhole 500ms 2s 1",
        4 << 20,
        Duration::from_secs(60),
    )
    .await;
    assert!(link.blackholed > 0.0, "the outage dropped packets");
    assert!(took > Duration::from_secs(2), "the transfer waited it out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_survives_reordering() {
    let (_, _, link) = transfer(
        "rate 20mbit delay 20ms reorder 5% limit 100",
        2 << 20,
        Duration::from_secs(60),
    )
    .await;
    assert!(link.reordered > 0.0, "packets were reordered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_survives_corruption() {
    let (_, _, link) = transfer(
        "rate 20mbit delay 5ms corrupt 5% limit 100",
        2 << 20,
        Duration::from_secs(60),
    )
    .await;
    assert!(link.corrupted > 0.0, "packets were corrupted");
}

/// A UDP forwarder to `server` that passes a datagram when `keep` says so;
/// `keep` is told whether the datagram goes to the server.
async fn forwarder(
    server: std::net::SocketAddr,
    keep: impl Fn(bool) -> bool + Send + Sync + 'static,
) -> std::net::SocketAddr {
    use std::sync::{Arc, Mutex};
    let front = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let back = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
    back.connect(server).await.unwrap();
    let client = Arc::new(Mutex::new(None));
    let keep = Arc::new(keep);
    let (to_server, latest, keep_up) = (back.clone(), client.clone(), keep.clone());
    let entry = front.local_addr().unwrap();
    let from_clients = front.clone();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        while let Ok((n, from)) = from_clients.recv_from(&mut buf).await {
            *latest.lock().unwrap() = Some(from);
            if keep_up(true) {
                let _ = to_server.send(&buf[..n]).await;
            }
        }
    });
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        while let Ok(n) = back.recv(&mut buf).await {
            let to = *client.lock().unwrap();
            if let Some(to) = to.filter(|_| keep(false)) {
                let _ = front.send_to(&buf[..n], to).await;
            }
        }
    });
    entry
}

/// A forwarder to `server` that drops everything clients send during its
/// first `mute`: a path on which handshakes get lost.
async fn muted_forwarder(server: std::net::SocketAddr, mute: Duration) -> std::net::SocketAddr {
    let start = Instant::now();
    forwarder(server, move |to_server| {
        !to_server || start.elapsed() >= mute
    })
    .await
}

/// A scheduled flow whose handshakes are lost for longer than one
/// connection attempt waits keeps trying with a fresh connection, joins
/// late and still ends on schedule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_flow_joins_late_through_lost_handshakes() {
    let _machine = MACHINE.lock().await;
    let bed = LoopbackBed::ecnq().await.expect("bed");
    let mute = client::CONNECT_TIMEOUT + Duration::from_millis(500);
    let entry = muted_forwarder(bed.server(), mute).await;
    let config = bed.client_config(entry, CongestionControl::Cubic, 0.0);
    let scheduled = Duration::from_secs(8);
    let start = Instant::now();
    let run = client::run_scheduled(&config, 1, start + scheduled)
        .await
        .expect("no error")
        .expect("the flow gets in once the path carries its handshake");
    let first = run.intervals.first().expect("intervals");
    assert!(
        first.start >= mute.as_secs_f64(),
        "interval times count from the scheduled start ({first:?})"
    );
    assert!(run.peer_result.bytes > 0, "the late flow sent data");
    assert!(
        run.peer_result.seconds < (scheduled - mute).as_secs_f64(),
        "it sent only for the time left ({} s)",
        run.peer_result.seconds
    );
}

/// A scheduled flow that never gets an answer is reported as never joined
/// once its time is up, not as an error that would end the whole run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_flow_that_never_gets_in_comes_back_empty() {
    let _machine = MACHINE.lock().await;
    let bed = LoopbackBed::ecnq().await.expect("bed");
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let config = bed.client_config(silent.local_addr().unwrap(), CongestionControl::Cubic, 0.0);
    let start = Instant::now();
    let run = client::run_scheduled(&config, 1, start + Duration::from_millis(1500))
        .await
        .expect("no error");
    assert!(run.is_none());
    assert!(start.elapsed() >= Duration::from_millis(1500));
}

/// A congestion controller that keeps a fixed window and ignores losses: a
/// sender that puts the receiver's whole flow-control credit in flight at
/// once, whatever the path drops.
#[derive(Clone)]
struct FixedWindow;

/// [`FixedWindow`]'s window: more than ecnq's stream credit, so the credit
/// is what limits it.
const FIXED_WINDOW: u64 = 4 * ecnq::quic::STREAM_RECEIVE_WINDOW as u64;

impl quinn::congestion::Controller for FixedWindow {
    fn on_congestion_event(
        &mut self,
        _: std::time::Instant,
        _: std::time::Instant,
        _: bool,
        _: u64,
    ) {
    }
    fn on_mtu_update(&mut self, _: u16) {}
    fn window(&self) -> u64 {
        FIXED_WINDOW
    }
    fn clone_box(&self) -> Box<dyn quinn::congestion::Controller> {
        Box::new(self.clone())
    }
    fn initial_window(&self) -> u64 {
        FIXED_WINDOW
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

impl quinn::congestion::ControllerFactory for FixedWindow {
    fn build(
        self: std::sync::Arc<Self>,
        _: std::time::Instant,
        _: u16,
    ) -> Box<dyn quinn::congestion::Controller> {
        Box::new(FixedWindow)
    }
}

/// A perf server keeps a transfer through a loss burst that leaves thousands
/// of holes in its data stream. For one second from the request on, the path
/// drops every acknowledgement and every other datagram the client sends,
/// starting with the first (which carries the request), while a client with
/// a fixed window sends the server's whole 8 MiB stream credit right behind
/// it. quinn ends the connection once a stream holds more than 1024 unread
/// pieces ("too many gaps in stream buffer", which ended an MCP goal run):
/// the server must read its data stream out of order, and from the moment
/// it opens rather than once the request is in (a server that waits for
/// the request loses this connection), and count every byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_survives_a_loss_burst_of_thousands_of_holes() {
    let _machine = MACHINE.lock().await;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    const BURST: Duration = Duration::from_secs(1);
    const BYTES: u64 = 2 * ecnq::quic::STREAM_RECEIVE_WINDOW as u64;
    let bed = LoopbackBed::ecnq().await.expect("bed");
    let burst_from: Arc<Mutex<Option<Instant>>> = Arc::default();
    let (armed, sent) = (burst_from.clone(), Arc::new(AtomicU64::new(0)));
    let entry = forwarder(bed.server(), move |to_server| {
        match *armed.lock().unwrap() {
            Some(from) if from.elapsed() < BURST => {
                to_server && sent.fetch_add(1, Ordering::Relaxed) % 2 == 1
            }
            _ => true,
        }
    })
    .await;

    let config = bed.client_config(entry, CongestionControl::Cubic, 0.0);
    let mut crypto = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .expect("TLS 1.3")
    .with_root_certificates(config.roots.clone())
    .with_no_client_auth();
    crypto.alpn_protocols = vec![ecnq_examples::perf::proto::ALPN.to_vec()];
    let mut client = quinn::ClientConfig::new(Arc::new(
        quinn::crypto::rustls::QuicClientConfig::try_from(crypto).expect("quic crypto"),
    ));
    let mut transport = quinn::TransportConfig::default();
    transport.congestion_controller_factory(Arc::new(FixedWindow));
    client.transport_config(Arc::new(transport));
    let endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).expect("client");

    let transfer = async {
        let connection = endpoint
            .connect_with(client, entry, &config.server_name)
            .expect("connect")
            .await
            .expect("handshake");
        *burst_from.lock().unwrap() = Some(Instant::now());
        let (mut control_send, mut control_recv) = connection.open_bi().await.expect("control");
        let request = ecnq_examples::perf::proto::TestRequest {
            version: 1,
            reverse: false,
            seconds: 0.0,
            bytes: BYTES,
        };
        control_send
            .write_all(&ecnq_examples::perf::proto::encode(&request))
            .await
            .expect("request");
        control_send.finish().expect("request");
        let mut data = connection.open_uni().await.expect("data stream");
        data.write_all(&vec![0u8; BYTES as usize])
            .await
            .expect("the connection outlives the burst");
        data.finish().expect("finish");
        let result = control_recv
            .read_to_end(4096)
            .await
            .expect("the server's result");
        let result: ecnq_examples::perf::proto::TestResult =
            ecnq_examples::perf::proto::decode(&result).expect("result");
        (result, connection.stats().path.lost_packets)
    };
    let (result, lost) = tokio::time::timeout(Duration::from_secs(60), transfer)
        .await
        .expect("the transfer ends within a minute");
    println!(
        "server received {} B; the client lost {lost} packets",
        result.bytes
    );
    assert_eq!(result.bytes, BYTES, "the server counted every byte");
    assert!(
        lost > 2048,
        "the burst must leave more holes than quinn keeps pieces ({lost} packets lost)"
    );
}

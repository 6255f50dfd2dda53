//! The HTTP/3 file server and client on loopback: files come back byte for
//! byte, a missing file is a 404, and no path reaches outside the root.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;

use ecnq::quic::{CongestionControl, PeerMode, SelfSigned};
use ecnq_examples::http3::client::{self, GetConfig, Target};
use ecnq_examples::http3::server::{FileServer, Served, ServerConfig, SEND_WINDOW};
use ecnq_examples::metrics::ConnectionBoard;
use http::StatusCode;

/// `len` bytes that do not repeat within the file (xorshift64, Marsaglia 2003).
fn noise(len: usize, mut state: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// Serves `root` with `cc` on loopback until the returned sender is used
/// or dropped; each connection's summary arrives on the receiver, and the
/// connections are listed on the board whose metrics are served at the
/// last address.
fn serve(
    root: &Path,
    cert: &SelfSigned,
    cc: CongestionControl,
) -> (
    SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::sync::mpsc::UnboundedReceiver<Served>,
    SocketAddr,
) {
    let server = FileServer::bind(ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        identity: cert.identity(),
        cc,
        root: root.to_owned(),
        send_window: SEND_WINDOW,
        qlog: None,
    })
    .unwrap();
    let board = Arc::new(ConnectionBoard::default());
    let metrics = board.serve("127.0.0.1:0".parse().unwrap()).unwrap();
    let server = server.track_on(board);
    let addr = server.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        server
            .serve(shutdown, move |served| {
                let _ = tx.send(served.expect("a handshake on loopback"));
            })
            .await;
    });
    (addr, stop, rx, metrics)
}

/// The body of a Prometheus scrape of `metrics`, over plain HTTP.
fn scrape(metrics: SocketAddr) -> String {
    let mut stream = TcpStream::connect(metrics).unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_come_back_whole_and_nothing_outside_the_root_is_served() {
    let scratch = tempfile::tempdir().unwrap();
    let (root, out) = (scratch.path().join("www"), scratch.path().join("out"));
    std::fs::create_dir_all(root.join("sub")).unwrap();
    let big = noise(3 << 20, 0x9e37_79b9_7f4a_7c15);
    std::fs::write(root.join("big.bin"), &big).unwrap();
    std::fs::write(root.join("sub/small.txt"), b"small\n").unwrap();
    std::fs::write(root.join("index.html"), b"<p>index</p>\n").unwrap();
    // Beside the root, and a link to it from inside.
    let secret = scratch.path().join("secret.txt");
    std::fs::write(&secret, b"not for the web\n").unwrap();
    std::os::unix::fs::symlink(&secret, root.join("link.txt")).unwrap();

    let cert = SelfSigned::new(&["localhost"]).unwrap();
    let cc = CongestionControl::DEFAULT;
    let (addr, stop, mut served, metrics) = serve(&root, &cert, cc);
    let paths = [
        "/big.bin",
        "/sub/small.txt",
        "/",
        "/missing.bin",
        "/../secret.txt",
        "/sub/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/link.txt",
    ];
    let targets: Vec<Target> = paths
        .iter()
        .map(|p| {
            format!("https://localhost:{}{p}", addr.port())
                .parse()
                .unwrap()
        })
        .collect();
    let config = GetConfig {
        server: addr,
        server_name: "localhost".into(),
        roots: cert.roots(),
        cc,
        output: Some(out.clone()),
    };
    let run = client::get(&config, &targets).await.unwrap();
    let statuses: Vec<u16> = run.fetched.iter().map(|f| f.status.as_u16()).collect();
    assert_eq!(
        statuses,
        [200, 200, 200, 404, 404, 404, 404, 404],
        "{run:?}"
    );
    assert_eq!(std::fs::read(out.join("big.bin")).unwrap(), big);
    assert_eq!(
        std::fs::read(out.join("sub/small.txt")).unwrap(),
        b"small\n"
    );
    assert_eq!(
        std::fs::read(out.join("index.html")).unwrap(),
        b"<p>index</p>\n"
    );
    for f in &run.fetched[3..] {
        assert_eq!((f.bytes, &f.saved), (0, &None), "{f:?}");
    }
    // Nothing but the three files was written.
    let mut written = Vec::new();
    for entry in std::fs::read_dir(&out).unwrap() {
        written.push(entry.unwrap().file_name().into_string().unwrap());
    }
    written.sort();
    assert_eq!(written, ["big.bin", "index.html", "sub"]);
    let files_bytes = (big.len() + 6 + 13) as u64;
    assert_eq!(run.bytes(), files_bytes);

    // The client closed; the server reports the connection.
    let summary = served.recv().await.unwrap();
    stop.send(()).unwrap();
    assert_eq!(summary.answers.len(), paths.len(), "{summary:?}");
    assert_eq!(summary.not_found(), 5);
    assert_eq!(summary.bytes(), files_bytes);
    assert_eq!(summary.error, None, "{summary:?}");
    assert!(summary.goodput_bps() > 0.0, "{summary:?}");
    // Both ends run ecnq, so the server's erc runs on router feedback.
    assert_eq!(summary.stats.controller, cc);
    assert_eq!(summary.stats.mode, PeerMode::Ecnq, "{:?}", summary.stats);
    // The metrics count it, ended, in that mode, and none open.
    let text = scrape(metrics);
    let series = "{cc=\"erc\",mode=\"Ecnq\"}";
    for (family, value) in [
        ("ecnq_connections", 0),
        ("ecnq_connections_closed_total", 1),
    ] {
        let line = format!("{family}{series} {value}");
        assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_sends_with_the_controller_it_was_given() {
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(scratch.path().join("a.bin"), noise(100_000, 7)).unwrap();
    let cert = SelfSigned::new(&["localhost"]).unwrap();
    let (addr, stop, mut served, _) = serve(scratch.path(), &cert, CongestionControl::Cubic);
    let target: Target = format!("https://localhost:{}/a.bin", addr.port())
        .parse()
        .unwrap();
    let config = GetConfig {
        server: addr,
        server_name: "localhost".into(),
        roots: cert.roots(),
        cc: CongestionControl::DEFAULT,
        output: None,
    };
    let run = client::get(&config, &[target]).await.unwrap();
    assert_eq!(
        (run.fetched[0].status, run.fetched[0].bytes),
        (StatusCode::OK, 100_000)
    );
    let summary = served.recv().await.unwrap();
    stop.send(()).unwrap();
    assert_eq!(summary.stats.controller, CongestionControl::Cubic);
    assert_eq!(
        summary.stats.mode,
        PeerMode::Unassisted,
        "{:?}",
        summary.stats
    );
}

//! The runner contract end to end on loopback with the vanilla stack: a
//! server and a client process-equivalent (each on its own runtime), files
//! compared byte for byte, and the runner's version probe.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use ecnq_interop::{cli, Vanilla};

fn stack() -> Vanilla {
    Vanilla {
        name: "loopback-test",
        about: "test",
    }
}

fn free_port() -> u16 {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    socket.local_addr().expect("addr").port()
}

fn write_certs(dir: &Path) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    std::fs::write(dir.join("cert.pem"), cert.cert.pem()).expect("write cert");
    std::fs::write(dir.join("priv.key"), cert.key_pair.serialize_pem()).expect("write key");
}

/// Starts a server for `testcase` on a fresh port; it runs until the test ends.
fn serve(root: &Path, testcase: &str) -> SocketAddr {
    let port = free_port();
    let args: Vec<String> = vec![
        "server".into(),
        "--role".into(),
        "server".into(),
        "--testcase".into(),
        testcase.into(),
        "--www".into(),
        root.join("www").display().to_string(),
        "--certs".into(),
        root.join("certs").display().to_string(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
    ];
    std::thread::spawn(move || cli::main_from(&mut stack(), args.into_iter().map(Into::into)));
    std::thread::sleep(Duration::from_millis(200));
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn fetch(root: &Path, server: SocketAddr, testcase: &str, files: &[&str]) -> ExitCode {
    let requests: Vec<String> = files
        .iter()
        .map(|f| format!("https://localhost:{}/{f}", server.port()))
        .collect();
    let args = [
        "client".to_string(),
        "--role".into(),
        "client".into(),
        "--testcase".into(),
        testcase.into(),
        "--requests".into(),
        requests.join(" "),
        "--downloads".into(),
        root.join("downloads").join(testcase).display().to_string(),
        "--keylog".into(),
        root.join("keys.log").display().to_string(),
    ];
    cli::main_from(&mut stack(), args.into_iter().map(Into::into))
}

fn setup() -> (tempfile::TempDir, Vec<(String, Vec<u8>)>) {
    let dir = tempfile::tempdir().expect("tempdir");
    for sub in ["www", "certs", "downloads"] {
        std::fs::create_dir(dir.path().join(sub)).expect("mkdir");
    }
    write_certs(&dir.path().join("certs"));
    // Sizes across one packet, one flow-control window and several.
    let files: Vec<(String, Vec<u8>)> = [10usize, 70_000, 1_500_000]
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let data: Vec<u8> = (0..n).map(|j| (j * 31 + i * 7) as u8).collect();
            (format!("f{i}"), data)
        })
        .collect();
    for (name, data) in &files {
        std::fs::write(dir.path().join("www").join(name), data).expect("write file");
    }
    (dir, files)
}

#[test]
fn every_case_downloads_identical_files() {
    let (dir, files) = setup();
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    for testcase in [
        "handshake",
        "transfer",
        "chacha20",
        "retry",
        "resumption",
        "zerortt",
        "keyupdate",
        "multiconnect",
        "ecn",
        "http3",
    ] {
        let server = serve(dir.path(), testcase);
        let code = fetch(dir.path(), server, testcase, &names);
        assert_eq!(code, ExitCode::SUCCESS, "{testcase}");
        let downloads = dir.path().join("downloads").join(testcase);
        let mut got: Vec<String> = std::fs::read_dir(&downloads)
            .expect("downloads")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        got.sort();
        assert_eq!(got, names, "{testcase}: exactly the requested files");
        for (name, data) in &files {
            let copy = std::fs::read(downloads.join(name)).expect("read download");
            assert!(&copy == data, "{testcase}: {name} differs");
        }
    }
    let keys = std::fs::read_to_string(dir.path().join("keys.log")).expect("key log");
    assert!(keys
        .lines()
        .any(|l| l.starts_with("CLIENT_TRAFFIC_SECRET_0 ")));
}

#[test]
fn missing_file_fails_the_client() {
    let (dir, files) = setup();
    for testcase in ["handshake", "http3"] {
        let server = serve(dir.path(), testcase);
        assert_eq!(
            fetch(dir.path(), server, testcase, &[&files[0].0, "nope"]),
            ExitCode::FAILURE,
            "{testcase}"
        );
    }
}

#[test]
fn version_probe_gets_version_negotiation() {
    let (dir, _files) = setup();
    let server = serve(dir.path(), "handshake");
    // A long-header Initial-sized datagram with the runner's probe version.
    let mut probe = vec![0xc0];
    probe.extend_from_slice(&0x5741_4954u32.to_be_bytes());
    probe.push(8);
    probe.extend_from_slice(&[1; 8]);
    probe.push(8);
    probe.extend_from_slice(&[2; 8]);
    probe.resize(1200, 0);
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    socket
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    socket.send_to(&probe, server).expect("send");
    let mut reply = [0u8; 1500];
    let (n, _) = socket.recv_from(&mut reply).expect("a reply");
    assert!(n > 7 && reply[0] & 0x80 != 0, "long header");
    assert_eq!(
        &reply[1..5],
        &[0, 0, 0, 0],
        "version 0: Version Negotiation"
    );
    // The reply echoes our connection IDs swapped (RFC 9000 §17.2.1).
    assert_eq!(reply[5], 8);
    assert_eq!(&reply[6..14], &[2; 8]);
}

/// The ecnq endpoint, as a process: against itself its schemes turn on (and
/// feedback reports flow), against vanilla quinn it falls back to classic
/// congestion control.
#[test]
fn ecnq_endpoint_turns_schemes_on_only_with_ecnq() {
    let (dir, files) = setup();
    let run = |role: &str, port: u16, extra: &[&str]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ecnq-interop"));
        cmd.args(["--role", role, "--testcase", "transfer", "--cc", "vcp"])
            .args(["--www", &dir.path().join("www").display().to_string()])
            .args(["--certs", &dir.path().join("certs").display().to_string()])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(extra)
            .stderr(std::process::Stdio::piped());
        cmd
    };
    let requests = |port: u16| {
        files
            .iter()
            .map(|(n, _)| format!("https://localhost:{port}/{n}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let downloads = dir.path().join("downloads").display().to_string();

    // ecnq client -> ecnq server.
    let port = free_port();
    let mut server = run("server", port, &[]).spawn().expect("server");
    std::thread::sleep(Duration::from_millis(300));
    let client = run(
        "client",
        0,
        &["--requests", &requests(port), "--downloads", &downloads],
    )
    .output()
    .expect("client");
    let _ = server.kill();
    let _ = server.wait();
    let log = String::from_utf8_lossy(&client.stderr);
    assert!(client.status.success(), "{log}");
    // Loopback has no ecnq router: VCP's presence probes come back
    // unraised, and it may already run Cubic for that reason (not because
    // the peer is vanilla); either way the peers exchange reports.
    assert!(
        log.contains("mode=Ecnq") || log.contains("mode=ClassicNoRouter"),
        "ecnq end to end: {log}"
    );
    let reports = log
        .split("reports_received=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok());
    assert!(reports.is_some_and(|n| n > 0), "reports: {log}");

    // ecnq client -> vanilla quinn server.
    let server = serve(dir.path(), "transfer");
    let client = run(
        "client",
        0,
        &[
            "--requests",
            &requests(server.port()),
            "--downloads",
            &downloads,
        ],
    )
    .output()
    .expect("client");
    let log = String::from_utf8_lossy(&client.stderr);
    assert!(client.status.success(), "{log}");
    assert!(log.contains("mode=ClassicPeerNotEcnq"), "fallback: {log}");
    for (name, data) in &files {
        let copy = std::fs::read(dir.path().join("downloads").join(name)).expect("download");
        assert!(&copy == data, "{name} differs");
    }
}

/// `--list-schemes` prints the registry's schemes, one a line, with no
/// runner environment needed: interop/run-matrix takes its default
/// schemes from it.
#[test]
fn ecnq_endpoint_lists_every_scheme() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ecnq-interop"))
        .arg("--list-schemes")
        .env_remove("ROLE")
        .output()
        .expect("ecnq-interop");
    assert!(out.status.success(), "{out:?}");
    let listed: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    let registry: Vec<String> = ecnq::Scheme::ALL
        .iter()
        .map(|s| s.name().to_owned())
        .collect();
    assert_eq!(listed, registry);
    assert!(listed.iter().any(|s| s == "prague"));
}

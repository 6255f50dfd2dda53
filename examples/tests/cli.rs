//! `ecnq-perf` on hostile input: every bad flag ends with a non-zero exit
//! and a message naming it, never a panic or an endless run.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ecnq-perf");

/// Runs `ecnq-perf ARGS`; it must fail at once with `message` on stderr.
fn fails_with(args: &[&str], message: &str) {
    let out = Command::new(BIN).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(c) if c != 0),
        "{args:?}: {:?} {stderr}",
        out.status
    );
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    assert!(stderr.contains(message), "{args:?}: {stderr}");
}

#[test]
fn hostile_flags_fail_cleanly() {
    for (args, message) in [
        (&["-c", "127.0.0.1", "-t", "1e30"][..], "-t must be between"),
        (&["-c", "127.0.0.1", "-t", "NaN"], "-t must be between"),
        (
            &["-c", "127.0.0.1", "-i", "1e-300"],
            "-i (0 for none) must be between",
        ),
        (
            &["-c", "127.0.0.1", "-i=-1"],
            "-i (0 for none) must be between",
        ),
        (
            &["-c", "127.0.0.1", "-n", "1e30G"],
            "size `1e30G` is too large",
        ),
        (
            &["-c", "127.0.0.1", "-n", "2t"],
            "must be a size from 1 byte to 1t",
        ),
        (
            &["demo", "--rate", "50mbps"],
            "write `50mbit` for bits per second",
        ),
        (&["-c", "127.0.0.1", "-P", "0"], "0 is not in 1..=128"),
        (&["-c", "127.0.0.1", "-p", "70000"], "70000"),
        (&["-c", "127.0.0.1", "--cc", "nosuch"], "nosuch"),
        (&["-s", "--cert", "/nonexistent"], "--key"),
        (
            &["demo", "--duration", "1e30"],
            "--duration must be between",
        ),
        (&["demo", "--duration", "ten"], "`ten` is not a time"),
        (&["demo", "--duration", "1s"], "--duration must be between"),
        (&["demo", "--stagger=-5"], "--stagger must be between"),
        (&["demo", "--stagger", "1e9"], "--stagger must be between"),
        (&["demo", "--rate", "0bit"], "at least 1 bit/s"),
        (&["demo", "--buffer", "lots"], "--buffer"),
        (&["demo", "--link-down", "rate fast"], "--link-down"),
        (
            &["demo", "--link", "trace /nonexistent/att.down"],
            "trace /nonexistent/att.down: No such file",
        ),
        (
            &["demo", "--link", "rate 1mbit", "--rate", "2mbit"],
            "cannot be used with",
        ),
        (
            &[
                "demo",
                "--fake-newcomers",
                "5",
                "--link-down",
                "schedule 0s:20mbit,2s:5mbit",
            ],
            "--fake-newcomers needs a fixed rate on the data path",
        ),
        (
            &["-c", "127.0.0.1", "--pause", "soon"],
            "`soon` is not FROM..UNTIL",
        ),
        (
            &["-c", "127.0.0.1", "--pause", "12..10"],
            "`12..10`: the pause must end after it starts",
        ),
        (
            &["-c", "127.0.0.1", "--pause", "20..22"],
            "--pause starts at 20 s, after the test's 10 s",
        ),
        (&["-c", "127.0.0.1", "-R", "--pause", "1..2"], "--reverse"),
        (&["-s", "--pause", "1..2"], "--pause"),
        (&["-c", "127.0.0.1", "--send-window", "lots"], "lots"),
        (&["--no-such-flag"], "--no-such-flag"),
        (
            &["h3-server", "--root", "/nonexistent/www"],
            "cannot serve /nonexistent/www",
        ),
        (
            &["h3-server", "--root", "/etc/passwd"],
            "is not a directory",
        ),
        (
            &["h3-server", "--root", "/tmp", "--send-window", "0"],
            "must be at least 1 byte",
        ),
        (
            &["h3-server", "--root", "/tmp", "--listen", "nowhere"],
            "nowhere",
        ),
        (
            &["h3-server", "--root", "/tmp", "--cert", "/x.pem"],
            "--key",
        ),
        (&["h3-get"], "<URL>"),
        (&["h3-get", "http://localhost/x"], "not an https:// URL"),
        (
            &["h3-get", "https://a:1/x", "https://b:1/y"],
            "all URLs must name one server",
        ),
        (
            &["h3-get", "https://127.0.0.1:1/x", "--ca", "/nonexistent"],
            "cannot read certificates",
        ),
    ] {
        fails_with(args, message);
    }
}

/// A free UDP port on loopback (free when this returns, most likely still).
fn free_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A private temporary directory for one test's servers and clients.
fn scratch(name: &str) -> PathBuf {
    let tmp = std::env::temp_dir().join(format!("ecnq-perf-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    tmp
}

/// Starts `ecnq-perf ARGS` (a server) with `tmp` as its temporary
/// directory; returns it and the certificate path it printed.
fn start_server(tmp: &Path, args: &[&str]) -> (Child, String) {
    let mut server = Command::new(BIN)
        .args(args)
        .env("TMPDIR", tmp)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let path = first
        .split(" in ")
        .nth(1)
        .unwrap_or_else(|| panic!("no path in {first:?}"));
    assert!(path.starts_with(tmp.to_str().unwrap()), "{path}");
    let path = path.to_owned();
    // Keep reading what it prints, so its writes do not fail.
    std::thread::spawn(move || lines.for_each(drop));
    (server, path)
}

/// The server writes its self-signed certificate, after binding, into a
/// private directory and prints the path; the client finds it from the
/// address it names; a second server that cannot bind leaves it alone.
#[test]
fn a_client_trusts_the_certificate_its_server_left() {
    let tmp = scratch("cert");
    let port = free_port().to_string();
    let server_args = ["-s", "-1", "-B", "127.0.0.1", "-p", &port];
    let (mut server, path) = start_server(&tmp, &server_args);
    let path = path.as_str();
    let pem = std::fs::read_to_string(path).unwrap();
    let second = Command::new(BIN)
        .args(server_args)
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    assert!(!second.status.success());
    assert!(String::from_utf8_lossy(&second.stderr).contains("cannot listen"));
    assert_eq!(std::fs::read_to_string(path).unwrap(), pem, "overwritten");
    let client = Command::new(BIN)
        .args(["-c", "127.0.0.1", "-p", &port, "-t", "0.3", "-i", "0"])
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    assert!(
        client.status.success(),
        "{}",
        String::from_utf8_lossy(&client.stderr)
    );
    assert!(server.wait().unwrap().success());
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// SIGTERM to a server in the middle of a 30 s test: it closes the
/// connection (application close) and exits 0; the client stops at once
/// instead of waiting out the idle timeout.
#[test]
fn a_server_told_to_stop_closes_its_connections() {
    let tmp = scratch("stop");
    let port = free_port().to_string();
    let (server, _) = start_server(&tmp, &["-s", "-B", "127.0.0.1", "-p", &port]);
    let mut client = Command::new(BIN)
        .args(["-c", "127.0.0.1", "-p", &port, "-t", "30", "-i", "0"])
        .env("TMPDIR", &tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let stopped = Instant::now();
    let out = server.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    loop {
        if client.try_wait().unwrap().is_some() {
            break;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(5),
            "the client waits on"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// `ecnq-perf h3-get` downloads from `ecnq-perf h3-server`, trusting the
/// certificate the server left, and saves the file as it was.
#[test]
fn h3_get_downloads_from_h3_server() {
    let tmp = scratch("h3");
    let (root, out) = (tmp.join("www"), tmp.join("out"));
    std::fs::create_dir_all(&root).unwrap();
    let body: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    std::fs::write(root.join("f.bin"), &body).unwrap();
    let port = free_port().to_string();
    let listen = format!("127.0.0.1:{port}");
    let root_arg = root.to_str().unwrap();
    let (mut server, _) = start_server(
        &tmp,
        &["h3-server", "--root", root_arg, "--listen", &listen],
    );
    let url = format!("https://localhost:{port}/f.bin");
    let missing = format!("https://localhost:{port}/nope");
    let get = |urls: &[&str]| {
        Command::new(BIN)
            .args(["h3-get", "--connect", &listen, "-o", out.to_str().unwrap()])
            .args(urls)
            .env("TMPDIR", &tmp)
            .output()
            .unwrap()
    };
    let ok = get(&[&url]);
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(
        ok.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(stdout.contains("200 https://localhost"), "{stdout}");
    assert_eq!(std::fs::read(out.join("f.bin")).unwrap(), body);
    let not_found = get(&[&url, &missing]);
    assert!(!not_found.status.success());
    assert!(String::from_utf8_lossy(&not_found.stdout).contains("404"));
    assert!(String::from_utf8_lossy(&not_found.stderr).contains("1 of 2 responses were not 2xx"));
    server.kill().unwrap();
    server.wait().unwrap();
    std::fs::remove_dir_all(&tmp).unwrap();
}

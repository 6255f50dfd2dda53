//! The `ecnq-shim` binary: one-line errors on bad input, and final counters
//! as JSON lines on SIGTERM.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_ecnq-shim");

fn fails_with(args: &[&str], message: &str) {
    let out = Command::new(BIN).args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{args:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains(message), "{args:?}: {stderr}");
}

#[test]
fn bad_input_gets_one_line_errors() {
    let relay = ["relay", "--listen", "127.0.0.1:0", "--to", "127.0.0.1:9"];
    let with = |extra: &[&'static str]| [&relay[..], extra].concat();
    fails_with(
        &with(&["--link", "rate 10mbits"]),
        "unknown rate unit `mbits`",
    );
    fails_with(&with(&["--link-up", "loss 200%"]), "between 0% and 100%");
    fails_with(&with(&["--scheme", "reno"]), "unknown marking mode `reno`");
    fails_with(&with(&["--tp", "0ms"]), "--tp must be longer than zero");
    fails_with(&with(&["--gamma=0"]), "--gamma must be a positive number");
    fails_with(
        &["relay", "--listen", "nowhere", "--to", "127.0.0.1:9"],
        "--listen `nowhere`",
    );
    fails_with(&["testbed", "up", "star"], "unknown topology `star`");
    fails_with(
        &["testbed", "restart", "nosuch-bed", "--router", "rt9"],
        "testbed `nosuch-bed` has no router `rt9`",
    );
}

#[test]
fn sigterm_prints_final_counters() {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut child = Command::new(BIN)
        .args(["relay", "--listen", "127.0.0.1:0", "--to"])
        .arg(sink.local_addr().unwrap().to_string())
        .args(["--link", "delay 1ms", "--seed", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut banner = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut banner)
        .unwrap();
    // "ecnq-shim relay: listening on ADDR, forwarding to ..."
    let addr: SocketAddr = banner
        .split("listening on ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {banner:?}"));
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    for _ in 0..3 {
        client.send_to(b"hello", addr).unwrap();
    }
    sink.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    for _ in 0..3 {
        // Retry if a signal (a sibling test's child exiting) interrupts the wait.
        while let Err(e) = sink.recv(&mut [0; 16]) {
            assert_eq!(e.kind(), std::io::ErrorKind::Interrupted, "{e}");
        }
    }
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert!(lines[0].contains("\"dir\":\"up\"") && lines[0].contains("\"final\":true"));
    assert!(lines[0].contains("\"arrivals\":3") && lines[0].contains("\"departures\":3"));
    assert!(lines[1].contains("\"dir\":\"down\""));
    assert_eq!(lines[2], "{\"sessions\":1,\"sessions_refused\":0}");
}

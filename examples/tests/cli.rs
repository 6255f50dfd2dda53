//! `ecnq-perf` on hostile input: every bad flag ends with a non-zero exit
//! and a message naming it, never a panic or an endless run.

use std::process::Command;

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
        (&["-c", "127.0.0.1", "-i", "1e-300"], "-i (0 for none) must be between"),
        (&["-c", "127.0.0.1", "-i=-1"], "-i (0 for none) must be between"),
        (&["-c", "127.0.0.1", "-n", "1e30G"], "must be a size from 1 byte to 1T"),
        (&["-c", "127.0.0.1", "-P", "0"], "0 is not in 1..=128"),
        (&["-c", "127.0.0.1", "-p", "70000"], "70000"),
        (&["-c", "127.0.0.1", "--cc", "nosuch"], "nosuch"),
        (&["-s", "--cert", "/nonexistent"], "--key"),
        (&["demo", "--duration", "1e30"], "--duration must be between"),
        (&["demo", "--stagger=-5"], "--stagger must be between"),
        (&["demo", "--stagger", "1e9"], "--stagger must be between"),
        (&["demo", "--rate", "0bit"], "at least 1 bit/s"),
        (&["demo", "--buffer", "lots"], "--buffer"),
        (&["--no-such-flag"], "--no-such-flag"),
    ] {
        fails_with(args, message);
    }
}

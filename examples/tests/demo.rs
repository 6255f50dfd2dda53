//! `ecnq-perf demo` end to end over a link whose capacity changes: the
//! binary as a user runs it, two short runs through its in-process relay.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_ecnq-perf");

/// 20 Mbit/s for a second, then 5: utilization is judged against what the
/// link could carry, the header names the schedule, and the plots draw
/// the capacity.
#[test]
fn the_demo_runs_over_a_schedule() {
    let out = tempfile::tempdir().unwrap();
    let run = Command::new(BIN)
        .args(["demo", "--cc", "erc,cubic", "--no-mixed", "--duration", "2"])
        .args([
            "--link-down",
            "schedule 0s:20mbit,1s:5mbit delay 10ms limit 100",
        ])
        .args(["--link-up", "delay 10ms"])
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stdout}\n{stderr}");
    for words in [
        "ecnq-perf demo: data (client to server) schedule ",
        ",1s:5000000bit delay 10ms limit 100, ACKs (server to client) delay 10ms ",
    ] {
        assert!(stdout.contains(words), "{stdout}");
    }
    let summary = std::fs::read_to_string(out.path().join("summary.json")).unwrap();
    let rows: Vec<serde_json::Value> = serde_json::from_str(&summary).unwrap();
    let row = |name: &str| rows.iter().find(|r| r["name"] == name).unwrap();
    for name in ["erc", "cubic"] {
        assert!(stdout.contains(&format!("\n{name} ")), "{stdout}");
        assert_eq!(row(name)["capacity_varies"], true);
        let utilization = row(name)["utilization"].as_f64().unwrap();
        assert!(utilization <= 1.05, "{name}: {utilization}\n{stdout}");
        let svg = std::fs::read_to_string(out.path().join(format!("{name}-throughput.svg")));
        assert!(svg.unwrap().contains("link capacity"));
    }
    // Cubic fills the buffer: against the first step's 20 Mbit/s it would
    // read at most 0.6 (25 of 40 Mbit in 2 s).
    let cubic = row("cubic")["utilization"].as_f64().unwrap();
    assert!(cubic > 0.7, "cubic: {cubic}\n{stdout}");
}

//! Snapshot tests: short runs of a few scenarios with every protocol (each
//! scheme of the registry and each baseline) must print what the files in
//! `sim/tests/snapshots/` hold, so a refactor that says "no behaviour
//! change" is checked by `cargo test`. The text counts packets and bytes
//! and rounds the derived figures to fixed decimals (as s2n-quic-core's
//! recovery simulation snapshots do); it holds no wall-clock time.
//!
//! A change that means to alter behaviour rewrites the files, and the diff
//! of `sim/tests/snapshots/` goes in its commit:
//!
//! ```text
//! ECNQ_BLESS=1 cargo test -p ecnq-sim --test snapshots
//! ```

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use ecnq::Ecn;
use ecnq_sim::engine::{Link, Sim};
use ecnq_sim::protocol::Protocol;
use ecnq_sim::report::metrics::{ClassQueues, FlowSummary, LinkSummary, Summary};
use ecnq_sim::runner;
use ecnq_sim::scenario::Overrides;
use rayon::prelude::*;

mod common;

/// The environment variable that rewrites the snapshot files.
const BLESS: &str = "ECNQ_BLESS";

/// The command that rewrites them, for messages and file headers.
const BLESS_COMMAND: &str = "ECNQ_BLESS=1 cargo test -p ecnq-sim --test snapshots";

/// Differing lines a failure shows per file.
const SHOWN_DIFFERENCES: usize = 6;

/// A scenario file of `sim/scenarios/` by name, shortened by `--set`
/// edits: one snapshot file each, with a run per protocol. They cover the
/// drop-tail FIFO of the papers, the ecnq router's dual queue, its three
/// queues with L4S, an L4S DualPI2 router, staggered arrivals, finite
/// flows, two bottlenecks in a row, and feedback through the connection
/// session.
type Case = (&'static str, &'static [&'static str]);

const CASES: &[Case] = &[
    ("mcp-fig8", &["duration=8s", "measure_from=2s"]),
    ("coexist-dual", &["duration=6s", "measure_from=2s"]),
    ("l4s-three-classes", &["duration=6s", "measure_from=2s"]),
    ("l4s-dualpi2", &["duration=6s", "measure_from=2s"]),
    ("erc-staggered", &["duration=12s"]),
    ("adpm-afct", &["duration=20s", "pareto.0.stop=15s"]),
    ("erc-parking-lot", &["duration=6s", "measure_from=2s"]),
    ("session-feedback", &["duration=8s"]),
];

/// The explicit-rate anchors' scenarios: one snapshot file each, with a
/// run per protocol of the scenario's `compare` line-up.
const ANCHOR_CASES: &[Case] = &[
    (
        "rcp-afct",
        &["links.0.rate=100Mbit", "pareto.0.stop=3s", "duration=5s"],
    ),
    (
        "xcp-fig4",
        &[
            "links.0.rate=20Mbit",
            "flows.0.count=10",
            "flows.1.count=10",
            "duration=6s",
            "measure_from=2s",
        ],
    ),
];

fn snapshot_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots")
}

/// A fraction or a time in seconds, to a fixed number of decimals.
fn fixed(x: f64) -> String {
    format!("{x:.3}")
}

fn optional(x: Option<f64>) -> String {
    x.map_or("-".to_owned(), fixed)
}

/// The case's file: a header, then one block per protocol: the
/// registry's schemes and the loss- and delay-based baselines (the
/// explicit-rate anchors, RCP and XCP, have scenarios of their own), or
/// with `own`, the scenario's `compare` line-up.
fn render(&(name, set): &Case, own: bool) -> String {
    let scenario = common::scenario(name, set);
    let (protocols, which): (Vec<Protocol>, String) = if own {
        let own: Vec<Protocol> = scenario.file.compare.iter().map(|c| c.protocol).collect();
        let names: Vec<&str> = own.iter().map(|p| p.name()).collect();
        (own, format!("its line-up {}", names.join(", ")))
    } else {
        let every = Protocol::ALL.into_iter().filter(|p| !p.explicit());
        (every.collect(), "every protocol".to_owned())
    };
    let mut out = format!(
        "# {name} --set {}\n# {which}; regenerate with: {BLESS_COMMAND}\n",
        set.join(" --set ")
    );
    let blocks: Vec<String> = protocols
        .par_iter()
        .map(|&p| {
            let o = Overrides {
                scheme: Some(p),
                ..Overrides::default()
            };
            match runner::run(&scenario, &o) {
                Ok(run) => render_run(p, &run.sim, &run.summary),
                Err(e) => format!("\n== {p}\nerror: {e}\n"),
            }
        })
        .collect();
    out.extend(blocks);
    out
}

/// One run: whole-run counters, then each link, flow and aggregate.
fn render_run(p: Protocol, sim: &Sim, s: &Summary) -> String {
    let c = sim.counters;
    let mut out = format!(
        "\n== {p}\nevents {}, packets injected {}, delivered {}, dropped {}\n",
        c.events, c.injected, c.delivered, c.dropped
    );
    for l in &sim.links {
        if let Some(summary) = s.links.iter().find(|x| x.name == l.spec.name) {
            write_link(&mut out, l, summary);
        }
    }
    for f in &s.flows {
        write_flow(&mut out, sim, f);
    }
    write_aggregates(&mut out, s);
    out
}

/// Group totals, fairness and the finite flows' completion times.
fn write_aggregates(out: &mut String, s: &Summary) {
    let groups: Vec<String> = (s.groups.iter())
        .map(|g| format!("{} x{} {}", g.name, g.flows, fixed(g.throughput_bps / 1e6)))
        .collect();
    if !groups.is_empty() {
        let _ = writeln!(out, "groups, Mbit/s: {}", groups.join(", "));
    }
    if !s.jain.series.is_empty() {
        let (j, n) = (&s.jain, s.jain.series.len());
        let _ = writeln!(
            out,
            "jain over {n} samples: mean {}, min {}, last {}",
            fixed(j.mean),
            fixed(j.min),
            fixed(j.last)
        );
    }
    if let Some(c) = &s.completion {
        let _ = writeln!(
            out,
            "finite flows: {} started ({} B), {} finished, mean {} s, median {} s, \
             processor sharing {} s",
            c.started,
            c.offered_bytes,
            c.finished,
            fixed(c.mean_s),
            fixed(c.median_s),
            fixed(c.sharing_mean_s)
        );
        for class in &c.by_size {
            let _ = writeln!(
                out,
                "  under {} B: {} flows, mean {} s, processor sharing {} s",
                class.below_bytes,
                class.flows,
                fixed(class.mean_s),
                fixed(class.sharing_mean_s)
            );
        }
    }
}

/// A link's counters over the measured period, its derived figures, and
/// the codepoints its marker let through by wire scheme.
fn write_link(out: &mut String, l: &Link, s: &LinkSummary) {
    let st = &l.stats;
    let _ = writeln!(
        out,
        "link {}: arrived {} pkt {} B, departed {} pkt {} B, dropped {}, lost {}, \
         aqm drops {}, peak queue {} pkt {} B",
        s.name,
        st.arrived_packets,
        st.arrived_bytes,
        st.departed_packets,
        st.departed_bytes,
        st.dropped_packets,
        st.lost_packets,
        st.aqm_drops,
        st.peak_queue_packets,
        st.peak_queue_bytes
    );
    let q = |x: &ClassQueues| [x.ecnq, x.classic, x.l4s].map(optional).join("/");
    let _ = writeln!(
        out,
        "  utilization {}, queue mean {} pkt, p99 {} pkt, p99 ms ecnq/classic/l4s \
         queue {} sojourn {}, 90 % at {} s",
        fixed(s.utilization),
        fixed(s.mean_queue_packets),
        s.p99_queue_packets,
        q(&s.p99_class_queue_ms),
        q(&s.p99_class_sojourn_ms),
        optional(s.time_to_90pct_s)
    );
    for (wire, counts) in l.mark_counters().into_iter().flat_map(|m| m.iter()) {
        if counts.iter().any(|&n| n > 0) {
            let by_ecn: Vec<String> = Ecn::ALL
                .iter()
                .map(|&e| format!("{:02b} {}", e.bits(), counts[usize::from(e.bits())]))
                .collect();
            let _ = writeln!(out, "  left as {}: {}", wire.name(), by_ecn.join(", "));
        }
    }
}

/// A flow's packet and byte counts, its derived figures, and with session
/// feedback what its session went through.
fn write_flow(out: &mut String, sim: &Sim, f: &FlowSummary) {
    let flow = &sim.flows[f.id];
    let _ = writeln!(
        out,
        "flow {} {} {}: from {} s, sent {} pkt, lost {} ({} measured), received {} B \
         ({} measured), {} Mbit/s, converged at {} s, done at {} s",
        f.id,
        f.group,
        f.scheme,
        fixed(f.start_s),
        flow.packets_sent,
        flow.packets_lost,
        f.packets_lost,
        flow.received_bytes,
        flow.received_bytes - flow.received_at_measure,
        fixed(f.throughput_bps / 1e6),
        optional(f.convergence_s),
        optional(f.completion_s)
    );
    if let Some(fb) = &f.feedback {
        let changes: Vec<String> = fb
            .mode_changes
            .iter()
            .map(|(t, mode)| format!("{} {mode}", fixed(*t)))
            .collect();
        let _ = writeln!(
            out,
            "  session {}: {} fallbacks, {} recoveries, reports {} sent {} arrived; changes: {}",
            fb.mode,
            fb.fallbacks,
            fb.recoveries,
            fb.reports_sent,
            fb.reports_arrived,
            changes.join(", ")
        );
    }
}

/// The first lines where `expected` and `actual` differ, each with the
/// protocol block it is in.
fn differences(expected: &str, actual: &str) -> String {
    let (old, new): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let mut block = "";
    let mut out = String::new();
    let mut shown = 0;
    for i in 0..old.len().max(new.len()) {
        let (a, b) = (old.get(i).copied(), new.get(i).copied());
        if let Some(name) = b.and_then(|b| b.strip_prefix("== ")) {
            block = name;
        }
        if a == b {
            continue;
        }
        if shown == SHOWN_DIFFERENCES {
            let _ = writeln!(out, "  …");
            break;
        }
        let _ = writeln!(
            out,
            "  line {} ({block}):\n  - {}\n  + {}",
            i + 1,
            a.unwrap_or("(end of file)"),
            b.unwrap_or("(end of file)")
        );
        shown += 1;
    }
    out
}

/// Every case against its file; with `ECNQ_BLESS` set, the files are
/// rewritten instead, and files no case produces are removed.
#[test]
fn scenario_runs_match_their_snapshot_files() {
    let dir = snapshot_dir();
    let bless = std::env::var_os(BLESS).is_some_and(|v| !v.is_empty() && v != "0");
    let cases = CASES.iter().map(|c| (c, false));
    let cases: Vec<(&Case, bool)> = cases
        .chain(ANCHOR_CASES.iter().map(|c| (c, true)))
        .collect();
    let rendered: Vec<(PathBuf, String)> = cases
        .par_iter()
        .map(|&(case, own)| (dir.join(format!("{}.txt", case.0)), render(case, own)))
        .collect();
    let mut failures = Vec::new();
    for (path, actual) in &rendered {
        if bless {
            fs::create_dir_all(&dir).unwrap();
            fs::write(path, actual).unwrap();
            continue;
        }
        match fs::read_to_string(path) {
            Ok(expected) if expected == *actual => {}
            Ok(expected) => failures.push(format!(
                "{} differs:\n{}",
                path.display(),
                differences(&expected, actual)
            )),
            Err(e) => failures.push(format!("{}: {e}", path.display())),
        }
    }
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if !rendered.iter().any(|(p, _)| *p == path) {
            if bless {
                fs::remove_file(&path).unwrap();
            } else {
                failures.push(format!("{}: no case writes it", path.display()));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "the runs no longer match their snapshots (- the file, + this run):\n{}\nIf the change is meant, \
         rewrite the files with `{BLESS_COMMAND}` and commit their diff.",
        failures.join("\n")
    );
}

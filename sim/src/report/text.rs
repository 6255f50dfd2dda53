//! Text for the terminal: the one-screen summary of a run, and the table
//! of headline figures that `compare` and `sweep` print, one row per run
//! (as text, or as Markdown for docs/results.md).

use std::fmt::{self, Write as _};

use ecnq::router::bottleneck::Class;

use super::metrics::{FeedbackSummary, FlowSummary, LinkSummary, Summary};
use crate::scenario::Scenario;
pub use ecnq_charts::table::{aligned, markdown};

/// A rate in bits per second in fixed-width table style: `100.00Mbit`.
struct ShowRate(f64);

impl fmt::Display for ShowRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        match v {
            v if v >= 1e9 => write!(f, "{:.2}Gbit", v / 1e9),
            v if v >= 1e6 => write!(f, "{:.2}Mbit", v / 1e6),
            v if v >= 1e3 => write!(f, "{:.1}kbit", v / 1e3),
            v => write!(f, "{v:.0}bit"),
        }
    }
}

/// At most this many flows are listed one by one.
const SHOWN_FLOWS: usize = 12;

/// The one-screen summary `run` prints; `wall_s` is how long the run took.
pub fn one_screen(scenario: &Scenario, s: &Summary, wall_s: f64) -> String {
    let mut out = String::new();
    write_header(&mut out, scenario, s, wall_s);
    write_links(&mut out, &s.links);
    write_flows(&mut out, &s.flows);
    write_feedback(&mut out, &s.flows);
    write_aggregates(&mut out, s);
    out
}

/// What ran: the scenario, the paper's claim, the scheme, seed and speed.
fn write_header(out: &mut String, scenario: &Scenario, s: &Summary, wall_s: f64) {
    let _ = writeln!(out, "{} — {}", scenario.name, scenario.file.title);
    if !scenario.file.paper.is_empty() {
        let _ = writeln!(out, "paper: {}", scenario.file.paper);
    }
    if !scenario.file.expect.is_empty() {
        let _ = writeln!(out, "paper reports: {}", scenario.file.expect);
    }
    let _ = writeln!(
        out,
        "scheme {}  seed {}  {:.0} s simulated (stats from {:.0} s) in {:.2} s wall, {} events ({:.1} M/s)",
        s.scheme,
        s.seed,
        s.duration_s,
        s.measure_from_s,
        wall_s,
        s.events,
        s.events as f64 / wall_s.max(1e-9) / 1e6
    );
    if s.measure_from_s >= s.duration_s {
        let _ = writeln!(
            out,
            "note: the run ends before its stats start, so the figures below count nothing; \
             the CSV series and plots cover the whole run (a longer --duration, or --set measure_from=0s)"
        );
    }
}

/// One line per link that carried traffic or dropped packets.
fn write_links(out: &mut String, links: &[LinkSummary]) {
    let _ = writeln!(
        out,
        "{:<10} {:>10} {:>6} {:>8} {:>8} {:>8} {:>9} {:>9} {:>8}",
        "link", "rate", "util", "q mean", "q p99", "q peak", "q p99 ms", "peak ms", "loss"
    );
    for l in links.iter().filter(|l| l.utilization > 0.01 || l.drops > 0) {
        let _ = writeln!(
            out,
            "{:<10} {:>10} {:>6.3} {:>8.1} {:>8} {:>8} {:>9.1} {:>9.1} {:>8.4}",
            l.name,
            ShowRate(l.rate_bps).to_string(),
            l.utilization,
            l.mean_queue_packets,
            l.p99_queue_packets,
            l.peak_queue_packets,
            l.p99_queue_ms,
            l.peak_queue_ms,
            l.loss
        );
        write_classes(out, l);
    }
}

/// Where packets took more than one queue of a link, one line with each
/// queue's p99 delay: its queue at the link's rate, and its measured
/// sojourn (which also counts the other queues' turns).
fn write_classes(out: &mut String, l: &LinkSummary) {
    let used: Vec<String> = Class::ALL
        .iter()
        .filter_map(|&class| {
            let q = l.p99_class_queue_ms.of(class)?;
            let sojourn =
                (l.p99_class_sojourn_ms.of(class)).map_or("-".to_owned(), |ms| format!("{ms:.1}"));
            Some(format!("{} {q:.1}/{sojourn}", class.name()))
        })
        .collect();
    if used.len() > 1 {
        let _ = writeln!(
            out,
            "{:<10} p99 ms, queue at link rate/sojourn: {}",
            "",
            used.join(", ")
        );
    }
}

/// One line per flow, up to [`SHOWN_FLOWS`].
fn write_flows(out: &mut String, flows: &[FlowSummary]) {
    let shown = flows.len().min(SHOWN_FLOWS);
    let _ = writeln!(
        out,
        "{:<5} {:<10} {:<9} {:>8} {:>12} {:>6} {:>10}",
        "flow", "group", "scheme", "start s", "throughput", "lost", "converge s"
    );
    for f in &flows[..shown] {
        let _ = writeln!(
            out,
            "{:<5} {:<10} {:<9} {:>8.1} {:>12} {:>6} {:>10}",
            f.id,
            f.group,
            f.scheme,
            f.start_s,
            ShowRate(f.throughput_bps).to_string(),
            f.packets_lost,
            f.convergence_s.map_or("-".into(), |c| format!("{c:.1}"))
        );
    }
    if flows.len() > shown {
        let _ = writeln!(
            out,
            "… {} more flows (see summary.json)",
            flows.len() - shown
        );
    }
}

/// With session feedback, one line per flow (up to [`SHOWN_FLOWS`]): its
/// sender's mode, fallbacks, recoveries and reports.
fn write_feedback(out: &mut String, flows: &[FlowSummary]) {
    let shown: Vec<(usize, &FeedbackSummary)> = flows
        .iter()
        .filter_map(|f| Some((f.id, f.feedback.as_ref()?)))
        .take(SHOWN_FLOWS)
        .collect();
    if shown.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "{:<5} {:<26} {:>9} {:>10} {:>12} {:>8}",
        "flow", "session mode", "fallbacks", "recoveries", "reports sent", "arrived"
    );
    for (id, fb) in shown {
        let _ = writeln!(
            out,
            "{:<5} {:<26} {:>9} {:>10} {:>12} {:>8}",
            id, fb.mode, fb.fallbacks, fb.recoveries, fb.reports_sent, fb.reports_arrived
        );
    }
}

/// Group totals, fairness and completion times.
fn write_aggregates(out: &mut String, s: &Summary) {
    if s.groups.len() > 1 {
        let groups: Vec<String> = s
            .groups
            .iter()
            .map(|g| format!("{} ×{} {}", g.name, g.flows, ShowRate(g.throughput_bps)))
            .collect();
        let _ = writeln!(out, "groups: {}", groups.join(", "));
    }
    if !s.jain.series.is_empty() {
        let _ = writeln!(
            out,
            "Jain's index: mean {:.3}, min {:.3}, last {:.3}",
            s.jain.mean, s.jain.min, s.jain.last
        );
    }
    if let Some(c) = &s.completion {
        let _ = writeln!(
            out,
            "finite flows: {} started, {} finished, mean completion {:.3} s, median {:.3} s; \
             processor sharing {:.3} s (× {:.2})",
            c.started,
            c.finished,
            c.mean_s,
            c.median_s,
            c.sharing_mean_s,
            c.mean_s / c.sharing_mean_s.max(1e-9)
        );
        for class in &c.by_size {
            let _ = writeln!(
                out,
                "  under {:>10} B: {:>6} flows, mean {:.3} s, processor sharing {:.3} s (× {:.2})",
                class.below_bytes,
                class.flows,
                class.mean_s,
                class.sharing_mean_s,
                class.mean_s / class.sharing_mean_s.max(1e-9)
            );
        }
    }
}

/// One row of `compare` / `sweep`: the headline figures of a run.
pub struct Row {
    /// What distinguishes this run.
    pub label: Vec<String>,
    /// The run's summary, or why it did not run.
    pub result: Result<Summary, String>,
}

/// The most utilized reported link (the bottleneck for tables).
pub fn bottleneck(s: &Summary) -> Option<&LinkSummary> {
    s.links
        .iter()
        .max_by(|a, b| a.utilization.total_cmp(&b.utilization))
}

/// The figure columns of [`table`] after the label columns, each with its
/// width in the text table (the link's name left-aligned, the rest right).
const FIGURE_COLUMNS: [(&str, usize); 10] = [
    ("link", 8),
    ("util", 6),
    ("q mean", 7),
    ("q p99", 6),
    ("q peak", 6),
    ("loss", 8),
    ("Jain", 7),
    ("conv s", 9),
    ("FCT s", 9),
    ("×PS", 6),
];

/// A table of headline figures; `heads` name the label columns.
pub fn table(heads: &[&str], rows: &[Row]) -> String {
    let mut out = String::new();
    for h in heads {
        let _ = write!(out, "{h:<12} ");
    }
    let names = FIGURE_COLUMNS.map(|(name, _)| name.to_owned());
    let widths = FIGURE_COLUMNS.map(|(_, width)| width);
    let _ = writeln!(out, "{}", aligned(&names, &widths));
    for row in rows {
        for l in &row.label {
            let _ = write!(out, "{l:<12} ");
        }
        match &row.result {
            Err(e) => {
                let _ = writeln!(out, "skipped: {e}");
            }
            Ok(s) => {
                let _ = writeln!(out, "{}", aligned(&figures(s), &widths));
            }
        }
    }
    out
}

/// The same table as [`table`], as a Markdown table: the same columns and
/// figures, a row that did not run saying why in its first figure column.
pub fn table_markdown(heads: &[&str], rows: &[Row]) -> String {
    let heads: Vec<&str> = heads
        .iter()
        .copied()
        .chain(FIGURE_COLUMNS.iter().map(|(name, _)| *name))
        .collect();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let figures = match &row.result {
                Ok(s) => figures(s).to_vec(),
                Err(e) => std::iter::once(format!("skipped: {e}"))
                    .chain(std::iter::repeat_n(String::new(), FIGURE_COLUMNS.len() - 1))
                    .collect(),
            };
            [row.label.clone(), figures].concat()
        })
        .collect();
    markdown(&heads, &cells)
}

/// The heading `compare` and `sweep` print above a Markdown table: the
/// scenario, its title, the paper it reproduces and what the paper reports.
pub fn heading_markdown(scenario: &Scenario) -> String {
    let mut out = format!("## {} — {}\n\n", scenario.name, scenario.file.title);
    if !scenario.file.paper.is_empty() {
        let _ = writeln!(out, "Paper: {}\n", scenario.file.paper);
    }
    if !scenario.file.expect.is_empty() {
        let _ = writeln!(out, "Paper reports: {}\n", scenario.file.expect);
    }
    out
}

/// A table row's figures, one per [`FIGURE_COLUMNS`] entry: the
/// bottleneck's, fairness, convergence and completion time.
fn figures(s: &Summary) -> [String; 10] {
    let (name, util, qm, q99, qp, loss) =
        bottleneck(s).map_or(("-".into(), 0.0, 0.0, 0, 0, 0.0), |l| {
            (
                l.name.clone(),
                l.utilization,
                l.mean_queue_packets,
                l.p99_queue_packets,
                l.peak_queue_packets,
                l.loss,
            )
        });
    let jain = if s.jain.series.is_empty() {
        "-".to_owned()
    } else {
        format!("{:.3}", s.jain.mean)
    };
    let fct = s
        .completion
        .as_ref()
        .filter(|c| c.finished > 0)
        .map(|c| (c.mean_s, c.mean_s / c.sharing_mean_s.max(1e-9)));
    [
        name,
        format!("{util:.3}"),
        format!("{qm:.1}"),
        q99.to_string(),
        qp.to_string(),
        format!("{loss:.4}"),
        jain,
        convergence_column(&s.flows),
        fct.map_or("-".into(), |(c, _)| format!("{c:.3}")),
        fct.map_or("-".into(), |(_, r)| format!("{r:.2}")),
    ]
}

/// Convergence: the slowest later flow, and how many later flows converged.
fn convergence_column(flows: &[FlowSummary]) -> String {
    let later: Vec<Option<f64>> = flows
        .iter()
        .filter(|f| f.start_s > 0.0 && f.completion_s.is_none())
        .map(|f| f.convergence_s)
        .collect();
    let converged: Vec<f64> = later.iter().flatten().copied().collect();
    match converged.iter().copied().reduce(f64::max) {
        _ if later.is_empty() => "-".to_owned(),
        None => format!("none/{}", later.len()),
        Some(max) if converged.len() == later.len() => format!("{max:.1}"),
        Some(max) => format!("{max:.0}({}/{})", converged.len(), later.len()),
    }
}

//! Text for the terminal: the one-screen summary of a run, and the table
//! of headline figures that `compare` and `sweep` print, one row per run
//! (as text, or as Markdown for docs/results.md).

use std::fmt::{self, Write as _};

use ecnq::router::bottleneck::Class;

use super::metrics::{
    over_sharing, ArrivalSummary, FeedbackSummary, FlowSummary, LinkSummary, Summary,
    SIZE_CLASS_BOUNDS,
};
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
    if let Some(a) = &s.arrivals {
        write_arrivals(&mut out, a, s.measure_from_s);
    }
    out
}

/// The arrival period's line: its bottleneck's queue and loss, and when
/// Jain's index settled.
fn write_arrivals(out: &mut String, a: &ArrivalSummary, from_s: f64) {
    let [name, q99, q99_ms, peak, loss, fair] = arrival_figures(a);
    let _ = writeln!(
        out,
        "arrivals ({from_s:.1}–{:.1} s): {name} q p99 {q99} pkt ({q99_ms} ms), peak {peak} pkt, loss {loss}; Jain's index fair for good after {fair} s",
        a.until_s
    );
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
            c.vs_sharing()
        );
        for class in &c.by_size {
            let name = format!("under {:>10} B", class.below_bytes);
            let times = (class.mean_s, class.sharing_mean_s);
            write_completion_line(out, &name, class.flows, Some(times));
        }
        let _ = writeln!(out, "by size class:");
        for (name, band) in size_class_labels().iter().zip(&c.by_size_class) {
            let times = band.mean_s.zip(band.sharing_mean_s);
            write_completion_line(out, &format!("{name:<10}"), band.flows, times);
        }
    }
}

/// One line of the completion times of a set of finished flows: how many,
/// their mean (s) and processor sharing's (s), or `-` without flows.
fn write_completion_line(out: &mut String, name: &str, flows: usize, times: Option<(f64, f64)>) {
    let _ = match times {
        Some((mean, sharing)) => writeln!(
            out,
            "  {name}: {flows:>6} flows, mean {mean:.3} s, processor sharing {sharing:.3} s (× {:.2})",
            over_sharing(mean, sharing)
        ),
        None => writeln!(out, "  {name}: {:>6}", "-"),
    };
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
    busiest(&s.links)
}

/// The most utilized of `links`.
fn busiest(links: &[LinkSummary]) -> Option<&LinkSummary> {
    links
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

/// The columns of the arrival-period table, as [`FIGURE_COLUMNS`].
const ARRIVAL_COLUMNS: [(&str, usize); 6] = [
    ("link", 8),
    ("q p99", 6),
    ("p99 ms", 7),
    ("q peak", 6),
    ("loss", 8),
    ("fair s", 7),
];

/// What the arrival-period table shows, above it.
const ARRIVAL_CAPTION: &str =
    "During arrivals (from measure_from to the scenario's `arrivals`): the \
     bottleneck's queue p99 (packets, ms), peak and loss; fair s: seconds \
     until Jain's index stays at least 0.99 to the end of the run.";

/// The columns of the changing-link table, as [`FIGURE_COLUMNS`].
const VARYING_COLUMNS: [(&str, usize); 7] = [
    ("link", 8),
    ("Mbit/s", 8),
    ("util", 6),
    ("p50 ms", 7),
    ("p95 ms", 7),
    ("p99 ms", 7),
    ("loss", 8),
];

/// What the changing-link table shows, above it.
const VARYING_CAPTION: &str =
    "On a link whose capacity varies, as Pantheon ranks schemes: the bottleneck's \
     throughput, its utilization of the capacity in force, and the percentiles \
     of the per-packet queueing delay (every queue).";

/// What the size-class table under the headline table shows, above it.
const SIZE_CLASS_CAPTION: &str =
    "Finite flows by size: n finished, ×PS their mean completion time \
                                  over processor sharing's for the same flows.";

/// What the group table under the size-class table shows, above it.
const GROUP_CAPTION: &str = "Long-lived flows beside the finite ones: each group's throughput \
     (Mbit/s) over the measured period.";

/// A table's figure columns after its label columns: each one's name and
/// its width in the text table.
type Columns = Vec<(String, usize)>;

/// `fixed`'s columns as [`Columns`].
fn columns(fixed: &[(&str, usize)]) -> Columns {
    fixed
        .iter()
        .map(|&(name, width)| (name.to_owned(), width))
        .collect()
}

/// A table row as the renderers take it: its labels, and its summary or
/// why it did not run.
type Line<'a> = (&'a [String], Result<&'a Summary, &'a str>);

/// Lays out `lines` under `heads` and `columns`, each run's figures from
/// `cells`: as text ([`text_rows`]) or Markdown ([`markdown_rows`]).
type Render = fn(&[&str], &Columns, &[Line<'_>], &dyn Fn(&Summary) -> Vec<String>) -> String;

/// A table of headline figures; `heads` name the label columns. Where runs
/// had finite flows, the size-class table follows.
pub fn table(heads: &[&str], rows: &[Row]) -> String {
    tables(heads, rows, text_rows, "\n")
}

/// The same tables as [`table`], as Markdown tables: the same columns and
/// figures, a row that did not run saying why in its first figure column.
pub fn table_markdown(heads: &[&str], rows: &[Row]) -> String {
    tables(heads, rows, markdown_rows, "\n\n")
}

/// The headline table and, where any run had finite flows, the size-class
/// table, and where any had an arrival period, its table, each under its
/// caption (`gap` after the caption), all by `render`.
fn tables(heads: &[&str], rows: &[Row], render: Render, gap: &str) -> String {
    let lines: Vec<Line<'_>> = rows
        .iter()
        .map(|r| {
            (
                r.label.as_slice(),
                r.result.as_ref().map_err(String::as_str),
            )
        })
        .collect();
    let mut out = render(heads, &columns(&FIGURE_COLUMNS), &lines, &|s| {
        figures(s).to_vec()
    });
    let finite = rows
        .iter()
        .any(|r| r.result.as_ref().is_ok_and(|s| s.completion.is_some()));
    if finite {
        let _ = write!(out, "\n{SIZE_CLASS_CAPTION}{gap}");
        out += &render(heads, &size_class_columns(), &lines, &size_class_cells);
    }
    let groups = group_names(rows);
    if finite && !groups.is_empty() {
        let _ = write!(out, "\n{GROUP_CAPTION}{gap}");
        let columns = groups
            .iter()
            .map(|name| (name.clone(), name.chars().count().max(8)))
            .collect();
        out += &render(heads, &columns, &lines, &|s| group_cells(s, &groups));
    }
    let arrivals = rows
        .iter()
        .any(|r| r.result.as_ref().is_ok_and(|s| s.arrivals.is_some()));
    if arrivals {
        let _ = write!(out, "\n{ARRIVAL_CAPTION}{gap}");
        out += &render(
            heads,
            &columns(&ARRIVAL_COLUMNS),
            &lines,
            &|s| match &s.arrivals {
                Some(a) => arrival_figures(a).to_vec(),
                None => vec!["-".to_owned(); ARRIVAL_COLUMNS.len()],
            },
        );
    }
    let varies = |s: &Summary| bottleneck(s).is_some_and(|l| l.varies);
    if rows.iter().any(|r| r.result.as_ref().is_ok_and(varies)) {
        let _ = write!(out, "\n{VARYING_CAPTION}{gap}");
        out += &render(
            heads,
            &columns(&VARYING_COLUMNS),
            &lines,
            &|s| match bottleneck(s) {
                Some(l) => varying_figures(l).to_vec(),
                None => vec!["-".to_owned(); VARYING_COLUMNS.len()],
            },
        );
    }
    out
}

/// A changing link's figures, one per [`VARYING_COLUMNS`] entry.
fn varying_figures(l: &LinkSummary) -> [String; 7] {
    let ms = |x: f64| format!("{x:.1}");
    [
        l.name.clone(),
        format!("{:.2}", l.throughput_bps() / 1e6),
        format!("{:.3}", l.utilization),
        ms(l.sojourn_ms.p50),
        ms(l.sojourn_ms.p95),
        ms(l.sojourn_ms.p99),
        format!("{:.4}", l.loss),
    ]
}

/// The long-lived groups of the runs that ran, in the order of the first.
fn group_names(rows: &[Row]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for s in rows.iter().filter_map(|r| r.result.as_ref().ok()) {
        for g in &s.groups {
            if !names.contains(&g.name) {
                names.push(g.name.clone());
            }
        }
    }
    names
}

/// A run's throughput per group of `names`, Mbit/s; `-` for a group it
/// does not have.
fn group_cells(s: &Summary, names: &[String]) -> Vec<String> {
    names
        .iter()
        .map(|name| {
            s.groups
                .iter()
                .find(|g| g.name == *name)
                .map_or("-".to_owned(), |g| format!("{:.2}", g.throughput_bps / 1e6))
        })
        .collect()
}

/// The arrival period's figures, one per [`ARRIVAL_COLUMNS`] entry.
fn arrival_figures(a: &ArrivalSummary) -> [String; 6] {
    let fair = a
        .fair_after_s
        .map_or("never".to_owned(), |t| format!("{t:.1}"));
    match busiest(&a.links) {
        None => {
            let dash = || "-".to_owned();
            [dash(), dash(), dash(), dash(), dash(), fair]
        }
        Some(l) => [
            l.name.clone(),
            l.p99_queue_packets.to_string(),
            format!("{:.1}", l.p99_queue_ms),
            l.peak_queue_packets.to_string(),
            format!("{:.4}", l.loss),
            fair,
        ],
    }
}

/// A text table: label columns 12 wide, then each figure column padded to
/// its width ([`aligned`]); a row that did not run says why.
fn text_rows(
    heads: &[&str],
    columns: &Columns,
    lines: &[Line<'_>],
    cells: &dyn Fn(&Summary) -> Vec<String>,
) -> String {
    let mut out = String::new();
    for h in heads {
        let _ = write!(out, "{h:<12} ");
    }
    let (names, widths): (Vec<String>, Vec<usize>) = columns.iter().cloned().unzip();
    let _ = writeln!(out, "{}", aligned(&names, &widths));
    for (label, result) in lines {
        for l in *label {
            let _ = write!(out, "{l:<12} ");
        }
        match result {
            Err(e) => {
                let _ = writeln!(out, "skipped: {e}");
            }
            Ok(s) => {
                let _ = writeln!(out, "{}", aligned(&cells(s), &widths));
            }
        }
    }
    out
}

/// A Markdown table of the same cells as [`text_rows`].
fn markdown_rows(
    heads: &[&str],
    columns: &Columns,
    lines: &[Line<'_>],
    cells: &dyn Fn(&Summary) -> Vec<String>,
) -> String {
    let heads: Vec<&str> = heads
        .iter()
        .copied()
        .chain(columns.iter().map(|(name, _)| name.as_str()))
        .collect();
    let rows: Vec<Vec<String>> = lines
        .iter()
        .map(|(label, result)| {
            let figures = match result {
                Ok(s) => cells(s),
                Err(e) => std::iter::once(format!("skipped: {e}"))
                    .chain(std::iter::repeat_n(String::new(), columns.len() - 1))
                    .collect(),
            };
            [label.to_vec(), figures].concat()
        })
        .collect();
    markdown(&heads, &rows)
}

/// The size-class table's columns: the finite flows' ×PS overall, then
/// each class's finished flows and ×PS. Flow counts rather than mean
/// seconds: ×PS already compares the classes with one another and with
/// the goal, and n says whether a class has flows enough to judge, and
/// whether schemes finished the same flows (then a lower ×PS is a lower
/// mean; `run` and summary.json give the seconds).
fn size_class_columns() -> Columns {
    let classes = size_class_labels();
    let per_class = classes
        .iter()
        .flat_map(|c| [format!("{c} n"), format!("{c} ×PS")]);
    std::iter::once("×PS".to_owned())
        .chain(per_class)
        .map(|name| {
            let width = name.chars().count().max(5);
            (name, width)
        })
        .collect()
}

/// Each size class's name: `<100kB`, `100kB–1MB`, .., `≥10MB`.
pub fn size_class_labels() -> Vec<String> {
    let size = |b: u64| match b {
        b if b >= 1_000_000 => format!("{}MB", b / 1_000_000),
        b => format!("{}kB", b / 1_000),
    };
    let bounds = SIZE_CLASS_BOUNDS;
    let middle = bounds
        .windows(2)
        .map(|w| format!("{}–{}", size(w[0]), size(w[1])));
    std::iter::once(format!("<{}", size(bounds[0])))
        .chain(middle)
        .chain(std::iter::once(format!(
            "≥{}",
            size(bounds[bounds.len() - 1])
        )))
        .collect()
}

/// A run's cells under [`size_class_columns`]; `-` where there is nothing
/// to show (no finite flows, or none finished in a class).
fn size_class_cells(s: &Summary) -> Vec<String> {
    let ratio = |r: Option<f64>| r.map_or("-".to_owned(), |r| format!("{r:.2}"));
    let Some(c) = &s.completion else {
        return vec!["-".to_owned(); size_class_columns().len()];
    };
    let overall = (c.finished > 0).then(|| c.vs_sharing());
    let per_class = c.by_size_class.iter().flat_map(|b| match b.flows {
        0 => ["-".to_owned(), "-".to_owned()],
        n => [n.to_string(), ratio(b.vs_sharing())],
    });
    std::iter::once(ratio(overall)).chain(per_class).collect()
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
        .map(|c| (c.mean_s, c.vs_sharing()));
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
/// Only the scenario's own long-lived flows count: a finite flow has no
/// fair share to reach, and background traffic, such as a flood of fake
/// newcomers (`erc-fake-newcomers`), is not the scheme's to converge.
/// Pareto flows are neither in `flows` nor long-lived.
fn convergence_column(flows: &[FlowSummary]) -> String {
    let later: Vec<Option<f64>> = flows
        .iter()
        .filter(|f| f.long_lived && f.start_s > 0.0)
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

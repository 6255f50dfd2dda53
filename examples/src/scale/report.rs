//! What a run measured, and the report printed from it.

use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::config::{ScaleConfig, Stack};
use super::process::{DRAIN_LIMIT, POLL};
use crate::perf::output::bytes as human_bytes;

/// The figures of one stack's run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StackReport {
    /// The stack, both ends.
    pub stack: Stack,
    /// Connections attempted.
    pub connections: usize,
    /// Connections whose handshake succeeded.
    pub opened: usize,
    /// Downloads that arrived whole, every byte checked.
    pub completed: usize,
    /// Connections that failed (handshake or download).
    pub failed: usize,
    /// The first failure, for the report.
    pub first_failure: Option<String>,
    /// Bytes checked, all connections.
    pub bytes_verified: u64,
    /// From the first handshake to the last one settled.
    pub handshake_time: Duration,
    /// From the start signal to the last download settled.
    pub transfer_time: Duration,
    /// Process CPU time over the transfer.
    pub transfer_cpu: Option<Duration>,
    /// Resident set with the server and the relay up, no client yet.
    pub rss_base: Option<u64>,
    /// With every connection open, before the transfer.
    pub rss_open: Option<u64>,
    /// Highest seen during the transfer (sampled, not trimmed).
    pub rss_peak: Option<u64>,
    /// With every connection open, after the transfer.
    pub rss_after: Option<u64>,
    /// From the close signal until the runtime ran no task of the run
    /// (every connection drained, every endpoint closed); None if some
    /// were still alive after [`DRAIN_LIMIT`].
    pub drained: Option<Duration>,
    /// Datagrams the kernel dropped on full receive buffers, from the
    /// base to the end of the transfer; counted for the whole machine.
    pub buffer_drops: Option<u64>,
    /// quinn's packets sent, both ends, all connections.
    pub packets_sent: u64,
    /// quinn's packets lost, both ends, all connections.
    pub packets_lost: u64,
    /// Packets that reached the shim, both directions.
    pub shim_arrivals: u64,
    /// Packets the shim dropped, both directions.
    pub shim_drops: u64,
    /// Sessions the relay opened.
    pub sessions_opened: u64,
    /// New sessions the relay refused.
    pub sessions_refused: u64,
    /// Sessions the relay closed to make room.
    pub sessions_evicted: u64,
    /// Server connections whose sender ran on router feedback.
    pub feedback_senders: usize,
}

impl StackReport {
    /// Resident bytes per open connection above the base.
    pub fn per_connection(&self, rss: Option<u64>) -> Option<f64> {
        let (rss, base) = (rss?, self.rss_base?);
        (self.opened > 0).then(|| (rss as f64 - base as f64) / self.opened as f64)
    }

    /// CPU seconds per Gbit of verified payload (also: cores per Gbit/s).
    pub fn cpu_per_gbit(&self) -> Option<f64> {
        let gbit = self.bytes_verified as f64 * 8.0 / 1e9;
        (gbit > 0.0).then_some(self.transfer_cpu?.as_secs_f64() / gbit)
    }

    /// Verified payload over the transfer time, bit/s.
    pub fn goodput(&self) -> f64 {
        self.bytes_verified as f64 * 8.0 / self.transfer_time.as_secs_f64().max(1e-9)
    }
}

/// The shim's own memory per session, measured apart from QUIC.
#[derive(Clone, Copy, Debug)]
pub struct ShimSessions {
    /// Sessions the relay opened.
    pub opened: u64,
    /// Sessions asked for.
    pub wanted: usize,
    /// Resident bytes per session.
    pub per_session: Option<f64>,
}

/// Everything a run measured.
#[derive(Clone, Debug)]
pub struct ScaleReport {
    /// What was run.
    pub config: ScaleConfig,
    /// The shim's memory per session.
    pub shim: ShimSessions,
    /// The runs, in the order made ([`order`](super::order)).
    pub runs: Vec<StackReport>,
}

impl ScaleReport {
    /// The runs of `stack`.
    pub fn runs_of(&self, stack: Stack) -> impl Iterator<Item = &StackReport> {
        self.runs.iter().filter(move |r| r.stack == stack)
    }

    /// The mean of a figure over the runs of `stack`; None if a run lacks it.
    pub fn mean(&self, stack: Stack, figure: impl Fn(&StackReport) -> Option<f64>) -> Option<f64> {
        let values: Option<Vec<f64>> = self.runs_of(stack).map(figure).collect();
        values
            .filter(|v| !v.is_empty())
            .map(|v| v.iter().sum::<f64>() / v.len() as f64)
    }

    /// ecnq's mean less vanilla quinn's: ecnq's own share of a figure.
    pub fn ecnq_own(&self, figure: impl Fn(&StackReport) -> Option<f64>) -> Option<f64> {
        Some(self.mean(Stack::Ecnq, &figure)? - self.mean(Stack::Vanilla, &figure)?)
    }

    /// Whether every connection of every run completed.
    pub fn all_completed(&self) -> bool {
        self.runs.iter().all(|s| s.completed == s.connections)
    }
}

/// One of a run's resident-set figures.
type RssOf = fn(&StackReport) -> Option<u64>;

/// `part (x.x %)` of `whole`.
fn share(part: u64, whole: u64) -> String {
    let percent = 100.0 * part as f64 / whole.max(1) as f64;
    format!("{part} ({percent:.1} %)")
}

/// Memory per connection or session, in kB (1000 bytes).
fn kb(bytes: Option<f64>) -> String {
    bytes.map_or("n/a".into(), |b| format!("{:.1} kB", b / 1e3))
}

/// The report as printed: one column per run, and ecnq's own cost (the
/// mean of its runs less the mean of vanilla quinn's) when the baseline ran.
pub fn render(report: &ScaleReport) -> String {
    let mut out = String::new();
    write_setup(&mut out, report);
    let own_column = report.runs_of(Stack::Vanilla).next().is_some();
    let mut table = Table {
        out: &mut out,
        runs: &report.runs,
        own_column,
    };
    outcome_rows(&mut table, report);
    packet_rows(&mut table);
    memory_rows(&mut table, report);
    write_notes(&mut out, report, own_column);
    write_goals(&mut out, report);
    out
}

/// What was run: connections, bytes, link, and the shim's memory per session.
fn write_setup(out: &mut String, report: &ScaleReport) {
    let c = &report.config;
    let _ = writeln!(
        out,
        "scale: {} concurrent connections, {} downloaded by each, one server endpoint, one relay shim on loopback",
        c.connections,
        human_bytes(c.bytes)
    );
    let _ = writeln!(
        out,
        "link: {} (both directions); relay sessions: max {n}, per source {n} (every client is 127.0.0.1), idle 1 h; handshakes in batches of {}",
        c.link,
        c.batch,
        n = c.connections
    );
    let shim = &report.shim;
    let _ = writeln!(
        out,
        "shim memory per session: {} resident ({} of {} sessions opened by plain UDP clients; the kernel's socket buffers not counted)",
        kb(shim.per_session),
        shim.opened,
        shim.wanted
    );
    let _ = writeln!(out);
}

/// The figures table: one row per figure, one column per run, then ecnq's
/// own when the baseline ran.
struct Table<'a> {
    out: &'a mut String,
    runs: &'a [StackReport],
    own_column: bool,
}

impl Table<'_> {
    /// A row: `label`, `figure` of each run, then `own` in ecnq's column.
    fn row(&mut self, label: &str, figure: &dyn Fn(&StackReport) -> String, own: Option<String>) {
        let out = &mut *self.out;
        let _ = write!(out, "{label:<42}");
        for r in self.runs {
            let _ = write!(out, " {:>18}", figure(r));
        }
        if self.own_column {
            let _ = write!(out, " {:>14}", own.unwrap_or_default());
        }
        let _ = writeln!(out);
    }
}

/// The runs' names, then whether and how fast their connections completed.
fn outcome_rows(table: &mut Table<'_>, report: &ScaleReport) {
    let number = std::cell::Cell::new(0);
    table.row(
        "run",
        &|r| {
            number.set(number.get() + 1);
            format!("#{} {}", number.get(), r.stack)
        },
        Some("ecnq's own".into()),
    );
    table.row(
        "connections completed / failed",
        &|r| format!("{} / {}", r.completed, r.failed),
        None,
    );
    table.row("bytes checked", &|r| human_bytes(r.bytes_verified), None);
    table.row(
        "handshakes, s",
        &|r| format!("{:.2}", r.handshake_time.as_secs_f64()),
        None,
    );
    table.row(
        "transfer, s (goodput)",
        &|r| {
            format!(
                "{:.2} ({:.0} Mbit/s)",
                r.transfer_time.as_secs_f64(),
                r.goodput() / 1e6
            )
        },
        None,
    );
    table.row(
        "CPU per Gbit/s, cores (whole process)",
        &|r| r.cpu_per_gbit().map_or("n/a".into(), |x| format!("{x:.2}")),
        report
            .ecnq_own(StackReport::cpu_per_gbit)
            .map(|d| format!("{d:+.2}")),
    );
    table.row(
        "close and drain, s",
        &|r| {
            r.drained
                .map_or(format!("> {}", DRAIN_LIMIT.as_secs()), |d| {
                    format!("{:.2}", d.as_secs_f64())
                })
        },
        None,
    );
}

/// Packets lost and dropped, the relay's sessions and who ran on feedback.
fn packet_rows(table: &mut Table<'_>) {
    table.row(
        "packets lost, quinn, both ends (of sent)",
        &|r| share(r.packets_lost, r.packets_sent),
        None,
    );
    table.row(
        "packets dropped by the shim (of arrived)",
        &|r| share(r.shim_drops, r.shim_arrivals),
        None,
    );
    table.row(
        "UDP receive-buffer drops (kernel, machine)",
        &|r| r.buffer_drops.map_or("n/a".into(), |d| d.to_string()),
        None,
    );
    table.row(
        "shim sessions opened / refused / evicted",
        &|r| {
            format!(
                "{} / {} / {}",
                r.sessions_opened, r.sessions_refused, r.sessions_evicted
            )
        },
        None,
    );
    table.row(
        "senders on router feedback at their end",
        &|r| match r.stack {
            Stack::Ecnq => format!("{} / {}", r.feedback_senders, r.opened),
            Stack::Vanilla => "-".into(),
        },
        None,
    );
}

/// Resident set: the whole process's, then per connection.
fn memory_rows(table: &mut Table<'_>, report: &ScaleReport) {
    table.row(
        "process RSS, MB: base -> all open, after",
        &|r| match (r.rss_base, r.rss_after) {
            (Some(b), Some(a)) => format!("{:.0} -> {:.0}", b as f64 / 1e6, a as f64 / 1e6),
            _ => "n/a".into(),
        },
        None,
    );
    let memory: [(&str, RssOf); 3] = [
        ("RSS per connection, all open, before", |r| r.rss_open),
        ("RSS per connection, peak in transfer", |r| r.rss_peak),
        ("RSS per connection, all open, after", |r| r.rss_after),
    ];
    for (label, rss) in memory {
        table.row(
            label,
            &|r| kb(r.per_connection(rss(r))),
            report
                .ecnq_own(|r| r.per_connection(rss(r)))
                .map(|d| kb(Some(d))),
        );
    }
}

/// What the table's figures mean, and the first failure if any.
fn write_notes(out: &mut String, report: &ScaleReport, own_column: bool) {
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "RSS per connection: the whole process's resident set (every client endpoint, both ends of each connection, its relay session; quinn included) over the base with the server and relay up, divided by the connections open; the peak is sampled every {} ms, the others taken after malloc_trim.",
        POLL.as_millis()
    );
    let _ = writeln!(
        out,
        "CPU per Gbit/s: user + system time of the whole process (clients, server, shim) from the start signal to the last download, in seconds per Gbit of payload checked."
    );
    if own_column {
        let _ = writeln!(
            out,
            "ecnq's own: the mean of the ecnq runs less the mean of the vanilla quinn runs (in the order quinn, ecnq, ecnq, quinn, so that the machine's changing load hits both alike)."
        );
    }
    if let Some(first) = report.runs.iter().find_map(|r| r.first_failure.as_ref()) {
        let _ = writeln!(out, "first failure: {first}");
    }
    let _ = writeln!(out);
}

/// Whether the run met its goals: every connection completed, ecnq's own
/// memory per connection.
fn write_goals(out: &mut String, report: &ScaleReport) {
    let c = &report.config;
    let ecnq_completed: Vec<String> = report
        .runs_of(Stack::Ecnq)
        .map(|r| r.completed.to_string())
        .collect();
    let _ = writeln!(
        out,
        "goal: all {} connections complete: {} (ecnq runs: {} completed)",
        c.connections,
        verdict(
            report
                .runs_of(Stack::Ecnq)
                .all(|r| r.completed == c.connections)
        ),
        ecnq_completed.join(", ")
    );
    match report.ecnq_own(|r| r.per_connection(r.rss_after)) {
        Some(own) => {
            let _ = writeln!(
                out,
                "goal: ecnq's own memory <= 100 kB per connection (all open, after the transfer): {} ({})",
                verdict(own <= 100e3),
                kb(Some(own))
            );
        }
        None => {
            let _ = writeln!(
                out,
                "goal: ecnq's own memory <= 100 kB per connection: not judged (needs the baseline runs)"
            );
        }
    }
}

/// How a report says whether a goal was met.
pub(super) fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "NOT met"
    }
}

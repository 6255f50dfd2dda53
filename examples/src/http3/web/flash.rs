//! `ecnq-perf web --flash N`: a flash crowd of downloads on the real
//! stack. N of ecnq's HTTP/3 clients connect within 10 ms, each fetching
//! one file, through the relay shim, and the table gives issue 70's
//! flash-crowd figures as the simulator's `erc-flash-100` measures them:
//! the loss, the queue from the third round trip on, and Jain's index over
//! the flows' rates once the crowd has had time to share (its second
//! second), with the start codes the server read from its clients' counts.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ecnq::statistics::jain_index;
use tokio::time::Instant;

use super::{by_class, failure_note, fetched, file_name, uri, Fetch, Mix, Outcome, RealRun, Tasks};
use crate::http3::client::{GetConfig, Session};
use crate::perf::host::steal_note;

/// The span over which a crowd's clients start: issue 70's flash crowd
/// ("100 flows within 10 ms"), the simulator's `erc-flash-100`.
const SPREAD: f64 = 0.010;

/// The round trips after which the queue counts: issue 70's goal is the
/// queue p99 "from the third round trip on", once the initial windows have
/// crossed the link.
const QUEUE_FROM_ROUNDS: f64 = 3.0;

/// The window, seconds into the crowd, over which each flow's rate is
/// taken for Jain's index: the crowd's second second (issue 70's goal:
/// Jain ≥ 0.99 within 2 s).
const JAIN_WINDOW: (f64, f64) = (1.0, 2.0);

/// The files of a crowd of `n` clients on a link of `rate_bps`: client i
/// starts at i × `SPREAD` / n, each file the link's rate over `seconds`
/// split n ways.
pub fn crowd(n: u32, rate_bps: f64, seconds: f64) -> Result<Vec<Fetch>, String> {
    if seconds < JAIN_WINDOW.1 + 1.0 {
        return Err(format!(
            "--duration must be at least {} s with --flash (the crowd's rates are taken in its \
             second second), got {seconds}",
            JAIN_WINDOW.1 + 1.0
        ));
    }
    let bytes = (rate_bps * seconds / 8.0 / f64::from(n)).round() as u64;
    Ok((0..n)
        .map(|i| Fetch {
            start: f64::from(i) * SPREAD / f64::from(n),
            bytes,
        })
        .collect())
}

/// What `ecnq-perf web` says it runs.
pub fn what(mix: &Mix) -> String {
    let bytes = mix.fetches.first().map_or(0, |f| f.bytes);
    format!(
        "a flash crowd of {} clients within {:.0} ms, {:.0} kB each",
        mix.fetches.len(),
        SPREAD * 1e3,
        bytes as f64 / 1e3
    )
}

/// One task per client of the crowd, each its own connection started at
/// its arrival, taking the bytes it received in [`JAIN_WINDOW`] beside
/// its file; and the files' sizes.
pub(super) fn tasks(
    mix: &Mix,
    config: &GetConfig,
    start: Instant,
    done: &Arc<AtomicUsize>,
) -> (Tasks, Vec<u64>) {
    let at = |s: f64| start + Duration::from_secs_f64(s);
    let tasks = (mix.fetches.iter().enumerate())
        .map(|(i, f)| {
            let (config, done) = (config.clone(), done.clone());
            let (arrival, name) = (at(f.start), file_name(i));
            let window = (at(JAIN_WINDOW.0), at(JAIN_WINDOW.1));
            let task = tokio::spawn(async move {
                tokio::time::sleep_until(arrival).await;
                let outcome = fetch_sampled(&config, &name, window).await;
                done.fetch_add(1, Ordering::Relaxed);
                vec![outcome]
            });
            (task, 1)
        })
        .collect();
    (tasks, mix.fetches.iter().map(|f| f.bytes).collect())
}

/// `name` over a connection of its own, timed from the connection's first
/// packet to the body's end, with the bytes the connection received
/// between the window's two times if the body was still coming at its
/// end.
async fn fetch_sampled(config: &GetConfig, name: &str, window: (Instant, Instant)) -> Outcome {
    let started = Instant::now();
    let session = match Session::connect(config).await {
        Ok(session) => session,
        Err(e) => return Outcome::failed(e),
    };
    let fetch = async {
        let outcome = fetched(session.fetch(uri(name), None).await, started);
        (outcome, Instant::now())
    };
    let sample = async {
        tokio::time::sleep_until(window.0).await;
        let first = session.received_bytes();
        tokio::time::sleep_until(window.1).await;
        session.received_bytes() - first
    };
    let ((mut outcome, ended), bytes) = tokio::join!(fetch, sample);
    if outcome.seconds.is_some() && ended > window.1 {
        outcome.second_bytes = Some(bytes);
    }
    tokio::spawn(session.close());
    outcome
}

/// What one controller's crowd measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FlashRow {
    /// The controller (and the server's flight).
    pub name: String,
    /// Files planned.
    pub planned: usize,
    /// Files that arrived whole.
    pub finished: usize,
    /// Dropped over offered packets at the bottleneck, over the run.
    pub loss: f64,
    /// The p99 of the packets' sojourns from the third round trip on, ms.
    pub queue_p99_ms: f64,
    /// Jain's index over the rates of the flows still coming at the end
    /// of `JAIN_WINDOW`, and how many they were.
    pub jain: Option<(f64, usize)>,
    /// The files' mean completion time over processor sharing's.
    pub mean_x: Option<f64>,
    /// The server's connections by the start code it read (see
    /// [`RealRun::start_codes`]).
    pub start_codes: [usize; 4],
    /// The host's share of the CPU time during the run.
    pub host_steal: Option<f64>,
    /// The first failure, if any fetch failed.
    pub failure: Option<String>,
}

impl FlashRow {
    /// The figures of `run`, the crowd of `mix`, under `name`.
    pub fn of(name: &str, mix: &Mix, run: &RealRun) -> FlashRow {
        let (times, failure) = run.times();
        let rates: Vec<f64> = (run.outcomes.iter())
            .filter_map(|o| o.second_bytes)
            .map(|b| b as f64)
            .collect();
        let from = QUEUE_FROM_ROUNDS * 2.0 * mix.delay;
        let queue = run.link.sojourn_hist(from, f64::INFINITY);
        FlashRow {
            name: name.to_owned(),
            planned: run.planned.len(),
            finished: times.iter().flatten().count(),
            loss: run.link.loss(),
            queue_p99_ms: queue.percentile_ms(99.0).unwrap_or(0.0),
            jain: (!rates.is_empty()).then(|| (jain_index(&rates), rates.len())),
            mean_x: by_class(&run.planned, &times, &mix.sharing())[0].mean_x,
            start_codes: run.start_codes,
            host_steal: run.host_steal,
            failure,
        }
    }
}

/// The table's heads.
const HEADS: [&str; 7] = [
    "run",
    "done",
    "loss",
    "queue p99",
    "Jain",
    "mean ×PS",
    "codes 0/1/2/3",
];

/// One row's cells under [`HEADS`].
fn cells(r: &FlashRow) -> Vec<String> {
    let [a, b, c, d] = r.start_codes;
    vec![
        r.name.clone(),
        format!("{}/{}", r.finished, r.planned),
        format!("{:.2}%", r.loss * 100.0),
        format!("{:.1} ms", r.queue_p99_ms),
        r.jain
            .map_or("–".to_owned(), |(j, n)| format!("{j:.3} ({n})")),
        r.mean_x.map_or("–".to_owned(), |x| format!("{x:.2}")),
        format!("{a}/{b}/{c}/{d}"),
    ]
}

/// The table's column widths in text.
const WIDTHS: [usize; 7] = [22, 9, 7, 10, 12, 9, 14];

/// What the cells are, and failures and steal.
fn notes(rows: &[FlashRow], mix: &Mix) -> Vec<String> {
    let mut notes = vec![format!(
        "loss: over the run. queue p99: each packet's sojourn at the bottleneck (server to \
         client) from the third round trip on ({:.0} ms). Jain: over the rates of the flows \
         still coming at {} s, in the crowd's second second (how many). mean ×PS: the files' \
         mean completion time over processor sharing's, handshake included. codes: the \
         server's connections by how many of its first three flight datagrams came cleared \
         (erc's start code; a one-datagram flight reads 1, which asks nothing).",
        QUEUE_FROM_ROUNDS * 2.0 * mix.delay * 1e3,
        JAIN_WINDOW.1
    )];
    for r in rows {
        let done = (r.planned, r.finished);
        notes.extend(failure_note(&r.name, done, r.failure.as_ref()));
        notes.extend(steal_note(&r.name, r.host_steal));
    }
    notes
}

/// The table as text, with its notes.
pub fn table_text(rows: &[FlashRow], mix: &Mix) -> String {
    use ecnq_charts::table::aligned;
    let heads = HEADS.map(str::to_owned);
    let mut out = format!("\n{}\n", aligned(&heads, &WIDTHS).trim_end());
    for r in rows {
        out += &format!("{}\n", aligned(&cells(r), &WIDTHS).trim_end());
    }
    for note in notes(rows, mix) {
        out += &format!("{note}\n");
    }
    out
}

/// The table as Markdown, the notes under it as paragraphs.
pub fn table_markdown(rows: &[FlashRow], mix: &Mix) -> String {
    let cells: Vec<Vec<String>> = rows.iter().map(cells).collect();
    let mut out = ecnq_charts::table::markdown(&HEADS, &cells);
    for note in notes(rows, mix) {
        out += &format!("\n{note}\n");
    }
    out
}

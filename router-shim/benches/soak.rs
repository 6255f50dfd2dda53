//! Soak (issue 22 item 9): an `ecnq-shim relay` process with 1000 flows
//! offering its link rate, echoed back by the target so both directions
//! run full, for a given time (10 minutes by default). Every sample period
//! (10 s) it prints the shim's resident memory (VmRSS) and its error and
//! drop counters (from `--metrics`), then a verdict: memory flat (the last
//! sample within 5 % or 1 MiB, whichever is more, of the first sample
//! after warm-up) and no errors (no send errors, no session refused or
//! evicted, the shim running throughout and exiting cleanly without a
//! panic). Link drops are the link's own (a full buffer, AQM) and are
//! reported, not judged.
//!
//! `cargo bench -p ecnq-shim --bench soak -- [DURATION]`

use std::net::{SocketAddr, UdpSocket};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use ecnq::tos_io::send_with_tos;
use ecnq::{Ecn, Scheme, SchemeTag};

#[path = "../tests/load/mod.rs"]
mod load;
use load::{kernel_drops, numbered, paced, socket, Exit, Metrics, Receiver, Shim, Tally};

const USAGE: &str = "\
usage: soak [DURATION]

Runs `ecnq-shim relay` (link `rate 50mbit delay 10ms limit 1000`) with 1000
flows offering the link rate both ways for DURATION (default 10m: a number
with s, m or h; a bare number is seconds), samples its memory and counters
every 10 s and prints a verdict. Exit status 1 if the verdict fails.

  cargo bench -p ecnq-shim --bench soak -- 10m";

const LINK: &str = "rate 50mbit delay 10ms limit 1000";
const RATE_BPS: f64 = 50e6;
const FLOWS: usize = 1000;
const PAYLOAD: usize = 1200;
/// Payload, UDP and IPv4 headers: what the link counts.
const WIRE: f64 = (PAYLOAD + 28) as f64;
const SAMPLE: Duration = Duration::from_secs(10);
/// Memory may grow this much over the run and still count as flat.
const TOLERANCE: f64 = 0.05;
const TOLERANCE_KIB: u64 = 1024;

/// `10m`, `90s`, `1h`, `45` (seconds).
fn parse_duration(word: &str) -> Option<Duration> {
    let split = word
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(word.len());
    let (number, unit) = word.split_at(split);
    let n: u64 = number.parse().ok()?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n.checked_mul(60)?,
        "h" => n.checked_mul(3600)?,
        _ => return None,
    };
    (secs > 0).then(|| Duration::from_secs(secs))
}

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let duration = match args.as_slice() {
        [] => Duration::from_secs(600),
        [flag] if flag == "-h" || flag == "--help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        [word] => match parse_duration(word) {
            Some(d) => d,
            None => {
                eprintln!("soak: `{word}` is not a duration (e.g. 10m, 90s)\n\n{USAGE}");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("soak: one argument at most\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match soak(duration) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("soak: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One row of the table.
struct Sample {
    t: Duration,
    rss_kib: u64,
    metrics: Metrics,
    sent: u64,
    echoed: u64,
    kernel_drops: u64,
}

fn soak(duration: Duration) -> Result<bool, String> {
    let any: SocketAddr = "127.0.0.1:0".parse().map_err(|_| "address")?;
    let server = socket(any)?;
    let target = server.local_addr().map_err(|e| e.to_string())?;
    let echo = Receiver::start(vec![server], true)?;
    let mut shim = Shim::start(target, &["--link", LINK, "--seed", "1"])?;
    let relay = shim.listen;
    let clients: Vec<UdpSocket> = (0..FLOWS).map(|_| socket(any)).collect::<Result<_, _>>()?;
    let senders: Vec<UdpSocket> = clients
        .iter()
        .map(|c| c.try_clone().map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let back = Receiver::start(clients, false)?;

    let pps = RATE_BPS / 8.0 / WIRE;
    let sent = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let sender = send_flows(senders, relay, pps, sent.clone(), stop.clone());

    let warm_up = (duration / 10).clamp(SAMPLE, Duration::from_secs(60));
    print_head(pps, duration, warm_up);
    let (samples, running) = sample(&mut shim, duration, &sent, &back.tally)?;
    stop.store(true, Ordering::Relaxed);
    let total = sender.join().map_err(|_| "the sender panicked")?;
    thread::sleep(Duration::from_millis(500));
    let echoed = back.tally.total();
    let exit = shim.stop()?;
    echo.stop();
    back.stop();
    let pass = judge(&samples, warm_up, running, &exit, total, echoed)?;
    if !exit.stderr.is_empty() && !pass {
        eprintln!("shim stderr:\n{}", exit.stderr);
    }
    Ok(pass)
}

/// Starts the flows, round robin at `pps` in all, a third each VCP-tagged
/// ECT(1), untagged ECT(0) and Not-ECT, `sent` counting them, until `stop`;
/// the thread returns how many it sent.
fn send_flows(
    senders: Vec<UdpSocket>,
    relay: SocketAddr,
    pps: f64,
    sent: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<u64> {
    let kinds = [
        SchemeTag::new(Scheme::Vcp.wire().id()).tos(Ecn::Ect1),
        SchemeTag::UNTAGGED.tos(Ecn::Ect0),
        SchemeTag::UNTAGGED.tos(Ecn::NotEct),
    ];
    thread::spawn(move || {
        paced(
            pps,
            || stop.load(Ordering::Relaxed),
            |k| {
                let flow = (k % FLOWS as u64) as usize;
                let payload = numbered(flow as u32, k / FLOWS as u64, PAYLOAD);
                let tos = kinds[flow % kinds.len()];
                let _ = send_with_tos(&senders[flow], &payload, Some(relay), tos, false);
                sent.store(k + 1, Ordering::Relaxed);
            },
        )
    })
}

/// What the run does, and the table's column heads.
fn print_head(pps: f64, duration: Duration, warm_up: Duration) {
    println!(
        "soak: relay `{LINK}`, {FLOWS} flows of {PAYLOAD} B datagrams offering {:.0} datagrams/s \
         ({:.1} Mbit/s on the wire) up, echoed down; {} s, sampled every {} s, warm-up {} s",
        pps,
        RATE_BPS / 1e6,
        duration.as_secs(),
        SAMPLE.as_secs(),
        warm_up.as_secs()
    );
    println!(
        "{:>6} {:>9} {:>7} {:>7} {:>8} {:>7} {:>8} {:>6} {:>7} {:>6} {:>6} {:>7} {:>6}",
        "t s",
        "RSS KiB",
        "up Mb/s",
        "dn Mb/s",
        "echoed %",
        "active",
        "overflow",
        "aqm",
        "policed",
        "senderr",
        "refused",
        "evicted",
        "kdrop"
    );
}

/// Samples the shim every [`SAMPLE`] for `duration`, printing a row each
/// time; returns the samples and whether the shim kept running.
fn sample(
    shim: &mut Shim,
    duration: Duration,
    sent: &AtomicU64,
    echoed: &Tally,
) -> Result<(Vec<Sample>, bool), String> {
    let relay = shim.listen;
    let start = Instant::now();
    let mut samples: Vec<Sample> = Vec::new();
    let mut running = true;
    while running && start.elapsed() < duration {
        let next = SAMPLE * (samples.len() as u32 + 1);
        thread::sleep(next.min(duration).saturating_sub(start.elapsed()));
        running = shim.running();
        if !running {
            break;
        }
        let sample = Sample {
            t: start.elapsed(),
            rss_kib: shim.rss_kib()?,
            metrics: shim.metrics()?,
            sent: sent.load(Ordering::Relaxed),
            echoed: echoed.total(),
            kernel_drops: kernel_drops(relay),
        };
        print_row(&sample, samples.last());
        samples.push(sample);
    }
    Ok((samples, running))
}

/// Prints the totals, the memory and error findings and the verdict:
/// whether memory stayed flat after `warm_up` and nothing went wrong;
/// `total` datagrams were sent and `echoed` came back.
fn judge(
    samples: &[Sample],
    warm_up: Duration,
    running: bool,
    exit: &Exit,
    total: u64,
    echoed: u64,
) -> Result<bool, String> {
    let (Some(baseline), Some(last)) = (samples.iter().find(|s| s.t >= warm_up), samples.last())
    else {
        return Err("too few samples for a verdict".into());
    };
    let allowed = ((baseline.rss_kib as f64 * TOLERANCE) as u64).max(TOLERANCE_KIB);
    let flat = last.rss_kib <= baseline.rss_kib + allowed;
    let m = &last.metrics;
    let errors = [
        ("send errors", m.sum("send_errors_total", "")),
        ("sessions refused", m.sum("sessions_refused_total", "")),
        ("sessions evicted", m.sum("sessions_evicted_total", "")),
        ("panics", exit.panics() as u64),
        ("stopped early", u64::from(!running)),
        ("unclean exit", u64::from(!exit.clean)),
    ];
    let found: Vec<String> = errors
        .iter()
        .filter(|e| e.1 > 0)
        .map(|(what, n)| format!("{what} {n}"))
        .collect();
    println!(
        "sent {total} datagrams, {echoed} came back ({:.3} %); link drops up {} down {}; \
         kernel drops at the shim's listener {}",
        100.0 * echoed as f64 / total.max(1) as f64,
        m.sum("drops_total", "dir=\"up\""),
        m.sum("drops_total", "dir=\"down\""),
        last.kernel_drops
    );
    println!(
        "memory: {} KiB at {} s (after warm-up), {} KiB at {} s: {:+} KiB; {} (tolerance {} KiB)",
        baseline.rss_kib,
        baseline.t.as_secs(),
        last.rss_kib,
        last.t.as_secs(),
        last.rss_kib as i64 - baseline.rss_kib as i64,
        if flat { "flat" } else { "GREW" },
        allowed
    );
    println!(
        "errors: {}",
        if found.is_empty() {
            "none".to_owned()
        } else {
            found.join(", ")
        }
    );
    let pass = flat && found.is_empty();
    println!("verdict: {}", if pass { "PASS" } else { "FAIL" });
    Ok(pass)
}

fn print_row(s: &Sample, previous: Option<&Sample>) {
    let zero = Metrics::default();
    let (p_metrics, p_t, p_sent, p_echoed) = previous.map_or((&zero, Duration::ZERO, 0, 0), |p| {
        (&p.metrics, p.t, p.sent, p.echoed)
    });
    let secs = (s.t - p_t).as_secs_f64().max(1e-9);
    let mbps = |dir: &str| {
        let label = format!("dir=\"{dir}\"");
        let bytes = s.metrics.sum("departure_bytes_total", &label)
            - p_metrics.sum("departure_bytes_total", &label);
        bytes as f64 * 8.0 / secs / 1e6
    };
    let m = &s.metrics;
    println!(
        "{:>6} {:>9} {:>7.2} {:>7.2} {:>8.2} {:>7} {:>8} {:>6} {:>7} {:>6} {:>6} {:>7} {:>6}",
        s.t.as_secs(),
        s.rss_kib,
        mbps("up"),
        mbps("down"),
        100.0 * (s.echoed - p_echoed) as f64 / (s.sent - p_sent).max(1) as f64,
        m.sum("sessions_active", ""),
        m.sum("drops_total", "overflow"),
        m.sum("drops_total", "aqm"),
        m.sum("drops_total", "policed"),
        m.sum("send_errors_total", ""),
        m.sum("sessions_refused_total", ""),
        m.sum("sessions_evicted_total", ""),
        s.kernel_drops
    );
}

//! End to end: ecnq QUIC flows through relay shims on loopback — the real
//! transport, socket layer, feedback channel and router code together.
//!
//! Short versions run in CI (`cargo test`). Longer and heavier ones are
//! `#[ignore]`d: `cargo test -p ecnq-e2e --release -- --ignored`.
//!
//! A shim restarted in the middle of a transfer is tested in `testbed.rs`,
//! on the TUN testbed, where a restarted router keeps every address.
//! Through the relay a restart is a NAT rebinding (the server sees a new
//! source port), which ecnq's servers follow: they find a connection by
//! its connection ID. A router that loses its state in place is a link
//! spec's `restart T` (`erc_rides_through_a_router_restart_on_the_real_stack`).

use std::time::Duration;

use ecnq::quic::{CongestionControl, PeerMode};
use ecnq::router::bottleneck::Class;
use ecnq::statistics::percentile;
use ecnq::Scheme;
use ecnq_e2e::StallWatch;
use ecnq_examples::perf::client::{self, ClientConfig};
use ecnq_examples::perf::fake_newcomers;
use ecnq_examples::perf::loopback::{Flood, Flow, LinkSeries, LoopbackBed, RunResult};
use ecnq_examples::perf::paired::{LATE_FLOW_OFFSET, LATE_FLOW_PATH};
use ecnq_examples::perf::pump::Pause;
use ecnq_shim::link::spec::LinkSpec;
use tokio::time::Instant;

fn link(spec: &str) -> LinkSpec {
    spec.parse()
        .unwrap_or_else(|e| panic!("bad test link `{spec}`: {e}"))
}

/// Where the judged part of a run starts, as a share of the time the flows
/// send: the last 40 % is judged, in the real stack and the simulator alike.
const JUDGED_FROM: f64 = 0.6;

/// A parking lot of two chained shims and the flows through it: an access
/// link at 5/3 of the bottleneck's rate with two bandwidth-delay products
/// of buffer, then the bottleneck with one; each link carries a quarter of
/// the round trip each way.
#[derive(Clone, Copy, Debug)]
struct ParkingLotPath {
    bottleneck_mbit: u32,
    rtt_ms: u32,
    /// Flows of one scheme, all sending for the whole run.
    flows: usize,
}

impl ParkingLotPath {
    /// CI's path and the utilization goal's: the round trip (200 ms) equals
    /// the routers' t_p, the regime the papers' laws are scaled to.
    fn long_rtt(bottleneck_mbit: u32) -> ParkingLotPath {
        ParkingLotPath {
            bottleneck_mbit,
            rtt_ms: 200,
            flows: 2,
        }
    }

    /// The bottleneck's buffer: one bandwidth-delay product.
    fn bdp_kb(&self) -> u32 {
        self.bottleneck_mbit * self.rtt_ms / 8
    }

    /// The access link's rate and buffer.
    fn access(&self) -> (u32, u32) {
        (self.bottleneck_mbit * 5 / 3, self.bdp_kb() * 2)
    }

    /// Each link's one-way delay.
    fn delay_ms(&self) -> u32 {
        self.rtt_ms / 4
    }

    fn links(&self) -> [LinkSpec; 2] {
        let ((access_mbit, access_kb), delay) = (self.access(), self.delay_ms());
        [
            link(&format!(
                "rate {access_mbit}mbit delay {delay}ms limit {access_kb}kb"
            )),
            link(&format!(
                "rate {}mbit delay {delay}ms limit {}kb",
                self.bottleneck_mbit,
                self.bdp_kb()
            )),
        ]
    }

    fn flows(&self, scheme: Scheme, seconds: f64) -> Vec<Flow> {
        let flow = Flow {
            cc: CongestionControl::Ecnq(scheme),
            offset: 0.0,
            seconds,
        };
        vec![flow; self.flows]
    }

    /// The same path and flows as an `ecnq-sim` scenario, judged over the
    /// last 40 % of `seconds`.
    fn scenario(&self, scheme: Scheme, seconds: f64) -> String {
        let ((access_mbit, access_kb), delay) = (self.access(), self.delay_ms());
        format!(
            r#"
title = "e2e parking lot"
scheme = "{scheme}"
duration = "{seconds}s"
measure_from = "{from}s"
mss = "1200B"

[[links]]
name = "access"
rate = "{access_mbit}Mbit"
delay = "{delay}ms"
buffer = "{access_kb}KB"

[[links]]
name = "bottleneck"
rate = "{mbit}Mbit"
delay = "{delay}ms"
buffer = "{bdp_kb}KB"

[[flows]]
count = {count}
rtt = "{rtt}ms"
"#,
            from = seconds * JUDGED_FROM,
            mbit = self.bottleneck_mbit,
            bdp_kb = self.bdp_kb(),
            count = self.flows,
            rtt = self.rtt_ms,
        )
    }
}

/// Held by every test here for its whole run. cargo runs tests in parallel,
/// and two real-time runs sharing a 2-core machine disturb each other's
/// rates and queues; one at a time, each measures its own scheme.
static MACHINE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The longest the host may stall this process during a judged run: half
/// the routers' measurement period, t_p = 200 ms.
const MAX_STALL: Duration = Duration::from_millis(100);
/// Runs made at most; when the host disturbed every one of them, the one
/// it disturbed least is judged ([`least_disturbed`]).
const ATTEMPTS: u32 = 5;
/// The pause before a run is made again: the host's stalls come in episodes
/// that last seconds.
const RETRY_PAUSE: Duration = Duration::from_secs(5);

/// The most of the machine's CPU time the host may take during a judged
/// run in short stalls (steal). Runs that lose up to about a tenth
/// measure as on a quiet host, and a run that loses much more fails; the
/// demo's stricter bound (`perf::host::NOTABLE_STEAL`) would discard most
/// runs on a busy host and make the short tests take several times as long.
const MAX_STEAL: f64 = 0.15;

/// Runs `flows` over `links`, alone on the machine. A run during which the
/// host took more than [`MAX_STEAL`] of the CPU time or stalled the process
/// longer than [`MAX_STALL`] is discarded and made
/// again: on a shared virtual machine the host takes the CPU away for
/// hundreds of milliseconds at times (steal time), and such a run measures
/// the host, not ecnq.
async fn measured_run(flows: &[Flow], links: &[LinkSpec]) -> RunResult {
    measured_run_configured(flows, links, &|_, _| {}, None).await
}

/// [`measured_run`] with each flow's client set up by `configure`, and a
/// `flood` of fake newcomers beside them.
async fn measured_run_configured(
    flows: &[Flow],
    links: &[LinkSpec],
    configure: &(dyn Fn(usize, &mut ClientConfig) + Sync),
    flood: Option<&Flood>,
) -> RunResult {
    let _machine = MACHINE.lock().await;
    least_disturbed(move |attempt| async move {
        let bed = LoopbackBed::ecnq().await.expect("bed");
        let watch = StallWatch::start();
        let result = bed
            .run_configured(flows, links, configure, flood)
            .await
            .expect("run");
        let stall = watch.worst();
        assert!(
            result.runs.iter().all(Option::is_some),
            "a flow's handshake never got through"
        );
        let steal = result.host_steal.unwrap_or(0.0) * 100.0;
        if stall <= MAX_STALL && steal <= MAX_STEAL * 100.0 {
            println!("run {attempt}: longest host stall {stall:?}, steal {steal:.1} %");
            return (result, None);
        }
        let judged = judge(&result);
        println!(
            "run {attempt}: the host stalled this process for {stall:?} and took {steal:.1} % \
             of the CPU time; run discarded (it measured {:.1} %, p99 queue {:.0} B)",
            judged.utilization * 100.0,
            judged.p99
        );
        (result, Some(stall))
    })
    .await
}

/// Makes a run up to [`ATTEMPTS`] times, [`RETRY_PAUSE`] apart, until one
/// the host left alone: `attempt(n)` makes run `n` and says how much the
/// host disturbed it, `None` for not at all. When the host disturbed every
/// run, the one it disturbed least is judged.
async fn least_disturbed<T, D, Run>(mut attempt: impl FnMut(u32) -> Run) -> T
where
    Run: std::future::Future<Output = (T, Option<D>)>,
    D: PartialOrd + std::fmt::Debug,
{
    let mut least: Option<(D, T)> = None;
    for n in 1..=ATTEMPTS {
        let (run, disturbed) = attempt(n).await;
        let Some(disturbed) = disturbed else {
            return run;
        };
        if least.as_ref().is_none_or(|(d, _)| disturbed < *d) {
            least = Some((disturbed, run));
        }
        if n < ATTEMPTS {
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
    let (disturbed, run) = least.expect("at least one run was made");
    println!("the host disturbed every run; judging the one it disturbed least ({disturbed:?})");
    run
}

/// What a run measured at the bottleneck over the last 40 % of the time
/// every flow was scheduled to send. The run goes on after that while the
/// flows stop and report (the link idles for a round trip or two): judging
/// up to the run's end cost a 60 s run about a point and a half of
/// utilization.
struct Judged {
    utilization: f64,
    /// p99 queue, bytes.
    p99: f64,
    /// The buffer, bytes.
    buffer: f64,
    /// When the queue first held a third of the buffer or more, and for how
    /// many seconds in all: where to look when the p99 goal is missed.
    deep_queue: Option<(f64, f64)>,
}

/// The judged part of a run: the last 40 % of the time every flow sends.
fn judged_window(result: &RunResult) -> (f64, f64) {
    let to = result
        .flows
        .iter()
        .map(|f| f.offset + f.seconds)
        .fold(result.elapsed, f64::min);
    (to * JUDGED_FROM, to)
}

fn judge(result: &RunResult) -> Judged {
    // The parking lot's second link is its bottleneck; a run through one
    // relay (the coexistence runs, judged here only when the host stalled
    // them) has that link alone. Indexing [1] there panicked on a stall.
    let bottleneck = result
        .links
        .get(1)
        .or(result.links.last())
        .expect("a run has a link");
    let (from, to) = judged_window(result);
    let buffer = bottleneck.buffer_bytes;
    let window: Vec<_> = bottleneck
        .samples
        .windows(2)
        .filter(|w| w[0].t >= from && w[1].t <= to)
        .collect();
    let deep: Vec<_> = window
        .iter()
        .filter(|w| w[0].queue_bytes >= buffer / 3.0)
        .collect();
    Judged {
        utilization: bottleneck.utilization(from, to),
        p99: percentile(&bottleneck.queue_bytes(from, to), 99.0).unwrap_or(f64::INFINITY),
        buffer,
        deep_queue: deep
            .first()
            .map(|w| (w[0].t, deep.iter().map(|w| w[1].t - w[0].t).sum())),
    }
}

/// What a parking-lot run of one scheme measured at the bottleneck.
struct ParkingLot {
    scheme: Scheme,
    judged: Judged,
}

impl ParkingLot {
    /// Why the run misses the goal (utilization at least `min_utilization`,
    /// p99 queue below a third of the buffer when `judge_queue`), if it does.
    fn shortfall(&self, min_utilization: f64, judge_queue: bool) -> Option<String> {
        let (scheme, j) = (self.scheme, &self.judged);
        if j.utilization < min_utilization {
            Some(format!(
                "{scheme}: bottleneck utilization {:.1} % < {:.1} %",
                j.utilization * 100.0,
                min_utilization * 100.0
            ))
        } else if judge_queue && j.p99 >= j.buffer / 3.0 {
            let (first, seconds) = j.deep_queue.unwrap_or_default();
            Some(format!(
                "{scheme}: p99 queue {:.0} B ≥ a third of the {:.0} B buffer \
                 (a third or more for {seconds:.2} s, first at {first:.1} s)",
                j.p99, j.buffer
            ))
        } else {
            None
        }
    }
}

/// The bottleneck (the path's last link) and every flow from 5 s before
/// `t` to 5 s after, in half seconds: largest queue, utilization and drops
/// at the bottleneck; each flow's window, load-factor estimate, mode and
/// losses.
fn print_around(result: &RunResult, t: f64) {
    let bottleneck = result.links.last().expect("a link");
    let mut from = (t - 5.0).max(0.0);
    while from < t + 5.0 {
        let to = from + 0.5;
        let span: Vec<_> = bottleneck
            .samples
            .iter()
            .filter(|s| s.t >= from && s.t < to)
            .collect();
        let queue = span.iter().map(|s| s.queue_bytes).fold(0.0, f64::max);
        let drops = match (span.first(), span.last()) {
            (Some(a), Some(b)) => b.drops - a.drops,
            _ => 0.0,
        };
        print!(
            "{from:6.1} s: queue ≤ {queue:8.0} B, {:5.1} %, {drops:4.0} dropped",
            bottleneck.utilization(from, to) * 100.0
        );
        for run in result.runs.iter().flatten() {
            if let Some(i) = run.intervals.iter().find(|i| i.end > from && i.start < to) {
                print!(
                    " | {:8} B {:?} {} lost {}",
                    i.snd_cwnd, i.load_factor, i.mode, i.retransmits
                );
            }
        }
        println!();
        from = to;
    }
}

/// Flows of `scheme` through the parking lot, with feedback in use (asserted).
async fn parking_lot_run(scheme: Scheme, path: ParkingLotPath, seconds: f64) -> ParkingLot {
    let result = measured_run(&path.flows(scheme, seconds), &path.links()).await;
    let judged = judge(&result);
    let disregarded: Vec<_> = (result.links.iter())
        .map(|l| l.samples.last().map_or(0.0, |s| s.intervals_disregarded))
        .collect();
    println!(
        "{scheme}: utilization {:.1} %, p99 queue {:.0} B of {:.0} B; \
         measurement intervals disregarded for shim stalls, per link: {disregarded:?}",
        judged.utilization * 100.0,
        judged.p99,
        judged.buffer
    );
    if let Some((first, seconds)) = judged.deep_queue {
        println!("{scheme}: queue a third of the buffer or more for {seconds:.2} s, first at {first:.1} s");
        print_around(&result, first);
    }
    for run in result.runs.iter().flatten() {
        assert_eq!(
            run.stats.mode,
            PeerMode::Ecnq,
            "{scheme}: feedback must be in use"
        );
        assert!(
            run.stats.reports_received > 0,
            "{scheme}: no feedback arrived"
        );
    }
    ParkingLot { scheme, judged }
}

/// CI's short version: 12 Mbit/s, 12 s, in a debug build on a shared
/// 2-core machine. The window laws' own operating point here is about
/// γ·(1 + 0.875)/2 ≈ 0.90 of capacity (they back off by ×0.875 as soon as
/// demand passes γ = 0.955 of it). The end of the run, when flows stop, is
/// not judged; 70 % leaves room for the noise of a loaded machine while
/// still failing a scheme that does not fill the link.
/// The issue's 90 % is the opt-in test below.
/// MCP gets 20 s and its own bound: it starts at 80 kbit/s, adjusts once per
/// 2T = 400 ms and spends its first seven increase-decrease cycles in the
/// fairing mode, so its utilization here scatters from run to run and 55 %
/// only fails a collapse. Its p99 queue is not judged here: its MI(2)
/// start overshoots while feedback lags by T + RTT = 400 ms, so on this
/// path the queue scatters up to most of the buffer, and the one-third goal
/// holds for MCP only in the opt-in test at 100 Mbit/s.
macro_rules! parking_lot_tests {
    ($($name:ident: $scheme:expr, $seconds:expr, $min:expr, $judge_queue:expr;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let run = parking_lot_run($scheme, ParkingLotPath::long_rtt(12), $seconds).await;
            if let Some(why) = run.shortfall($min, $judge_queue) {
                panic!("{why}");
            }
        }
    )*};
}

parking_lot_tests! {
    parking_lot_vcp: Scheme::Vcp, 12.0, 0.7, true;
    parking_lot_evcp: Scheme::Evcp, 12.0, 0.7, true;
    parking_lot_dpcp: Scheme::Dpcp, 12.0, 0.7, true;
    parking_lot_tpcp: Scheme::Tpcp, 12.0, 0.7, true;
    parking_lot_bmcc: Scheme::Bmcc, 12.0, 0.7, true;
    parking_lot_mcp: Scheme::Mcp, 20.0, 0.55, false;
}

/// What the simulator, running the same law, marker and meter code in
/// virtual time, measures on `path` over the same window (the last 40 % of
/// `seconds`): the bottleneck's utilization.
fn simulated_utilization(scheme: Scheme, path: ParkingLotPath, seconds: f64) -> f64 {
    let scenario = path.scenario(scheme, seconds);
    let scenario = ecnq_sim::scenario::Scenario::parse("e2e", "tests/e2e.rs", &scenario, &[])
        .expect("scenario");
    let run = ecnq_sim::runner::run(&scenario, &Default::default()).expect("simulation");
    run.summary
        .links
        .iter()
        .find(|l| l.name == "bottleneck")
        .expect("the bottleneck is reported")
        .utilization
}

/// A goal run of `scheme` on `path`, with the simulator's figure for the
/// same path and window printed beside the measured one: what falls short
/// of `min_utilization` or of the queue bound.
async fn goal_shortfall(
    scheme: Scheme,
    path: ParkingLotPath,
    seconds: f64,
    min_utilization: f64,
) -> Option<String> {
    let run = parking_lot_run(scheme, path, seconds).await;
    println!(
        "{scheme}: simulator {:.1} % on the same path and window",
        simulated_utilization(scheme, path, seconds) * 100.0
    );
    run.shortfall(min_utilization, true)
}

/// The schemes a goal run covers: every router-assisted one, or those
/// named in `ECNQ_GOAL_SCHEMES` (comma-separated, e.g. `mcp,tpcp`), to
/// repeat a few without waiting for all of them.
fn goal_schemes() -> Vec<Scheme> {
    let Ok(names) = std::env::var("ECNQ_GOAL_SCHEMES") else {
        return Scheme::router_assisted().collect();
    };
    names
        .split(',')
        .map(|name| {
            let scheme: Scheme = name
                .parse()
                .unwrap_or_else(|e| panic!("ECNQ_GOAL_SCHEMES: {e}"));
            assert!(
                scheme.is_router_assisted(),
                "ECNQ_GOAL_SCHEMES: {scheme} gets no help from routers"
            );
            scheme
        })
        .collect()
}

/// The issue's goal, opt-in: every scheme's flows reach ≥ 90 % utilization
/// of a 100 Mbit/s bottleneck with p99 queue below a third of its buffer.
/// `cargo test -p ecnq-e2e --release -- --ignored parking_lot_goal_every_scheme`
///
/// Runs of 180 s judged over their last 72 s. VCP's MI start takes about
/// 15 s to fill 2.5 MB. A window law then climbs by AI from about 85 % of
/// capacity, backs off ×0.875 once demand passes γ = 0.975 of it, and
/// climbs again: a sawtooth averaging about 91 % of capacity by design,
/// whose cycle lasts 26 s here for VCP and BMCC (6 s for DPCP). A window
/// cutting a cycle lands on either side of that mean by phase, so over a
/// window of one cycle one disturbance (an extra back-off after a host
/// stall) takes a scheme under 90 %. 72 s hold nearly three such cycles,
/// and a disturbance costs half as much.
///
/// MCP's utilization is printed, not judged: its first seven
/// increase-decrease cycles are AIMD(80 kbit/s, 0.5) "fairing" (MCP paper
/// §IV-D.1), between about 49 % and 98 % of capacity, and with two flows
/// at 100 Mbit/s one cycle takes (0.98 - 0.49) × 100 Mbit/s over
/// 2 × 80 kbit/s per 400 ms, about two minutes. Its queue is judged, and
/// its 90 % in `parking_lot_goal_mcp_after_fairing`, on a path where the
/// fairing cycles end early in the run. Prague's is printed, not judged
/// either: it is the L4S baseline, not an ecnq scheme the goal is for, and
/// after its slow start's first marked round halves its window each flow
/// grows one packet per round trip, so the two regain about 0.5 % of this
/// path's 2083-packet bandwidth-delay product per second.
/// Each scheme's figure from the simulator (same law code, same path and
/// window) is printed next to the measured one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: run with --release -- --ignored"]
async fn parking_lot_goal_every_scheme() {
    const SECONDS: f64 = 180.0;
    let path = ParkingLotPath::long_rtt(100);
    let mut misses = Vec::new();
    for scheme in goal_schemes() {
        let judged = scheme != Scheme::Mcp && !scheme.wire().is_l4s();
        let min_utilization = if judged { 0.9 } else { 0.0 };
        misses.extend(goal_shortfall(scheme, path, SECONDS, min_utilization).await);
    }
    assert!(misses.is_empty(), "{}", misses.join("; "));
}

/// The utilization goal for MCP, opt-in, on a path where its fairing ends
/// early in the run: 12 Mbit/s, 40 ms round trip, six flows. A fairing
/// cycle climbs from about 49 % to 98 % of capacity at 6 × 80 kbit/s per
/// 2T = 400 ms, about 5 s, so the seven cycles are over after some 35 s and
/// the flows hold still in the stable mode (88-98 %, MCP paper Fig. 2).
/// 90 s, judged over the last 36 s.
/// `cargo test -p ecnq-e2e --release -- --ignored parking_lot_goal_mcp`
///
/// It needs MCP's senders paced at their rate (`ecnq::quic`'s rate gate)
/// and its stable mode to ride out overload readings shorter than 2T (see
/// `McpLaw`); without either it falls short of 90 %.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: run with --release -- --ignored"]
async fn parking_lot_goal_mcp_after_fairing() {
    const SECONDS: f64 = 90.0;
    let path = ParkingLotPath {
        bottleneck_mbit: 12,
        rtt_ms: 40,
        flows: 6,
    };
    if let Some(why) = goal_shortfall(Scheme::Mcp, path, SECONDS, 0.9).await {
        panic!("{why}");
    }
}

/// A late-arrival run: two flows of `scheme` over `link`, the second
/// starting `offset` seconds into a run of `seconds`.
async fn late_flow_run(scheme: Scheme, link_spec: &str, offset: f64, seconds: f64) -> RunResult {
    let cc = CongestionControl::Ecnq(scheme);
    let flows = [
        Flow {
            cc,
            offset: 0.0,
            seconds,
        },
        Flow {
            cc,
            offset,
            seconds: seconds - offset,
        },
    ];
    measured_run(&flows, &[link(link_spec)]).await
}

/// Seconds from the late flow's start (5 s into a run of `seconds`) until
/// it first gets within 20 % of the fair share (the EVCP paper's notion of
/// convergence), if it does.
async fn late_flow_convergence(scheme: Scheme, seconds: f64) -> Option<f64> {
    let result = late_flow_run(scheme, LATE_FLOW_PATH, LATE_FLOW_OFFSET, seconds).await;
    let converge = ecnq::statistics::convergence_time(
        &result.series,
        1,
        0.2,
        ecnq_examples::perf::loopback::SAMPLE_WINDOW,
    );
    match converge {
        Some(t) => println!("{scheme}: late flow within 20 % of its fair share after {t:.1} s"),
        None => println!("{scheme}: late flow never within 20 % of its fair share"),
    }
    converge
}

/// The issue's goal, opt-in: a late flow gets within 20 % of its fair share
/// within 20 s, for every scheme; MCP, whose stable mode holds for 2T, is
/// the slowest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: run with --release -- --ignored"]
async fn late_flow_converges_every_scheme() {
    let mut misses = Vec::new();
    for scheme in Scheme::router_assisted() {
        let converge = late_flow_convergence(scheme, 30.0).await;
        if !converge.is_some_and(|t| t <= 20.0) {
            misses.push(format!("{scheme}: {converge:?} s"));
        }
    }
    assert!(
        misses.is_empty(),
        "late flows too slow: {}",
        misses.join("; ")
    );
}

/// CI's short version, one scheme: BMCC's late flow gets within 20 % of its
/// fair share within the opt-in test's 20 s. Measured 0.25-8.5 s in debug
/// builds; BMCC's own laws make the time depend on where in the early
/// flow's increase-decrease cycle the late one arrives (the simulator has
/// 1.2-20 s to reach the full fair share on this path, over eight seeds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_flow_converges_bmcc() {
    let converge = late_flow_convergence(Scheme::Bmcc, 26.0).await;
    assert!(
        converge.is_some_and(|t| t <= 20.0),
        "bmcc: late flow took {converge:?} s"
    );
}

/// Against a server that does not run ecnq (vanilla quinn: untagged, no
/// reports), an ecnq sender falls back to classic congestion control and
/// completes the transfer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_ecnq_peer_falls_back_and_completes() {
    let _machine = MACHINE.lock().await;
    let bed = LoopbackBed::vanilla().await.expect("vanilla server");
    let spec = "rate 20mbit delay 5ms limit 100";
    let cc = CongestionControl::Ecnq(Scheme::Bmcc);
    let (run, _) = upload(bed.server(), bed.roots().clone(), spec, cc, 2 << 20).await;
    assert_eq!(
        run.peer_result.bytes,
        2 << 20,
        "the vanilla server received every byte"
    );
    assert_eq!(run.stats.mode, PeerMode::ClassicPeerNotEcnq);
    assert_eq!(run.stats.reports_received, 0);
}

/// One upload of `bytes` under `cc` to `server` through a relay of `spec`:
/// the client's record and the link's series.
async fn upload(
    server: std::net::SocketAddr,
    roots: rustls::RootCertStore,
    spec: &str,
    cc: CongestionControl,
    bytes: u64,
) -> (client::StreamRun, LinkSeries) {
    upload_acked(server, roots, spec, cc, bytes, None).await
}

/// [`upload`], asking the receiver to acknowledge every `ack_every`
/// packets ([`client::ClientConfig::ack_every`]).
async fn upload_acked(
    server: std::net::SocketAddr,
    roots: rustls::RootCertStore,
    spec: &str,
    cc: CongestionControl,
    bytes: u64,
    ack_every: Option<u32>,
) -> (client::StreamRun, LinkSeries) {
    let chain =
        ecnq_examples::perf::loopback::RelayChain::start(&[link(spec)], server).expect("relay");
    let config = client::ClientConfig {
        ack_every,
        server: chain.entry,
        server_name: "localhost".into(),
        roots,
        cc,
        request: ecnq_examples::perf::proto::TestRequest {
            version: 1,
            reverse: false,
            seconds: 0.0,
            bytes,
        },
        interval: Duration::from_millis(250),
        qlog: None,
        pause: None,
        send_window: None,
    };
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let run = client::run_stream(&config, 1, Instant::now(), tx)
        .await
        .unwrap_or_else(|e| panic!("upload to {server}: {e}"));
    let series = chain.stop().await.remove(0).rebased();
    (run, series)
}

/// The link of the tests of erc read from ACK-ECN counts.
const COUNTS_LINK: &str = "rate 20mbit delay 20ms limit 200";
/// Their uploads: about six seconds of the link.
const COUNTS_BYTES: u64 = 15_000_000;
/// The seconds of their runs that are judged: the middle.
const COUNTS_JUDGED: (f64, f64) = (2.0, 5.0);

/// The measurement intervals `link`'s relay disregarded between two
/// times because the host ran it late.
fn relay_late(link: &LinkSeries, from: f64, to: f64) -> f64 {
    let mut window = (link.samples.iter()).filter(|s| (from..=to).contains(&s.t));
    match (window.next(), window.next_back()) {
        (Some(first), Some(last)) => last.intervals_disregarded - first.intervals_disregarded,
        _ => 0.0,
    }
}

/// One erc upload of the counts tests, judged over [`COUNTS_JUDGED`].
struct CountsRun {
    stats: ecnq::quic::CongestionStats,
    /// The link's utilization, the run's loss, the packets dropped in the
    /// judged window, and the p90, p99 and most the packets that left the
    /// link waited in its queue (ms, by packet).
    /// The checks compare the p90 of a few thousand sojourns: a relay the
    /// host starves for a few hundred ms (the law's rate unchanged) moves
    /// the p99 several-fold, and the 50 ms queue samples give only about
    /// 60, whose p99 is in effect their maximum. A standing queue moves the
    /// p90, and one beyond the buffer drops packets, which the checks
    /// forbid in the judged window (a start may overshoot: 1 upload in 40
    /// lost 2.6 % of its packets, all before the window).
    util: f64,
    dropped: f64,
    p90: f64,
    p99: f64,
    max: f64,
    loss: f64,
    /// The median rate the law sent at (window over smoothed RTT), Mbit/s:
    /// the index it read, whatever the host let the sender do.
    law_mbit: f64,
    /// The longest the host stalled this process.
    stall: Duration,
    /// The relay's measurement intervals in the judged window that it
    /// disregarded because the host ran it late (`ecnq_shim` `STALL`, 20 ms).
    relay_late: f64,
}

impl CountsRun {
    /// `run` and its `link`, judged over [`COUNTS_JUDGED`].
    fn judge(run: client::StreamRun, link: &LinkSeries, stall: Duration) -> CountsRun {
        let (from, to) = COUNTS_JUDGED;
        let judged = run
            .intervals
            .iter()
            .filter(|i| i.start >= from && i.end <= to);
        let law: Vec<f64> = judged
            .map(|i| i.snd_cwnd as f64 * 8.0 / (i.rtt.max(1) as f64 * 1e-6) / 1e6)
            .collect();
        let sojourns = link.sojourn_hist(from, to);
        let waited = |p| sojourns.percentile_ms(p).unwrap_or(f64::INFINITY);
        CountsRun {
            stats: run.stats,
            util: link.utilization(from, to),
            dropped: link.drops_by(to) - link.drops_by(from),
            p90: waited(90.0),
            p99: waited(99.0),
            max: waited(100.0),
            loss: link.loss(),
            law_mbit: percentile(&law, 50.0).unwrap_or(0.0),
            stall,
            relay_late: relay_late(link, from, to),
        }
    }

    /// Whether the host ran this upload's sender or relay late: then the
    /// relay's queue holds what it could not forward, whatever the law did.
    fn disturbed(&self) -> bool {
        self.stall > MAX_STALL || self.relay_late > 0.0
    }

    /// This run's queue is close to `baseline`'s, run beside it: a p90 at
    /// most twice its own plus 2 ms, and nothing dropped in the window.
    fn assert_queue_near(&self, baseline: &CountsRun) {
        assert!(
            self.p90 <= 2.0 * baseline.p90 + 2.0 && self.dropped == 0.0,
            "queue p90 {:.2} ms against {:.2} ms beside it; {} dropped",
            self.p90,
            baseline.p90,
            self.dropped
        );
    }

    fn print(&self, label: &str) {
        eprintln!(
            "{label}: {:?} util {:.3} queue p90 {:.2} p99 {:.2} max {:.2} ms \
             loss {:.4} ({} dropped in the window), law {:.1} Mbit/s, {} frames read, \
             {} not, host stall {:?}, relay late {}",
            self.stats.mode,
            self.util,
            self.p90,
            self.p99,
            self.max,
            self.loss,
            self.dropped,
            self.law_mbit,
            self.stats.ack_frames_read,
            self.stats.ack_frames_unread,
            self.stall,
            self.relay_late,
        );
    }
}

/// Two erc uploads at once, each of [`COUNTS_BYTES`] through a
/// [`COUNTS_LINK`] of its own, to the server of each bed, whose receiver
/// is asked to acknowledge every `ack_every` packets ([`upload_acked`]).
/// Side by side, a loaded host slows both alike: made one after the
/// other, at load 14-25 either run lost a tenth to a quarter of its
/// utilization to a starved sender or relay, whichever way its feedback
/// came (the law's rate read right in every run), and failed the ratio
/// one run in ten. As [`measured_run`] does ([`least_disturbed`]), a pair
/// during which the host stalled this process longer than [`MAX_STALL`],
/// or ran either relay late ([`CountsRun::disturbed`]), is made again, and
/// if every one of [`ATTEMPTS`] was, the least disturbed is judged. A pair that no stall
/// flagged had one relay starved for a fraction of a second, at 0.8
/// utilization and a queue p99 four times its pair's; at load 10-14 the
/// relays' count discarded 13 pairs in 20 tests that the stall alone kept.
async fn counts_uploads(beds: [(&LoopbackBed, Option<u32>); 2]) -> [CountsRun; 2] {
    let upload = |(bed, ack_every): (&LoopbackBed, Option<u32>)| {
        let erc = CongestionControl::Ecnq(Scheme::Erc);
        let (server, roots) = (bed.server(), bed.roots().clone());
        upload_acked(server, roots, COUNTS_LINK, erc, COUNTS_BYTES, ack_every)
    };
    least_disturbed(move |attempt| async move {
        let watch = StallWatch::start();
        let ((a, link_a), (b, link_b)) = tokio::join!(upload(beds[0]), upload(beds[1]));
        let stall = watch.worst();
        let pair = [
            CountsRun::judge(a, &link_a, stall),
            CountsRun::judge(b, &link_b, stall),
        ];
        if !pair.iter().any(CountsRun::disturbed) {
            return (pair, None);
        }
        let late = [pair[0].relay_late, pair[1].relay_late];
        eprintln!(
            "pair {attempt} discarded: the host stalled this process for {stall:?}, \
             the relays late in {late:?} intervals"
        );
        let disturbance = (late[0] + late[1], stall);
        (pair, Some(disturbance))
    })
    .await
}

/// erc from the sender alone: to a vanilla quinn server, which reports
/// only its standard ACK-ECN counts, an ecnq client reads the router's
/// rate from them (its law's rate within 5 % of the one reports give),
/// and fills the link with a queue close to the one it keeps when the
/// server runs ecnq and reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erc_reads_the_router_from_a_vanilla_peers_ack_ecn_counts() {
    let _machine = MACHINE.lock().await;
    let bed = LoopbackBed::ecnq().await.expect("ecnq server");
    let vanilla = LoopbackBed::vanilla().await.expect("vanilla server");
    let [reports, counts] = counts_uploads([(&bed, None), (&vanilla, None)]).await;
    reports.print("reports");
    counts.print("counts");
    assert_eq!(reports.stats.mode, PeerMode::Ecnq);
    assert_eq!(
        counts.stats.mode,
        PeerMode::EcnqAckCounts,
        "{:?}",
        counts.stats
    );
    assert!(counts.stats.ack_frames_read > 100, "{:?}", counts.stats);
    let law = counts.law_mbit / reports.law_mbit;
    assert!(
        (0.95..=1.05).contains(&law),
        "law {law:.3} of its rate from reports"
    );
    assert!(
        counts.util >= 0.9 * reports.util,
        "{} vs {}",
        counts.util,
        reports.util
    );
    counts.assert_queue_near(&reports);
}

/// erc behind a vanilla quinn receiver that acknowledges only every tenth
/// packet (as Chromium does): the sender keeps pacing between the ACKs,
/// so it fills the link about as well as with an ACK every two packets,
/// where it used to send a burst per ACK and wait, and the room the window
/// leaves for the gap between ACKs does not lengthen the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erc_keeps_the_link_full_behind_a_peer_that_acknowledges_every_tenth_packet() {
    let _machine = MACHINE.lock().await;
    let vanilla = LoopbackBed::vanilla().await.expect("vanilla server");
    let [two, ten] = counts_uploads([(&vanilla, Some(2)), (&vanilla, Some(10))]).await;
    two.print("every 2");
    ten.print("every 10");
    for run in [&two, &ten] {
        assert_eq!(run.stats.mode, PeerMode::EcnqAckCounts, "{:?}", run.stats);
    }
    assert!(
        ten.util >= 0.9 * two.util,
        "every 10: {} of every 2: {}",
        ten.util,
        two.util
    );
    ten.assert_queue_near(&two);
}

/// Flows started together through relay shims, judged at the last link
/// over the run's judged window ([`judged_window`]).
struct SharedRun {
    result: RunResult,
    from: f64,
    to: f64,
    /// Mbit/s of each flow: bytes its server received over the time it
    /// sent.
    mbit: Vec<f64>,
    /// The last link's utilization.
    util: f64,
}

impl SharedRun {
    /// The last link: the bottleneck the flows share.
    fn bottleneck(&self) -> &LinkSeries {
        self.result.links.last().expect("a link")
    }

    /// The p99 wait per packet in `class`'s queue at the bottleneck, ms
    /// (none if no packet left that queue).
    fn waited_ms(&self, class: Class) -> Option<f64> {
        (self.bottleneck()).class_sojourn_p99_ms(class, self.from, self.to)
    }
}

/// Flows of `ccs` started together through relay shims with `specs`, in
/// path order, sending for `seconds`.
async fn shared_run(ccs: &[CongestionControl], specs: &[&str], seconds: f64) -> SharedRun {
    let result = together(ccs, specs, seconds).await;
    let (from, to) = judged_window(&result);
    let mbit = goodput_mbit(&result, seconds);
    let util = (result.links.last().expect("a link")).utilization(from, to);
    SharedRun {
        result,
        from,
        to,
        mbit,
        util,
    }
}

/// One flow of each of `ccs`, all started together and sending for
/// `seconds`, through relays in series with `specs`.
async fn together(ccs: &[CongestionControl], specs: &[&str], seconds: f64) -> RunResult {
    together_configured(ccs, specs, seconds, &|_, _| {}).await
}

/// [`together`] with each flow's client set up by `configure`.
async fn together_configured(
    ccs: &[CongestionControl],
    specs: &[&str],
    seconds: f64,
    configure: &(dyn Fn(usize, &mut ClientConfig) + Sync),
) -> RunResult {
    let flows: Vec<Flow> = ccs
        .iter()
        .map(|&cc| Flow {
            cc,
            offset: 0.0,
            seconds,
        })
        .collect();
    let links: Vec<LinkSpec> = specs.iter().map(|s| link(s)).collect();
    measured_run_configured(&flows, &links, configure, None).await
}

/// Each flow's goodput over the `seconds` it was to send, Mbit/s (0 for
/// one that never got in).
fn goodput_mbit(result: &RunResult, seconds: f64) -> Vec<f64> {
    (result.runs.iter())
        .map(|run| run.as_ref().map_or(0, |r| r.peer_result.bytes) as f64 * 8.0 / seconds / 1e6)
        .collect()
}

/// One flow of `ecnq` and one of `other` started together through one
/// shim; returns Mbit/s of each and the link's utilization.
async fn coexistence_run(
    ecnq: CongestionControl,
    other: CongestionControl,
    spec: &str,
    seconds: f64,
) -> (f64, f64, f64) {
    let run = shared_run(&[ecnq, other], &[spec], seconds).await;
    (run.mbit[0], run.mbit[1], run.util)
}

/// erc beside quinn's Cubic through the shim's dual-queue bottleneck
/// (10 Mbit/s, 40 ms RTT, one BDP of buffer, 20 s): each gets 0.5×–2× the
/// other and together they use ≥ 90 % of the link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erc_holds_its_share_beside_cubic() {
    assert_pair_shares(
        CongestionControl::DEFAULT,
        CongestionControl::Cubic,
        "rate 10mbit delay 20ms limit 50kb",
        20.0,
    )
    .await;
}

/// The same through one FIFO that marks and drops for both (`queue
/// fifo`): the erc router counts Cubic's flow as a flow bottlenecked there
/// and advertises half of what its standing queue leaves. Told the link
/// less Cubic's rate instead, erc would get almost nothing (the simulator's
/// `coexist-fifo` checks the same).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erc_holds_its_share_beside_cubic_in_one_fifo() {
    assert_pair_shares(
        CongestionControl::DEFAULT,
        CongestionControl::Cubic,
        "rate 10mbit delay 20ms limit 50kb queue fifo",
        20.0,
    )
    .await;
}

/// Runs `a` beside `b` through one relay with `spec` for `seconds`, prints
/// the figures and asserts the coexistence goal: each gets 0.5×–2× the
/// other, together ≥ 90 % of the link.
async fn assert_pair_shares(a: CongestionControl, b: CongestionControl, spec: &str, seconds: f64) {
    let (x, y, util) = coexistence_run(a, b, spec, seconds).await;
    println!("{a} {x:.2} Mbit/s, {b} {y:.2} Mbit/s, utilization {util:.3}");
    let ratio = x / y;
    assert!(
        (0.5..=2.0).contains(&ratio) && util >= 0.9,
        "{a}/{b} {ratio:.2}, utilization {util:.3}"
    );
}

/// Issue 20's first goal for erc with more flows, opt-in: erc and quinn's
/// Cubic through the shim's dual queue (50 Mbit/s, 40 ms, one BDP, 30 s),
/// 1 + 1, 2 + 2 and 1 + 4 flows started together. An erc flow gets 0.5×–2×
/// a Cubic flow's goodput, together they use ≥ 90 % of the link, and the
/// ecnq queue's packets wait ≤ 2 ms at p99 while Cubic keeps its standing
/// queue in the classic one (per packet, from the shim's sojourn
/// histograms, judged over the last 40 % of the run). It also prints each
/// queue's p99 at the link's rate, sampled every 50 ms, which understates
/// the wait of a class served at its share. The 2 ms bound holds because
/// the ecnq queue goes first within its share (not only when it comes back
/// from idle) and erc sends in bursts of 1 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: run with --release -- --ignored"]
async fn erc_beside_more_cubic_flows_keeps_its_queue_short() {
    const SECONDS: f64 = 30.0;
    let mut misses = Vec::new();
    for (ercs, cubics) in [(1, 1), (2, 2), (1, 4)] {
        let ccs: Vec<CongestionControl> = std::iter::repeat_n(CongestionControl::DEFAULT, ercs)
            .chain(std::iter::repeat_n(CongestionControl::Cubic, cubics))
            .collect();
        let run = shared_run(&ccs, &["rate 50mbit delay 20ms limit 250kb"], SECONDS).await;
        let (mbit, util) = (&run.mbit, run.util);
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let (erc, cubic) = (mean(&mbit[..ercs]), mean(&mbit[ercs..]));
        let at_link_rate = |class| {
            percentile(
                &run.bottleneck().class_queue_ms(class, run.from, run.to),
                99.0,
            )
            .unwrap_or(0.0)
        };
        let waited = |class| run.waited_ms(class).unwrap_or(f64::INFINITY);
        let ecnq_p99 = waited(Class::Ecnq);
        println!(
            "{ercs} erc + {cubics} cubic: Mbit/s {mbit:.2?}, erc/cubic per flow {:.2}, \
             utilization {util:.3}, sojourn p99 per packet: ecnq {ecnq_p99:.1} ms, \
             classic {:.1} ms; queue p99 at the link's rate: ecnq {:.2} ms, classic {:.2} ms",
            erc / cubic,
            waited(Class::Classic),
            at_link_rate(Class::Ecnq),
            at_link_rate(Class::Classic)
        );
        if !(0.5..=2.0).contains(&(erc / cubic)) || util < 0.9 || ecnq_p99 > 2.0 {
            misses.push(format!(
                "{ercs} + {cubics}: {:.2}×, {util:.3}, ecnq p99 {ecnq_p99:.2} ms",
                erc / cubic
            ));
        }
    }
    assert!(misses.is_empty(), "{}", misses.join("; "));
}

/// The issue's coexistence goal, opt-in: every scheme beside quinn's Cubic
/// and BBR at 50 Mbit/s, 40 ms, one BDP, 30 s: each gets 0.5×–2× the
/// other, together ≥ 90 % of the link, and the ecnq queue's packets wait
/// ≤ 2 ms at p99. Prague is not ecnq-tagged: it waits in the L4S queue,
/// which is printed but not held to the ecnq queue's goal (the shim's L4S
/// queue marks from 1 ms as DualPI2 does). The ecnq queue's 2 ms bound
/// holds because it goes first within its share. MCP's law uses only part
/// of what it is given in 30 s (its fairing cycles; the simulator's
/// `erc-staggered` with `--scheme mcp` shows the same), so beside it Cubic
/// must fill the rest of the link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: run with --release -- --ignored"]
async fn every_scheme_beside_cubic_and_bbr() {
    const SECONDS: f64 = 30.0;
    let mut misses = Vec::new();
    for scheme in Scheme::router_assisted() {
        for other in [CongestionControl::Cubic, CongestionControl::Bbr] {
            let ccs = [CongestionControl::Ecnq(scheme), other];
            let run = shared_run(&ccs, &["rate 50mbit delay 20ms limit 250kb"], SECONDS).await;
            let (a, b, util) = (run.mbit[0], run.mbit[1], run.util);
            let waited = Class::ALL.map(|class| run.waited_ms(class).unwrap_or(0.0));
            let ecnq_wait = waited[Class::Ecnq as usize];
            println!(
                "{scheme} {a:.2} / {other} {b:.2} Mbit/s, utilization {util:.3}, \
                 p99 per packet: ecnq {ecnq_wait:.1} ms, classic {:.1} ms, L4S {:.1} ms",
                waited[Class::Classic as usize],
                waited[Class::L4s as usize]
            );
            let tagged = !scheme.wire().is_l4s();
            if !(0.5..=2.0).contains(&(a / b)) || util < 0.9 || (tagged && ecnq_wait > 2.0) {
                misses.push(format!(
                    "{scheme} vs {other}: {a:.2}/{b:.2}, {util:.3}, ecnq p99 {ecnq_wait:.1} ms"
                ));
            }
        }
    }
    assert!(misses.is_empty(), "{}", misses.join("; "));
}

/// erc beside a light Cubic flow through the relay shim's dual queue,
/// opt-in (50 Mbit/s, 40 ms, one BDP, 20 s each; prints the figures): a
/// flow with a 3 kB send window (about 0.6 Mbit/s at 40 ms: an SSH session
/// or a call), then a Cubic download beside erc's upload, whose ACKs are
/// the light flow on erc's direction. A light flow is limited elsewhere,
/// so erc is told the link less what it sends, not half the link: erc
/// gets ≥ 40 Mbit/s, the download ≥ 40 Mbit/s, and the light flow gets
/// about what it gets alone (≥ 0.45 Mbit/s).
///
/// The scheduler's weights give the ecnq queue its max-min share; a split
/// by flow counts would leave erc half the link. The light flow's rate
/// hangs on how its window reaches the receiver: its 3 kB (packets of
/// 1460, 1460 and 284 bytes) spread among erc's packets has quinn
/// acknowledge the third only after its 25 ms ACK delay, so a small
/// backlog leaves the bottleneck back to back (`SPARSE_BURST`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: run with --release -- --ignored"]
async fn erc_takes_what_a_light_flow_leaves_on_the_real_stack() {
    const SECONDS: f64 = 20.0;
    const LIGHT_WINDOW: u64 = 3_000;
    let light = |i: usize, config: &mut ClientConfig| {
        if i == 1 {
            config.send_window = Some(LIGHT_WINDOW);
        }
    };
    let download = |i: usize, config: &mut ClientConfig| {
        if i == 1 {
            config.request.reverse = true;
        }
    };
    let mut misses = Vec::new();
    for (case, configure, kept) in [
        (
            "a light cubic flow",
            &light as &(dyn Fn(usize, &mut ClientConfig) + Sync),
            0.45,
        ),
        ("a cubic download", &download, 40.0),
    ] {
        let result = together_configured(
            &[CongestionControl::DEFAULT, CongestionControl::Cubic],
            &["rate 50mbit delay 20ms limit 250kb"],
            SECONDS,
            configure,
        )
        .await;
        let mbit = goodput_mbit(&result, SECONDS);
        println!("erc {:.2} Mbit/s beside {case}: {:.2}", mbit[0], mbit[1]);
        if mbit[0] < 40.0 || mbit[1] < kept {
            misses.push(format!(
                "{case}: erc {:.2}, the other {:.2}",
                mbit[0], mbit[1]
            ));
        }
    }
    assert!(misses.is_empty(), "{misses:?}");
}

/// A Cubic flow held to a 3 kB window (an SSH session, a call) beside one
/// greedy flow that shares its classic queue, BBR or Cubic, through
/// the shim's dual queue (50 Mbit/s, 40 ms RTT, 250 kB): the light flow
/// gets about what it gets alone (≥ 0.4 Mbit/s), the greedy one
/// ≥ 40 Mbit/s. BBR ignores loss and keeps a queue of its own:
/// the classic queue's sparse section and its drops from the fattest flow
/// keep the light flow's windows from being lost to overflow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: run with --release -- --ignored"]
async fn a_light_flow_keeps_its_rate_beside_a_greedy_classic_flow_on_the_real_stack() {
    const SECONDS: f64 = 20.0;
    let light = |i: usize, config: &mut ClientConfig| {
        if i == 1 {
            config.send_window = Some(3_000);
        }
    };
    let mut misses = Vec::new();
    for greedy in [CongestionControl::Bbr, CongestionControl::Cubic] {
        let result = together_configured(
            &[greedy, CongestionControl::Cubic],
            &["rate 50mbit delay 20ms limit 250kb"],
            SECONDS,
            &light,
        )
        .await;
        let mbit = goodput_mbit(&result, SECONDS);
        println!(
            "light flow {:.2} Mbit/s beside {greedy}: {:.2}",
            mbit[1], mbit[0]
        );
        if mbit[0] < 40.0 || mbit[1] < 0.4 {
            misses.push(format!(
                "{greedy}: {:.2}, the light flow {:.2}",
                mbit[0], mbit[1]
            ));
        }
    }
    assert!(misses.is_empty(), "{misses:?}");
}

/// One flow of `cc` and one of Cubic for 20 s, through an ecnq router of
/// twice `mbit` and then an L4S DualPI2 bottleneck of `mbit` Mbit/s (40 ms
/// RTT, one BDP of buffer at each); returns Mbit/s of each and the
/// bottleneck's utilization.
async fn behind_an_ecnq_router_at_dualpi2(cc: CongestionControl, mbit: u32) -> (f64, f64, f64) {
    let router = format!("rate {}mbit delay 10ms limit {}kb", 2 * mbit, 10 * mbit);
    let bottleneck = format!(
        "rate {mbit}mbit delay 10ms limit {}kb queue dualpi2",
        5 * mbit
    );
    let run = shared_run(
        &[cc, CongestionControl::Cubic],
        &[&router, &bottleneck],
        20.0,
    )
    .await;
    (run.mbit[0], run.mbit[1], run.util)
}

/// erc behind an erc router, then at an L4S DualPI2 bottleneck that knows
/// nothing of ecnq (10 Mbit/s, 40 ms, 20 s): the router's digits are
/// classic codepoints, so the flow stays in DualPI2's classic queue, in
/// order, and shares with Cubic (0.5×–2×). With ECT(1) as a digit its
/// packets would take both of DualPI2's queues, and erc would starve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erc_behind_an_erc_router_shares_a_dualpi2_bottleneck_with_cubic() {
    let (erc, cubic, util) = behind_an_ecnq_router_at_dualpi2(CongestionControl::DEFAULT, 10).await;
    println!("erc {erc:.2} Mbit/s, cubic {cubic:.2} Mbit/s, utilization {util:.3}");
    assert!(
        (0.5..=2.0).contains(&(erc / cubic)),
        "erc/cubic {:.2}",
        erc / cubic
    );
    assert!(util >= 0.9, "utilization {util:.3}");
}

/// VCP and EVCP behind an ecnq router, then at an L4S DualPI2 bottleneck
/// that knows nothing of ecnq, opt-in (50 Mbit/s, 40 ms, one BDP, 20 s;
/// prints the figures): their low-load code ECT(1) puts them in the L4S
/// queue, whose lone coupled marks their receiver does not read as
/// overload, so each gets 0.5×–2× Cubic's goodput. EVCP's single runs
/// scatter widely around that bound, so this test fails now and then. At
/// 10 Mbit/s they fall short: there the L4S queue's 1 ms step is one
/// packet, so quinn's bursts are marked in runs, which read as overload;
/// the simulator's smoother senders hold their share there
/// (`l4s-erc-then-dualpi2` at 10 Mbit/s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: run with --release -- --ignored"]
async fn vcp_behind_an_ecnq_router_shares_a_dualpi2_bottleneck_with_cubic() {
    let mut misses = Vec::new();
    for scheme in [Scheme::Vcp, Scheme::Evcp] {
        let (a, cubic, util) =
            behind_an_ecnq_router_at_dualpi2(CongestionControl::Ecnq(scheme), 50).await;
        println!("{scheme} {a:.2} / cubic {cubic:.2} Mbit/s, utilization {util:.3}");
        if !(0.5..=2.0).contains(&(a / cubic)) {
            misses.push(format!("{scheme}: {a:.2} / {cubic:.2}"));
        }
    }
    assert!(misses.is_empty(), "{}", misses.join("; "));
}

/// Issue 25's goals on the real stack, opt-in (50 Mbit/s, 40 ms, one BDP,
/// 30 s; prints the figures): Prague beside Cubic through a DualPI2
/// bottleneck; erc behind an erc router at one; and erc, Prague and Cubic
/// through the ecnq shim's three queues, each within 0.5×–2× of a third.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: run with --release -- --ignored"]
async fn l4s_goals_on_the_real_stack() {
    const DUALPI2: &str = "rate 50mbit delay 10ms limit 250kb queue dualpi2";
    let prague = CongestionControl::Ecnq(Scheme::Prague);
    let (erc, cubic) = (CongestionControl::DEFAULT, CongestionControl::Cubic);
    let mut misses = Vec::new();
    let runs: [(&str, Vec<CongestionControl>, Vec<&str>); 3] = [
        (
            "prague vs cubic, dualpi2",
            vec![prague, cubic],
            vec![DUALPI2],
        ),
        (
            "erc vs cubic, erc router then dualpi2",
            vec![erc, cubic],
            vec!["rate 100mbit delay 10ms limit 500kb", DUALPI2],
        ),
        (
            "erc, prague, cubic, the shim's three queues",
            vec![erc, prague, cubic],
            vec!["rate 50mbit delay 20ms limit 250kb"],
        ),
    ];
    for (name, ccs, specs) in runs {
        let SharedRun { mbit, util, .. } = shared_run(&ccs, &specs, 30.0).await;
        println!("{name}: Mbit/s {mbit:.2?}, utilization {util:.3}");
        let fair = mbit.iter().sum::<f64>() / mbit.len() as f64;
        if mbit.iter().any(|m| !(0.5..=2.0).contains(&(m / fair))) || util < 0.9 {
            misses.push(format!("{name}: {mbit:.2?}, {util:.3}"));
        }
    }
    assert!(misses.is_empty(), "{}", misses.join("; "));
}

/// Issue 25's classic-ECN goal on the real stack, opt-in: Prague beside
/// quinn's Cubic, which uses ECN, at a classic RFC 3168 ECN AQM (one FIFO
/// that CE-marks every ECT packet while 60 KB wait: the simulator's 50
/// packets of 1200 B) at 50 Mbit/s, 40 ms, one BDP, 30 s; prints the
/// figures. Prague reads the marks as a classic AQM's and falls back to
/// Reno's response, halving at most once per round trip, so each gets
/// 0.5×–2× the other and together they use ≥ 90 % of the link; the
/// simulator's `prague_falls_back_at_a_classic_ecn_aqm` (`l4s-classic-ecn`)
/// checks the same. Prague must not halve on marks for packets sent before
/// its last halving, or it can fall under half of Cubic's goodput.
///
/// The step is 50 packets, not the scenario's 25 (30 KB): at 25 even Reno
/// beside Cubic leaves the link under 90 %, so the utilization goal there
/// would judge the step, not Prague.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: run with --release -- --ignored"]
async fn prague_falls_back_at_a_classic_ecn_aqm_on_the_real_stack() {
    assert_pair_shares(
        CongestionControl::Ecnq(Scheme::Prague),
        CongestionControl::Cubic,
        "rate 50mbit delay 20ms limit 250kb ecn 60kb",
        30.0,
    )
    .await;
}

/// Issue 19's robustness goal on the real stack, opt-in: three erc flows
/// through a relay whose router restarts 15 s into a 30 s run (`restart
/// 15s`: its flow table, meters and shares lost, as a router that reboots),
/// at 50 Mbit/s, 40 ms, one BDP. The restarted router counts the flows
/// afresh, so the senders must neither burst into loss nor starve: nothing
/// dropped at the bottleneck from the restart on, the queue's p99 in the 5 s
/// after it under 5 ms, the three fair again (Jain ≥ 0.98) from a second
/// after it, and the link ≥ 90 % used. The simulator's `erc-robustness`
/// checks the same and also a pause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: run with --release -- --ignored"]
async fn erc_rides_through_a_router_restart_on_the_real_stack() {
    const RESTART: f64 = 15.0;
    const SECONDS: f64 = 30.0;
    let spec = format!("rate 50mbit delay 20ms limit 250kb restart {RESTART}s");
    let result = together(&[CongestionControl::DEFAULT; 3], &[&spec], SECONDS).await;
    print_around(&result, RESTART);
    let bottleneck = &result.links[0];
    let dropped = bottleneck.drops_by(SECONDS + 1.0) - bottleneck.drops_by(RESTART - 0.5);
    let p99 = percentile(&bottleneck.queue_ms(RESTART, RESTART + 5.0), 99.0).unwrap_or(0.0);
    let mbit: Vec<f64> = (result.runs.iter().flatten())
        .map(|run| {
            let bytes: u64 = (run.intervals.iter())
                .filter(|i| i.start >= RESTART + 1.0)
                .map(|i| i.bytes)
                .sum();
            bytes as f64 * 8.0 / (SECONDS - RESTART - 1.0) / 1e6
        })
        .collect();
    let jain = ecnq::statistics::jain_index(&mbit);
    let util = bottleneck.utilization(RESTART, SECONDS);
    println!(
        "after the restart: {dropped} dropped, queue p99 {p99:.2} ms, Mbit/s {mbit:.2?} \
         (Jain {jain:.3}), utilization {util:.3}"
    );
    assert!(
        dropped == 0.0 && p99 <= 5.0 && jain >= 0.98 && util >= 0.9,
        "{dropped} dropped, p99 {p99:.2} ms, Jain {jain:.3}, utilization {util:.3}"
    );
}

/// Each flow's rate on the wire (the UDP bytes its client sent), Mbit/s,
/// over its intervals that lie within `from..to`.
fn wire_mbit(result: &RunResult, from: f64, to: f64) -> Vec<f64> {
    (result.runs.iter().flatten())
        .map(|run| {
            let within = || (run.intervals.iter()).filter(|i| i.start >= from && i.end <= to);
            let bytes: u64 = within().map(|i| i.wire_bytes).sum();
            let seconds: f64 = within().map(|i| i.seconds).sum();
            bytes as f64 * 8.0 / seconds.max(f64::EPSILON) / 1e6
        })
        .collect()
}

/// Issue 19's robustness goal for a pause on the real stack, opt-in: three
/// erc flows through a relay at 50 Mbit/s, 40 ms, one BDP, for 30 s; the
/// third writes nothing from 10 s to 12 s into its sending. Every flow's
/// send window is two BDPs (500 KB): with quinn's default of 10 MB a flow
/// at its share holds seconds of written data, and goes on sending it
/// through a pause of its writer. The paused flow must send almost nothing
/// on the wire from half a second into the pause to its end (under 1 % of
/// its share: its buffer drains in a round trip or two), the other two take
/// the capacity it frees (the link ≥ 90 % used meanwhile), and on its
/// return it must neither burst into loss nor starve: nothing dropped at
/// the bottleneck after the first 5 s (the restart test counts from its
/// restart on), the queue's p99 in the 5 s after the resume under 5 ms, and
/// the three fair again (Jain ≥ 0.98 on the wire) from 2 s after it. The
/// simulator's `erc-robustness` checks the same pause.
///
/// The queue after the resume stays short because the router counts a
/// returning flow from its first packet back (not once it is back at its
/// old rate), the sender holds its initial window's rate for the first
/// round trip after an idle (a ramp moved only by ACKs is a step), and
/// control packets do not hide an idle: PINGs left in flight through the
/// pause would have the flow take no restart and come back at its old
/// rate at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: run with --release -- --ignored"]
async fn erc_rides_through_a_pause_on_the_real_stack() {
    const SECONDS: f64 = 30.0;
    const PAUSE: (f64, f64) = (10.0, 12.0);
    const FLOWS: usize = 3;
    /// Two bandwidth-delay products: 50 Mbit/s × 40 ms = 250 KB.
    const SEND_WINDOW: u64 = 2 * 250_000;
    let (pause_from, resume) = PAUSE;
    let result = together_configured(
        &[CongestionControl::DEFAULT; FLOWS],
        &["rate 50mbit delay 20ms limit 250kb"],
        SECONDS,
        &|i, config| {
            config.send_window = Some(SEND_WINDOW);
            if i == FLOWS - 1 {
                config.pause = Some(Pause {
                    from: Duration::from_secs_f64(pause_from),
                    until: Duration::from_secs_f64(resume),
                });
            }
        },
    )
    .await;
    print_around(&result, resume);
    let bottleneck = &result.links[0];
    // The paused flow's intervals count from when it joined (a handshake
    // after the run's start), as its pause does.
    let joined = (result.runs.last().and_then(Option::as_ref))
        .and_then(|run| run.intervals.first())
        .map_or(0.0, |i| i.start);
    let silent = (joined + pause_from + 0.5, joined + resume);
    let in_pause = wire_mbit(&result, silent.0, silent.1);
    let paused = in_pause[FLOWS - 1];
    let fair = bottleneck.capacity_bps / 1e6 / FLOWS as f64;
    let pause_util = bottleneck.utilization(silent.0, silent.1);
    let (startup_drops, dropped) = (
        bottleneck.drops_by(5.0),
        bottleneck.drops_by(SECONDS + 1.0) - bottleneck.drops_by(5.0),
    );
    let p99 = |from: f64| percentile(&bottleneck.queue_ms(from, from + 5.0), 99.0).unwrap_or(0.0);
    let (before, p99) = (p99(pause_from - 5.0), p99(resume));
    let mbit = wire_mbit(&result, resume + 2.0, SECONDS);
    let jain = ecnq::statistics::jain_index(&mbit);
    println!(
        "pause {:.2}-{:.2} s: Mbit/s on the wire {in_pause:.2?} (paused flow {:.2} % of a \
         fair {fair:.2}), utilization {pause_util:.3}; {startup_drops} dropped in the first \
         5 s, {dropped} after; queue p99 {p99:.2} ms in the 5 s after the resume ({before:.2} \
         ms in the 5 s before the pause); Mbit/s from 2 s after it {mbit:.2?} (Jain {jain:.3})",
        silent.0,
        silent.1,
        paused / fair * 100.0
    );
    assert!(
        paused <= 0.01 * fair,
        "the paused flow sent {paused:.2} Mbit/s during its pause"
    );
    assert!(
        dropped == 0.0 && p99 <= 5.0 && jain >= 0.98 && pause_util >= 0.9,
        "{dropped} dropped, p99 {p99:.2} ms, Jain {jain:.3}, utilization {pause_util:.3} \
         during the pause"
    );
}

/// A paper scheme with no ecnq router on its path: its presence probes
/// arrive unraised, so it runs Cubic with ECT(0) and shares an L4S DualPI2
/// bottleneck (which knows nothing of ecnq) with Cubic (10 Mbit/s, 40 ms,
/// 20 s). Without probes TPCP would take most of the link from Cubic (the
/// simulator's `l4s-dualpi2` shows it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paper_scheme_with_no_ecnq_router_runs_cubic() {
    let result = together(
        &[
            CongestionControl::Ecnq(Scheme::Tpcp),
            CongestionControl::Cubic,
        ],
        &["rate 10mbit delay 20ms limit 50kb queue dualpi2"],
        20.0,
    )
    .await;
    let tpcp = result.runs[0].as_ref().expect("tpcp ran");
    let [a, b] = goodput_mbit(&result, 20.0)[..] else {
        panic!("two flows ran");
    };
    println!(
        "tpcp {a:.2} Mbit/s ({:?}), cubic {b:.2} Mbit/s",
        tpcp.stats.mode
    );
    assert_eq!(
        tpcp.stats.mode,
        PeerMode::ClassicNoRouter,
        "{:?}",
        tpcp.stats
    );
    assert!((0.5..=2.0).contains(&(a / b)), "tpcp/cubic {:.2}", a / b);
}

/// Issue 20's and 25's goal for the paper schemes, opt-in: each beside
/// Cubic, and beside Prague, through a DualPI2 bottleneck with no ecnq
/// router (50 Mbit/s, 40 ms, one BDP, 30 s) falls back to Cubic (on its
/// probes, or MCP on a loss no router explained) and gets 0.5×–2× the
/// other's goodput; prints the figures (README, "L4S neighbours"). Prague,
/// an L4S sender, has its own goals there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: run with --release -- --ignored"]
async fn every_scheme_without_an_ecnq_router() {
    let prague = CongestionControl::Ecnq(Scheme::Prague);
    let mut misses = Vec::new();
    for scheme in Scheme::router_assisted().filter(|s| !s.wire().is_l4s()) {
        for other in [CongestionControl::Cubic, prague] {
            let (a, b, util) = coexistence_run(
                CongestionControl::Ecnq(scheme),
                other,
                "rate 50mbit delay 20ms limit 250kb queue dualpi2",
                30.0,
            )
            .await;
            println!("{scheme} {a:.2} / {other} {b:.2} Mbit/s, utilization {util:.3}");
            if !(0.5..=2.0).contains(&(a / b)) {
                misses.push(format!("{scheme} vs {other}: {a:.2}/{b:.2}"));
            }
        }
    }
    assert!(misses.is_empty(), "{}", misses.join("; "));
}

/// The fake-newcomer goal on the real stack, opt-in: one long flow through
/// the shim's relay (50 Mbit/s, 40 ms, one BDP, marking by tag), and from
/// 3 s on, for 12 s, a flood of fake newcomers at 2, 5 and 10 % of the
/// link: every 12 packets of 300 bytes, erc-tagged and ECT(0), come from a
/// new source port and never answer. A long erc flow must keep ≥ 85 % of
/// what the flood leaves (the link less the flood's rate) over the flood;
/// a long Cubic flow's figure in the same table is there to compare. A
/// router that hands every newcomer a share gives the flood far more than
/// it sends. Prints the table (`ecnq-perf demo --fake-newcomers 2,5,10`
/// makes the same one); the simulator's `erc-fake-newcomers` is its twin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long, and erc's long flow keeps 68–93 % on a loaded host (docs/design.md, Arrivals): run with --release -- --ignored"]
async fn fake_newcomers_take_no_more_than_they_send() {
    const SECONDS: f64 = 12.0;
    const LINK_BPS: f64 = 50e6;
    let links = [link("rate 50mbit delay 20ms limit 250kb")];
    let mut rows = Vec::new();
    for attack in fake_newcomers::attacks(&[2.0, 5.0, 10.0]) {
        let flood = attack.flood(LINK_BPS, SECONDS);
        let flows = attack.flows(SECONDS);
        let result = measured_run_configured(&flows, &links, &|_, _| {}, flood.as_ref()).await;
        rows.push(attack.row(&result, LINK_BPS, SECONDS));
    }
    print!("{}", fake_newcomers::table_text(&rows));
    let misses: Vec<String> = (rows.iter())
        .filter(|r| !r.meets_goal())
        .map(|r| format!("{} % flood: erc kept {:.3}", r.percent, r.kept))
        .collect();
    assert!(misses.is_empty(), "{}", misses.join("; "));
}

/// `ecnq-perf paired`: a short demo scenario run in the simulator and on
/// the real stack gives both sets of figures and the ratio row. Real time
/// on a shared host scatters, so it asserts only that both runs carried
/// traffic and that their figures fit their definitions, never how close
/// they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paired_demo_runs_in_the_simulator_and_on_the_real_stack() {
    use ecnq_examples::perf::paired::{self, PairedArgs, Scenario};
    let words = ["demo", "--duration", "3", "--cc", "erc"];
    let args: PairedArgs = ecnq_examples::perf::parse_args("paired", &words).unwrap();
    let scenario = Scenario::from_args(&args).unwrap();
    let rows = {
        let _machine = MACHINE.lock().await;
        paired::measure(&scenario, &args.cc, true, None).await
    }
    .unwrap();
    assert_eq!(rows.len(), 1);
    let real = rows[0].real.expect("the real stack ran");
    for f in [rows[0].sim, real] {
        assert!(f.goodput_mbit > 1.0 && f.goodput_mbit < 50.0, "{f:?}");
        assert!(f.utilization > 0.05 && f.utilization < 1.05, "{f:?}");
        assert!(f.queue_p50_ms <= f.queue_p95_ms, "{f:?}");
        assert!(f.queue_p95_ms <= f.queue_p99_ms, "{f:?}");
        assert!((0.0..=1.0).contains(&f.loss), "{f:?}");
    }
    let markdown = paired::table_markdown(&rows);
    for row in ["| erc sim |", "| erc real |", "| erc real/sim |"] {
        assert!(markdown.contains(row), "{markdown}");
    }
}

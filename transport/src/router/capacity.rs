//! A link's capacity over time (docs/design.md §4, "Variable capacity"):
//! a fixed rate, a piecewise-constant schedule of rates, or a Mahimahi
//! delivery trace; how long a packet takes to cross such a link; and
//! what a router that does not own the link measures of it.
//!
//! A Mahimahi trace (Winstein et al., "Stochastic Forecasts Achieve High
//! Throughput and Low Delay over Cellular Networks", NSDI 2013) lists one
//! line per delivery opportunity: the millisecond, from the trace's start,
//! at which [`OPPORTUNITY`] bytes may leave the queue; a millisecond
//! repeated is several opportunities then. The trace loops with a period
//! of its last timestamp, as `mm-link` repeats it. An opportunity's bytes
//! serve the packets waiting when it comes, a packet longer than what is
//! left going on at the next one; bytes no packet waits for are lost, as
//! in `mm-link`.

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::units::{parse_duration, Rate};

/// Bytes one delivery opportunity of a Mahimahi trace carries: one MTU,
/// 1500 bytes (the traces' README; `mm-link`'s `PACKET_SIZE`).
pub const OPPORTUNITY: u32 = 1500;

const NS_PER_MS: u64 = 1_000_000;

/// A Mahimahi delivery trace (see the module docs).
#[derive(Clone, PartialEq, Eq)]
pub struct DeliveryTrace {
    /// Where it was read from, for messages.
    origin: String,
    /// Each opportunity's millisecond, non-decreasing.
    ms: Vec<u64>,
    /// The loop's period: the last timestamp.
    period_ms: u64,
}

impl DeliveryTrace {
    /// Parses a trace's text; errors name `origin` and the line.
    pub fn parse(origin: &str, text: &str) -> Result<DeliveryTrace, String> {
        let mut ms: Vec<u64> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let word = line.trim();
            if word.is_empty() {
                continue;
            }
            let at = |msg: String| format!("{origin}:{}: {msg}", i + 1);
            let t: u64 = word
                .parse()
                .map_err(|_| at(format!("`{word}` is not a whole number of milliseconds")))?;
            if ms.last().is_some_and(|&last| t < last) {
                return Err(at(format!(
                    "{t} ms comes before the line above ({} ms): timestamps must not decrease",
                    ms[ms.len() - 1]
                )));
            }
            ms.push(t);
        }
        let Some(&period_ms) = ms.last() else {
            return Err(format!(
                "{origin}: the trace is empty (no delivery opportunity)"
            ));
        };
        if period_ms == 0 {
            return Err(format!(
                "{origin}: the trace must last longer than 0 ms (its last line is its period)"
            ));
        }
        Ok(DeliveryTrace {
            origin: origin.to_owned(),
            ms,
            period_ms,
        })
    }

    /// Reads and parses a trace file.
    pub fn read(path: &Path) -> Result<DeliveryTrace, String> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| format!("trace {origin}: {e}"))?;
        DeliveryTrace::parse(&origin, &text)
    }

    /// Where it was read from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The loop's period.
    pub fn period(&self) -> Duration {
        Duration::from_millis(self.period_ms)
    }

    /// Its mean rate over one period, bits per second.
    pub fn mean_bps(&self) -> f64 {
        self.ms.len() as f64 * f64::from(OPPORTUNITY) * 8.0 / (self.period_ms as f64 / 1e3)
    }

    /// When opportunity `k` (counted over the loops) comes.
    fn at(&self, k: u64) -> Duration {
        let n = self.ms.len() as u64;
        let ms = (k / n) * self.period_ms + self.ms[(k % n) as usize];
        Duration::from_millis(ms)
    }

    /// The first opportunity at or after `t`.
    fn first_from(&self, t: Duration) -> u64 {
        let t = t.as_nanos() as u64;
        let period = self.period_ms * NS_PER_MS;
        // Loop c's opportunities fall in [c·period, (c+1)·period]: its
        // last is at the next loop's start.
        let cycle = t.saturating_sub(1) / period;
        let offset = t - cycle * period;
        let i = self.ms.partition_point(|&m| m * NS_PER_MS < offset);
        cycle * self.ms.len() as u64 + i as u64
    }

    /// Bytes its opportunities in `[from, to)` carry.
    pub fn bytes_between(&self, from: Duration, to: Duration) -> u64 {
        let opportunities = self.first_from(to).saturating_sub(self.first_from(from));
        opportunities * u64::from(OPPORTUNITY)
    }
}

impl fmt::Debug for DeliveryTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeliveryTrace")
            .field("origin", &self.origin)
            .field("opportunities", &self.ms.len())
            .field("period_ms", &self.period_ms)
            .finish()
    }
}

/// Piecewise-constant rates: each from its time until the next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateSchedule {
    /// `(from, bits per second)`, the first from zero, times increasing.
    steps: Vec<(Duration, u64)>,
}

impl RateSchedule {
    /// A schedule of `(from, bits per second)` steps: the first from zero,
    /// times strictly increasing, rates above zero.
    pub fn new(steps: Vec<(Duration, u64)>) -> Result<RateSchedule, String> {
        match steps.first() {
            None => return Err("a schedule needs at least one step".to_owned()),
            Some(&(from, _)) if !from.is_zero() => {
                return Err(format!(
                    "a schedule starts at 0s, not at {}",
                    crate::units::ShowDuration(from)
                ))
            }
            _ => {}
        }
        for (i, pair) in steps.windows(2).enumerate() {
            if pair[1].0 <= pair[0].0 {
                return Err(format!(
                    "schedule step {} ({}) does not come after the one before ({}): steps must be in time order",
                    i + 2,
                    crate::units::ShowDuration(pair[1].0),
                    crate::units::ShowDuration(pair[0].0)
                ));
            }
        }
        if let Some(i) = steps.iter().position(|&(_, bps)| bps == 0) {
            return Err(format!("schedule step {} has no rate (0 bit/s)", i + 1));
        }
        Ok(RateSchedule { steps })
    }

    /// Parses the shim's words, `0s:100mbit,10s:20mbit,20s:100mbit`.
    pub fn parse(words: &str) -> Result<RateSchedule, String> {
        let steps = words
            .split(',')
            .enumerate()
            .map(|(i, step)| {
                let (from, rate) = step.split_once(':').ok_or_else(|| {
                    format!(
                        "schedule step {} `{step}` is not TIME:RATE (e.g. 10s:20mbit)",
                        i + 1
                    )
                })?;
                let from = parse_duration(from.trim(), None).map_err(|e| e.to_string())?;
                let rate = rate.trim().parse::<Rate>().map_err(|e| e.to_string())?;
                Ok((from, rate.bits_per_sec().round() as u64))
            })
            .collect::<Result<Vec<_>, String>>()?;
        RateSchedule::new(steps)
    }

    /// The steps, `(from, bits per second)`.
    pub fn steps(&self) -> &[(Duration, u64)] {
        &self.steps
    }

    /// The step in force at `t`: its index.
    fn step_at(&self, t: Duration) -> usize {
        self.steps.partition_point(|&(from, _)| from <= t) - 1
    }

    /// The rate in force at `t`, bits per second.
    pub fn rate_at(&self, t: Duration) -> u64 {
        self.steps[self.step_at(t)].1
    }

    /// Bytes the link carries over `[from, to)`.
    pub fn bytes_between(&self, from: Duration, to: Duration) -> f64 {
        let mut bits = 0.0;
        let mut t = from;
        while t < to {
            let i = self.step_at(t);
            let end = self.steps.get(i + 1).map_or(to, |s| s.0.min(to));
            bits += self.steps[i].1 as f64 * (end - t).as_secs_f64();
            t = end;
        }
        bits / 8.0
    }
}

/// A link's capacity over time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkRate {
    /// One rate, bits per second.
    Fixed(u64),
    /// Rates that change at given times.
    Schedule(Arc<RateSchedule>),
    /// A Mahimahi delivery trace.
    Trace(Arc<DeliveryTrace>),
}

impl LinkRate {
    /// Whether its capacity changes over time.
    pub fn is_variable(&self) -> bool {
        !matches!(self, LinkRate::Fixed(_))
    }

    /// The rate a router configured with this link starts from, bits per
    /// second: the fixed rate, the schedule's first, a trace's mean.
    pub fn nominal_bps(&self) -> f64 {
        match self {
            LinkRate::Fixed(bps) => *bps as f64,
            LinkRate::Schedule(s) => s.steps[0].1 as f64,
            LinkRate::Trace(t) => t.mean_bps(),
        }
    }

    /// Bytes the link could carry over `[from, to)` (times since the link
    /// started): the capacity in force, for utilization.
    pub fn bytes_between(&self, from: Duration, to: Duration) -> f64 {
        match self {
            LinkRate::Fixed(bps) => *bps as f64 / 8.0 * to.saturating_sub(from).as_secs_f64(),
            LinkRate::Schedule(s) => s.bytes_between(from, to),
            LinkRate::Trace(t) => t.bytes_between(from, to) as f64,
        }
    }
}

impl fmt::Display for LinkRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkRate::Fixed(bps) => write!(f, "{} Mbit/s", *bps as f64 / 1e6),
            LinkRate::Schedule(s) => {
                let steps: Vec<String> = s
                    .steps
                    .iter()
                    .map(|&(from, bps)| {
                        format!(
                            "{}:{}mbit",
                            crate::units::ShowDuration(from),
                            bps as f64 / 1e6
                        )
                    })
                    .collect();
                write!(f, "schedule {}", steps.join(","))
            }
            LinkRate::Trace(t) => write!(
                f,
                "trace {} (mean {:.1} Mbit/s)",
                t.origin,
                t.mean_bps() / 1e6
            ),
        }
    }
}

/// Where a link's router takes the capacity it meters against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CapacitySource {
    /// The link's configured rate (a schedule's rate in force): the router
    /// owns the link, as one whose rate an operator set.
    #[default]
    Configured,
    /// What the link drains while it is busy ([`DrainRate`]), as a router
    /// at a cellular base station or a Wi-Fi access point must.
    Measured,
}

impl std::str::FromStr for CapacitySource {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "configured" => Ok(CapacitySource::Configured),
            "measured" => Ok(CapacitySource::Measured),
            _ => Err(format!(
                "unknown capacity `{s}` (expected measured or configured)"
            )),
        }
    }
}

impl fmt::Display for CapacitySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CapacitySource::Configured => "configured",
            CapacitySource::Measured => "measured",
        })
    }
}

/// How a packet crosses the link: the time its serialization ends.
#[derive(Debug)]
pub(crate) struct Serializer {
    rate: Option<LinkRate>,
    /// When the link started: a schedule's and a trace's time zero.
    origin: Duration,
    /// Bit·ns left over from the last packet's `len · 8 · 10⁹ / rate`
    /// (fixed and scheduled rates), so that departures stay exact.
    remainder: u128,
    /// A trace's last opportunity used and the bytes it has left, for the
    /// packet that starts when it comes.
    opportunity: Option<(u64, u32)>,
}

impl Serializer {
    pub(crate) fn new(rate: Option<LinkRate>, origin: Duration) -> Serializer {
        Serializer {
            rate,
            origin,
            remainder: 0,
            opportunity: None,
        }
    }

    pub(crate) fn rate(&self) -> Option<&LinkRate> {
        self.rate.as_ref()
    }

    /// The link went idle: nothing carries over (an opportunity's unused
    /// bytes are lost).
    pub(crate) fn idle(&mut self) {
        self.remainder = 0;
        self.opportunity = None;
    }

    /// When a packet of `len` bytes that starts at `start` has crossed.
    pub(crate) fn end(&mut self, start: Duration, len: u32) -> Duration {
        match &self.rate {
            None | Some(LinkRate::Fixed(0)) => start,
            Some(LinkRate::Fixed(bps)) => {
                let bps = u128::from(*bps);
                start + Self::at_rate(&mut self.remainder, len, bps)
            }
            Some(LinkRate::Schedule(s)) => {
                let s = Arc::clone(s);
                self.origin + self.scheduled(&s, start - self.origin, len)
            }
            Some(LinkRate::Trace(t)) => {
                let t = Arc::clone(t);
                self.origin + self.traced(&t, start - self.origin, len)
            }
        }
    }

    /// `len · 8 / rate` with the sub-nanosecond remainder carried over.
    fn at_rate(remainder: &mut u128, len: u32, bps: u128) -> Duration {
        let numerator = u128::from(len) * 8 * 1_000_000_000 + *remainder;
        *remainder = numerator % bps;
        Duration::from_nanos((numerator / bps) as u64)
    }

    /// Across a schedule: at each step's rate until the next step; a
    /// packet that spans a step sends its bits before it at the old rate.
    fn scheduled(&mut self, s: &RateSchedule, start: Duration, len: u32) -> Duration {
        let mut numerator = u128::from(len) * 8 * 1_000_000_000 + self.remainder;
        let mut t = start;
        loop {
            let i = s.step_at(t);
            let bps = u128::from(s.steps[i].1);
            let end = t + Duration::from_nanos((numerator / bps) as u64);
            match s.steps.get(i + 1) {
                Some(&(next, _)) if end > next => {
                    numerator -= (next - t).as_nanos() * bps;
                    t = next;
                    self.remainder = 0;
                }
                _ => {
                    self.remainder = numerator % bps;
                    return end;
                }
            }
        }
    }

    /// Across a trace: the packet takes what is left of the opportunity
    /// the one before it ended at, then whole opportunities, and ends at
    /// the one that carries its last byte.
    fn traced(&mut self, trace: &DeliveryTrace, start: Duration, len: u32) -> Duration {
        let mut need = len;
        let mut k = match self.opportunity {
            Some((k, left)) if trace.at(k) == start => {
                let take = left.min(need);
                need -= take;
                if need == 0 {
                    self.opportunity = Some((k, left - take));
                    return start;
                }
                k + 1
            }
            _ => trace.first_from(start),
        };
        loop {
            let take = OPPORTUNITY.min(need);
            need -= take;
            if need == 0 {
                self.opportunity = Some((k, OPPORTUNITY - take));
                return trace.at(k);
            }
            k += 1;
        }
    }
}

/// How long a window [`DrainRate`] measures over: 20 ms, as ABC measures
/// its dequeue rate (Goyal et al., "ABC: A Simple Explicit Congestion
/// Controller for Wireless Networks", NSDI 2020): a cellular scheduler's
/// rate moves within tens of milliseconds, and 20 ms holds over a dozen
/// opportunities at 12 Mbit/s, the slowest of the public traces' busy
/// stretches, so one window's figure is not a single packet's.
pub const DRAIN_WINDOW: Duration = Duration::from_millis(20);

/// How fast [`DrainRate`] raises its figure over the time the link served
/// every packet at once, with none waiting: ×2^(1/20) a window, so twice
/// in 400 ms. A queue tells the capacity, an empty one only that it is no
/// less than what came; the rise probes for more, and the first backlog
/// reads the truth. Doubling in 400 ms finds a rise to five times (issue
/// 56's 20 → 100 Mbit/s) within a second (2^2.5 = 5.7), while overshooting
/// by at most a few percent a 20 ms window before the flows answer.
const PROBE_GAIN: f64 = 1.035_264_923_841_377_1;

/// [`DrainRate`] probes only in a window whose departures came to at
/// least this share of its figure: senders that use what they are told
/// (erc targets 98 % of it) and still meet no queue may get more; a link
/// left idle by its senders (held back by loss, or by their own limits)
/// says nothing of a higher capacity, and probing there only overshoots.
const PROBE_WHEN_USED: f64 = 0.9;

/// The weight of one backlogged window's reading in [`DrainRate`]'s
/// figure, which averages about the last four (80 ms). On a cellular
/// trace single windows' readings scatter from half to twice the
/// capacity; erc's share, metered against each one, moved every interval,
/// faster than a flow sending a few packets an interval reads an index,
/// so the flow read stale rates well under the link's. ecnq's own, tuned
/// on the `cellular-*` and `rate-steps` scenarios: `cellular-att-lte-down`
/// carries 0.92 of the trace's capacity, against 0.65 with no average
/// (test `cellular_traces_side_by_side`).
const DRAIN_AVERAGE_GAIN: f64 = 0.25;

/// The least capacity [`DrainRate`] reports, bytes per second: 10 kbit/s,
/// the slowest rate erc can advertise (`schemes::erc::index`), so that a
/// link in an outage reads as nearly nothing, never as zero.
const DRAIN_FLOOR: f64 = 1_250.0;

/// What a link drains while it has a queue: the router's measured capacity.
///
/// Over each [`DRAIN_WINDOW`] it adds up the bytes of the packets that
/// started the moment the one before them ended (they waited: the link
/// was backlogged) and their service times, from that moment to their
/// end; on a trace that includes the wait for the next opportunity. A
/// window backlogged throughout reads its bytes over the window. A window
/// in which nothing left at all is an outage (a cellular scheduler's gap
/// of tens of milliseconds is routine) and keeps the figure: read as
/// nearly nothing, it made erc advertise its floor, and a flow told 10
/// kbit/s sends too few packets to read the next rate for seconds after
/// the link is back, while senders' windows already stop them when no
/// ACK comes (test
/// `erc_rides_out_an_outage_without_loss_and_is_back_within_a_second`).
/// The time a window was not backlogged says nothing of
/// the capacity and keeps the figure from before, raised by
/// `PROBE_GAIN` if the link served packets then (they found it idle)
/// and carried nearly its figure (`PROBE_WHEN_USED`); the backlogged part
/// moves the figure `DRAIN_AVERAGE_GAIN` of the way to the rate it
/// drained. With `f` the window's backlogged share and `r` that rate,
/// `C ← f·(C + a·(r − C)) + (1 − f)·C·g`
/// (`a_drain_rate_reads_a_backlog_probes_an_idle_link_and_holds_in_an_outage`).
/// A packet that finds the link idle tells nothing but that: on a trace
/// its wait for an opportunity is not the capacity.
#[derive(Clone, Debug)]
pub struct DrainRate {
    window_end: Duration,
    bytes: u64,
    backlogged: Duration,
    /// Whether a packet found the link idle in this window.
    unqueued: bool,
    /// Bytes that left in this window, backlogged or not.
    departed: u64,
    /// The packet in service started back to back: its service is counted
    /// up to this time.
    counted_from: Option<Duration>,
    last_end: Option<Duration>,
    /// Bytes per second.
    estimate: f64,
}

impl DrainRate {
    /// Starts at `initial` bytes per second, its first window from `now`.
    pub fn new(initial: f64, now: Duration) -> DrainRate {
        DrainRate {
            window_end: now + DRAIN_WINDOW,
            bytes: 0,
            backlogged: Duration::ZERO,
            unqueued: false,
            departed: 0,
            counted_from: None,
            last_end: None,
            estimate: initial.max(DRAIN_FLOOR),
        }
    }

    /// The capacity measured, bytes per second.
    pub fn estimate(&self) -> f64 {
        self.estimate
    }

    /// A packet starts its service at `start`; the new figure if a window
    /// closed.
    pub fn on_start(&mut self, start: Duration) -> Option<f64> {
        let closed = self.advance(start);
        self.counted_from = (self.last_end == Some(start)).then_some(start);
        closed
    }

    /// The packet in service, of `len` bytes, ended at `end`; the new
    /// figure if a window closed.
    pub fn on_departure(&mut self, end: Duration, len: u32) -> Option<f64> {
        let closed = self.advance(end);
        self.departed += u64::from(len);
        match self.counted_from.take() {
            Some(from) => {
                self.bytes += u64::from(len);
                self.backlogged += end.saturating_sub(from);
            }
            None => self.unqueued = true,
        }
        self.last_end = Some(end);
        closed
    }

    /// Closes the windows that ended before `now`; the newest figure if
    /// one changed it.
    pub fn advance(&mut self, now: Duration) -> Option<f64> {
        let mut changed = None;
        while now > self.window_end {
            if let Some(from) = self.counted_from.as_mut() {
                self.backlogged += self.window_end.saturating_sub(*from);
                *from = self.window_end;
            }
            if let Some(c) = self.close() {
                changed = Some(c);
            }
            if self.counted_from.is_none() && now > self.window_end + DRAIN_WINDOW {
                // Idle windows change nothing: skip to the last of them.
                let behind = (now - self.window_end).as_nanos() / DRAIN_WINDOW.as_nanos();
                self.window_end += DRAIN_WINDOW * (behind as u32);
            } else {
                self.window_end += DRAIN_WINDOW;
            }
        }
        changed
    }

    fn close(&mut self) -> Option<f64> {
        let window = DRAIN_WINDOW.as_secs_f64();
        let backlogged = self.backlogged.as_secs_f64().min(window);
        let (bytes, unqueued, departed) = (self.bytes, self.unqueued, self.departed);
        self.bytes = 0;
        self.backlogged = Duration::ZERO;
        self.unqueued = false;
        self.departed = 0;
        if (backlogged == 0.0 && !unqueued) || departed == 0 {
            return None;
        }
        let used = departed as f64 >= PROBE_WHEN_USED * self.estimate * window;
        let gain = if unqueued && used { PROBE_GAIN } else { 1.0 };
        let busy = backlogged / window;
        let drained = if busy > 0.0 {
            bytes as f64 / backlogged
        } else {
            self.estimate
        };
        let averaged = self.estimate + DRAIN_AVERAGE_GAIN * (drained - self.estimate);
        let probed = self.estimate * gain;
        self.estimate = (busy * averaged + (1.0 - busy) * probed).max(DRAIN_FLOOR);
        Some(self.estimate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_trace_loops_with_its_last_timestamp_as_period() {
        let t = DeliveryTrace::parse("t", "1\n1\n3\n4\n").unwrap();
        assert_eq!(t.period(), MS * 4);
        // 4 opportunities per 4 ms: 12 Mbit/s.
        assert!((t.mean_bps() - 12e6).abs() < 1e-6);
        let times: Vec<_> = (0..6).map(|k| t.at(k)).collect();
        assert_eq!(times, [MS, MS, MS * 3, MS * 4, MS * 5, MS * 5]);
        assert_eq!(t.first_from(MS * 2), 2);
        assert_eq!(t.first_from(MS * 4 + Duration::from_nanos(1)), 4);
        // [0, 8 ms) holds 7 opportunities (the eighth is at 8 ms), one
        // loop four.
        assert_eq!(t.first_from(MS * 4), 3);
        assert_eq!(t.bytes_between(Duration::ZERO, MS * 8), 7 * 1500);
        assert_eq!(
            t.bytes_between(
                MS * 4 + Duration::from_nanos(1),
                MS * 8 + Duration::from_nanos(1)
            ),
            4 * 1500
        );
    }

    #[test]
    fn bad_traces_are_refused_with_file_and_line() {
        let cases = [
            ("", "t: the trace is empty"),
            ("\n\n", "t: the trace is empty"),
            ("0\n0\n", "t: the trace must last longer than 0 ms"),
            ("1\nx\n", "t:2: `x` is not a whole number"),
            ("1\n5\n3\n", "t:3: 3 ms comes before"),
            ("-1\n", "t:1: `-1` is not a whole number"),
        ];
        for (text, want) in cases {
            let e = DeliveryTrace::parse("t", text).unwrap_err();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
        let e = DeliveryTrace::read(Path::new("/nonexistent/trace.down")).unwrap_err();
        assert!(e.starts_with("trace /nonexistent/trace.down: "), "{e}");
    }

    #[test]
    fn a_traced_packet_waits_for_its_opportunity_and_shares_it() {
        let t = Arc::new(DeliveryTrace::parse("t", "2\n2\n5\n").unwrap());
        let mut s = Serializer::new(Some(LinkRate::Trace(t)), Duration::ZERO);
        // 1000 bytes at 0: the first opportunity, at 2 ms, 500 left.
        assert_eq!(s.end(Duration::ZERO, 1000), MS * 2);
        // Back to back: 500 of that one, the second (also 2 ms) for 100 more.
        assert_eq!(s.end(MS * 2, 600), MS * 2);
        // 2000 bytes: 1400 left of the second, 600 of the one at 5 ms.
        assert_eq!(s.end(MS * 2, 2000), MS * 5);
        // The link idles: what is left is lost; the next loop's first
        // opportunities are at 7 ms.
        s.idle();
        assert_eq!(s.end(MS * 6, 1500), MS * 7);
        assert_eq!(s.end(MS * 7, 1500), MS * 7);
        assert_eq!(s.end(MS * 7, 1), MS * 10);
    }

    #[test]
    fn a_schedule_serializes_across_its_steps() {
        let sched = RateSchedule::parse("0s:8mbit, 10ms:16mbit").unwrap();
        let mut s = Serializer::new(
            Some(LinkRate::Schedule(Arc::new(sched.clone()))),
            Duration::ZERO,
        );
        // 1000 bytes at 8 Mbit/s: 1 ms.
        assert_eq!(s.end(Duration::ZERO, 1000), MS);
        // From 9.5 ms: 500 bytes by 10 ms, the other 500 at 16 Mbit/s.
        assert_eq!(
            s.end(MS * 19 / 2, 1000),
            MS * 10 + Duration::from_micros(250)
        );
        assert_eq!(sched.rate_at(MS * 10), 16_000_000);
        assert!((sched.bytes_between(Duration::ZERO, MS * 20) - 30_000.0).abs() < 1e-6);
        // One step is a fixed rate, to the nanosecond and its remainder.
        let one = LinkRate::Schedule(Arc::new(RateSchedule::parse("0s:7mbit").unwrap()));
        let (mut a, mut b) = (
            Serializer::new(Some(one), Duration::ZERO),
            Serializer::new(Some(LinkRate::Fixed(7_000_000)), Duration::ZERO),
        );
        let mut t = Duration::ZERO;
        for len in [1234, 1500, 77, 1500] {
            let end = a.end(t, len);
            assert_eq!(end, b.end(t, len));
            t = end;
        }
    }

    #[test]
    fn bad_schedules_are_refused() {
        for (words, want) in [
            ("10s:20mbit", "a schedule starts at 0s"),
            (
                "0s:100mbit,10s:20mbit,5s:100mbit",
                "schedule step 3 (5s) does not come after",
            ),
            ("0s:100mbit,0s:20mbit", "schedule step 2"),
            ("0s:100mbps", "ambiguous"),
            ("0s:100", "no unit"),
            ("0s", "schedule step 1 `0s` is not TIME:RATE"),
            ("10:20mbit", "no unit"),
        ] {
            let e = RateSchedule::parse(words).unwrap_err();
            assert!(e.contains(want), "{words}: {e}");
        }
    }

    #[test]
    fn a_drain_rate_reads_a_backlog_probes_an_idle_link_and_holds_in_an_outage() {
        let mut d = DrainRate::new(1e6, Duration::ZERO);
        // A backlog throughout 0–20 ms at 2 Mbyte/s: 1000 bytes every
        // 0.5 ms, each starting as the one before ends.
        let step = Duration::from_micros(500);
        d.on_start(Duration::ZERO);
        d.on_departure(step, 1000);
        for i in 1..40u32 {
            d.on_start(step * i);
            d.on_departure(step * (i + 1), 1000);
        }
        // The first found the link idle (it probes): 39 packets in 19.5 ms
        // backlogged, the last half millisecond at the old figure raised.
        let got = d.on_start(MS * 20 + step / 2).unwrap();
        let busy = 0.0195 / 0.02;
        let averaged = 1e6 + DRAIN_AVERAGE_GAIN * (39_000.0 / 0.0195 - 1e6);
        let want = busy * averaged + (1.0 - busy) * 1e6 * PROBE_GAIN;
        assert!((got - want).abs() < 1.0, "{got} vs {want}");
        // 20–40 ms: 40 packets, each finding the link idle, carry 40 kB,
        // over 90 % of the figure: it rises by the probe's gain.
        d.on_departure(MS * 20 + step, 1000);
        for i in 1..40u32 {
            d.on_start(MS * 20 + step * i + step / 2);
            d.on_departure(MS * 20 + step * (i + 1), 1000);
        }
        let up = d.advance(MS * 41).unwrap();
        assert!((up - got * PROBE_GAIN).abs() < 1.0, "{up}");
        // 40–60 ms: one packet, the link left idle by its senders: held.
        d.on_start(MS * 45);
        d.on_departure(MS * 46, 1000);
        assert_eq!(d.advance(MS * 61), Some(up));
        // An idle stretch keeps it.
        assert_eq!(d.advance(MS * 500), None);
        assert_eq!(d.estimate(), up);
        // An outage: a packet starts back to back at 500 ms and waits
        // 100 ms for its opportunity. The window the one before it left in
        // found the link idle and keeps the figure; those it spans with
        // nothing leaving keep it too.
        d.on_start(MS * 500);
        d.on_departure(MS * 500, 1000);
        d.on_start(MS * 500);
        assert_eq!(d.advance(MS * 545), Some(up));
        assert_eq!(d.advance(MS * 599), None);
        assert_eq!(d.estimate(), up);
        // The window it leaves in reads what drained, 1000 bytes over a
        // window backlogged throughout, into the average.
        d.on_departure(MS * 600, 1000);
        let after = d.advance(MS * 621).unwrap();
        let want = up + DRAIN_AVERAGE_GAIN * (1000.0 / 0.02 - up);
        assert!((after - want).abs() < 1.0, "{after} vs {want}");
    }
}

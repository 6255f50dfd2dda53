//! `LoadFactorMeter`: what a router measures on one output link every t_p.
//!
//! The meter counts arrivals (at enqueue, before any tail drop, as the VCP
//! ns-2 release does — docs/design.md §2), departures and the queue, and at the
//! end of each interval turns them into the load figure of every formula in
//! the registry's [`FORMULAS`](crate::schemes::registry::FORMULAS). One
//! meter serves all schemes on a link at once.
//!
//! It is driven by packet events alone (time is an argument); a caller with
//! an idle link may call [`LoadFactorMeter::advance`] from a timer.

use std::time::Duration;

use crate::schemes::registry::FormulaParams;
pub use crate::signal::load::{IntervalStats, LinkLoad, DEFAULT_INTERVAL};

/// VCP samples the queue every 10 ms (VCP ns-2 release, docs/design.md §2).
pub const DEFAULT_QUEUE_SAMPLE: Duration = Duration::from_millis(10);

/// How one link is measured.
#[derive(Clone, Debug, PartialEq)]
pub struct MeterConfig {
    /// Link capacity C, in bytes per second.
    pub capacity: f64,
    /// Measurement interval t_p.
    pub interval: Duration,
    /// Queue sampling period t_q for the persistent queue.
    pub queue_sample: Duration,
    /// The load formulas' parameters.
    pub formulas: FormulaParams,
}

impl MeterConfig {
    /// The papers' defaults for a link of `capacity` bytes per second.
    pub fn new(capacity: f64) -> MeterConfig {
        MeterConfig {
            capacity,
            interval: DEFAULT_INTERVAL,
            queue_sample: DEFAULT_QUEUE_SAMPLE,
            formulas: FormulaParams::for_capacity(capacity),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Accumulator {
    arrived_bytes: u64,
    arrived_packets: u64,
    departed_bytes: u64,
    queue_min: u64,
    queue_max: u64,
    persistent: u64,
    /// ∫ queue dt, in byte·seconds.
    area: f64,
}

impl Accumulator {
    fn new(queue: u64) -> Accumulator {
        Accumulator {
            arrived_bytes: 0,
            arrived_packets: 0,
            departed_bytes: 0,
            queue_min: queue,
            queue_max: queue,
            persistent: u64::MAX,
            area: 0.0,
        }
    }
}

/// Measures one output link (see the module docs).
#[derive(Clone, Debug)]
pub struct LoadFactorMeter {
    config: MeterConfig,
    epoch: u64,
    interval_end: Duration,
    next_sample: Duration,
    queue: u64,
    last_change: Duration,
    acc: Accumulator,
    last: Option<IntervalStats>,
    load: LinkLoad,
    fresh: bool,
    /// Intervals that start before this are disregarded.
    disregard_until: Duration,
    disregarded: u64,
    /// When the last completed interval ended, and the load before it.
    last_end: Duration,
    load_before_last: LinkLoad,
}

impl LoadFactorMeter {
    /// A meter whose first interval starts at `now`.
    ///
    /// Intervals and sampling periods shorter than a microsecond are raised to
    /// one microsecond, and a capacity that is not positive and finite to one
    /// byte per second, so the meter can never divide by zero.
    pub fn new(mut config: MeterConfig, now: Duration) -> LoadFactorMeter {
        let floor = Duration::from_micros(1);
        config.interval = config.interval.max(floor);
        config.queue_sample = config.queue_sample.max(floor).min(config.interval);
        if !(config.capacity.is_finite() && config.capacity > 0.0) {
            config.capacity = 1.0;
        }
        LoadFactorMeter {
            epoch: 0,
            interval_end: now + config.interval,
            next_sample: now + config.queue_sample,
            queue: 0,
            last_change: now,
            acc: Accumulator::new(0),
            last: None,
            load: LinkLoad::default(),
            fresh: false,
            disregard_until: Duration::ZERO,
            disregarded: 0,
            last_end: now,
            load_before_last: LinkLoad::default(),
            config,
        }
    }

    /// The router could not watch the link from `from` to `to` (its thread
    /// was descheduled, or packets that arrived then were read late): they
    /// were counted late or not at all, so every interval overlapping that
    /// time would read too low and the next too high. Those intervals keep
    /// the load figures from before them, as if no measurement had been
    /// taken; one that already closed is taken back. Routers in the papers
    /// never stop; a userspace one on a shared host does.
    pub fn disregard(&mut self, from: Duration, to: Duration) {
        self.advance(from);
        if let Some(last) = self.last.as_mut() {
            if self.last_end > from && !last.disregarded {
                last.disregarded = true;
                self.disregarded += 1;
                self.load = LinkLoad {
                    epoch: self.load.epoch,
                    ..self.load_before_last
                };
            }
        }
        self.disregard_until = self.disregard_until.max(to);
    }

    /// How many intervals [`LoadFactorMeter::disregard`] has voided so far.
    pub fn disregarded(&self) -> u64 {
        self.disregarded
    }

    /// Measures against `capacity` bytes per second from now on (a queue
    /// whose share of the link changes); the formulas' other parameters
    /// stay those of the whole link. Not positive and finite: ignored.
    pub fn set_capacity(&mut self, capacity: f64) {
        if capacity.is_finite() && capacity > 0.0 {
            self.config.capacity = capacity;
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &MeterConfig {
        &self.config
    }

    /// A packet of `bytes` was offered to the link (call before the drop decision).
    #[inline]
    pub fn on_arrival(&mut self, now: Duration, bytes: u32) {
        self.advance(now);
        self.acc.arrived_bytes += u64::from(bytes);
        self.acc.arrived_packets += 1;
    }

    /// A packet of `bytes` left the link.
    #[inline]
    pub fn on_departure(&mut self, now: Duration, bytes: u32) {
        self.advance(now);
        self.acc.departed_bytes += u64::from(bytes);
    }

    /// The queue now holds `queue_bytes` (call after every enqueue and dequeue).
    #[inline]
    pub fn on_queue(&mut self, now: Duration, queue_bytes: u64) {
        self.advance(now);
        self.acc.area += self.queue as f64 * now.saturating_sub(self.last_change).as_secs_f64();
        self.last_change = now;
        self.queue = queue_bytes;
        self.acc.queue_min = self.acc.queue_min.min(queue_bytes);
        self.acc.queue_max = self.acc.queue_max.max(queue_bytes);
    }

    /// Closes every interval that ended at or before `now`.
    #[inline]
    pub fn advance(&mut self, now: Duration) {
        if now < self.next_sample && now < self.interval_end {
            return;
        }
        self.advance_slow(now);
    }

    #[cold]
    fn advance_slow(&mut self, now: Duration) {
        let interval = self.config.interval;
        while now >= self.interval_end {
            let end = self.interval_end;
            self.close(end);
            // Intervals that passed with no event saw a constant queue and no
            // traffic: skip to the last of them instead of looping over each.
            let idle = (now - end).as_nanos() / interval.as_nanos();
            if idle >= 2 {
                let skip = u32::try_from(idle - 1).unwrap_or(u32::MAX);
                let start = end + interval * skip;
                self.epoch += u64::from(skip);
                self.last_change = start;
                self.interval_end = start + interval;
                self.next_sample = start + self.config.queue_sample;
            }
        }
        if now >= self.next_sample {
            // The queue has been constant since the last event, so every
            // sampling instant up to now saw `self.queue`.
            self.acc.persistent = self.acc.persistent.min(self.queue);
            let period = self.config.queue_sample.as_nanos();
            let missed = (now - self.next_sample).as_nanos() / period + 1;
            self.next_sample += Duration::from_nanos((missed * period) as u64);
        }
    }

    fn close(&mut self, end: Duration) {
        if self.next_sample <= end {
            self.acc.persistent = self.acc.persistent.min(self.queue);
        }
        let length = self.config.interval;
        self.acc.area += self.queue as f64 * end.saturating_sub(self.last_change).as_secs_f64();
        let disregarded = end.saturating_sub(length) < self.disregard_until;
        let stats = IntervalStats {
            epoch: self.epoch,
            length,
            arrived_bytes: self.acc.arrived_bytes,
            arrived_packets: self.acc.arrived_packets,
            departed_bytes: self.acc.departed_bytes,
            queue_min: self.acc.queue_min,
            queue_max: self.acc.queue_max,
            queue_avg: self.acc.area / length.as_secs_f64(),
            queue_persistent: if self.acc.persistent == u64::MAX {
                self.acc.queue_min
            } else {
                self.acc.persistent
            },
            disregarded,
        };
        let capacity = self.config.capacity;
        self.load_before_last = self.load;
        self.last_end = end;
        self.load = if disregarded {
            self.disregarded += 1;
            LinkLoad {
                epoch: self.epoch,
                ..self.load
            }
        } else {
            LinkLoad::measure(self.epoch, &self.config.formulas, &stats, capacity)
        };
        self.last = Some(stats);
        self.fresh = true;
        self.epoch += 1;
        self.last_change = end;
        self.interval_end = end + length;
        self.next_sample = end + self.config.queue_sample;
        self.acc = Accumulator::new(self.queue);
    }

    /// The load figures of the last completed interval (all zero before the first).
    #[inline]
    pub fn load(&self) -> &LinkLoad {
        &self.load
    }

    /// The statistics of the last completed interval, if one has completed.
    pub fn last_interval(&self) -> Option<&IntervalStats> {
        self.last.as_ref()
    }

    /// The statistics of an interval completed since the previous call, if any.
    pub fn take_completed(&mut self) -> Option<IntervalStats> {
        std::mem::take(&mut self.fresh).then_some(()).and(self.last)
    }

    /// The queue as last reported, in bytes.
    pub fn queue_bytes(&self) -> u64 {
        self.queue
    }

    /// When the interval in progress ends.
    pub fn interval_end(&self) -> Duration {
        self.interval_end
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schemes::{bmcc, mcp, vcp};

    const MS: Duration = Duration::from_millis(1);

    fn meter() -> LoadFactorMeter {
        // 1 Mbyte/s, so 200 ms carries 200 000 bytes.
        LoadFactorMeter::new(MeterConfig::new(1e6), Duration::ZERO)
    }

    #[test]
    fn offered_load_over_one_interval() {
        let mut m = meter();
        for i in 0..100u32 {
            m.on_arrival(MS * (2 * i), 1500);
        }
        m.advance(MS * 200);
        let s = m.take_completed().expect("interval closed");
        assert_eq!(s.arrived_bytes, 150_000);
        assert!((s.offered(1e6) - 0.75).abs() < 1e-12);
        assert!(m.take_completed().is_none(), "taken once");
        // No queue: ρ = λ / (γ C t_p).
        let gamma = m.config().formulas.vcp.gamma;
        assert!((m.load()[vcp::FORMULA].get() - 0.75 / gamma).abs() < 1e-9);
        // MCP's U has no γ.
        assert!((m.load()[mcp::FORMULA].get() - 0.75).abs() < 1e-9);
    }

    #[test]
    fn queue_statistics() {
        let mut m = meter();
        // In the second interval: 10 000 bytes for 100 ms, then 30 000 for
        // 90 ms, then 10 000 again.
        m.on_queue(Duration::ZERO, 10_000);
        m.on_queue(MS * 300, 30_000);
        m.on_queue(MS * 390, 10_000);
        m.advance(MS * 400);
        let s = m.last_interval().copied().unwrap();
        assert_eq!(s.epoch, 1);
        assert_eq!(s.queue_min, 10_000);
        assert_eq!(s.queue_max, 30_000);
        let avg = (10_000.0 * 0.1 + 30_000.0 * 0.09 + 10_000.0 * 0.01) / 0.2;
        assert!((s.queue_avg - avg).abs() < 1e-6, "{} vs {avg}", s.queue_avg);
        // Samples every 10 ms: the smallest is 10 000 (at 10..=100 ms and 190, 200).
        assert_eq!(s.queue_persistent, 10_000);
    }

    #[test]
    fn persistent_queue_ignores_short_dips() {
        let mut m = meter();
        m.on_queue(Duration::ZERO, 20_000);
        // A dip between two sampling instants is seen by the minimum only.
        m.on_queue(MS * 51, 0);
        m.on_queue(MS * 52, 20_000);
        m.advance(MS * 200);
        let s = m.last_interval().unwrap();
        assert_eq!(s.queue_min, 0);
        assert_eq!(s.queue_persistent, 20_000);
        // VCP's ρ counts κ_q · q̃ = 0.5 · 20 000 bytes.
        let p = m.config().formulas.vcp;
        let want = 0.5 * 20_000.0 / (p.gamma * 1e6 * 0.2);
        assert!((m.load()[vcp::FORMULA].get() - want).abs() < 1e-9);
    }

    /// Offers 1500-byte packets every 2 ms over `[from, to)` ms: 75 % of
    /// the link.
    fn offer(m: &mut LoadFactorMeter, from: u32, to: u32) {
        for t in (from..to).step_by(2) {
            m.on_arrival(MS * t, 1500);
        }
    }

    /// A meter that measured one interval at 75 % and was then offered the
    /// traffic up to 350 ms; returns it and that first reading.
    fn steady_until_350_ms() -> (LoadFactorMeter, LinkLoad) {
        let mut m = meter();
        offer(&mut m, 0, 200);
        m.advance(MS * 200);
        let steady = *m.load();
        assert!((steady[mcp::FORMULA].get() - 0.75).abs() < 1e-9);
        offer(&mut m, 200, 350);
        (m, steady)
    }

    /// The 50 packets of 350–450 ms, read only at 450 ms, then on time to
    /// 600 ms.
    fn late_backlog_until_600_ms(m: &mut LoadFactorMeter) {
        for _ in 0..50 {
            m.on_arrival(MS * 450, 1500);
        }
        offer(m, 450, 600);
    }

    #[test]
    fn a_stalled_router_keeps_its_last_load_over_the_stall() {
        let (mut m, steady) = steady_until_350_ms();
        // From 350 to 450 ms nothing was seen; the backlog then counts late.
        m.disregard(MS * 350, MS * 450);
        late_backlog_until_600_ms(&mut m);
        m.advance(MS * 400);
        assert!(m.last_interval().unwrap().disregarded);
        assert_eq!(
            m.load()[vcp::FORMULA],
            steady[vcp::FORMULA],
            "the low reading is disregarded"
        );
        assert_eq!(m.load().epoch, 1);
        m.advance(MS * 600);
        assert!(m.last_interval().unwrap().disregarded);
        assert_eq!(
            m.load()[bmcc::FORMULA],
            steady[bmcc::FORMULA],
            "the backlog's high one too"
        );
        assert_eq!(m.disregarded(), 2);
        // The next interval is measured again.
        offer(&mut m, 600, 800);
        m.on_arrival(MS * 800, 1500);
        assert!(!m.last_interval().unwrap().disregarded);
        assert!((m.load()[mcp::FORMULA].get() - 0.75).abs() < 1e-9);
    }

    #[test]
    fn a_reading_taken_during_a_stall_is_taken_back() {
        let (mut m, steady) = steady_until_350_ms();
        // Packets from 350 ms on were read only at 450 ms, after the
        // interval ending at 400 ms closed on their absence.
        m.advance(MS * 400);
        assert!((m.load()[mcp::FORMULA].get() - 0.5625).abs() < 1e-9);
        m.disregard(MS * 350, MS * 450);
        assert_eq!(
            m.load()[vcp::FORMULA],
            steady[vcp::FORMULA],
            "the low reading is taken back"
        );
        assert_eq!(m.load().epoch, 1);
        assert!(m.last_interval().unwrap().disregarded);
        // The interval the late packets are counted in is disregarded too.
        late_backlog_until_600_ms(&mut m);
        m.advance(MS * 600);
        assert_eq!(m.load()[bmcc::FORMULA], steady[bmcc::FORMULA]);
        assert_eq!(m.disregarded(), 2);
        // A later gap in the open interval does not take back a closed one.
        offer(&mut m, 600, 700);
        m.disregard(MS * 650, MS * 690);
        assert_eq!(m.disregarded(), 2);
    }

    #[test]
    fn without_disregard_a_stall_reads_low_then_high() {
        let (mut m, _) = steady_until_350_ms();
        late_backlog_until_600_ms(&mut m);
        m.advance(MS * 400);
        assert!(
            (m.load()[mcp::FORMULA].get() - 0.5625).abs() < 1e-9,
            "{:?}",
            m.load()
        );
        m.advance(MS * 600);
        assert!(
            (m.load()[mcp::FORMULA].get() - 0.9375).abs() < 1e-9,
            "{:?}",
            m.load()
        );
        assert_eq!(m.disregarded(), 0);
    }

    #[test]
    fn idle_gaps_skip_to_the_latest_interval() {
        let mut m = meter();
        m.on_arrival(MS, 1000);
        m.on_queue(MS, 1000);
        m.on_arrival(Duration::from_secs(3600), 1000);
        let s = m.last_interval().unwrap();
        // 3600 s / 200 ms = 18 000 intervals; the one ending at 3600 s is index 17 999.
        assert_eq!(s.epoch, 17_999);
        assert_eq!(s.arrived_bytes, 0);
        assert_eq!(s.queue_persistent, 1000);
        assert_eq!(m.load().epoch, 17_999);
        assert_eq!(m.interval_end(), Duration::from_secs(3600) + MS * 200);
    }

    #[test]
    fn intervals_are_contiguous() {
        let mut m = meter();
        let mut epochs = Vec::new();
        for t in (0..2000).step_by(7) {
            m.on_arrival(MS * t, 100);
            if let Some(s) = m.take_completed() {
                epochs.push(s.epoch);
            }
        }
        assert_eq!(epochs, (0..9).collect::<Vec<_>>());
    }

    #[test]
    fn degenerate_config_is_made_safe() {
        let mut cfg = MeterConfig::new(0.0);
        cfg.interval = Duration::ZERO;
        cfg.queue_sample = Duration::ZERO;
        let mut m = LoadFactorMeter::new(cfg, Duration::ZERO);
        m.on_arrival(MS, 1500);
        m.on_arrival(MS * 2, 1500);
        assert!(m.load()[vcp::FORMULA].get().is_finite());
    }
}

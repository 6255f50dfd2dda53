//! Policing of the ecnq queue, sans-IO: a flow that keeps sending well
//! above its max-min fair share while the queue is overloaded — a sender
//! that ignores its signal, or one whose receiver reports less load than
//! the routers wrote — is held to its share by dropping its excess, so it
//! cannot take the others' share (issue 20; the MCP paper warns of such
//! abuse).
//!
//! Every interval the policer measures each flow's arrival rate and the
//! max-min fair share of the queue's capacity among them. A flow over
//! [`OVER_SHARE`] × share for [`STRIKES`] intervals in a row, while the
//! arrivals exceed the capacity, is policed: a token bucket filled at the
//! share admits its packets and drops the rest. It is released after
//! [`STRIKES`] intervals at or under [`RELEASE_SHARE`] × share.
//!
//! The margins leave room for honest flows: an erc sender reaches its rate
//! within one RTT; a paper scheme's flow that is still converging decreases
//! on its overload code, and its decrease keeps it under 1.5 × share.

use std::collections::HashMap;
use std::time::Duration;

use crate::signal::fairness::MaxMin;

/// A flow over this many times its share is suspect.
pub const OVER_SHARE: f64 = 1.5;
/// Intervals in a row over (or, once policed, back under) the margin before
/// the verdict changes: 5 × 200 ms, a second at the papers' t_p.
pub const STRIKES: u8 = 5;
/// A policed flow is released once it sends at most this many times its share.
pub const RELEASE_SHARE: f64 = 1.1;
/// How much a policed flow may send at once: its share for this long.
const BURST: Duration = Duration::from_millis(20);
/// Most flows tracked: beyond it, new flows pass unpoliced and memory stays
/// bounded.
const MAX_FLOWS: usize = 1 << 16;

#[derive(Clone, Copy, Debug, Default)]
struct FlowUse {
    /// Bytes offered this interval.
    bytes: u64,
    /// Intervals in a row over the margin (or, policed, under the release).
    strikes: u8,
    /// The share it is held to, when policed.
    policed: Option<f64>,
    /// Token balance in bytes, when policed.
    tokens: f64,
    /// When the balance was last filled.
    filled: Duration,
}

/// Per-flow policing of one queue (see the module docs).
#[derive(Debug)]
pub struct Policer {
    interval: Duration,
    ends: Duration,
    capacity: f64,
    flows: HashMap<u64, FlowUse>,
    dropped: u64,
}

impl Policer {
    /// A policer of a queue served at `capacity` bytes per second, judging
    /// every `interval` from `now`.
    pub fn new(capacity: f64, interval: Duration, now: Duration) -> Policer {
        let interval = interval.max(Duration::from_millis(1));
        Policer {
            interval,
            ends: now + interval,
            capacity,
            flows: HashMap::new(),
            dropped: 0,
        }
    }

    /// The queue is served at `capacity` bytes per second from now on.
    pub fn set_capacity(&mut self, capacity: f64) {
        self.capacity = capacity;
    }

    /// A packet of `len` bytes of `flow` arrives at `now`: whether it may
    /// enter the queue.
    pub fn admit(&mut self, now: Duration, flow: u64, len: u32) -> bool {
        if now >= self.ends {
            self.judge(now);
        }
        if self.flows.len() >= MAX_FLOWS && !self.flows.contains_key(&flow) {
            return true;
        }
        let f = self.flows.entry(flow).or_default();
        f.bytes += u64::from(len);
        let Some(share) = f.policed else {
            return true;
        };
        let depth = share * BURST.as_secs_f64() + f64::from(len);
        let elapsed = now.saturating_sub(f.filled).as_secs_f64();
        f.tokens = (f.tokens + share * elapsed).min(depth);
        f.filled = now;
        if f.tokens >= f64::from(len) {
            f.tokens -= f64::from(len);
            true
        } else {
            self.dropped += 1;
            false
        }
    }

    /// Closes the interval: rates, the fair share, and each flow's verdict.
    fn judge(&mut self, now: Duration) {
        let idle = now.saturating_sub(self.ends) >= self.interval;
        let seconds = self.interval.as_secs_f64();
        let mut rates: Vec<f64> = self
            .flows
            .values()
            .map(|f| if idle { 0.0 } else { f.bytes as f64 / seconds })
            .collect();
        let offered: f64 = rates.iter().sum();
        let share = MaxMin::split(self.capacity, &mut rates).share();
        let overloaded = offered > self.capacity;
        self.flows.retain(|_, f| {
            let rate = if idle { 0.0 } else { f.bytes as f64 / seconds };
            f.bytes = 0;
            match (f.policed, share) {
                (None, Some(share)) if overloaded && rate > OVER_SHARE * share => {
                    f.strikes += 1;
                    if f.strikes >= STRIKES {
                        f.policed = Some(share);
                        f.strikes = 0;
                        f.tokens = 0.0;
                        f.filled = now;
                    }
                }
                (Some(_), _) if share.is_none_or(|s| rate <= RELEASE_SHARE * s) => {
                    f.strikes += 1;
                    if f.strikes >= STRIKES {
                        f.policed = None;
                        f.strikes = 0;
                    }
                }
                (Some(_), Some(share)) => {
                    // Still over: held to the current share.
                    f.policed = Some(share);
                    f.strikes = 0;
                }
                _ => f.strikes = 0,
            }
            rate > 0.0 || f.policed.is_some()
        });
        self.ends = now + self.interval;
    }

    /// Flows held to their share now.
    pub fn policed_flows(&self) -> usize {
        self.flows.values().filter(|f| f.policed.is_some()).count()
    }

    /// Packets dropped since the start.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Offers each flow's bytes per millisecond for `ms` milliseconds on a
    /// 1 MB/s queue; returns the bytes admitted per flow.
    fn offer(p: &mut Policer, from: u32, ms: u32, per_ms: &[(u64, u32)]) -> Vec<u64> {
        let mut admitted = vec![0; per_ms.len()];
        for t in from..from + ms {
            for (i, &(flow, bytes)) in per_ms.iter().enumerate() {
                if p.admit(MS * t, flow, bytes) {
                    admitted[i] += u64::from(bytes);
                }
            }
        }
        admitted
    }

    #[test]
    fn a_flow_far_over_its_share_is_held_to_it() {
        let mut p = Policer::new(1e6, MS * 200, Duration::ZERO);
        // Flow 1 offers 2 MB/s, flow 2 its half, 500 kB/s.
        let first = offer(&mut p, 0, 2000, &[(1, 2000), (2, 500)]);
        assert_eq!(p.policed_flows(), 1);
        assert!(p.dropped() > 0);
        // From the second second on, flow 1 gets about its share.
        let later = offer(&mut p, 2000, 2000, &[(1, 2000), (2, 500)]);
        let rate1 = later[0] as f64 / 2.0;
        assert!((rate1 - 5e5).abs() < 5e4, "policed flow got {rate1} B/s");
        assert_eq!(later[1], 1_000_000, "the honest flow lost nothing");
        assert!(first[0] > later[0]);
    }

    #[test]
    fn honest_flows_and_a_loaded_but_fair_queue_are_left_alone() {
        let mut p = Policer::new(1e6, MS * 200, Duration::ZERO);
        // Two flows at 600 kB/s each: overloaded, but neither over 1.5 × share.
        offer(&mut p, 0, 3000, &[(1, 600), (2, 600)]);
        assert_eq!((p.policed_flows(), p.dropped()), (0, 0));
        // One flow alone at twice the capacity: it is the only flow, its
        // share is the whole queue and 2 × is over 1.5 ×: policed.
        let mut alone = Policer::new(1e6, MS * 200, Duration::ZERO);
        offer(&mut alone, 0, 3000, &[(1, 2000)]);
        assert_eq!(alone.policed_flows(), 1);
    }

    #[test]
    fn a_policed_flow_that_calms_down_is_released() {
        let mut p = Policer::new(1e6, MS * 200, Duration::ZERO);
        offer(&mut p, 0, 2000, &[(1, 2000), (2, 500)]);
        assert_eq!(p.policed_flows(), 1);
        offer(&mut p, 2000, 2000, &[(1, 400), (2, 500)]);
        assert_eq!(p.policed_flows(), 0);
    }
}

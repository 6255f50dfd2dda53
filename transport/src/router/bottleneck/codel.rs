//! The classic queue's AQM: CoDel (RFC 8289), whose signals the dual
//! queue passes to the flow with the most bytes waiting.

use std::time::Duration;

use super::{Bottleneck, Class, Queued};

impl<P: Queued> Bottleneck<P> {
    /// Whether the classic packet of `flow` that starts now is marked or
    /// dropped, where CoDel's verdict on it is `codel`. In the dual queue
    /// CoDel's signals go to the flow with the most bytes waiting, at its
    /// next departure, when that is another flow: one flow that fills the
    /// queue and ignores loss must not pass its drops to the flows that
    /// answer them, as FQ-CoDel keeps each flow's drops to its own queue
    /// (RFC 8290 §1.2) and AFD drops in proportion to a flow's excess.
    /// Signalling the head's packet instead starved Cubic beside BBR
    /// (`coexist-dual`) and split three Cubic flows of different round
    /// trips unfairly (`erc-mixed-rtt --scheme cubic`); guarded by
    /// `codel_signals_the_flow_with_the_most_bytes_waiting`. What a flow
    /// owes is forgiven when nothing of it waits any more.
    pub(super) fn classic_signal(&mut self, flow: u64, codel: bool) -> bool {
        let waiting = &mut self.flow_bytes[Class::Classic as usize];
        let own = waiting.get(&flow).map_or(0, |w| w.bytes);
        let fattest = self.fattest[Class::Classic as usize].0;
        let mut signal = codel;
        if let Some(fat) = waiting.get_mut(&fattest) {
            if codel && fattest != flow && fat.bytes > own {
                fat.owed += 1;
                signal = false;
            }
        }
        match waiting.get_mut(&flow) {
            Some(w) if !signal && w.owed > 0 => {
                w.owed -= 1;
                true
            }
            _ => signal,
        }
    }
}

/// CoDel's target sojourn time (RFC 8289 §4.4).
const CODEL_TARGET: Duration = Duration::from_millis(5);
/// CoDel's interval (RFC 8289 §4.3).
pub(super) const CODEL_INTERVAL: Duration = Duration::from_millis(100);
/// Below this backlog CoDel never signals: one MTU-sized packet (RFC 8289 §5.3).
pub(super) const CODEL_MIN_BACKLOG: u64 = 1500;

/// CoDel's state (RFC 8289 §5): decides at dequeue whether a packet
/// carries a congestion signal.
#[derive(Debug, Default)]
pub(super) struct Codel {
    first_above: Option<Duration>,
    dropping: bool,
    next_signal: Duration,
    count: u32,
    last_count: u32,
}

impl Codel {
    /// The next signal time after `t`: interval / √count later.
    fn control_law(t: Duration, count: u32) -> Duration {
        t + CODEL_INTERVAL.div_f64(f64::from(count.max(1)).sqrt())
    }

    /// A packet leaves after waiting `sojourn`, `backlog` bytes behind it:
    /// whether to mark or drop it.
    pub(super) fn signal(&mut self, now: Duration, sojourn: Duration, backlog: u64) -> bool {
        let above = if sojourn < CODEL_TARGET || backlog <= CODEL_MIN_BACKLOG {
            self.first_above = None;
            false
        } else {
            match self.first_above {
                None => {
                    self.first_above = Some(now + CODEL_INTERVAL);
                    false
                }
                Some(t) => now >= t,
            }
        };
        if self.dropping {
            if !above {
                self.dropping = false;
                return false;
            }
            if now >= self.next_signal {
                self.count += 1;
                self.next_signal = Self::control_law(self.next_signal, self.count);
                return true;
            }
            return false;
        }
        if !above {
            return false;
        }
        self.dropping = true;
        // Resume near the previous rate if the last episode was recent.
        let delta = self.count.saturating_sub(self.last_count);
        self.count = if delta > 1 && now.saturating_sub(self.next_signal) < CODEL_INTERVAL * 16 {
            delta
        } else {
            1
        };
        self.last_count = self.count;
        self.next_signal = Self::control_law(now, self.count);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::bottleneck::test_support::*;
    use crate::router::bottleneck::{Discipline, Dropped, QueueLimit};
    use crate::wire::ecn::{Ecn, SchemeTag};
    use std::collections::HashMap;

    /// CoDel's drops in the dual queue's classic queue fall on the flow
    /// with the most bytes waiting, not on whoever is at the head: a flow
    /// that answers them keeps its packets beside one that fills the queue
    /// and ignores them (BBR).
    #[test]
    fn codel_signals_the_flow_with_the_most_bytes_waiting() {
        // Flow 1 greedy (two packets a millisecond), flow 2 one packet
        // every 2 ms, both Not-ECT, for 4 s: CoDel's drops per flow.
        let run = |discipline: Discipline| {
            let mut b = link(discipline);
            b.limit = QueueLimit::Packets(100);
            let mut dropped: HashMap<u64, u64> = HashMap::new();
            for t in 0..4_000u32 {
                let now = MS * t;
                while b.depart(now).is_some() {}
                let _ = b.offer(now, pkt(1, SchemeTag::UNTAGGED, Ecn::NotEct));
                let _ = b.offer(now + MS / 2, pkt(1, SchemeTag::UNTAGGED, Ecn::NotEct));
                if t % 2 == 0 {
                    let _ = b.offer(now, pkt(2, SchemeTag::UNTAGGED, Ecn::NotEct));
                }
                for (why, p) in b.take_drops() {
                    if why == Dropped::Aqm {
                        *dropped.entry(p.0.flow).or_default() += 1;
                    }
                }
            }
            let of = |flow| dropped.get(&flow).copied().unwrap_or(0);
            (of(1), of(2))
        };
        let (greedy, other) = run(Discipline::Dual);
        assert!(greedy > 20, "CoDel dropped {greedy} of the greedy flow's");
        assert_eq!(other, 0, "CoDel dropped {other} of the other flow's");
        // DualPI2 knows no flows: its drops fall on both.
        let (greedy, other) = run(Discipline::DualPi2);
        assert!(greedy > 0 && other > 0, "{greedy} / {other}");
    }

    #[test]
    fn codel_waits_an_interval_then_signals_faster() {
        let mut c = Codel::default();
        let late = Duration::from_millis(20);
        assert!(!c.signal(Duration::ZERO, late, 100_000));
        assert!(!c.signal(MS * 99, late, 100_000));
        assert!(c.signal(MS * 100, late, 100_000));
        assert!(!c.signal(MS * 150, late, 100_000));
        assert!(c.signal(MS * 200, late, 100_000));
        // The next gap is 100 ms / √2.
        assert!(!c.signal(MS * 270, late, 100_000));
        assert!(c.signal(MS * 271, late, 100_000));
        // A short sojourn ends the episode.
        assert!(!c.signal(MS * 272, MS, 100_000));
        assert!(!c.dropping);
    }
}

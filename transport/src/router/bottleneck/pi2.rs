//! DualPI2 (RFC 9332): PI2's base probability, the coupled marks of its
//! classic and L4S queues, and the L4S step, which the dual discipline's
//! L4S queue uses too.

use std::time::Duration;

use super::{Bottleneck, Class, Queued, Waiting};

impl<P: Queued> Bottleneck<P> {
    /// Whether DualPI2 marks or drops `waiting`, which starts at `start`
    /// after waiting `sojourn`.
    pub(super) fn pi2_signal(
        &mut self,
        start: Duration,
        waiting: &Waiting<P>,
        sojourn: Duration,
    ) -> bool {
        // PI2 follows the longer of the two queues' delays
        // (Linux's `calculate_probability`).
        let oldest = self
            .queues
            .iter()
            .filter_map(|q| q.front())
            .map(|w| w.since);
        let delay = oldest
            .map(|since| start.saturating_sub(since))
            .fold(sojourn, Duration::max);
        self.pi2.update(start, delay);
        // RFC 9332 Appendix A.1, `dualpi2_dequeue`: classic
        // packets with p_C = p'², L4S ones with p_L =
        // max(step, p_CL = k·p'): with a step of 0 or 1, the
        // draw's union with it is that maximum.
        let (p, step) = match waiting.class {
            Class::Classic => (self.pi2.p * self.pi2.p, false),
            _ => (
                (PI2_K * self.pi2.p).min(1.0),
                waiting.queued_behind && sojourn > PI2_STEP,
            ),
        };
        step || self.pi2.chance(p)
    }

    /// The dual discipline's L4S step for `waiting`, the head of queue
    /// `class`: on the queue's length at the link's rate, as an L4S
    /// router's queue drains when its packets go first (its sojourn here
    /// also counts the other classes' turns).
    pub(super) fn l4s_step(&self, class: usize, waiting: &Waiting<P>) -> bool {
        let backlog = self.bytes[class] + u64::from(waiting.packet.wire_len());
        waiting.queued_behind && backlog as f64 > self.capacity * PI2_STEP.as_secs_f64()
    }
}

/// PI2's target queue delay (RFC 9332 Appendix A.1, `dualpi2_params_init`
/// line 8: 15 ms; Linux `sch_dualpi2`'s default too).
const PI2_TARGET: Duration = Duration::from_millis(15);
/// PI2 updates its base probability this often. RFC 9332 Appendix A.1
/// line 12 derives Tupdate = min(target, RTT_max / 3) = 15 ms; this is
/// Linux `sch_dualpi2`'s default, 16 ms, which its α and β go with.
const PI2_UPDATE: Duration = Duration::from_millis(16);
/// PI2's integral gain α, applied once per update to delays in seconds
/// (RFC 9332 Appendix A.1, `dualpi2_update`: p' += α·(curq − target) +
/// β·(curq − prevq)). Line 13 derives α = 0.1·Tupdate / RTT_max² = 0.15
/// Hz for 15 ms; Linux's 41/256 ≈ 0.16 Hz for 16 ms integrates as fast
/// (α / Tupdate = 10 s⁻²).
const PI2_ALPHA: f64 = 0.16;
/// PI2's proportional gain β, applied once per update (RFC 9332 Appendix
/// A.1 line 14: β = 0.3 / RTT_max = 3 Hz; Linux's 819/256 ≈ 3.2 Hz).
const PI2_BETA: f64 = 3.2;
/// The coupling factor k: the L4S queue is marked with k·p' where the
/// classic queue sees p'² (RFC 9332 §2.1, p_C = (p_CL / k)², and Appendix
/// A.1 line 3: k = 2).
const PI2_K: f64 = 2.0;
/// The L4S queue's native AQM: CE for a packet whose sojourn exceeds this
/// (Linux `sch_dualpi2`'s `step_thresh`, 1 ms; RFC 9332 Appendix A.1
/// lines 17–18 ramp from 800 µs over 400 µs, and allow a step). The dual
/// discipline's L4S step uses it too.
const PI2_STEP: Duration = Duration::from_millis(1);
/// The time shift of the time-shifted FIFO between the queues, one of the
/// schedulers RFC 9332 §4.2.2 discusses (Linux uses a weighted round robin
/// with 10 % for the classic queue instead): twice the classic target, a
/// choice of this model; it never binds while the L4S queue stays short.
pub(super) const PI2_TSHIFT: Duration = Duration::from_millis(30);

/// PI2's base probability p' (RFC 9332 Appendix A.1, `dualpi2_update`),
/// updated every [`PI2_UPDATE`] from the queue delay and held in [0, 1],
/// and the random draws of its marks.
///
/// Where this differs from the RFC's pseudocode and Linux's qdisc
/// (sim/REPRODUCTION.md, "L4S", has what each was measured to change):
/// the delay is the longer of the two queues' head sojourns, as
/// Linux's `calculate_probability` takes it (the RFC's uses the classic
/// queue's alone); p' is brought up to date by the first dequeue at or
/// after each update time, not by a timer; the RFC marks through
/// `recur()`, a deterministic accumulator, where this draws as Linux does,
/// and the classic p'² in one draw where Linux draws p' twice (the same
/// probability); Linux never marks or drops by p' while under two MTUs
/// wait; there is no overload mode (L4S drop once k·p' ≥ 1). None of
/// these, nor Linux's WRR scheduler or the RFC's gains, moves Cubic with
/// ECN against Prague.
#[derive(Debug)]
pub(super) struct Pi2 {
    p: f64,
    previous: Duration,
    next_update: Duration,
    rng: u64,
}

impl Pi2 {
    pub(super) fn new(now: Duration, seed: u64) -> Pi2 {
        Pi2 {
            p: 0.0,
            previous: Duration::ZERO,
            next_update: now + PI2_UPDATE,
            rng: seed ^ 0x9e37_79b9_7f4a_7c15,
        }
    }

    /// Brings p' up to date at `now` with the queue delay `delay`.
    fn update(&mut self, now: Duration, delay: Duration) {
        while now >= self.next_update {
            let (q, previous, target) = (
                delay.as_secs_f64(),
                self.previous.as_secs_f64(),
                PI2_TARGET.as_secs_f64(),
            );
            // Per update, delays in seconds, as PIE applies its gains
            // (RFC 8033 §4.2).
            self.p += PI2_ALPHA * (q - target) + PI2_BETA * (q - previous);
            self.p = self.p.clamp(0.0, 1.0);
            self.previous = delay;
            self.next_update += PI2_UPDATE;
        }
    }

    /// True with probability `p` (SplitMix64).
    fn chance(&mut self, p: f64) -> bool {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        ((z >> 11) as f64) < p * (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::bottleneck::test_support::*;
    use crate::router::bottleneck::Discipline;
    use crate::wire::ecn::{Ecn, SchemeTag};

    /// Untagged ECT(1) and CE, and tagged Prague, wait in the L4S queue,
    /// CE-marked beyond 1 ms of the link; an erc, an L4S and a classic flow
    /// split the link three ways.
    #[test]
    fn l4s_traffic_gets_a_step_marked_queue_and_an_equal_share() {
        let mut b = link(Discipline::Dual);
        let prague = SchemeTag::new(crate::schemes::prague::WIRE.id());
        let untagged = SchemeTag::UNTAGGED;
        for (tag, ecn, class) in [
            (prague, Ecn::Ect1, Class::L4s),
            (untagged, Ecn::Ect1, Class::L4s),
            (untagged, Ecn::Ce, Class::L4s),
            (untagged, Ecn::Ect0, Class::Classic),
            (untagged, Ecn::NotEct, Class::Classic),
            (ERC, Ecn::NotEct, Class::Ecnq),
        ] {
            assert_eq!(
                b.class_of(Some(&pkt(1, tag, ecn).0)),
                class,
                "{tag:?} {ecn:?}"
            );
        }
        let out = run(
            &mut b,
            &[
                (1, ERC, Ecn::Ect0),
                (2, untagged, Ecn::Ect1),
                (3, untagged, Ecn::Ect0),
            ],
            3000,
        );
        let total = out.values().sum::<u64>() as f64;
        for flow in 1..=3 {
            let share = out[&flow] as f64 / total;
            assert!((share - 1.0 / 3.0).abs() < 0.02, "{out:?}");
        }
        assert_eq!(b.active_flows(), [1, 1, 1]);
        let capacity = ecnq_capacity(&b);
        assert!((capacity - 1e6 / 3.0).abs() < 1.0, "{capacity}");
        assert!(b.counters(Class::L4s).aqm_marks > 0);
        assert_eq!(b.counters(Class::L4s).aqm_drops, 0);
    }

    /// p' moves by RFC 9332 Appendix A.1's rule, once per interval:
    /// p' += α·(q − target) + β·(q − q_prev), delays in seconds, held in
    /// [0, 1].
    #[test]
    fn pi2_updates_p_by_the_rfc_rule_once_per_interval() {
        let mut pi2 = Pi2::new(Duration::ZERO, 0);
        let delay = MS * 20;
        pi2.update(PI2_UPDATE - Duration::from_nanos(1), delay);
        assert_eq!(pi2.p, 0.0, "no update before the first interval ends");
        // Ten intervals at once: the integral term counts each of them, the
        // proportional term the delay's one rise from 0 to 20 ms.
        pi2.update(PI2_UPDATE * 10, delay);
        let expected = 10.0 * PI2_ALPHA * (0.020 - 0.015) + PI2_BETA * 0.020;
        assert!((pi2.p - expected).abs() < 1e-12, "{} vs {expected}", pi2.p);
        // The queue empties: the fall takes β·20 ms off at once, then the
        // integral α·15 ms per interval, down to zero and not below.
        pi2.update(PI2_UPDATE * 11, Duration::ZERO);
        let expected = expected - PI2_ALPHA * 0.015 - PI2_BETA * 0.020;
        assert!((pi2.p - expected).abs() < 1e-12, "{} vs {expected}", pi2.p);
        pi2.update(PI2_UPDATE * 20, Duration::ZERO);
        assert_eq!(pi2.p, 0.0);
        // A second of queue saturates it at 1.
        pi2.update(PI2_UPDATE * 21, Duration::from_secs(1));
        assert_eq!(pi2.p, 1.0);
    }

    /// At a steady p', DualPI2 CE-marks classic ECT packets with p'²,
    /// drops classic Not-ECT ones with p'², and marks L4S packets with
    /// k·p' (RFC 9332 §2.1: p_C = (p_CL / k)²); an L4S packet that waited
    /// over a millisecond is marked whatever p' is.
    #[test]
    fn dualpi2_marks_classic_with_p_squared_and_l4s_with_k_times_p() {
        let mut b = link(Discipline::DualPi2);
        b.pi2.p = 0.1;
        b.pi2.next_update = Duration::MAX;
        let kinds = [
            (1, SchemeTag::UNTAGGED, Ecn::Ect0),
            (2, SchemeTag::UNTAGGED, Ecn::NotEct),
            (3, SchemeTag::UNTAGGED, Ecn::Ect1),
        ];
        // One packet a millisecond, a millisecond each: none waits.
        let (mut sent, mut ce) = ([0u32; 3], [0u32; 3]);
        for t in 0..60_000u32 {
            let now = MS * t;
            while let Some((_, p)) = b.depart(now) {
                let kind = p.0.flow as usize - 1;
                sent[kind] += 1;
                ce[kind] += u32::from(p.0.ecn == Ecn::Ce);
            }
            let (flow, tag, ecn) = kinds[t as usize % 3];
            b.offer(now, pkt(flow, tag, ecn)).unwrap();
        }
        let dropped = b.counters(Class::Classic).aqm_drops as u32;
        let fraction = |n: u32, of: u32| f64::from(n) / f64::from(of);
        let (ect, not_ect, l4s) = (
            fraction(ce[0], sent[0]),
            fraction(dropped, sent[1] + dropped),
            fraction(ce[2], sent[2]),
        );
        assert!((ect - 0.01).abs() < 0.002, "classic ECT marked {ect}");
        assert!(
            (not_ect - 0.01).abs() < 0.002,
            "classic Not-ECT dropped {not_ect}"
        );
        assert_eq!(ce[1], 0);
        assert!((l4s - 0.2).abs() < 0.01, "L4S marked {l4s}");
        assert_eq!(b.counters(Class::L4s).aqm_drops, 0);
        // The step: at p' = 0, three L4S packets at once wait 0, 1 and 2 ms.
        let mut b = link(Discipline::DualPi2);
        for _ in 0..3 {
            b.offer(Duration::ZERO, pkt(3, SchemeTag::UNTAGGED, Ecn::Ect1))
                .unwrap();
        }
        let marks: Vec<bool> = std::iter::from_fn(|| b.depart(MS * 10))
            .map(|(_, p)| p.0.ecn == Ecn::Ce)
            .collect();
        assert_eq!(marks, [false, false, true]);
    }

    /// At a link so slow that one packet takes longer than the step, an
    /// L4S packet is marked only when it joined a waiting packet: a lone
    /// packet, or one behind the packet in service, is not (Linux's
    /// `apply_step`). Marking every packet for its own length starves
    /// Prague at a slow link.
    #[test]
    fn the_l4s_step_marks_only_a_packet_that_joined_a_queue() {
        for discipline in [Discipline::Dual, Discipline::DualPi2] {
            // 4 Mbit/s: a 1000-byte packet takes 2 ms, twice the step.
            let mut b = link_at(discipline, 4_000_000, Duration::ZERO);
            let mut marks = Vec::new();
            for group in 0..20u32 {
                // Three packets 0.5 ms apart, then 20 ms of idle link.
                for k in 0..3u32 {
                    let now = MS * (20 * group) + MS * k / 2;
                    marks.extend(std::iter::from_fn(|| b.depart(now)).map(|(_, p)| p.0.ecn));
                    b.offer(now, pkt(1, SchemeTag::UNTAGGED, Ecn::Ect1))
                        .unwrap();
                }
            }
            marks.extend(std::iter::from_fn(|| b.depart(MS * 1000)).map(|(_, p)| p.0.ecn));
            let expected = [Ecn::Ect1, Ecn::Ect1, Ecn::Ce].repeat(20);
            assert_eq!(marks, expected, "{discipline:?}");
        }
    }

    /// The seed decides which packets DualPI2's draws mark, and only that.
    #[test]
    fn the_seed_drives_dualpi2s_draws() {
        let marks = |seed: u64| {
            let mut b = link(Discipline::DualPi2);
            b.pi2 = Pi2::new(Duration::ZERO, seed);
            b.pi2.p = 0.1;
            b.pi2.next_update = Duration::MAX;
            let mut ce = Vec::new();
            for t in 0..2_000u32 {
                let now = MS * t;
                ce.extend(std::iter::from_fn(|| b.depart(now)).map(|(_, p)| p.0.ecn == Ecn::Ce));
                b.offer(now, pkt(1, SchemeTag::UNTAGGED, Ecn::Ect1))
                    .unwrap();
            }
            ce
        };
        let count = |ce: &[bool]| ce.iter().filter(|&&c| c).count();
        let (a, b) = (marks(1), marks(2));
        assert_eq!(marks(1), a);
        assert_ne!(a, b);
        // Both near k·p' = 0.2 of 2000.
        for ce in [&a, &b] {
            assert!((350..450).contains(&count(ce)), "{}", count(ce));
        }
    }
}

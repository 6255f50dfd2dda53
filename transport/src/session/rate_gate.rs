//! Holds a rate law's sender to its rate inside quinn.
//!
//! quinn sends whenever its congestion window allows, and paces at 1.25 ×
//! window / srtt. A window of rate × srtt therefore lets through rate ×
//! srtt / (RTT + ACK delay): under the rate, by an amount that varies with
//! the ACK delay and the queue. MCP routers read that variation as load,
//! and their overload line (98 % of the link) cuts stable states short.
//! The paper's sender spaces packets at exactly 8S/R (MCP §IV-H).
//!
//! The gate gives quinn a window of what is in flight plus a token balance
//! that fills at the law's rate, so over any stretch longer than the spacing
//! of ACKs (which is when quinn asks) the flow sends its rate, whatever the
//! RTT and the ACK delay. For a law that catches up the session raises that
//! window to rate × srtt / 1.25 while less is in flight, so that quinn's
//! own pacer sends the law's rate at a start
//! ([`super::sending::Sending::gated_window`]).
//!
//! A law that bounds its bursts ([`crate::signal::Law::pacing_burst`])
//! holds only one burst in its balance, and what accrues beyond it while
//! quinn does not ask is lost, unless the law catches up
//! ([`crate::signal::Law::pacing_catches_up`]): then a second balance
//! beside the deep one holds one burst and fills at [`CATCH_UP`] times the
//! rate, as a token bucket filter's peak rate, so what one late ask leaves
//! goes out over the next few asks, a burst at a time. Without it a law
//! with 1 ms bursts (erc) sends well under its rate wherever quinn asks
//! late (`a_law_that_catches_up_sends_its_rate_when_asked_late`).

use std::time::Duration;

use crate::signal::Law;

/// How long the balance may fill beyond [`DEPTH_PACKETS`], unless the law
/// bounds its bursts closer and does not catch up: quinn asks for the
/// window when ACKs arrive or its driver runs, which on a busy host can be
/// milliseconds apart (tokio's timers tick every millisecond). More lets
/// a stalled process burst onto the bottleneck when it resumes and
/// lengthens the queue; with 3 ms the link can fall under the 95 % that
/// issue 19 asks for (the demo's erc run, `ecnq-perf demo --cc erc
/// --no-mixed`).
/// `sends_its_rate_when_asked_within_the_fill_span` checks the rate.
const FILL_SPAN: Duration = Duration::from_millis(4);
/// Packets the balance may always hold: the two a receiver acks at once,
/// and room for a coalesced datagram.
const DEPTH_PACKETS: f64 = 4.0;
/// How much faster than the rate a bounded burst refills for a law that
/// catches up: twice, so that a backlog of one fill span drains within
/// about one more.
const CATCH_UP: f64 = 2.0;
/// A window that lets one full datagram through (1500-byte MTU, with quinn's
/// allowance for the packet being built) when nothing is in flight: with no
/// packet in flight no ACK comes to reopen the gate, so one always passes.
pub(super) const IDLE_WINDOW: u64 = 3_000;

/// What the gate fills at: a law's pacing.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pace {
    /// Bytes per second.
    pub rate: f64,
    /// The law's bound on a burst ([`crate::signal::Law::pacing_burst`]),
    /// if it has one; [`FILL_SPAN`] otherwise.
    pub burst: Option<Duration>,
    /// Whether the law catches up ([`crate::signal::Law::pacing_catches_up`]).
    pub catch_up: bool,
}

impl Pace {
    /// The pacing of `law` at `rate`, its [`crate::signal::Law::pacing_rate`].
    pub fn of(law: &dyn Law, rate: f64) -> Pace {
        Pace {
            rate,
            burst: law.pacing_burst(),
            catch_up: law.pacing_catches_up(),
        }
    }

    /// `span` at the rate, plus [`DEPTH_PACKETS`].
    fn holding(self, span: Duration, mss: u64) -> f64 {
        self.rate * span.as_secs_f64() + DEPTH_PACKETS * mss as f64
    }

    /// The most that may leave at once, so at one ask: the law's burst
    /// span at the rate, plus [`DEPTH_PACKETS`].
    fn burst_depth(self, mss: u64) -> f64 {
        self.holding(self.burst.unwrap_or(FILL_SPAN), mss)
    }

    /// The most the balance holds: [`FILL_SPAN`]'s worth for a law that
    /// catches up, one burst for the others.
    fn depth(self, mss: u64) -> f64 {
        if self.catch_up {
            self.holding(FILL_SPAN, mss)
        } else {
            self.burst_depth(mss)
        }
    }

    /// How fast the burst balance fills.
    fn burst_rate(self) -> f64 {
        if self.catch_up {
            CATCH_UP * self.rate
        } else {
            self.rate
        }
    }
}

/// The token balances of one sending direction.
#[derive(Clone, Debug, Default)]
pub(crate) struct RateGate {
    /// Bytes the flow may still send; negative after an idle-window packet.
    balance: f64,
    /// Bytes the flow may send at once (see the module docs).
    burst: f64,
    /// When the balances were last brought up to date.
    at: Option<Duration>,
}

impl RateGate {
    /// The balance and the burst balance at `now`, without recording them.
    fn balances_at(&self, now: Duration, pace: Pace, mss: u64) -> (f64, f64) {
        let (depth, burst_depth) = (pace.depth(mss), pace.burst_depth(mss));
        match self.at {
            Some(at) => {
                let span = now.saturating_sub(at).as_secs_f64();
                (
                    (self.balance + pace.rate * span).min(depth),
                    (self.burst + pace.burst_rate() * span).min(burst_depth),
                )
            }
            // A new flow starts with full balances, as quinn starts with a full window.
            None => (depth, burst_depth),
        }
    }

    /// Debits a packet sent at `now`.
    pub fn on_sent(&mut self, now: Duration, bytes: u64, pace: Pace, mss: u64) {
        let (balance, burst) = self.balances_at(now, pace, mss);
        self.balance = balance - bytes as f64;
        self.burst = burst - bytes as f64;
        self.at = Some(now);
    }

    /// The window for quinn at `now`: in flight plus the smaller balance,
    /// at most `cap`, and at least [`IDLE_WINDOW`] when nothing is in
    /// flight.
    pub fn window(&self, now: Duration, pace: Pace, mss: u64, in_flight: u64, cap: u64) -> u64 {
        let (balance, burst) = self.balances_at(now, pace, mss);
        let open = in_flight.saturating_add(balance.min(burst).max(0.0) as u64);
        let window = open.min(cap.max(in_flight));
        if in_flight == 0 {
            window.max(IDLE_WINDOW)
        } else {
            window
        }
    }

    /// When [`RateGate::window`], asked with the same arguments, first
    /// reaches `target` if nothing is sent meanwhile: `now` if it already
    /// does, `None` if filling never gets it there (beyond `cap` or the
    /// balances' depth). The balances fill linearly, so the time is exact,
    /// rounded up to the next nanosecond so that the window has reached
    /// `target` then. Test: `the_gate_reaches_a_window_when_it_says`.
    pub fn reaches(
        &self,
        now: Duration,
        pace: Pace,
        mss: u64,
        in_flight: u64,
        cap: u64,
        target: u64,
    ) -> Option<Duration> {
        if self.window(now, pace, mss, in_flight, cap) >= target {
            return Some(now);
        }
        // Here `target` is above what is in flight, which the window never
        // falls below.
        let need = (target - in_flight) as f64;
        if target > cap || need > pace.depth(mss).min(pace.burst_depth(mss)) {
            return None;
        }
        let (balance, burst) = self.balances_at(now, pace, mss);
        let wait = ((need - balance) / pace.rate).max((need - burst) / pace.burst_rate());
        let wait = Duration::try_from_secs_f64(wait).ok()?;
        Some(now + wait + Duration::from_nanos(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const MSS: u64 = 1200;
    const CAP: u64 = 1 << 30;

    /// The transport's own burst span at `rate`.
    fn pace(rate: f64) -> Pace {
        Pace {
            rate,
            burst: None,
            catch_up: false,
        }
    }

    /// Sends 1200-byte packets whenever the window allows, checking every
    /// `tick`, for `span`; returns the bytes sent.
    fn drive(pace: Pace, tick: Duration, span: Duration, in_flight: u64) -> u64 {
        let mut gate = RateGate::default();
        let mut sent = 0;
        let mut now = Duration::ZERO;
        while now < span {
            while in_flight + MSS < gate.window(now, pace, MSS, in_flight, CAP) {
                gate.on_sent(now, MSS, pace, MSS);
                sent += MSS;
            }
            now += tick;
        }
        sent
    }

    #[test]
    fn sends_its_rate_when_asked_within_the_fill_span() {
        // 250 kB/s for 10 s: the depth (full at start) plus the rate.
        let rate = 250_000.0;
        let depth = rate * FILL_SPAN.as_secs_f64() + DEPTH_PACKETS * MSS as f64;
        for tick in [MS, FILL_SPAN, FILL_SPAN * 4] {
            let sent = drive(pace(rate), tick, MS * 10_000, 5 * MSS) as f64;
            let expected = rate * 10.0 + depth;
            assert!(
                (sent - expected).abs() < 3.0 * MSS as f64 + rate * tick.as_secs_f64(),
                "tick {tick:?}: sent {sent}, expected {expected}"
            );
        }
        // Asked less often than the depth lasts, the flow falls short: the
        // price of not bursting after a stall.
        let sent = drive(pace(rate), MS * 100, MS * 10_000, 5 * MSS) as f64;
        assert!(sent < 0.5 * rate * 10.0, "sent {sent}");
    }

    #[test]
    fn an_idle_flow_gets_one_datagram_and_repays_it() {
        let mut gate = RateGate::default();
        gate.on_sent(Duration::ZERO, 100_000, pace(10_000.0), MSS);
        // Deep in debt, but nothing in flight: one datagram passes.
        assert!(gate.window(MS, pace(10_000.0), MSS, 0, CAP) >= IDLE_WINDOW);
        // With a packet in flight the debt holds the gate shut.
        assert_eq!(gate.window(MS, pace(10_000.0), MSS, MSS, CAP), MSS);
    }

    #[test]
    fn the_balance_is_bounded_and_the_cap_holds() {
        let mut gate = RateGate::default();
        gate.on_sent(Duration::ZERO, 0, pace(1e6), MSS);
        // After an hour idle, the balance is one depth, not an hour of rate.
        let depth = 1e6 * FILL_SPAN.as_secs_f64() + DEPTH_PACKETS * MSS as f64;
        let hour = Duration::from_secs(3600);
        assert_eq!(
            gate.window(hour, pace(1e6), MSS, MSS, CAP),
            MSS + depth as u64
        );
        assert_eq!(gate.window(hour, pace(1e6), MSS, MSS, 10_000), 10_000);
        // The cap never shrinks the window below what is already in flight.
        assert_eq!(gate.window(hour, pace(1e6), MSS, 50_000, 10_000), 50_000);
    }

    #[test]
    fn a_law_that_bounds_its_bursts_gets_a_shallower_balance() {
        // Prague's 250 µs at 5 MB/s: 1250 bytes beyond the four packets,
        // where the transport's own span would allow 25 000.
        let bounded = Pace {
            rate: 5e6,
            burst: Some(Duration::from_micros(250)),
            catch_up: false,
        };
        let hour = Duration::from_secs(3600);
        let mut gate = RateGate::default();
        gate.on_sent(Duration::ZERO, 0, bounded, MSS);
        assert_eq!(
            gate.window(hour, bounded, MSS, MSS, CAP),
            MSS + 1250 + 4 * MSS
        );
        // A new flow starts with the same bounded balance.
        let fresh = RateGate::default();
        assert_eq!(fresh.window(MS, bounded, MSS, 0, CAP), 1250 + 4 * MSS);
        // Over time it still sends the rate.
        let sent = drive(bounded, MS, MS * 10_000, 5 * MSS);
        let expected = 5e6 * 10.0;
        assert!((sent as f64 / expected - 1.0).abs() < 0.01, "{sent}");
    }

    /// Over gates in many states (fresh, in debt, part full, a bounded
    /// burst, catching up), the window reaches each target at the time
    /// `reaches` names and not a microsecond before; a target beyond the
    /// cap or the depth is never reached.
    #[test]
    fn the_gate_reaches_a_window_when_it_says() {
        let (mut reached, mut never) = (0, 0);
        for (catch_up, burst) in [(false, None), (false, Some(MS / 4)), (true, Some(MS))] {
            let pace = Pace {
                rate: 1.25e6,
                burst,
                catch_up,
            };
            for debt in [0, MSS, 10 * MSS, 100 * MSS] {
                let mut gate = RateGate::default();
                gate.on_sent(MS, debt, pace, MSS);
                for (in_flight, cap) in [(0, CAP), (5 * MSS, CAP), (5 * MSS, 8 * MSS)] {
                    for target in (1..=20).map(|n| n * MSS) {
                        let window = |at| gate.window(at, pace, MSS, in_flight, cap);
                        let now = 2 * MS;
                        let Some(at) = gate.reaches(now, pace, MSS, in_flight, cap, target) else {
                            never += 1;
                            let hour = Duration::from_secs(3600);
                            assert!(window(hour) < target, "{pace:?} {debt} {target}");
                            continue;
                        };
                        reached += 1;
                        assert!(window(at) >= target, "{pace:?} {debt} {target} {at:?}");
                        let early = at.saturating_sub(Duration::from_micros(1));
                        assert!(at == now || window(early) < target, "{pace:?} {target}");
                    }
                }
            }
        }
        assert!(
            reached > 100 && never > 100,
            "{reached} reached, {never} never"
        );
    }

    /// Asked unevenly (three asks a millisecond apart, then one 9 ms
    /// later), a law with 1 ms bursts at 1.25 MB/s that catches up still
    /// sends its rate, and no ask lets out more than one burst: what a late
    /// ask leaves goes out over the next ones. One that does not catch up
    /// loses what its burst cannot hold.
    #[test]
    fn a_law_that_catches_up_sends_its_rate_when_asked_late() {
        let run = |catch_up: bool| {
            let pace = Pace {
                rate: 1.25e6,
                burst: Some(MS),
                catch_up,
            };
            let mut gate = RateGate::default();
            let (mut now, mut sent, mut most) = (Duration::ZERO, 0u64, 0u64);
            for ask in 0..4_000u32 {
                now += if ask % 4 == 3 { MS * 9 } else { MS };
                let mut at_once = 0;
                while 5 * MSS + MSS < gate.window(now, pace, MSS, 5 * MSS, CAP) {
                    gate.on_sent(now, MSS, pace, MSS);
                    at_once += MSS;
                }
                most = most.max(at_once);
                sent += at_once;
            }
            let burst = pace.burst_depth(MSS);
            assert!(most as f64 <= burst, "{most} at once, burst {burst}");
            sent as f64 / (pace.rate * now.as_secs_f64())
        };
        let (caught_up, lost) = (run(true), run(false));
        assert!(caught_up >= 0.85, "{caught_up}");
        assert!(lost < 0.7, "{lost}");
    }
}

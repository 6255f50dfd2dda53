//! Holds a rate law's sender to its rate inside quinn.
//!
//! quinn sends whenever its congestion window allows, and paces at 1.25 ×
//! window / srtt. A window of rate × srtt therefore lets through rate ×
//! srtt / (RTT + ACK delay): measured at 82–98 % of the rate per 250 ms on
//! a 12 Mbit/s, 40 ms path, varying with the ACK delay and the queue. MCP
//! routers read that variation as load: per 200 ms period, six flows at
//! constant law rates arrived at 90–105 % of the link, and MCP's 98 %
//! overload line cut stable states short. The paper's sender spaces packets
//! at exactly 8S/R (MCP §IV-H).
//!
//! The gate gives quinn a window of what is in flight plus a token balance
//! that fills at the law's rate, so over any stretch longer than the spacing
//! of ACKs (which is when quinn asks) the flow sends its rate, whatever the
//! RTT and the ACK delay.

use std::time::Duration;

/// How long the balance may fill beyond [`DEPTH_PACKETS`], unless the law
/// bounds its bursts closer: quinn asks for the window when ACKs arrive or
/// its driver runs, which on a busy host can be milliseconds apart (tokio's
/// timers tick every millisecond). More would let a stalled process burst
/// onto the bottleneck when it resumes.
const FILL_SPAN: Duration = Duration::from_millis(5);
/// Packets the balance may always hold: the two a receiver acks at once,
/// and room for a coalesced datagram.
const DEPTH_PACKETS: f64 = 4.0;
/// A window that lets one full datagram through (1500-byte MTU, with quinn's
/// allowance for the packet being built) when nothing is in flight: with no
/// packet in flight no ACK comes to reopen the gate, so one always passes.
const IDLE_WINDOW: u64 = 3_000;

/// What the gate fills at: a law's pacing.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pace {
    /// Bytes per second.
    pub rate: f64,
    /// The law's bound on a burst ([`crate::signal::Law::pacing_burst`]),
    /// if it has one; [`FILL_SPAN`] otherwise.
    pub burst: Option<Duration>,
}

impl Pace {
    /// The most the balance holds: the burst span at the rate, plus
    /// [`DEPTH_PACKETS`].
    fn depth(self, mss: u64) -> f64 {
        let span = self.burst.unwrap_or(FILL_SPAN);
        self.rate * span.as_secs_f64() + DEPTH_PACKETS * mss as f64
    }
}

/// The token balance of one sending direction.
#[derive(Clone, Debug, Default)]
pub(crate) struct RateGate {
    /// Bytes the flow may still send; negative after an idle-window packet.
    balance: f64,
    /// When the balance was last brought up to date.
    at: Option<Duration>,
}

impl RateGate {
    /// The balance at `now`, without recording it.
    fn balance_at(&self, now: Duration, pace: Pace, mss: u64) -> f64 {
        let depth = pace.depth(mss);
        match self.at {
            Some(at) => {
                (self.balance + pace.rate * now.saturating_sub(at).as_secs_f64()).min(depth)
            }
            // A new flow starts with a full balance, as quinn starts with a full window.
            None => depth,
        }
    }

    /// Debits a packet sent at `now`.
    pub fn on_sent(&mut self, now: Duration, bytes: u64, pace: Pace, mss: u64) {
        self.balance = self.balance_at(now, pace, mss) - bytes as f64;
        self.at = Some(now);
    }

    /// The window for quinn at `now`: in flight plus the balance, at most
    /// `cap`, and at least [`IDLE_WINDOW`] when nothing is in flight.
    pub fn window(&self, now: Duration, pace: Pace, mss: u64, in_flight: u64, cap: u64) -> u64 {
        let open = in_flight.saturating_add(self.balance_at(now, pace, mss).max(0.0) as u64);
        let window = open.min(cap.max(in_flight));
        if in_flight == 0 {
            window.max(IDLE_WINDOW)
        } else {
            window
        }
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
        Pace { rate, burst: None }
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
        let depth = rate * 0.005 + 4.0 * MSS as f64;
        for tick in [MS, MS * 5, MS * 20] {
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
        let depth = 1e6 * 0.005 + 4.0 * MSS as f64;
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
}

//! XCP, the eXplicit Control Protocol (Katabi, Handley, Rohrs, "Congestion
//! Control for High Bandwidth-Delay Product Networks", SIGCOMM 2002): the
//! simulator's explicit-window anchor ([`crate::explicit`]).
//!
//! A sender writes its window, its RTT and the change of window it wants
//! (any) into each packet's header. Every router splits the control in two
//! (§3.5). Once per control interval d, the average RTT, its efficiency
//! controller asks the aggregate traffic to change by
//! φ = α·d·S − β·Q bytes, S the spare capacity and Q the persistent queue;
//! its fairness controller hands an increase out so that every flow's
//! throughput grows by the same amount (additive) and a decrease so that
//! each falls in proportion to its throughput (multiplicative), and
//! shuffles h = max(0, γ·y·d − |φ|) bytes from flow to flow even when φ is
//! zero, so that flows converge to fairness at full utilization. Each
//! packet gets its share of the interval's feedback, p − n, and the router
//! lowers the header's feedback to it; the receiver echoes the header, and
//! the sender adds the feedback to its window (§3.2). On a loss it halves,
//! as TCP does. Test: `xcp_fills_the_link_with_a_near_empty_queue`
//! (tests/anchor_goals.rs).

use std::time::Duration;

use ecnq::signal::{Congestion, Feedback, Law, LawConfig, Mode, RttSample};
use ecnq::wire::ecn::SchemeTag;

use crate::explicit::{header_rtt, ExplicitLaw, Header, LinkState};

/// The efficiency controller's gain on spare capacity (SIGCOMM 2002, §3.5;
/// α = 0.4 and β = 0.226 make it stable for any capacity, delay and number
/// of flows, §4).
const ALPHA: f64 = 0.4;
/// The efficiency controller's gain on the persistent queue (see [`ALPHA`]).
const BETA: f64 = 0.226;
/// The share of the traffic shuffled per control interval (SIGCOMM 2002,
/// §3.5: 10 %).
const GAMMA: f64 = 0.1;
/// The control interval's bounds, and each packet's RTT as the router
/// counts it (the authors' ns-2 router's `XCP_MIN_INTERVAL` and
/// `XCP_MAX_INTERVAL`).
const MIN_INTERVAL: Duration = Duration::from_millis(1);
/// See [`MIN_INTERVAL`].
const MAX_INTERVAL: Duration = Duration::from_secs(1);
/// The control interval until packets carry an RTT (ecnq's choice: the
/// paper's intervals follow the flows' RTTs, which no packet has told yet).
const INITIAL_INTERVAL: Duration = Duration::from_millis(100);
/// The persistent queue is the smallest queue of the last half
/// propagation delay, and at least this long a span (the authors' ns-2
/// router's `Tq_`: max(2 ms, (d − queue delay) / 2)).
const MIN_QUEUE_SPAN: Duration = Duration::from_millis(2);

/// One link's XCP router.
#[derive(Clone, Debug)]
pub struct XcpRouter {
    /// When the current control interval started, and its length d.
    start: Duration,
    interval: Duration,
    /// Bytes that arrived in the interval (y × d).
    input: f64,
    /// Over the interval's packets that carry an RTT: Σ s, Σ rtt·s/cwnd,
    /// and Σ rtt·(rtt·s/cwnd). The last two give the flows' average RTT
    /// (each flow's packets add up to d in the first sum, whatever its
    /// rate), the first two the fairness controller's denominators.
    bytes: f64,
    inverse_rate: f64,
    rtt_inverse_rate: f64,
    /// The persistent queue, bytes: the queue that does not drain within
    /// a propagation delay (§3.5), the smallest one a packet found over the
    /// last [`MIN_QUEUE_SPAN`] or more; and the span being measured: its
    /// start, its length and its smallest queue so far.
    persistent: f64,
    queue_span: (Duration, Duration, Option<u64>),
    /// ξ_p and ξ_n, the interval's per-packet feedback coefficients.
    xi_p: f64,
    xi_n: f64,
    /// What is left of the interval's positive and negative feedback to
    /// hand out, bytes: packets that outnumber the last interval's get
    /// none beyond it (the authors' ns-2 router's residues).
    residue: (f64, f64),
}

impl XcpRouter {
    /// A router whose first control interval starts at `now`.
    pub fn new(now: Duration) -> XcpRouter {
        XcpRouter {
            start: now,
            interval: INITIAL_INTERVAL,
            input: 0.0,
            bytes: 0.0,
            inverse_rate: 0.0,
            rtt_inverse_rate: 0.0,
            persistent: 0.0,
            queue_span: (now, MIN_QUEUE_SPAN, None),
            xi_p: 0.0,
            xi_n: 0.0,
            residue: (0.0, 0.0),
        }
    }

    /// A packet of `len` bytes arrives at `now`: input traffic, the queue
    /// it found, and its flow's window and RTT for the next interval.
    pub fn on_arrival(&mut self, now: Duration, header: &Header, len: u32, link: LinkState) {
        self.advance(now, link);
        let s = f64::from(len);
        self.input += s;
        if let Some((cwnd, rtt)) = window_and_rtt(header) {
            self.bytes += s;
            self.inverse_rate += rtt * s / cwnd;
            self.rtt_inverse_rate += rtt * rtt * s / cwnd;
        }
    }

    /// A packet of `len` bytes leaves at `now`: its feedback
    /// p − n = ξ_p·rtt²·s/cwnd − ξ_n·rtt·s (§3.5) replaces the header's
    /// where it is less; a packet with no RTT yet gets none.
    pub fn on_departure(&mut self, now: Duration, header: &mut Header, len: u32, link: LinkState) {
        self.advance(now, link);
        let mine = match window_and_rtt(header) {
            Some((cwnd, rtt)) => {
                let s = f64::from(len);
                let p = (self.xi_p * rtt * rtt * s / cwnd).min(self.residue.0);
                let n = (self.xi_n * rtt * s).min(self.residue.1);
                self.residue.0 -= p;
                self.residue.1 -= n;
                p - n
            }
            None => 0.0,
        };
        if let Header::Xcp { feedback, .. } = header {
            *feedback = feedback.min(mine as f32);
        }
    }

    /// Ends the control interval if it ended by `now`: the efficiency
    /// controller's φ, the shuffled h, and from them the next interval's
    /// ξ_p and ξ_n (§3.5).
    /// Test: `xcp_feedback_fills_spare_capacity_and_drains_a_queue`.
    fn advance(&mut self, now: Duration, link: LinkState) {
        self.track_queue(now, link);
        while now >= self.start + self.interval {
            let elapsed = self.interval.as_secs_f64();
            self.start += self.interval;
            let d = if self.inverse_rate > 0.0 {
                self.rtt_inverse_rate / self.inverse_rate
            } else {
                elapsed
            };
            let spare = link.capacity - self.input / elapsed;
            let phi = ALPHA * d * spare - BETA * self.persistent;
            let shuffled = (GAMMA * self.input * d / elapsed - phi.abs()).max(0.0);
            self.xi_p = if self.inverse_rate > 0.0 {
                (shuffled + phi.max(0.0)) / (d * self.inverse_rate)
            } else {
                0.0
            };
            self.xi_n = if self.bytes > 0.0 {
                (shuffled + (-phi).max(0.0)) / (d * self.bytes)
            } else {
                0.0
            };
            self.residue = (shuffled + phi.max(0.0), shuffled + (-phi).max(0.0));
            self.interval = Duration::from_secs_f64(d).clamp(MIN_INTERVAL, MAX_INTERVAL);
            self.input = 0.0;
            self.bytes = 0.0;
            self.inverse_rate = 0.0;
            self.rtt_inverse_rate = 0.0;
        }
    }

    /// The queue a packet finds at `now` goes into the span's minimum;
    /// when the span ends, its minimum is the persistent queue, and the
    /// next lasts half the propagation delay, the control interval less
    /// the queue's delay.
    fn track_queue(&mut self, now: Duration, link: LinkState) {
        let (start, span, least) = &mut self.queue_span;
        *least = Some(least.map_or(link.queue_bytes, |q| q.min(link.queue_bytes)));
        if now < *start + *span {
            return;
        }
        self.persistent = least.unwrap_or(0) as f64;
        let queue_delay = link.queue_bytes as f64 / link.capacity.max(1.0);
        let propagation = (self.interval.as_secs_f64() - queue_delay).max(0.0);
        *start = now;
        *span = Duration::from_secs_f64(propagation / 2.0).max(MIN_QUEUE_SPAN);
        *least = Some(link.queue_bytes);
    }
}

/// An XCP header's window (bytes) and RTT (seconds, at most
/// [`MAX_INTERVAL`]), if its sender has an RTT yet.
fn window_and_rtt(header: &Header) -> Option<(f64, f64)> {
    let Header::Xcp { cwnd, rtt, .. } = *header else {
        return None;
    };
    let (cwnd, rtt) = (f64::from(cwnd), f64::from(rtt));
    (rtt > 0.0 && cwnd > 0.0).then(|| (cwnd, rtt.min(MAX_INTERVAL.as_secs_f64())))
}

/// XCP's sender: a window that moves by the feedback its ACKs echo.
#[derive(Clone, Debug)]
pub struct XcpLaw {
    config: LawConfig,
    /// The window, bytes.
    cwnd: f64,
    srtt: Option<Duration>,
    /// When the window last halved for a loss: losses of packets sent
    /// before then are the same congestion event.
    last_cut: Option<Duration>,
}

impl XcpLaw {
    /// A sender at the initial window (RFC 9002's, as every sender here).
    pub fn new(config: LawConfig) -> XcpLaw {
        XcpLaw {
            cwnd: config.initial_window as f64,
            config,
            srtt: None,
            last_cut: None,
        }
    }
}

impl ExplicitLaw for XcpLaw {
    fn header(&self) -> Header {
        Header::Xcp {
            cwnd: self.cwnd as f32,
            rtt: header_rtt(self.srtt),
            feedback: f32::INFINITY,
        }
    }

    /// cwnd ← max(cwnd + H_feedback, s) (§3.2); the window never goes
    /// under one packet nor over the configured cap.
    fn on_echo(&mut self, _now: Duration, header: Header, rtt: &RttSample) {
        self.srtt = Some(rtt.smoothed);
        if let Header::Xcp { feedback, .. } = header {
            if feedback.is_finite() {
                let mss = self.config.mss as f64;
                let cwnd = self.cwnd + f64::from(feedback);
                self.cwnd = cwnd.clamp(mss, self.config.max_window as f64);
            }
        }
    }
}

impl Law for XcpLaw {
    /// A loss halves the window once per congestion event, as TCP does
    /// (SIGCOMM 2002, §3.2); CE never comes (XCP packets are Not-ECT).
    fn on_congestion(&mut self, now: Duration, sent: Duration, _: Congestion, _: &RttSample) {
        if self.last_cut.is_some_and(|cut| sent <= cut) {
            return;
        }
        self.last_cut = Some(now);
        self.cwnd = self.config.clamp(self.cwnd / 2.0);
    }

    fn on_ack(&mut self, _: Duration, _: u64, _: &RttSample) {}

    fn on_feedback(&mut self, _: Duration, _: Feedback, _: &RttSample) {}

    fn window(&self) -> u64 {
        self.cwnd as u64
    }

    fn mode(&self) -> Mode {
        Mode::CongestionAvoidance
    }

    fn tag(&self) -> SchemeTag {
        SchemeTag::UNTAGGED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// One millisecond of a 40 ms-RTT flow with window `cwnd` sending
    /// `bytes` in one packet at `ms`; returns the packet's feedback.
    fn packet(router: &mut XcpRouter, ms: u64, cwnd: f32, bytes: u32, queue: u64) -> f64 {
        let mut header = Header::Xcp {
            cwnd,
            rtt: 0.04,
            feedback: f32::INFINITY,
        };
        router.on_arrival(
            Duration::from_millis(ms),
            &header,
            bytes,
            LinkState::ten_mbit(queue),
        );
        router.on_departure(
            Duration::from_millis(ms),
            &mut header,
            bytes,
            LinkState::ten_mbit(queue),
        );
        match header {
            Header::Xcp { feedback, .. } => f64::from(feedback),
            _ => unreachable!(),
        }
    }

    #[test]
    fn xcp_feedback_fills_spare_capacity_and_drains_a_queue() {
        let mut router = XcpRouter::new(Duration::ZERO);
        // Half the capacity, no queue: positive feedback, about
        // α·d·S = 0.4 × 40 ms × 625 kB/s = 10 kB over an interval, to a flow
        // whose 40 packets an interval share it.
        let mut total = 0.0;
        for ms in 0..400 {
            let fb = packet(&mut router, ms, 25_000.0, 625, 0);
            if ms >= 300 {
                total += fb;
            }
        }
        let per_interval = total / (100.0 / 40.0);
        assert!(
            (8_000.0..12_500.0).contains(&per_interval),
            "{per_interval}"
        );
        // At capacity with a standing queue of 20 kB: negative feedback.
        let mut total = 0.0;
        for ms in 400..800 {
            total += packet(&mut router, ms, 50_000.0, 1250, 20_000);
        }
        assert!(total < 0.0, "{total}");
    }

    #[test]
    fn an_xcp_sender_adds_the_echoed_feedback_and_halves_on_loss() {
        let config = LawConfig::with_mss(1000);
        let mut law = XcpLaw::new(config);
        let rtt = RttSample::uniform(Duration::from_millis(40));
        assert_eq!(law.window(), 10_000);
        let echo = |feedback| Header::Xcp {
            cwnd: 0.0,
            rtt: 0.0,
            feedback,
        };
        law.on_echo(MS, echo(500.0), &rtt);
        assert_eq!(law.window(), 10_500);
        law.on_echo(MS, echo(f32::INFINITY), &rtt);
        assert_eq!(law.window(), 10_500);
        law.on_echo(MS, echo(-1e9), &rtt);
        assert_eq!(law.window(), 1000);
        law.on_echo(MS, echo(9000.0), &rtt);
        law.on_congestion(2 * MS, MS, Congestion::Loss, &rtt);
        law.on_congestion(3 * MS, MS, Congestion::Loss, &rtt);
        assert_eq!(law.window(), 5000);
    }
}

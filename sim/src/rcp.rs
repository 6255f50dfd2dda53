//! RCP, the Rate Control Protocol (Dukkipati and McKeown, "Processor
//! Sharing Flows in the Internet", IWQoS 2005; "Why Flow-Completion Time is
//! the Right Metric for Congestion Control", CCR 2006): the simulator's
//! explicit-rate anchor for flow completion times ([`crate::explicit`]).
//!
//! Every router keeps one rate R for its link and updates it every
//! interval T from the spare capacity and the queue,
//! R ← R·(1 + (T/d)·(α(C − y) − β·q/d)/C) (IWQoS 2005, eq. 1), with no
//! count of flows. It writes R into each passing packet's header unless
//! the header already holds less, so the header arrives with the path's
//! smallest R, and the receiver echoes it. In the paper a flow's SYN
//! picks up R, and the flow sends at R from its first round trip of data.
//! In the simulator the server's handshake flight plays the SYN's part: it
//! carries the header, the client's Finished echoes it, and the sender
//! paces its first data at that rate (newcomers that sent an initial
//! window of unpaced packets instead raised the queue, and the queue term
//! lowered R for every flow); a sender that has no rate yet sends one
//! packet alone. From then on it paces at the rate each ACK echoes. It keeps that rate through loss (the
//! authors' ns-2 sender retransmits and keeps the router's rate). Test:
//! `rcp_finishes_flows_close_to_processor_sharing` (tests/anchor_goals.rs).

use std::time::Duration;

use ecnq::signal::{Congestion, Feedback, Law, LawConfig, Mode, RttSample};
use ecnq::wire::ecn::SchemeTag;

use crate::explicit::{header_rtt, ExplicitLaw, Header, LinkState};

/// The gain on spare capacity (CCR 2006, §3: α = 0.1, β = 1, the values of
/// the paper's AFCT figures).
const ALPHA: f64 = 0.1;
/// The gain on the queue (see [`ALPHA`]).
const BETA: f64 = 1.0;
/// The longest update interval: T = min(10 ms, d) (Dukkipati's thesis,
/// §3.2; the authors' ns-2 router's `upd_timeslot_`, bounded by d).
const MAX_INTERVAL: Duration = Duration::from_millis(10);
/// R never falls under one packet of this size per average RTT (the
/// authors' ns-2 router floors it at `min_pprtt_` packets per RTT).
const FLOOR_PACKET: f64 = 1500.0;

/// One link's RCP router.
#[derive(Clone, Debug)]
pub struct RcpRouter {
    /// R, bytes per second: the link's capacity at first, so that a lone
    /// flow on an idle link sends at once at all the link can carry.
    rate: f64,
    /// d, the average RTT of the packets that carry one, seconds; none
    /// until a packet does.
    rtt: Option<f64>,
    /// When the current interval started, and its length T.
    start: Duration,
    interval: Duration,
    /// Bytes that arrived in the current interval (y × T).
    input: f64,
    /// Σ rtt·bytes and Σ bytes over the packets of the interval that carry
    /// an RTT: their mean is this interval's RTT sample.
    rtt_bytes: f64,
    rtt_weight: f64,
}

impl RcpRouter {
    /// A router whose first interval starts at `now`, on a link of
    /// `capacity` bytes per second.
    pub fn new(now: Duration, capacity: f64) -> RcpRouter {
        RcpRouter {
            rate: capacity,
            rtt: None,
            start: now,
            interval: MAX_INTERVAL,
            input: 0.0,
            rtt_bytes: 0.0,
            rtt_weight: 0.0,
        }
    }

    /// R, bytes per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// A packet of `len` bytes arrives at `now`: it is input traffic, and
    /// its RTT, if it carries one, goes into d.
    pub fn on_arrival(&mut self, now: Duration, header: &Header, len: u32, link: LinkState) {
        self.advance(now, link);
        let len = f64::from(len);
        self.input += len;
        if let Header::Rcp { rtt, .. } = *header {
            if rtt > 0.0 {
                self.rtt_bytes += f64::from(rtt) * len;
                self.rtt_weight += len;
            }
        }
    }

    /// A packet leaves at `now`: R goes into its header where it is less
    /// than what the header holds (the path's minimum).
    pub fn on_departure(&mut self, now: Duration, header: &mut Header, link: LinkState) {
        self.advance(now, link);
        if let Header::Rcp { rate, .. } = header {
            *rate = rate.min(self.rate as f32);
        }
    }

    /// Ends every interval that ended by `now`. An interval ends with the
    /// queue as it is when the next packet comes; every departure is one,
    /// so a busy link's queue is read within a packet's time.
    /// Test: `rcp_rate_falls_with_a_queue_and_rises_on_spare_capacity`.
    fn advance(&mut self, now: Duration, link: LinkState) {
        while now >= self.start + self.interval {
            let t = self.interval.as_secs_f64();
            self.start += self.interval;
            if self.rtt_weight > 0.0 {
                let sample = self.rtt_bytes / self.rtt_weight;
                // d is a moving average of the packets' RTTs (IWQoS 2005,
                // §2) over about one d.
                self.rtt = Some(match self.rtt {
                    Some(d) => d + (t / d).min(1.0) * (sample - d),
                    None => sample,
                });
            }
            if let Some(d) = self.rtt {
                let (c, y, q) = (link.capacity, self.input / t, link.queue_bytes as f64);
                let change = (t / d) * (ALPHA * (c - y) - BETA * q / d) / c;
                self.rate = (self.rate * (1.0 + change)).clamp(FLOOR_PACKET / d, c);
                self.interval = MAX_INTERVAL.min(Duration::from_secs_f64(d));
            }
            self.input = 0.0;
            self.rtt_bytes = 0.0;
            self.rtt_weight = 0.0;
        }
    }
}

/// RCP's sender: one packet, then the rate its ACKs echo.
#[derive(Clone, Debug)]
pub struct RcpLaw {
    config: LawConfig,
    /// The rate the path offered, bytes per second; none before the first
    /// ACK brings it.
    rate: Option<f64>,
    srtt: Option<Duration>,
}

impl RcpLaw {
    /// A sender that has sent nothing yet.
    pub fn new(config: LawConfig) -> RcpLaw {
        RcpLaw {
            config,
            rate: None,
            srtt: None,
        }
    }
}

impl Law for RcpLaw {
    fn on_ack(&mut self, _: Duration, _: u64, _: &RttSample) {}

    fn on_feedback(&mut self, _: Duration, _: Feedback, _: &RttSample) {}

    fn on_congestion(&mut self, _: Duration, _: Duration, _: Congestion, _: &RttSample) {}

    /// One packet until the rate is known (the SYN's round trip); then
    /// what the rate carries over a round trip, which bounds what is in
    /// flight while ACKs do not come back.
    fn window(&self) -> u64 {
        match (self.rate, self.srtt) {
            (Some(rate), Some(srtt)) => self.config.clamp(rate * srtt.as_secs_f64()) as u64,
            _ => self.config.mss,
        }
    }

    fn pacing_rate(&self) -> Option<f64> {
        self.rate
    }

    fn mode(&self) -> Mode {
        Mode::ExplicitRate
    }

    fn tag(&self) -> SchemeTag {
        SchemeTag::UNTAGGED
    }
}

impl ExplicitLaw for RcpLaw {
    fn header(&self) -> Header {
        Header::Rcp {
            rate: f32::INFINITY,
            rtt: header_rtt(self.srtt),
        }
    }

    /// The SYN's header: the handshake picks up the path's rate.
    fn handshake_header(&self) -> Header {
        self.header()
    }

    fn on_echo(&mut self, _now: Duration, header: Header, rtt: &RttSample) {
        self.srtt = Some(rtt.smoothed);
        if let Header::Rcp { rate, .. } = header {
            if rate.is_finite() {
                self.rate = Some(f64::from(rate));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn packet(rtt: f32) -> Header {
        Header::Rcp {
            rate: f32::INFINITY,
            rtt,
        }
    }

    /// Feeds `bytes_per_ms` of 40 ms-RTT traffic for `ms` milliseconds.
    fn feed(router: &mut RcpRouter, from: u64, ms: u64, bytes_per_ms: u32, queue: u64) {
        for i in from..from + ms {
            router.on_arrival(
                Duration::from_millis(i),
                &packet(0.04),
                bytes_per_ms,
                LinkState::ten_mbit(queue),
            );
        }
    }

    #[test]
    fn rcp_rate_falls_with_a_queue_and_rises_on_spare_capacity() {
        let mut router = RcpRouter::new(Duration::ZERO, 1.25e6);
        // Input at capacity with no queue: R stays at C.
        feed(&mut router, 0, 200, 1250, 0);
        assert!((router.rate() - 1.25e6).abs() < 1.0, "{}", router.rate());
        // Twice the capacity and a standing queue: R falls.
        feed(&mut router, 200, 200, 2500, 50_000);
        let low = router.rate();
        assert!(low < 0.5e6, "{low}");
        // Half the capacity and no queue: R climbs back, by
        // (T/d)·α·(C − y)/C = 1.25 % per 10 ms interval.
        feed(&mut router, 400, 1000, 625, 0);
        assert!(router.rate() > 2.0 * low, "{} after {low}", router.rate());
        // The header keeps the smallest R on the path.
        let mut header = packet(0.04);
        router.on_departure(1400 * MS, &mut header, LinkState::ten_mbit(0));
        assert_eq!(
            header,
            Header::Rcp {
                rate: router.rate() as f32,
                rtt: 0.04
            }
        );
        let mut lower = Header::Rcp {
            rate: 1.0,
            rtt: 0.04,
        };
        router.on_departure(1400 * MS, &mut lower, LinkState::ten_mbit(0));
        assert_eq!(
            lower,
            Header::Rcp {
                rate: 1.0,
                rtt: 0.04
            }
        );
    }

    #[test]
    fn an_rcp_sender_sends_one_packet_then_paces_at_the_echoed_rate() {
        let config = LawConfig::with_mss(1000);
        let mut law = RcpLaw::new(config);
        assert_eq!((law.window(), law.pacing_rate()), (1000, None));
        let rtt = RttSample::uniform(Duration::from_millis(40));
        law.on_echo(
            Duration::ZERO,
            Header::Rcp {
                rate: 1e6,
                rtt: 0.0,
            },
            &rtt,
        );
        assert_eq!(law.pacing_rate(), Some(1e6));
        assert_eq!(law.window(), 40_000);
        // A loss leaves the rate alone: the router sets it.
        law.on_congestion(MS, MS, Congestion::Loss, &rtt);
        assert_eq!(law.pacing_rate(), Some(1e6));
        assert_eq!(
            law.header(),
            Header::Rcp {
                rate: f32::INFINITY,
                rtt: 0.04
            }
        );
    }
}

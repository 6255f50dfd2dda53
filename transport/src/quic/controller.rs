//! The adapter that puts a core [`Law`](crate::Law) (or one of quinn's own
//! controllers) behind quinn's `congestion::Controller`, wired to one
//! connection's feedback.

use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

use quinn_proto::congestion::{Controller, ControllerFactory, ControllerMetrics};
use quinn_proto::RttEstimator;

use super::peer::Sending;
use super::peer::{law_level, note_law_change, Active, Peer, PeerMode};
use crate::cubic::CubicLaw;
use crate::ecn::SchemeTag;
use crate::signal::{Congestion, LawConfig, Mode, RttSample};

/// Builds the controller of one connection. quinn calls it once per path;
/// every controller it builds shares that connection's feedback state.
pub struct EcnqControllerFactory {
    peer: Arc<Peer>,
}

impl std::fmt::Debug for EcnqControllerFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EcnqControllerFactory")
            .field("cc", &self.peer.cc)
            .finish_non_exhaustive()
    }
}

impl EcnqControllerFactory {
    pub(crate) fn new(peer: Arc<Peer>) -> EcnqControllerFactory {
        EcnqControllerFactory { peer }
    }
}

impl ControllerFactory for EcnqControllerFactory {
    fn build(self: Arc<Self>, _now: Instant, _current_mtu: u16) -> Box<dyn Controller> {
        Box::new(EcnqController {
            peer: self.peer.clone(),
        })
    }
}

/// quinn's view of an ecnq connection's congestion control.
struct EcnqController {
    peer: Arc<Peer>,
}

fn rtt_sample(rtt: &RttEstimator) -> RttSample {
    RttSample {
        smoothed: rtt.get(),
        min: rtt.min(),
        // quinn exposes the latest sample only as max(smoothed, latest).
        latest: rtt.conservative(),
    }
}

impl EcnqController {
    /// Replaces the scheme's law by Cubic at the law's window once the peer
    /// turned out not to run ecnq or its reports stopped: without router
    /// feedback, a loss-based law that holds its own next to today's traffic
    /// (a law still in slow start stays in it).
    fn follow_mode(&self, tx: &mut Sending) {
        let mode = self.peer.mode();
        if let Active::Law(law) = &tx.active {
            if mode.is_fallback() && law.tag() != SchemeTag::UNTAGGED {
                let window = law.window();
                tracing::info!(window, mode = mode.name(), "law replaced by Cubic");
                let mut cubic = CubicLaw::new(LawConfig {
                    initial_window: window,
                    ..tx.config
                });
                if law.mode() != Mode::SlowStart {
                    cubic.set_window(window as f64);
                }
                tx.active = Active::Law(Box::new(cubic));
            }
        }
    }
}

impl Controller for EcnqController {
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
        let mut tx = self.peer.sending();
        let tx = &mut *tx;
        tx.in_flight = tx.in_flight.saturating_add(bytes);
        if let Some(rate) = tx.law_rate() {
            let since = self.peer.since_epoch(now);
            tx.gate
                .on_sent(since, bytes + tx.header_bytes, rate, tx.config.mss);
        }
        if let Active::Quinn(c) = &mut tx.active {
            c.on_sent(now, bytes, last_packet_number);
        }
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        let mut tx = self.peer.sending();
        let tx = &mut *tx;
        tx.rtt = rtt_sample(rtt);
        let since = self.peer.since_epoch(now);
        self.peer.check_report_timeout(tx, since);
        self.follow_mode(tx);
        match &mut tx.active {
            Active::Law(law) if !app_limited => {
                let before = law_level(law.as_ref());
                law.on_ack(since, bytes, &tx.rtt);
                note_law_change(law.as_ref(), before, &mut tx.md_events, "ack");
            }
            Active::Law(_) => {}
            Active::Quinn(c) => c.on_ack(now, sent, bytes, app_limited, rtt),
        }
        self.peer.publish(tx);
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        largest_packet_num_acked: Option<u64>,
    ) {
        let mut tx = self.peer.sending();
        tx.in_flight = in_flight;
        if let Active::Quinn(c) = &mut tx.active {
            c.on_end_acks(now, in_flight, app_limited, largest_packet_num_acked);
        }
        self.peer.publish(&tx);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        let mut tx = self.peer.sending();
        let tx = &mut *tx;
        self.follow_mode(tx);
        tx.in_flight = tx.in_flight.saturating_sub(lost_bytes);
        let ce = lost_bytes == 0;
        match &mut tx.active {
            // CE on an ecnq path is the scheme's own overload code (the
            // receiver's report carries it to the law), unless the scheme
            // never uses CE as a code.
            Active::Law(_)
                if ce && self.peer.mode() == PeerMode::Ecnq && !self.peer.ce_is_congestion() => {}
            Active::Law(law) => {
                let kind = if ce { Congestion::Ce } else { Congestion::Loss };
                let before = law_level(law.as_ref());
                let (now, sent) = (self.peer.since_epoch(now), self.peer.since_epoch(sent));
                law.on_congestion(now, sent, kind, &tx.rtt);
                note_law_change(law.as_ref(), before, &mut tx.md_events, "congestion");
            }
            Active::Quinn(c) => {
                c.on_congestion_event(now, sent, is_persistent_congestion, lost_bytes)
            }
        }
        self.peer.publish(tx);
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        // Laws keep their packet unit: the MSS only scales their AI step.
        if let Active::Quinn(c) = &mut self.peer.sending().active {
            c.on_mtu_update(new_mtu);
        }
    }

    fn window(&self) -> u64 {
        self.peer.quinn_window(Instant::now())
    }

    fn metrics(&self) -> ControllerMetrics {
        let tx = self.peer.sending();
        match &tx.active {
            Active::Quinn(c) => c.metrics(),
            Active::Law(_) => {
                let mut metrics = ControllerMetrics::default();
                metrics.congestion_window = self.peer.window();
                metrics
            }
        }
    }

    /// quinn clones a controller for a new path; ecnq state is per connection,
    /// so the clone shares it.
    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(EcnqController {
            peer: self.peer.clone(),
        })
    }

    fn initial_window(&self) -> u64 {
        self.peer.sending().config.initial_window
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

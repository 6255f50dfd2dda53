//! quinn's `congestion::Controller` for an ecnq connection: the calls go to
//! the connection's [`Session`](crate::session::Session), whose law decides.
//! With `--cc newreno | cubic` the factory builds quinn's own controller
//! instead, as a vanilla quinn connection runs it.

use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quinn_proto::congestion::{
    Controller, ControllerFactory, ControllerMetrics, CubicConfig, NewRenoConfig,
};
use quinn_proto::RttEstimator;

use super::congestion::CongestionControl;
use super::peer::Peer;
use crate::session::PeerEvent;
use crate::signal::RttSample;

/// Builds the controller of one connection. quinn calls it once per path;
/// every controller it builds shares that connection's session.
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
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        match self.peer.cc {
            CongestionControl::Ecnq(_) | CongestionControl::Bbr => Box::new(SessionController {
                peer: self.peer.clone(),
            }),
            CongestionControl::Cubic => Arc::new(CubicConfig::default()).build(now, current_mtu),
            CongestionControl::NewReno => {
                Arc::new(NewRenoConfig::default()).build(now, current_mtu)
            }
        }
    }
}

/// quinn's view of an ecnq connection's law.
struct SessionController {
    peer: Arc<Peer>,
}

/// quinn's estimate, with `latest` the round trip of the packet just
/// acknowledged, as the simulator's sender gives it: quinn exposes its own
/// latest sample only as max(smoothed, latest), which never falls below
/// the smoothed RTT, so a law that tracks the smallest recent RTT (BBR's
/// 10-second minimum, Prague's per round) read its own queue in it.
fn rtt_sample(rtt: &RttEstimator, latest: Duration) -> RttSample {
    RttSample {
        smoothed: rtt.get(),
        min: rtt.min(),
        latest,
    }
}

impl Controller for SessionController {
    fn on_sent(&mut self, now: Instant, bytes: u64, _last_packet_number: u64) {
        let now = self.peer.since_epoch(now);
        self.peer.session().on_sent(now, bytes);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        let rtt = rtt_sample(rtt, now.saturating_duration_since(sent));
        let acked = PeerEvent::Acked {
            bytes,
            app_limited,
            rtt,
        };
        self.peer.on_peer(now, acked);
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        _app_limited: bool,
        _largest_packet_num_acked: Option<u64>,
    ) {
        self.peer.on_peer(now, PeerEvent::AcksDone { in_flight });
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        _is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        let sent = self.peer.since_epoch(sent);
        let congestion = PeerEvent::Congestion { sent, lost_bytes };
        self.peer.on_peer(now, congestion);
    }

    // Laws keep their packet unit on an MTU update: the MSS only scales their AI step.
    fn on_mtu_update(&mut self, _new_mtu: u16) {}

    fn window(&self) -> u64 {
        self.peer.quinn_window(Instant::now())
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut metrics = ControllerMetrics::default();
        metrics.congestion_window = self.peer.published().window();
        metrics
    }

    /// quinn clones a controller for a new path; ecnq state is per connection,
    /// so the clone shares it.
    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(SessionController {
            peer: self.peer.clone(),
        })
    }

    fn initial_window(&self) -> u64 {
        self.peer.reading().config().initial_window
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

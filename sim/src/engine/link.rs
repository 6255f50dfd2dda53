//! A one-way link's state: the core's bottleneck (queue, router marking and
//! meter) served at the link rate, then a constant-delay pipe; its counters
//! and its time-series row. `network` drives packets through it.

use std::collections::VecDeque;
use std::time::Duration;

use ecnq::router::bottleneck::{Bottleneck, BottleneckConfig, Class, CLASSES};
use ecnq::router::capacity::LinkRate;
use ecnq::router::{MarkCounters, RouterConfig};
use ecnq::statistics::SojournHistogram;
use ecnq::LinkLoad;

use super::clock::{dur, Nanos};
use super::config::LinkSpec;
use super::packet::{Packet, PacketKind};
use crate::explicit::{Header, LinkState};
use crate::rcp::RcpRouter;
use crate::xcp::XcpRouter;

/// Counters over a link's measured period.
#[derive(Clone, Debug, Default)]
pub struct LinkStats {
    /// Packets offered.
    pub arrived_packets: u64,
    /// Bytes offered.
    pub arrived_bytes: u64,
    /// Packets dropped by the full buffer.
    pub dropped_packets: u64,
    /// Packets lost on the wire (random loss).
    pub lost_packets: u64,
    /// Packets transmitted.
    pub departed_packets: u64,
    /// Bytes transmitted.
    pub departed_bytes: u64,
    /// ∫ queue bytes dt, in byte·ns.
    pub queue_byte_ns: f64,
    /// ∫ queue packets dt, in packet·ns.
    pub queue_packet_ns: f64,
    /// Largest queue in packets.
    pub peak_queue_packets: u64,
    /// Largest queue in bytes.
    pub peak_queue_bytes: u64,
    /// Histograms of the queue (packets) each arriving packet found in its
    /// class, indexed by [`Class`] (a FIFO link's only queue is the ecnq
    /// class's).
    pub queue_seen: [Vec<u64>; CLASSES],
    /// Classic packets CoDel dropped (dual-queue links).
    pub aqm_drops: u64,
}

/// A link as the engine runs it.
#[derive(Debug)]
pub struct Link {
    /// The configuration.
    pub spec: LinkSpec,
    pub(super) bottleneck: Option<Bottleneck<Packet>>,
    pub(super) pipe: VecDeque<(Nanos, Packet)>,
    /// RCP's and XCP's routers, for the packets that carry their headers.
    explicit: ExplicitRouters,
    last_queue_change: Nanos,
    pub(super) sample_departed: u64,
    /// Counters since `measure_from`.
    pub stats: LinkStats,
    /// The bottleneck's sojourn histograms at `measure_from` (they count
    /// from the start of the run).
    sojourns_at_measure: [SojournHistogram; CLASSES],
}

impl Link {
    /// A link; `seed` drives its AQM's random draws.
    pub(super) fn new(spec: LinkSpec, seed: u64) -> Link {
        let bottleneck = spec.rate.map(|bps| {
            let mut router = RouterConfig::new(bps / 8.0, 0);
            router.classic_threshold = spec.ecn_threshold.max(1);
            router.mode = spec.marking;
            let rate = spec
                .varies
                .clone()
                .unwrap_or(LinkRate::Fixed(bps.round() as u64));
            let config = BottleneckConfig {
                rate: Some(rate),
                capacity: spec.capacity,
                limit: spec.buffer,
                discipline: spec.discipline,
                router,
                seed,
            };
            Bottleneck::new(config, Duration::ZERO)
        });
        Link {
            spec,
            bottleneck,
            pipe: VecDeque::new(),
            explicit: ExplicitRouters::default(),
            last_queue_change: 0,
            sample_departed: 0,
            stats: LinkStats::default(),
            sojourns_at_measure: Default::default(),
        }
    }

    /// Packets queued, in transmission or propagating.
    pub fn packets_inside(&self) -> usize {
        let serializing = self.bottleneck.as_ref().map_or(0, |b| {
            b.queue_packets() + usize::from(b.next_departure().is_some())
        });
        serializing + self.pipe.len()
    }

    /// Waiting packets.
    pub fn queue_packets(&self) -> usize {
        self.bottleneck
            .as_ref()
            .map_or(0, Bottleneck::queue_packets)
    }

    /// Waiting bytes.
    pub fn queue_bytes(&self) -> u64 {
        self.bottleneck.as_ref().map_or(0, Bottleneck::queue_bytes)
    }

    /// The router's mark counters (None for pure delays).
    pub fn mark_counters(&self) -> Option<&MarkCounters> {
        self.bottleneck.as_ref().map(|b| b.router().counters())
    }

    /// The bottleneck (None for pure delays).
    pub fn bottleneck(&self) -> Option<&Bottleneck<Packet>> {
        self.bottleneck.as_ref()
    }

    /// The sojourns of the packets that left `class`'s queue since
    /// `measure_from` (from arrival to the start of serialization).
    pub fn sojourns(&self, class: Class) -> SojournHistogram {
        let at_measure = &self.sojourns_at_measure[class as usize];
        self.bottleneck
            .as_ref()
            .map_or_else(SojournHistogram::new, |b| {
                b.sojourns(class).since(at_measure)
            })
    }

    /// The measured period starts: [`Link::sojourns`] counts from here.
    pub(super) fn start_measuring_sojourns(&mut self) {
        if let Some(b) = &self.bottleneck {
            self.sojourns_at_measure = Class::ALL.map(|class| b.sojourns(class).clone());
        }
    }

    /// Bytes a link whose rate varies could carry from `from` to `to`:
    /// the capacity in force, for its utilization (`None` for a fixed
    /// rate, whose figures keep their own formula).
    pub fn varying_capacity_bytes(&self, from: Nanos, to: Nanos) -> Option<f64> {
        self.spec.varies.as_ref()?;
        self.bottleneck.as_ref()?.capacity_bytes(dur(from), dur(to))
    }

    /// The link's router restarts at `now`, its state lost.
    pub(super) fn restart_router(&mut self, now: Nanos) {
        if let Some(b) = self.bottleneck.as_mut() {
            b.restart_router(dur(now));
        }
        self.explicit = ExplicitRouters::default();
    }

    /// `pkt` arrives at the link at `now` (or, with `departs`, leaves it):
    /// RCP's and XCP's routers count it, and read or write the header of
    /// a data packet or of the server's handshake flight (RCP's SYN). An ACK's header is the echo of its data packet's,
    /// which no router on the way back touches. A pure delay has no router.
    pub(super) fn explicit(&mut self, now: Nanos, pkt: &mut Packet, departs: bool) {
        if self.explicit.idle() && pkt.explicit == Header::None {
            return;
        }
        let Some(b) = self.bottleneck.as_ref() else {
            return;
        };
        let state = LinkState {
            capacity: b.capacity(),
            queue_bytes: b.queue_bytes(),
        };
        let mut echo = Header::None;
        let header = match pkt.kind {
            PacketKind::Data | PacketKind::ServerHandshake => &mut pkt.explicit,
            _ => &mut echo,
        };
        let (now, routers) = (dur(now), &mut self.explicit);
        if departs {
            routers.on_departure(now, header, pkt.len, state);
        } else {
            routers.on_arrival(now, header, pkt.len, state);
        }
    }

    /// Adds the queue since the last change to the integrals and peaks.
    pub(super) fn account_queue(&mut self, now: Nanos) {
        let (bytes, packets) = (self.queue_bytes(), self.queue_packets() as u64);
        let dt = (now - self.last_queue_change) as f64;
        self.stats.queue_byte_ns += bytes as f64 * dt;
        self.stats.queue_packet_ns += packets as f64 * dt;
        self.last_queue_change = now;
        self.stats.peak_queue_packets = self.stats.peak_queue_packets.max(packets);
        self.stats.peak_queue_bytes = self.stats.peak_queue_bytes.max(bytes);
    }
}

/// The RCP and XCP routers of one link, each made when the first packet
/// with its header reaches the link, so that a link that carries neither
/// does nothing more. Once made, a router counts every packet that
/// arrives as its link's input traffic, whatever its header.
#[derive(Debug, Default)]
struct ExplicitRouters {
    rcp: Option<RcpRouter>,
    xcp: Option<XcpRouter>,
}

impl ExplicitRouters {
    /// Whether neither router runs yet.
    fn idle(&self) -> bool {
        self.rcp.is_none() && self.xcp.is_none()
    }

    /// A packet of `len` bytes with header `header` arrives at the link at
    /// `now` (before its queue takes or drops it).
    fn on_arrival(&mut self, now: Duration, header: &mut Header, len: u32, link: LinkState) {
        match header {
            Header::Rcp { .. } if self.rcp.is_none() => {
                self.rcp = Some(RcpRouter::new(now, link.capacity));
            }
            Header::Xcp { .. } if self.xcp.is_none() => self.xcp = Some(XcpRouter::new(now)),
            _ => {}
        }
        if let Some(rcp) = self.rcp.as_mut() {
            rcp.on_arrival(now, header, len, link);
        }
        if let Some(xcp) = self.xcp.as_mut() {
            xcp.on_arrival(now, header, len, link);
        }
    }

    /// A packet of `len` bytes with header `header` leaves the link at `now`.
    fn on_departure(&mut self, now: Duration, header: &mut Header, len: u32, link: LinkState) {
        if let Some(rcp) = self.rcp.as_mut() {
            rcp.on_departure(now, header, link);
        }
        if let Some(xcp) = self.xcp.as_mut() {
            xcp.on_departure(now, header, len, link);
        }
    }
}

/// One time-series row for a link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkSample {
    /// End of the sampling period.
    pub time: Nanos,
    /// Link index.
    pub link: u32,
    /// Departures over capacity in the period (the capacity in force, on
    /// a link whose rate varies).
    pub utilization: f64,
    /// The capacity in force over the period, bits per second.
    pub capacity_bps: f64,
    /// The capacity its router meters against now, bits per second (what
    /// it measured, with `capacity = "measured"`).
    pub router_bps: f64,
    /// Waiting packets now.
    pub queue_packets: u64,
    /// Waiting bytes now.
    pub queue_bytes: u64,
    /// Every formula's load figure of the last completed interval.
    pub load: LinkLoad,
}

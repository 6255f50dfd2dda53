//! One router output link's measuring and marking, as the simulator drives
//! it. This is a thin adapter over the core's [`LoadFactorMeter`] and
//! markers, shaped like the planned `ecnq::router::RouterLink` so it can be
//! swapped for it: arrivals are counted before the drop decision, packets
//! are marked by their DSCP scheme tag, untagged ECT packets get classic CE
//! above a queue threshold and Not-ECT packets are only queued.

use std::time::Duration;

use ecnq::signal::{LinkState, Marker, PacketMarks};
use ecnq::vcp::VcpMarker;
use ecnq::{Ecn, LinkLoad, LoadFactorMeter, MeterConfig, WireScheme};

/// Marks counted by what the router wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MarkCounters {
    /// Packets that left the marker with each codepoint (index = ECN bits).
    pub by_codepoint: [u64; 4],
    /// Untagged ECT packets the classic AQM marked CE.
    pub classic_ce: u64,
}

/// A router output link's meter and markers.
#[derive(Clone, Debug)]
pub struct RouterPort {
    meter: LoadFactorMeter,
    vcp: VcpMarker,
    classic_threshold: u64,
    counters: MarkCounters,
}

impl RouterPort {
    /// A port on a link of `capacity` bytes per second; untagged ECT packets
    /// are marked CE while the queue holds at least `classic_threshold` bytes.
    pub fn new(capacity: f64, classic_threshold: u64, now: Duration) -> RouterPort {
        RouterPort {
            meter: LoadFactorMeter::new(MeterConfig::new(capacity), now),
            vcp: VcpMarker,
            classic_threshold,
            counters: MarkCounters::default(),
        }
    }

    /// A packet arrives: count it (before any drop) and rewrite its marks.
    #[inline]
    pub fn on_arrival(&mut self, now: Duration, len: u32, queue_bytes: u64, pkt: &mut PacketMarks) {
        self.meter.on_arrival(now, len);
        if !pkt.ecn.is_ect() {
            return;
        }
        let link = LinkState {
            load: *self.meter.load(),
            queue_bytes,
        };
        match WireScheme::from_id(pkt.tag.wire_id) {
            WireScheme::Vcp => self.vcp.mark(now, &link, pkt),
            WireScheme::Classic => {
                if queue_bytes >= self.classic_threshold && pkt.ecn != Ecn::Ce {
                    pkt.ecn = Ecn::Ce;
                    self.counters.classic_ce += 1;
                }
            }
            // Schemes whose markers are not in the core yet cannot be built
            // into a scenario (see `Protocol::available`), so none arrive here.
            _ => {}
        }
        self.counters.by_codepoint[usize::from(pkt.ecn.bits())] += 1;
    }

    /// The queue changed (after every enqueue, dequeue or drop).
    #[inline]
    pub fn on_queue(&mut self, now: Duration, queue_bytes: u64) {
        self.meter.on_queue(now, queue_bytes);
    }

    /// A packet left the link.
    #[inline]
    pub fn on_departure(&mut self, now: Duration, len: u32) {
        self.meter.on_departure(now, len);
    }

    /// The load figures of the last completed interval, as of `now`.
    pub fn load(&mut self, now: Duration) -> LinkLoad {
        self.meter.advance(now);
        *self.meter.load()
    }

    /// What the marker wrote so far.
    pub fn counters(&self) -> &MarkCounters {
        &self.counters
    }
}

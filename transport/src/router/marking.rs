//! `RouterLink`: everything a router does to packets entering one output
//! link — measure the link, pick the marking from the packet's scheme tag (or
//! a forced scheme), rewrite the marks — in one sans-IO value the router shim
//! and the simulator both drive.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::router::meter::{IntervalStats, LoadFactorMeter, MeterConfig};
use crate::schemes::registry::{Scheme, WIRES};
use crate::signal::flow_table::FlowTableConfig;
use crate::signal::{LinkState, Marker, MarkerConfig, PacketMarks};
use crate::wire::ecn::{Ecn, WireScheme};

/// Which marking a link applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkingMode {
    /// By each packet's DSCP scheme tag; untagged (and unassigned ids) get
    /// classic CE marking.
    Auto,
    /// One scheme's marking for every packet, whatever its tag.
    Forced(WireScheme),
    /// Measure only; never rewrite.
    Off,
}

impl FromStr for MarkingMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(MarkingMode::Auto),
            "off" => Ok(MarkingMode::Off),
            other => other
                .parse::<Scheme>()
                .map(|scheme| MarkingMode::Forced(scheme.wire()))
                .map_err(|_| {
                    format!(
                        "unknown marking mode `{s}` (expected auto, off or a scheme: {})",
                        Scheme::names()
                    )
                }),
        }
    }
}

impl fmt::Display for MarkingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MarkingMode::Auto => f.write_str("auto"),
            MarkingMode::Off => f.write_str("off"),
            MarkingMode::Forced(w) => f.write_str(w.name()),
        }
    }
}

/// How a router link is measured and marked.
#[derive(Clone, Debug, PartialEq)]
pub struct RouterConfig {
    /// Capacity, t_p and formula parameters.
    pub meter: MeterConfig,
    /// Which marking applies.
    pub mode: MarkingMode,
    /// Queue (bytes) at which classic ECT traffic is CE-marked.
    pub classic_threshold: u64,
    /// MPCP's per-flow table.
    pub flows: FlowTableConfig,
}

impl RouterConfig {
    /// Defaults for a link of `capacity` bytes per second with a buffer of
    /// `buffer_bytes`: the papers' meter, auto marking, classic marking from
    /// half the buffer (before the tail drops), 65 536 flows.
    pub fn new(capacity: f64, buffer_bytes: u64) -> RouterConfig {
        RouterConfig {
            meter: MeterConfig::new(capacity),
            mode: MarkingMode::Auto,
            classic_threshold: (buffer_bytes / 2).max(1),
            flows: FlowTableConfig::default(),
        }
    }
}

/// Packets that left the marker, by wire scheme and final codepoint, and how
/// many of them the marker changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MarkCounters {
    /// `[wire index][codepoint]`: packets by the scheme they were marked as
    /// ([`WireScheme::index`]) and the codepoint they left with.
    pub by_scheme: [[u64; 4]; WIRES.len()],
    /// Packets whose ECN or tag the marker rewrote.
    pub rewritten: u64,
}

impl MarkCounters {
    /// Packets of `wire` that left with `ecn`.
    pub fn get(&self, wire: WireScheme, ecn: Ecn) -> u64 {
        self.by_scheme[wire.index()][usize::from(ecn.bits())]
    }

    /// Packets of each wire scheme that left with each codepoint, with the
    /// scheme.
    pub fn iter(&self) -> impl Iterator<Item = (WireScheme, &[u64; 4])> {
        WireScheme::all().zip(&self.by_scheme)
    }
}

/// Measurement and marking of one output link (see module docs).
#[derive(Debug)]
pub struct RouterLink {
    /// What the link was built from, to build it again on a restart.
    config: RouterConfig,
    meter: LoadFactorMeter,
    mode: MarkingMode,
    /// One marker per wire scheme, by [`WireScheme::index`].
    markers: Vec<Box<dyn Marker>>,
    /// The markers that observe other schemes' packets, by index.
    observers: Vec<usize>,
    counters: MarkCounters,
}

impl RouterLink {
    /// A link whose first measurement interval starts at `now`.
    pub fn new(config: RouterConfig, now: Duration) -> RouterLink {
        let markers: Vec<Box<dyn Marker>> = WireScheme::all()
            .map(|wire| {
                wire.marker(&MarkerConfig {
                    flows: config.flows,
                    classic_threshold: config.classic_threshold,
                })
            })
            .collect();
        let observers = (0..markers.len())
            .filter(|&i| markers[i].observes_others())
            .collect();
        RouterLink {
            meter: LoadFactorMeter::new(config.meter.clone(), now),
            mode: config.mode,
            markers,
            observers,
            counters: MarkCounters::default(),
            config,
        }
    }

    /// The router restarts at `now`: its meter, flow tables and shares are
    /// lost, as when its process starts again; the counters carry on.
    pub fn restart(&mut self, now: Duration) {
        let counters = self.counters;
        *self = RouterLink::new(self.config.clone(), now);
        self.counters = counters;
    }

    /// The measurement interval t_p it was built with.
    pub fn interval(&self) -> Duration {
        self.config.meter.interval
    }

    /// A packet of `len` bytes is offered to the link: it is counted (before
    /// any drop decision) and its marks are rewritten as the mode says.
    #[inline]
    pub fn on_arrival(&mut self, now: Duration, len: u32, pkt: &mut PacketMarks) {
        self.meter.on_arrival(now, len);
        let wire = match self.mode {
            MarkingMode::Off => return,
            MarkingMode::Forced(wire) => wire,
            MarkingMode::Auto => pkt.tag.wire(),
        };
        let link = LinkState {
            load: *self.meter.load(),
            queue_bytes: self.meter.queue_bytes(),
            packet_len: len,
            capacity: self.meter.config().capacity,
        };
        let before = *pkt;
        if pkt.tag.wire() == wire {
            // A presence probe is raised, then marked, so the sender learns
            // that an ecnq router is on its path.
            wire.raise_probe(pkt);
        }
        let index = wire.index();
        self.markers[index].mark(now, &link, pkt);
        if self.mode == MarkingMode::Auto {
            for &other in self.observers.iter().filter(|&&i| i != index) {
                self.markers[other].observe(now, &link, pkt);
            }
        }
        self.counters.by_scheme[index][usize::from(pkt.ecn.bits())] += 1;
        self.counters.rewritten += u64::from(*pkt != before);
    }

    /// The queue now holds `queue_bytes` (after every enqueue, dequeue, drop).
    #[inline]
    pub fn on_queue(&mut self, now: Duration, queue_bytes: u64) {
        self.meter.on_queue(now, queue_bytes);
    }

    /// A packet of `len` bytes left the link.
    #[inline]
    pub fn on_departure(&mut self, now: Duration, len: u32) {
        self.meter.on_departure(now, len);
    }

    /// Meters against `capacity` bytes per second from now on
    /// ([`LoadFactorMeter::set_capacity`]).
    pub fn set_capacity(&mut self, capacity: f64) {
        self.meter.set_capacity(capacity);
    }

    /// The link's meter.
    pub fn meter(&self) -> &LoadFactorMeter {
        &self.meter
    }

    /// The router could not watch the link from `from` to `to`
    /// ([`LoadFactorMeter::disregard`]).
    pub fn disregard(&mut self, from: Duration, to: Duration) {
        self.meter.disregard(from, to);
    }

    /// Closes measurement intervals up to `now` (for idle links).
    pub fn advance(&mut self, now: Duration) {
        self.meter.advance(now);
    }

    /// The statistics of an interval completed since the last call, if any.
    pub fn take_completed(&mut self) -> Option<IntervalStats> {
        self.meter.take_completed()
    }

    /// Counts a packet that another queue's AQM handled (the bottleneck's
    /// classic queue), so the counters cover every packet that left.
    pub fn count(&mut self, wire: WireScheme, ecn: Ecn, rewritten: bool) {
        self.counters.by_scheme[wire.index()][usize::from(ecn.bits())] += 1;
        self.counters.rewritten += u64::from(rewritten);
    }

    /// Marking counters.
    pub fn counters(&self) -> &MarkCounters {
        &self.counters
    }

    /// The marking mode.
    pub fn mode(&self) -> MarkingMode {
        self.mode
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ecn::SchemeTag;
    use crate::{schemes::mcp, schemes::vcp};

    const MS: Duration = Duration::from_millis(1);

    /// A 1 Mbyte/s link loaded at `offered` for one interval.
    fn loaded_link(mode: MarkingMode, offered: f64) -> RouterLink {
        let mut cfg = RouterConfig::new(1e6, 100_000);
        cfg.mode = mode;
        let mut link = RouterLink::new(cfg, Duration::ZERO);
        let bytes = (offered * 200_000.0) as u32;
        let mut pkt = marks(0, Ecn::NotEct);
        link.on_arrival(MS, bytes, &mut pkt);
        link.advance(MS * 200);
        link
    }

    fn marks(wire_id: u8, ecn: Ecn) -> PacketMarks {
        PacketMarks {
            ecn,
            tag: SchemeTag::new(wire_id),
            hash: 0,
            flow: 1,
        }
    }

    /// A presence probe of every scheme that probes (a tagged Not-ECT
    /// packet, or an MCP packet with the probe bit) leaves raised; untagged
    /// Not-ECT traffic stays Not-ECT.
    #[test]
    fn presence_probes_are_raised() {
        let mut link = loaded_link(MarkingMode::Auto, 0.5);
        let probing: Vec<WireScheme> = WireScheme::all().filter(|w| w.sends_probes()).collect();
        assert_eq!(probing.len(), 5, "vcp, dpcp, tpcp, bmcc, mcp");
        for wire in probing {
            let plain = marks(wire.id(), wire.base_ecn());
            let (tag, ecn) = wire.probe(plain.tag, plain.ecn);
            let mut pkt = PacketMarks { tag, ecn, ..plain };
            assert!(wire.is_unraised_probe(pkt.tag, pkt.ecn), "{}", wire.name());
            link.on_arrival(MS * 201, 100, &mut pkt);
            assert!(!wire.is_unraised_probe(pkt.tag, pkt.ecn), "{}", wire.name());
        }
        let mut pkt = marks(0, Ecn::NotEct);
        link.on_arrival(MS * 201, 100, &mut pkt);
        assert_eq!(pkt.ecn, Ecn::NotEct);
        // A router that marks nothing raises nothing: the sender sees no router.
        let mut off = loaded_link(MarkingMode::Off, 0.5);
        let mut pkt = marks(vcp::WIRE.id(), Ecn::NotEct);
        off.on_arrival(MS * 201, 100, &mut pkt);
        assert_eq!(pkt.ecn, Ecn::NotEct);
        let mut pkt = marks(mcp::WIRE.id(), Ecn::NotEct);
        pkt.tag.probe = true;
        off.on_arrival(MS * 201, 100, &mut pkt);
        assert!(pkt.tag.probe);
    }

    #[test]
    fn mode_names_parse() {
        assert_eq!("auto".parse(), Ok(MarkingMode::Auto));
        assert_eq!("OFF".parse(), Ok(MarkingMode::Off));
        assert_eq!("evcp".parse(), Ok(MarkingMode::Forced(vcp::WIRE)));
        assert_eq!(
            "tpcp".parse::<MarkingMode>().map(|m| m.to_string()),
            Ok("tpcp".into())
        );
        assert!("red"
            .parse::<MarkingMode>()
            .unwrap_err()
            .contains("unknown marking mode `red`"));
    }

    #[test]
    fn auto_marks_by_tag() {
        // ρ ≈ 0.9/γ ≥ 0.9: VCP high load; MCP code 10.
        let mut link = loaded_link(MarkingMode::Auto, 0.9);
        let mut vcp = marks(1, Ecn::Ect1);
        link.on_arrival(MS * 201, 1000, &mut vcp);
        assert_eq!(vcp.ecn, Ecn::Ect0);
        let mut mcp = marks(mcp::WIRE.id(), Ecn::NotEct);
        link.on_arrival(MS * 201, 1000, &mut mcp);
        assert_eq!(mcp.ecn, Ecn::Ect0);
        // Untagged ECT below the classic threshold: untouched.
        let mut classic = marks(0, Ecn::Ect0);
        link.on_arrival(MS * 201, 1000, &mut classic);
        assert_eq!(classic.ecn, Ecn::Ect0);
        assert_eq!(link.counters().get(vcp::WIRE, Ecn::Ect0), 1);
        assert_eq!(link.counters().rewritten, 2);
    }

    #[test]
    fn classic_marks_untagged_ect_over_threshold_only() {
        let mut link = loaded_link(MarkingMode::Auto, 0.1);
        link.on_queue(MS * 201, 60_000);
        let mut ect = marks(0, Ecn::Ect0);
        link.on_arrival(MS * 202, 1000, &mut ect);
        assert_eq!(ect.ecn, Ecn::Ce);
        let mut not_ect = marks(0, Ecn::NotEct);
        link.on_arrival(MS * 202, 1000, &mut not_ect);
        assert_eq!(not_ect.ecn, Ecn::NotEct);
    }

    #[test]
    fn forced_and_off_ignore_the_tag() {
        let mut forced = loaded_link(MarkingMode::Forced(vcp::WIRE), 1.5);
        let mut untagged = marks(0, Ecn::Ect1);
        forced.on_arrival(MS * 201, 1000, &mut untagged);
        assert_eq!(untagged.ecn, Ecn::Ce);
        let mut off = loaded_link(MarkingMode::Off, 1.5);
        let mut vcp = marks(1, Ecn::Ect1);
        off.on_arrival(MS * 201, 1000, &mut vcp);
        assert_eq!(vcp.ecn, Ecn::Ect1);
        assert!(
            off.meter().load()[crate::schemes::vcp::FORMULA].get() > 1.0,
            "off still measures"
        );
    }
}

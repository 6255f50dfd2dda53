//! Metering and marking of one output link: the core's [`LoadFactorMeter`]
//! plus a marker chosen per packet by [`MarkingMode`] (DESIGN.md §2, "DSCP
//! scheme tag").
//!
//! This mirrors the `ecnq::router::RouterLink` API planned for the core, so
//! the shim switches to the core type when it lands on `main`. Until then the
//! core has a marker for VCP only; packets of schemes whose marker is not in
//! the core yet (DPCP, TPCP, BMCC, MCP) get classic treatment, and a forced
//! mode for them is refused at start-up.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use ecnq::vcp::VcpMarker;
use ecnq::{
    Ecn, IntervalStats, LinkState, LoadFactorMeter, Marker, MeterConfig, PacketMarks, WireScheme,
};

/// How the link chooses the marking of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkingMode {
    /// By the packet's DSCP tag; untagged ECT traffic gets classic CE marking.
    Auto,
    /// Every ECT packet is marked by this scheme, whatever its tag.
    Forced(WireScheme),
    /// Meter only; never rewrite.
    Off,
}

impl MarkingMode {
    /// Whether the shim can honour this mode with the markers the core has.
    pub fn check_supported(self) -> Result<(), String> {
        match self {
            MarkingMode::Forced(scheme) if !has_marker(scheme) => Err(format!(
                "--scheme {}: the core has no marker for it yet (available: auto, vcp, evcp, classic, off)",
                wire_name(scheme)
            )),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for MarkingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MarkingMode::Auto => f.write_str("auto"),
            MarkingMode::Forced(scheme) => f.write_str(wire_name(*scheme)),
            MarkingMode::Off => f.write_str("off"),
        }
    }
}

impl FromStr for MarkingMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(MarkingMode::Auto),
            "off" => Ok(MarkingMode::Off),
            name => name
                .parse::<ecnq::Scheme>()
                .map(|scheme| MarkingMode::Forced(scheme.wire()))
                .map_err(|_| {
                    format!(
                        "unknown scheme `{s}` (expected one of: auto, vcp, evcp, dpcp, tpcp, bmcc, mcp, classic, off)"
                    )
                }),
        }
    }
}

/// The lowercase name of a wire scheme.
pub fn wire_name(scheme: WireScheme) -> &'static str {
    match scheme {
        WireScheme::Classic => "classic",
        WireScheme::Vcp => "vcp",
        WireScheme::Dpcp => "dpcp",
        WireScheme::Tpcp => "tpcp",
        WireScheme::Bmcc => "bmcc",
        WireScheme::Mcp => "mcp",
    }
}

/// Every wire scheme, in id order (index = id).
pub const WIRE_SCHEMES: [WireScheme; 6] = [
    WireScheme::Classic,
    WireScheme::Vcp,
    WireScheme::Dpcp,
    WireScheme::Tpcp,
    WireScheme::Bmcc,
    WireScheme::Mcp,
];

/// Whether the shim can mark this scheme: VCP with the core's marker,
/// classic with its own threshold rule.
fn has_marker(scheme: WireScheme) -> bool {
    matches!(scheme, WireScheme::Vcp | WireScheme::Classic)
}

/// Configuration of one link's router.
#[derive(Clone, Debug, PartialEq)]
pub struct RouterConfig {
    /// Meter: capacity, t_p, formula parameters.
    pub meter: MeterConfig,
    /// Marking mode.
    pub mode: MarkingMode,
    /// Queue in bytes at and above which untagged ECT packets get CE.
    pub classic_threshold: u64,
}

/// CoDel's target queue delay, 5 ms (RFC 8289 §4.2): the queue at which
/// classic traffic is told about congestion.
pub const CLASSIC_TARGET_DELAY: Duration = Duration::from_millis(5);
/// The classic threshold never falls below two full-size packets.
const CLASSIC_MIN_THRESHOLD: u64 = 3000;

impl RouterConfig {
    /// Defaults for a link of `capacity` bytes per second: the papers' meter
    /// parameters, auto marking, classic CE at 5 ms of queue (at least two
    /// packets).
    pub fn new(capacity: f64) -> RouterConfig {
        let threshold = (capacity * CLASSIC_TARGET_DELAY.as_secs_f64()) as u64;
        RouterConfig {
            meter: MeterConfig::new(capacity),
            mode: MarkingMode::Auto,
            classic_threshold: threshold.max(CLASSIC_MIN_THRESHOLD),
        }
    }
}

/// Marks applied, by scheme (index = wire id) and by the codepoint written.
/// A packet is counted when its codepoint changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MarkCounters {
    /// Packets seen (ECT or not), by the scheme that handled them.
    pub seen: [u64; 6],
    /// Rewrites, `[scheme][codepoint]`.
    pub marked: [[u64; 4]; 6],
}

impl MarkCounters {
    /// All rewrites to `ecn`, summed over schemes.
    pub fn marked_to(&self, ecn: Ecn) -> u64 {
        self.marked
            .iter()
            .map(|row| row[usize::from(ecn.bits())])
            .sum()
    }
}

/// Metering and marking of one output link.
#[derive(Clone, Debug)]
pub struct RouterLink {
    meter: LoadFactorMeter,
    mode: MarkingMode,
    classic_threshold: u64,
    vcp: VcpMarker,
    counters: MarkCounters,
}

impl RouterLink {
    /// A router link whose first interval starts at `now`.
    pub fn new(config: RouterConfig, now: Duration) -> RouterLink {
        RouterLink {
            meter: LoadFactorMeter::new(config.meter, now),
            mode: config.mode,
            classic_threshold: config.classic_threshold,
            vcp: VcpMarker,
            counters: MarkCounters::default(),
        }
    }

    /// A packet of `len` bytes arrives (call before any drop decision); its
    /// marks are rewritten as the mode says. `None` (a packet the shim could
    /// not classify) is counted as load and never rewritten.
    pub fn on_arrival(&mut self, now: Duration, len: u32, pkt: Option<&mut PacketMarks>) {
        self.meter.on_arrival(now, len);
        let Some(pkt) = pkt else { return };
        let scheme = match self.mode {
            MarkingMode::Off => return,
            MarkingMode::Forced(scheme) => scheme,
            MarkingMode::Auto => WireScheme::from_id(pkt.tag.wire_id),
        };
        let before = pkt.ecn;
        let link = LinkState {
            load: *self.meter.load(),
            queue_bytes: self.meter.queue_bytes(),
        };
        let handled_by = if scheme == WireScheme::Vcp {
            self.vcp.mark(now, &link, pkt);
            WireScheme::Vcp
        } else {
            // Classic ECN AQM: CE instead of drop over the threshold. Also
            // the treatment of tags whose marker the core does not have yet.
            if pkt.ecn.is_ect() && link.queue_bytes >= self.classic_threshold {
                pkt.ecn = Ecn::Ce;
            }
            scheme
        };
        let row = usize::from(handled_by.id());
        self.counters.seen[row] += 1;
        if pkt.ecn != before {
            self.counters.marked[row][usize::from(pkt.ecn.bits())] += 1;
        }
    }

    /// The queue now holds `queue_bytes` (after every enqueue, dequeue, drop).
    pub fn on_queue(&mut self, now: Duration, queue_bytes: u64) {
        self.meter.on_queue(now, queue_bytes);
    }

    /// A packet of `len` bytes finished serialization.
    pub fn on_departure(&mut self, now: Duration, len: u32) {
        self.meter.on_departure(now, len);
    }

    /// The meter.
    pub fn meter(&self) -> &LoadFactorMeter {
        &self.meter
    }

    /// An interval completed since the last call, if any (advances the meter to `now`).
    pub fn take_completed(&mut self, now: Duration) -> Option<IntervalStats> {
        self.meter.advance(now);
        self.meter.take_completed()
    }

    /// Marks applied so far.
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
    use ecnq::SchemeTag;

    const MS: Duration = Duration::from_millis(1);

    fn marks(tag: u8, ecn: Ecn) -> PacketMarks {
        PacketMarks {
            ecn,
            tag: SchemeTag::new(tag),
            hash: 0,
            flow: 1,
        }
    }

    /// A 1 Mbyte/s router driven to load ρ for one interval.
    fn loaded_router(mode: MarkingMode, offered_bytes: u32) -> RouterLink {
        let mut cfg = RouterConfig::new(1e6);
        cfg.mode = mode;
        let mut r = RouterLink::new(cfg, Duration::ZERO);
        for i in 0..100 {
            r.on_arrival(MS * i, offered_bytes / 100, None);
        }
        assert!(r.take_completed(MS * 200).is_some());
        r
    }

    #[test]
    fn modes_parse() {
        assert_eq!("auto".parse(), Ok(MarkingMode::Auto));
        assert_eq!("EVCP".parse(), Ok(MarkingMode::Forced(WireScheme::Vcp)));
        assert_eq!("off".parse(), Ok(MarkingMode::Off));
        assert_eq!(
            "classic".parse(),
            Ok(MarkingMode::Forced(WireScheme::Classic))
        );
        let err = "reno".parse::<MarkingMode>().unwrap_err();
        assert!(err.contains("unknown scheme `reno`"), "{err}");
        assert!(MarkingMode::Forced(WireScheme::Vcp)
            .check_supported()
            .is_ok());
        assert!(MarkingMode::Forced(WireScheme::Bmcc)
            .check_supported()
            .is_err());
    }

    #[test]
    fn auto_marks_vcp_by_load() {
        // Offered 200 000 bytes in 200 ms at 1 Mbyte/s: ρ = 1/γ > 1 → overload.
        let mut r = loaded_router(MarkingMode::Auto, 200_000);
        let mut vcp = marks(1, Ecn::Ect1);
        r.on_arrival(MS * 201, 100, Some(&mut vcp));
        assert_eq!(vcp.ecn, Ecn::Ce);
        // Untagged ECT with no queue is left alone; Not-ECT is never marked.
        let mut classic = marks(0, Ecn::Ect0);
        r.on_arrival(MS * 202, 100, Some(&mut classic));
        assert_eq!(classic.ecn, Ecn::Ect0);
        let mut not_ect = marks(1, Ecn::NotEct);
        r.on_arrival(MS * 203, 100, Some(&mut not_ect));
        assert_eq!(not_ect.ecn, Ecn::NotEct);
        assert_eq!(r.counters().marked[1][3], 1);
        assert_eq!(r.counters().seen, [1, 2, 0, 0, 0, 0]);
    }

    #[test]
    fn low_load_keeps_low_code() {
        let mut r = loaded_router(MarkingMode::Auto, 50_000);
        let mut vcp = marks(1, Ecn::Ect1);
        r.on_arrival(MS * 201, 100, Some(&mut vcp));
        assert_eq!(vcp.ecn, Ecn::Ect1);
        assert_eq!(r.counters().marked_to(Ecn::Ce), 0);
    }

    #[test]
    fn classic_ce_over_threshold() {
        let mut r = RouterLink::new(RouterConfig::new(1e6), Duration::ZERO);
        let threshold = 5_000; // 5 ms at 1 Mbyte/s
        r.on_queue(MS, threshold - 1);
        let mut pkt = marks(0, Ecn::Ect0);
        r.on_arrival(MS, 100, Some(&mut pkt));
        assert_eq!(pkt.ecn, Ecn::Ect0);
        r.on_queue(MS * 2, threshold);
        r.on_arrival(MS * 2, 100, Some(&mut pkt));
        assert_eq!(pkt.ecn, Ecn::Ce);
        let mut not_ect = marks(0, Ecn::NotEct);
        r.on_arrival(MS * 2, 100, Some(&mut not_ect));
        assert_eq!(not_ect.ecn, Ecn::NotEct);
        assert_eq!(r.counters().marked_to(Ecn::Ce), 1);
    }

    #[test]
    fn forced_and_off_ignore_the_tag() {
        let mut r = loaded_router(MarkingMode::Forced(WireScheme::Vcp), 200_000);
        let mut untagged = marks(0, Ecn::Ect1);
        r.on_arrival(MS * 201, 100, Some(&mut untagged));
        assert_eq!(untagged.ecn, Ecn::Ce);
        let mut r = loaded_router(MarkingMode::Off, 200_000);
        let mut vcp = marks(1, Ecn::Ect1);
        r.on_arrival(MS * 201, 100, Some(&mut vcp));
        assert_eq!(vcp.ecn, Ecn::Ect1);
    }
}

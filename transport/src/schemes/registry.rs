//! The scheme registry: every scheme ecnq knows, in one table. A scheme's
//! own module holds its marker, decoder and law; this module lists them with
//! the facts the rest of ecnq reads — the name users type, the DSCP tag
//! routers dispatch on, the base codepoint, the feedback level range, and
//! whether the law paces a rate or holds a window (docs/design.md §2, table of
//! schemes and "DSCP scheme tag"). Nothing outside this module lists schemes
//! by hand: command-line parsing and help, the router's dispatch, the
//! feedback report, the simulator and the demos all iterate these tables.

use std::fmt;
use std::str::FromStr;

use crate::schemes::bmcc::{self, BmccDecoder, BmccLaw, BmccMarker};
use crate::schemes::classic::{ClassicLaw, ClassicMarker};
use crate::schemes::erc::{self, ErcConfig, ErcCountReader, ErcDecoder, ErcLaw, ErcMarker};
use crate::schemes::evcp::EvcpLaw;
use crate::schemes::mcp::{self, McpDecoder, McpLaw, McpMarker};
use crate::schemes::mpcp::{Chain, MpcpDecoder, MpcpLaw, MpcpMarker};
use crate::schemes::prague::{self, PragueDecoder, PragueLaw, PragueMarker};
use crate::schemes::vcp::{self, VcpDecoder, VcpLaw, VcpMarker};
use crate::signal::load::{Formula, IntervalStats, LinkLoad, LoadFactor};
use crate::signal::{CountReader, Decoder, Law, LawConfig, Marker, MarkerConfig, PacketMarks};
use crate::wire::ecn::{Ecn, SchemeTag, WireScheme};

/// What routers and receivers know about one wire scheme.
pub struct WireEntry {
    /// The wire scheme (its DSCP pool tag).
    pub wire: WireScheme,
    /// Its name in router output (`--scheme`, stats, metrics).
    pub name: &'static str,
    /// How many low tag bits carry per-packet flags: the scheme owns tags
    /// `wire.id() .. wire.id() + 2^flag_bits`.
    pub flag_bits: u8,
    /// The codepoint its senders put on their packets, for routers to raise.
    pub base_ecn: Ecn,
    /// The highest [`crate::signal::Feedback::level`] its decoder reports.
    pub max_level: u16,
    /// Its receiver decoder; untagged traffic has none.
    pub decoder: Option<fn() -> Box<dyn Decoder>>,
    /// Its sender-side reader of a peer's ACK-ECN counts, for a peer that
    /// runs no decoder: a scheme whose digits are ECT(0) and Not-ECT alone
    /// can be read from them (erc).
    pub count_reader: Option<fn() -> Box<dyn CountReader>>,
    /// Its router marker.
    pub marker: fn(&MarkerConfig) -> Box<dyn Marker>,
    /// Whether its senders are L4S scalable senders, which a dual-queue
    /// router serves in its L4S queue rather than its ecnq queue.
    pub l4s: bool,
    /// Whether the ecnq queue drops its packets that a stalled link held
    /// past CoDel's interval (`router::bottleneck`'s stall guard): its
    /// senders pace at the router's rate beside a loss-driven window that
    /// resends and cuts, so a cleared flight costs them little (erc).
    pub clear_stalls: bool,
    /// How its senders send presence probes, if they do. Its lowest code is
    /// what senders send, so without probes a sender cannot tell an ecnq
    /// router at low load from no ecnq router at all (docs/design.md §2,
    /// "No router on the path").
    pub probe: Probe,
}

/// How a scheme's senders send presence probes, packets that every ecnq
/// router metering the scheme raises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// No probes: the wire says "no router" itself (erc), or there is no
    /// router feedback to miss (classic, Prague).
    None,
    /// A Not-ECT packet, raised to the base codepoint: for schemes whose
    /// base codepoint is ECN-capable (VCP, MPCP, BMCC).
    NotEct,
    /// A packet whose tag has its probe bit set, cleared by the router: for
    /// MCP, whose base codepoint is Not-ECT itself.
    TagBit,
}

/// Every wire scheme, untagged first.
pub const WIRES: [WireEntry; 8] = [
    WireEntry {
        wire: WireScheme::CLASSIC,
        name: "classic",
        flag_bits: 0,
        // RFC 3168's ECT(0), CE on congestion.
        base_ecn: Ecn::Ect0,
        max_level: 0,
        decoder: None,
        count_reader: None,
        marker: |c| {
            Box::new(ClassicMarker {
                threshold: c.classic_threshold,
            })
        },
        l4s: false,
        clear_stalls: false,
        probe: Probe::None,
    },
    WireEntry {
        wire: vcp::WIRE,
        name: "vcp",
        flag_bits: 0,
        // VCP's low-load code `01`, which routers only raise (docs/design.md §2).
        base_ecn: Ecn::Ect1,
        // Three levels: low load, high load, overload.
        max_level: 2,
        decoder: Some(|| Box::new(VcpDecoder::default())),
        count_reader: None,
        marker: |_| Box::new(VcpMarker),
        l4s: false,
        clear_stalls: false,
        probe: Probe::NotEct,
    },
    WireEntry {
        wire: Chain::Two.wire(),
        name: "dpcp",
        flag_bits: 0,
        // MPCP's digit 0 (MPCP paper Table 1).
        base_ecn: Ecn::Ect1,
        max_level: Chain::Two.levels() - 1,
        decoder: Some(|| Box::new(MpcpDecoder::new(Chain::Two))),
        count_reader: None,
        marker: |c| Box::new(MpcpMarker::new(Chain::Two, c.flows)),
        l4s: false,
        clear_stalls: false,
        probe: Probe::NotEct,
    },
    WireEntry {
        wire: Chain::Three.wire(),
        name: "tpcp",
        flag_bits: 0,
        base_ecn: Ecn::Ect1,
        max_level: Chain::Three.levels() - 1,
        decoder: Some(|| Box::new(MpcpDecoder::new(Chain::Three))),
        count_reader: None,
        marker: |c| Box::new(MpcpMarker::new(Chain::Three, c.flows)),
        l4s: false,
        clear_stalls: false,
        probe: Probe::NotEct,
    },
    WireEntry {
        wire: bmcc::WIRE,
        name: "bmcc",
        flag_bits: 0,
        // ADPM's unmarked base codepoint (BMCC paper §II-A).
        base_ecn: Ecn::Ect0,
        // The estimate in units of 1/10 000, saturating.
        max_level: u16::MAX,
        decoder: Some(|| Box::new(BmccDecoder::default())),
        count_reader: None,
        marker: |_| Box::new(BmccMarker),
        l4s: false,
        clear_stalls: false,
        probe: Probe::NotEct,
    },
    WireEntry {
        wire: mcp::WIRE,
        name: "mcp",
        // Fairing and this-path bits (MCP paper §IV-D), and ecnq's
        // presence-probe bit.
        flag_bits: 3,
        // The lowest utilization code `00` (MCP paper §IV-A.3).
        base_ecn: Ecn::NotEct,
        // Four utilization codes.
        max_level: 3,
        decoder: Some(|| Box::new(McpDecoder::default())),
        count_reader: None,
        marker: |_| Box::new(McpMarker::default()),
        l4s: false,
        clear_stalls: false,
        probe: Probe::TagBit,
    },
    WireEntry {
        wire: erc::WIRE,
        name: "erc",
        flag_bits: 0,
        // Digit 1 of the rate index: unmarked chains spell "no erc router",
        // and an L4S bottleneck queues them as classic (erc module docs).
        base_ecn: Ecn::Ect0,
        max_level: erc::MAX_LEVEL,
        decoder: Some(|| Box::new(ErcDecoder::default())),
        count_reader: Some(|| Box::new(ErcCountReader::default())),
        marker: |c| Box::new(ErcMarker::new(ErcConfig::default(), c.flows)),
        l4s: false,
        clear_stalls: true,
        probe: Probe::None,
    },
    WireEntry {
        wire: prague::WIRE,
        name: "prague",
        flag_bits: 0,
        // The L4S identifier (RFC 9331 §4.1).
        base_ecn: Ecn::Ect1,
        max_level: prague::MAX_LEVEL,
        decoder: Some(|| Box::new(PragueDecoder::default())),
        count_reader: None,
        marker: |_| Box::new(PragueMarker),
        // An L4S sender (RFC 9331 §4.3).
        l4s: true,
        clear_stalls: false,
        probe: Probe::None,
    },
];

/// The position in [`WIRES`] of each DSCP pool tag's scheme (untagged for
/// unassigned tags).
const BY_TAG: [u8; 16] = {
    let mut by_tag = [0u8; 16];
    let mut i = 0;
    while i < WIRES.len() {
        let first = WIRES[i].wire.id() as usize;
        let mut tag = first;
        while tag < first + (1 << WIRES[i].flag_bits) {
            by_tag[tag] = i as u8;
            tag += 1;
        }
        i += 1;
    }
    by_tag
};

/// The DSCP pool `xxxx11` (RFC 2474 §6): the low two DSCP bits are set.
const POOL: u8 = 0b11;

impl WireScheme {
    /// Every wire scheme, untagged first.
    pub fn all() -> impl Iterator<Item = WireScheme> {
        WIRES.iter().map(|entry| entry.wire)
    }

    /// The wire scheme of a DSCP pool tag; unassigned tags are untagged.
    pub const fn from_id(id: u8) -> WireScheme {
        WIRES[BY_TAG[(id & 0b1111) as usize] as usize].wire
    }

    /// The wire scheme named `name` (`vcp`, `erc`, …).
    pub fn from_name(name: &str) -> Option<WireScheme> {
        WIRES
            .iter()
            .find(|entry| entry.name.eq_ignore_ascii_case(name.trim()))
            .map(|entry| entry.wire)
    }

    /// Whether `id` is exactly the tag of a scheme (a flag-carrying tag like
    /// MCP's 9 is not: the scheme's id is its first tag).
    pub const fn is_assigned(id: u8) -> bool {
        id < 16 && WireScheme::from_id(id).id() == id
    }

    /// The position of this scheme in [`WIRES`]: an index for per-scheme
    /// counters.
    pub const fn index(self) -> usize {
        BY_TAG[self.id() as usize] as usize
    }

    /// The registry entry.
    pub const fn entry(self) -> &'static WireEntry {
        &WIRES[self.index()]
    }

    /// The name in router output.
    pub const fn name(self) -> &'static str {
        self.entry().name
    }

    /// The codepoint a sender of this scheme puts on its packets.
    pub const fn base_ecn(self) -> Ecn {
        self.entry().base_ecn
    }

    /// Whether its senders send presence probes ([`WireEntry::probe`]).
    pub const fn sends_probes(self) -> bool {
        !matches!(self.entry().probe, Probe::None)
    }

    /// The tag and codepoint that make a packet of this scheme, which would
    /// carry `tag` and `ecn`, a presence probe.
    pub const fn probe(self, tag: SchemeTag, ecn: Ecn) -> (SchemeTag, Ecn) {
        match self.entry().probe {
            Probe::None => (tag, ecn),
            Probe::NotEct => (tag, Ecn::NotEct),
            Probe::TagBit => (SchemeTag { probe: true, ..tag }, ecn),
        }
    }

    /// Whether a packet of this scheme that carries `tag` and `ecn` is a
    /// presence probe no ecnq router has raised.
    pub const fn is_unraised_probe(self, tag: SchemeTag, ecn: Ecn) -> bool {
        match self.entry().probe {
            Probe::None => false,
            Probe::NotEct => matches!(ecn, Ecn::NotEct),
            Probe::TagBit => tag.probe,
        }
    }

    /// An ecnq router's part: raises a presence probe of this scheme (a
    /// Not-ECT probe to the base codepoint, a tag probe to the plain tag),
    /// before the scheme's marker marks it.
    pub fn raise_probe(self, pkt: &mut PacketMarks) {
        match self.entry().probe {
            Probe::NotEct if pkt.ecn == Ecn::NotEct => pkt.ecn = self.base_ecn(),
            Probe::TagBit => pkt.tag.probe = false,
            _ => {}
        }
    }

    /// Whether a dual-queue router serves it in its L4S queue.
    pub const fn is_l4s(self) -> bool {
        self.entry().l4s
    }

    /// Whether the ecnq queue clears its stalled flight
    /// ([`WireEntry::clear_stalls`]).
    pub const fn clears_stalls(self) -> bool {
        self.entry().clear_stalls
    }

    /// Whether it is an ecnq scheme, whose law answers the load an ecnq
    /// router writes: tagged, and not L4S. A dual-queue router serves it in
    /// its ecnq queue.
    pub const fn is_ecnq(self) -> bool {
        self.id() != WireScheme::CLASSIC.id() && !self.is_l4s()
    }

    /// The highest level its decoder reports.
    pub const fn max_level(self) -> u16 {
        self.entry().max_level
    }

    /// A new receiver decoder for packets of this scheme; classic traffic
    /// carries no scheme feedback, so it has none.
    pub fn decoder(self) -> Option<Box<dyn Decoder>> {
        self.entry().decoder.map(|make| make())
    }

    /// A new reader of a peer's ACK-ECN counts, for the schemes that can
    /// be read from them ([`WireEntry::count_reader`]).
    pub fn count_reader(self) -> Option<Box<dyn CountReader>> {
        self.entry().count_reader.map(|make| make())
    }

    /// A new router marker for this scheme.
    pub fn marker(self, config: &MarkerConfig) -> Box<dyn Marker> {
        (self.entry().marker)(config)
    }
}

impl fmt::Display for WireScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The DSCP layout of the scheme tag (docs/design.md §2): DSCP = `tag << 2 | 0b11`;
/// a scheme with flag bits owns consecutive tags (MCP: 8..=15, bit 0 fairing,
/// bit 1 this-path, bit 2 presence probe). Any DSCP outside the pool, and any
/// unassigned tag, is untagged, so no standard codepoint (CS1, AF41, EF, …)
/// reads as ecnq.
impl SchemeTag {
    /// Reads a six-bit DSCP value (higher bits ignored).
    pub const fn from_dscp(dscp: u8) -> SchemeTag {
        if dscp & POOL != POOL {
            return SchemeTag::UNTAGGED;
        }
        let tag = (dscp >> 2) & 0b1111;
        let wire = WireScheme::from_id(tag);
        let flags = tag - wire.id();
        SchemeTag {
            wire_id: wire.id(),
            this_path: flags & 0b010 != 0,
            fairing: flags & 0b001 != 0,
            probe: flags & 0b100 != 0,
        }
    }

    /// Reads the tag out of a whole TOS / traffic-class byte.
    pub const fn from_tos(tos: u8) -> SchemeTag {
        SchemeTag::from_dscp(tos >> 2)
    }

    /// The six-bit DSCP value: 0 when untagged; flags only where the scheme
    /// has flag bits.
    pub const fn dscp(self) -> u8 {
        let wire = WireScheme::from_id(self.wire_id);
        if wire.id() == 0 {
            return 0;
        }
        let flags = if wire.entry().flag_bits == 3 {
            (self.probe as u8) << 2 | (self.this_path as u8) << 1 | self.fairing as u8
        } else {
            0
        };
        (wire.id() | flags) << 2 | POOL
    }

    /// The whole TOS / traffic-class byte for this tag and an ECN codepoint.
    pub const fn tos(self, ecn: Ecn) -> u8 {
        self.dscp() << 2 | ecn.bits()
    }
}

/// A load formula: how a router turns one interval's statistics into a
/// load factor that markers read from [`crate::signal::LinkState::load`].
/// One meter computes every formula on every link.
pub struct FormulaEntry {
    /// The formula.
    pub formula: Formula,
    /// Its name in router output: the shim's `load_{name}` stats field and
    /// `formula` metric label, the simulator's `load_{name}` column.
    pub name: &'static str,
    /// Its symbol in its paper, for tables.
    pub symbol: &'static str,
    /// The load factor of `stats` on a link of `capacity` bytes per
    /// second, with the link's parameters.
    pub load: fn(&FormulaParams, &IntervalStats, f64) -> LoadFactor,
}

/// Every load formula, in the order of router output.
pub const FORMULAS: [FormulaEntry; 3] = [
    FormulaEntry {
        formula: vcp::FORMULA,
        name: "vcp",
        symbol: "ρ",
        load: |p, stats, capacity| p.vcp.load_factor(stats, capacity),
    },
    FormulaEntry {
        formula: bmcc::FORMULA,
        name: "bmcc",
        symbol: "f",
        load: |p, stats, capacity| p.bmcc.load_factor(stats, capacity),
    },
    FormulaEntry {
        formula: mcp::FORMULA,
        name: "mcp",
        symbol: "U",
        load: |_, stats, capacity| mcp::utilization(stats, capacity),
    },
];

impl LinkLoad {
    /// The figures of every formula for one interval's `stats` on a link
    /// of `capacity` bytes per second with parameters `params`.
    pub fn measure(
        epoch: u64,
        params: &FormulaParams,
        stats: &IntervalStats,
        capacity: f64,
    ) -> LinkLoad {
        let mut load = LinkLoad {
            epoch,
            ..LinkLoad::default()
        };
        for entry in &FORMULAS {
            load[entry.formula] = (entry.load)(params, stats, capacity);
        }
        load
    }

    /// Every formula with its figure, in [`FORMULAS`] order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static FormulaEntry, LoadFactor)> {
        let load = *self;
        FORMULAS
            .iter()
            .map(move |entry| (entry, load[entry.formula]))
    }
}

/// The parameters of the formulas that have any, for one link: what a
/// router operator may tune (the shim's `--gamma`, `--kappa-q`, `--k1`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FormulaParams {
    /// VCP's γ and κ_q (EVCP paper eq. 1).
    pub vcp: vcp::LoadParams,
    /// BMCC's γ and k_1 (BMCC paper eq. 1.1).
    pub bmcc: bmcc::LoadParams,
}

impl FormulaParams {
    /// The papers' defaults for a link of `capacity` bytes per second.
    pub fn for_capacity(capacity: f64) -> FormulaParams {
        FormulaParams {
            vcp: vcp::LoadParams::for_capacity(capacity),
            bmcc: bmcc::LoadParams::for_capacity(capacity),
        }
    }
}

/// What a sender knows about one scheme.
pub struct SchemeEntry {
    /// The scheme.
    pub scheme: Scheme,
    /// The name users type (`--cc`, `--scheme`, scenario files).
    pub name: &'static str,
    /// One line for `--help`.
    pub summary: &'static str,
    /// What routers see of it.
    pub wire: WireScheme,
    /// Whether its law paces an explicit rate (else it holds a window).
    pub rate_based: bool,
    /// Whether a CE mark is congestion for its law: CE is never one of erc's
    /// or classic's codes, while the other schemes read it as a level.
    pub ce_is_congestion: bool,
    /// A new sender law.
    pub law: fn(LawConfig) -> Box<dyn Law>,
}

/// Every scheme, in [`Scheme`]'s order: ecnq's own first, the papers', then
/// the classic law.
pub const SCHEMES: [SchemeEntry; 9] = [
    SchemeEntry {
        scheme: Scheme::Erc,
        name: "erc",
        summary: "ecnq's explicit rate: routers advertise the max-min fair rate (Cubic where no router speaks)",
        wire: erc::WIRE,
        rate_based: true,
        ce_is_congestion: true,
        law: |c| Box::new(ErcLaw::new(c)),
    },
    SchemeEntry {
        scheme: Scheme::Vcp,
        name: "vcp",
        summary: "VCP: three load levels in one packet (Xia et al., SIGCOMM 2005)",
        wire: vcp::WIRE,
        rate_based: false,
        ce_is_congestion: false,
        law: |c| Box::new(VcpLaw::new(c)),
    },
    SchemeEntry {
        scheme: Scheme::Evcp,
        name: "evcp",
        summary: "EVCP: VCP with the convergence controller (Lu et al., JZUS 2007)",
        wire: vcp::WIRE,
        rate_based: false,
        ce_is_congestion: false,
        law: |c| Box::new(EvcpLaw::new(c)),
    },
    SchemeEntry {
        scheme: Scheme::Dpcp,
        name: "dpcp",
        summary: "DPCP: MPCP with chains of two packets, nine levels (Li & Yousefi'zadeh, CCR 2009)",
        wire: Chain::Two.wire(),
        rate_based: false,
        ce_is_congestion: false,
        law: |c| Box::new(MpcpLaw::new(Chain::Two, c)),
    },
    SchemeEntry {
        scheme: Scheme::Tpcp,
        name: "tpcp",
        summary: "TPCP: MPCP with chains of three packets, 27 levels",
        wire: Chain::Three.wire(),
        rate_based: false,
        ce_is_congestion: false,
        law: |c| Box::new(MpcpLaw::new(Chain::Three, c)),
    },
    SchemeEntry {
        scheme: Scheme::Bmcc,
        name: "bmcc",
        summary: "BMCC: ADPM threshold marking, about 16-bit resolution (Qazi, Andrew & Znati)",
        wire: bmcc::WIRE,
        rate_based: false,
        ce_is_congestion: false,
        law: |c| Box::new(BmccLaw::new(c)),
    },
    SchemeEntry {
        scheme: Scheme::Mcp,
        name: "mcp",
        summary: "MCP: rate-based multimodal control with fairing (Podlesny & Gorinsky, 2006)",
        wire: mcp::WIRE,
        rate_based: true,
        ce_is_congestion: false,
        law: |c| Box::new(McpLaw::new(c)),
    },
    SchemeEntry {
        scheme: Scheme::Prague,
        name: "prague",
        summary: "Prague: the L4S scalable sender (ECT(1), DCTCP-style reduction), the baseline of deployed router-assisted ECN",
        wire: prague::WIRE,
        rate_based: false,
        ce_is_congestion: true,
        law: |c| Box::new(PragueLaw::new(c)),
    },
    SchemeEntry {
        scheme: Scheme::Classic,
        name: "classic",
        summary: "no router feedback: NewReno-like, CE and loss as congestion, untagged",
        wire: WireScheme::CLASSIC,
        rate_based: false,
        ce_is_congestion: true,
        law: |c| Box::new(ClassicLaw::new(c)),
    },
];

/// A congestion-control scheme a sender can run; its facts are its
/// [`SCHEMES`] entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Scheme {
    /// erc: routers advertise the max-min fair rate (ecnq's own).
    Erc,
    /// VCP: three load levels in one packet.
    Vcp,
    /// EVCP: VCP with the convergence controller.
    Evcp,
    /// DPCP: MPCP with chains of two packets.
    Dpcp,
    /// TPCP: MPCP with chains of three packets.
    Tpcp,
    /// BMCC: ADPM threshold marking.
    Bmcc,
    /// MCP: rate-based multimodal control with fairing.
    Mcp,
    /// Prague: the L4S scalable sender.
    Prague,
    /// No router feedback: NewReno-like, CE and loss as congestion.
    Classic,
}

impl Scheme {
    /// Every scheme, ecnq's own first.
    pub const ALL: [Scheme; SCHEMES.len()] = {
        let mut all = [Scheme::Classic; SCHEMES.len()];
        let mut i = 0;
        while i < SCHEMES.len() {
            all[i] = SCHEMES[i].scheme;
            i += 1;
        }
        all
    };

    /// The schemes that read router feedback: all but classic.
    pub fn router_assisted() -> impl Iterator<Item = Scheme> {
        Scheme::ALL.into_iter().filter(|s| s.is_router_assisted())
    }

    /// The registry entry.
    pub const fn entry(self) -> &'static SchemeEntry {
        &SCHEMES[self as usize]
    }

    /// The name used on command lines and in reports.
    pub const fn name(self) -> &'static str {
        self.entry().name
    }

    /// One line for `--help`.
    pub const fn summary(self) -> &'static str {
        self.entry().summary
    }

    /// What routers see of this scheme: EVCP changes only the sender, so it
    /// travels as VCP.
    pub const fn wire(self) -> WireScheme {
        self.entry().wire
    }

    /// Whether the scheme reads router feedback (every scheme but classic).
    pub const fn is_router_assisted(self) -> bool {
        self.wire().id() != WireScheme::CLASSIC.id()
    }

    /// Whether its law paces an explicit rate (else it holds a window).
    pub const fn rate_based(self) -> bool {
        self.entry().rate_based
    }

    /// Whether a CE mark is congestion for this scheme's law.
    pub const fn ce_is_congestion(self) -> bool {
        self.entry().ce_is_congestion
    }

    /// A new sender law of this scheme.
    pub fn law(self, config: LawConfig) -> Box<dyn Law> {
        (self.entry().law)(config)
    }

    /// Every scheme's name, comma-separated, for error messages.
    pub fn names() -> String {
        Scheme::ALL.map(Scheme::name).join(", ")
    }

    /// One line per scheme, name and summary, for `--help`.
    pub fn help() -> String {
        Scheme::ALL
            .map(|s| format!("  {:<8} {}", s.name(), s.summary()))
            .join("\n")
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error for a scheme name that is not one of ours.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownScheme(pub String);

impl fmt::Display for UnknownScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown scheme `{}` (expected one of: {})",
            self.0,
            Scheme::names()
        )
    }
}

impl std::error::Error for UnknownScheme {}

impl FromStr for Scheme {
    type Err = UnknownScheme;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scheme::ALL
            .into_iter()
            .find(|scheme| scheme.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownScheme(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_in_order_and_consistent() {
        for (i, entry) in SCHEMES.iter().enumerate() {
            assert_eq!(entry.scheme as usize, i, "{}", entry.name);
            let wire = entry.wire;
            assert!(WireScheme::all().any(|w| w == wire), "{}", entry.name);
        }
        for (i, entry) in WIRES.iter().enumerate() {
            assert_eq!(entry.wire.index(), i, "{}", entry.name);
            assert_eq!(WireScheme::from_name(entry.name), Some(entry.wire));
            assert_eq!(entry.decoder.is_none(), entry.wire == WireScheme::CLASSIC);
        }
        // No two formulas share a place or a name.
        for (i, a) in FORMULAS.iter().enumerate() {
            for b in &FORMULAS[..i] {
                assert_ne!(a.formula, b.formula, "{} and {}", a.name, b.name);
                assert_ne!(a.name, b.name);
            }
        }
        // No two wire schemes share a tag.
        let tags: Vec<u8> = (0u8..16)
            .filter(|&t| WireScheme::is_assigned(t) && t != 0)
            .collect();
        assert_eq!(tags.len(), WIRES.len() - 1);
    }

    #[test]
    fn names_round_trip() {
        for s in Scheme::ALL {
            assert_eq!(s.to_string().parse::<Scheme>(), Ok(s));
        }
        assert_eq!(" DPCP ".parse::<Scheme>(), Ok(Scheme::Dpcp));
        let err = "reno".parse::<Scheme>().unwrap_err();
        assert!(err.to_string().contains("unknown scheme `reno`"));
        assert!(err.to_string().contains("erc, vcp"));
        assert!(Scheme::help().lines().count() == Scheme::ALL.len());
    }

    /// docs/design.md §2's tag table, spelled out once here as the check.
    #[test]
    fn tags_and_codepoints_match_design_table() {
        let ids: Vec<(&str, u8, Ecn)> = Scheme::ALL
            .iter()
            .map(|s| (s.name(), s.wire().id(), s.wire().base_ecn()))
            .collect();
        use Ecn::*;
        assert_eq!(
            ids,
            [
                ("erc", 6, Ect0),
                ("vcp", 1, Ect1),
                ("evcp", 1, Ect1),
                ("dpcp", 2, Ect1),
                ("tpcp", 3, Ect1),
                ("bmcc", 4, Ect0),
                ("mcp", 8, NotEct),
                ("prague", 5, Ect1),
                ("classic", 0, Ect0),
            ]
        );
        for unassigned in [0, 7] {
            assert_eq!(WireScheme::from_id(unassigned), WireScheme::CLASSIC);
        }
        // MCP's flags: fairing, this-path, presence probe.
        for flagged in 8..16 {
            assert_eq!(WireScheme::from_id(flagged), mcp::WIRE);
        }
    }

    #[test]
    fn tag_layout_matches_design() {
        // MCP with this-path and fairing: tag 11, DSCP 0b1011_11.
        let tag = SchemeTag {
            this_path: true,
            fairing: true,
            ..SchemeTag::new(mcp::WIRE.id())
        };
        assert_eq!(tag.dscp(), 0b10_1111);
        assert_eq!(tag.tos(Ecn::Ect1), 0b1011_1101);
        assert_eq!(SchemeTag::from_tos(tag.tos(Ecn::Ce)), tag);
        // ... and a presence probe: tag 15.
        let probe = SchemeTag { probe: true, ..tag };
        assert_eq!(probe.dscp(), 0b11_1111);
        assert_eq!(SchemeTag::from_tos(probe.tos(Ecn::NotEct)), probe);
        // erc: tag 6, DSCP 27.
        assert_eq!(SchemeTag::new(erc::WIRE.id()).dscp(), 27);
        // Flags are not part of schemes without flag bits.
        let vcp_flags = SchemeTag {
            this_path: true,
            fairing: true,
            probe: true,
            ..SchemeTag::new(1)
        };
        assert_eq!(vcp_flags.dscp(), 0b00_0111);
        assert!(SchemeTag::from_tos(0b0000_0010).is_untagged());
    }

    /// Every standard DSCP (RFC 2474 class selectors, RFC 2597 AF, RFC 3246
    /// EF, RFC 5865 VOICE-ADMIT, RFC 8622 LE) passes as untagged.
    #[test]
    fn every_standard_dscp_is_untagged() {
        let mut standard = vec![44, 46, 1];
        standard.extend((0..8).map(|cs| cs << 3));
        for class in 1..=4 {
            for drop in 1..=3 {
                standard.push(class << 3 | drop << 1);
            }
        }
        for dscp in standard {
            assert!(SchemeTag::from_dscp(dscp).is_untagged(), "DSCP {dscp}");
        }
    }

    #[test]
    fn every_dscp_reads_back_or_is_untagged() {
        for dscp in 0u8..64 {
            let tag = SchemeTag::from_dscp(dscp);
            if tag.is_untagged() {
                let in_pool = dscp & 0b11 == 0b11;
                assert!(!in_pool || WireScheme::from_id(dscp >> 2) == WireScheme::CLASSIC);
            } else {
                assert_eq!(tag.dscp(), dscp);
            }
        }
    }
}

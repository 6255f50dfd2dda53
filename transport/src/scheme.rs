//! The scheme names users type and the wire ids routers read (DESIGN.md §2,
//! table of schemes).

use std::fmt;
use std::str::FromStr;

use crate::bmcc::{BmccDecoder, BmccLaw};
use crate::classic::ClassicLaw;
use crate::ecn::Ecn;
use crate::erc::{ErcDecoder, ErcLaw};
use crate::evcp::EvcpLaw;
use crate::mcp::{McpDecoder, McpLaw};
use crate::mpcp::{Chain, MpcpDecoder, MpcpLaw};
use crate::signal::{Decoder, Law, LawConfig};
use crate::vcp::{VcpDecoder, VcpLaw};

/// A congestion-control scheme a sender can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// VCP: three load levels in one packet (Xia et al., SIGCOMM 2005).
    Vcp,
    /// EVCP: VCP with the convergence controller (Lu et al., JZUS 2007).
    Evcp,
    /// DPCP: MPCP with chains of two packets, nine levels (Li & Yousefi'zadeh, CCR 2009).
    Dpcp,
    /// TPCP: MPCP with chains of three packets, 27 levels.
    Tpcp,
    /// BMCC: ADPM threshold marking, about 16-bit resolution (Qazi, Andrew & Znati).
    Bmcc,
    /// MCP: rate-based multimodal control with fairing (Podlesny & Gorinsky, 2006).
    Mcp,
    /// erc: routers advertise the max-min fair rate (ecnq's own).
    Erc,
    /// No router feedback: NewReno-like, CE and loss as congestion.
    Classic,
}

impl Scheme {
    /// Every scheme, ecnq schemes first.
    pub const ALL: [Scheme; 8] = [
        Scheme::Erc,
        Scheme::Vcp,
        Scheme::Evcp,
        Scheme::Dpcp,
        Scheme::Tpcp,
        Scheme::Bmcc,
        Scheme::Mcp,
        Scheme::Classic,
    ];

    /// The schemes that need router feedback: all but classic.
    pub const ROUTER_ASSISTED: [Scheme; 7] = [
        Scheme::Erc,
        Scheme::Vcp,
        Scheme::Evcp,
        Scheme::Dpcp,
        Scheme::Tpcp,
        Scheme::Bmcc,
        Scheme::Mcp,
    ];

    /// The name used on command lines and in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Scheme::Vcp => "vcp",
            Scheme::Evcp => "evcp",
            Scheme::Dpcp => "dpcp",
            Scheme::Tpcp => "tpcp",
            Scheme::Bmcc => "bmcc",
            Scheme::Mcp => "mcp",
            Scheme::Erc => "erc",
            Scheme::Classic => "classic",
        }
    }

    /// What routers see of this scheme: EVCP changes only the sender, so it
    /// travels as VCP.
    pub const fn wire(self) -> WireScheme {
        match self {
            Scheme::Vcp | Scheme::Evcp => WireScheme::Vcp,
            Scheme::Dpcp => WireScheme::Dpcp,
            Scheme::Tpcp => WireScheme::Tpcp,
            Scheme::Bmcc => WireScheme::Bmcc,
            Scheme::Mcp => WireScheme::Mcp,
            Scheme::Erc => WireScheme::Erc,
            Scheme::Classic => WireScheme::Classic,
        }
    }
}

impl Scheme {
    /// Whether a CE mark is congestion for this scheme's law: for erc and
    /// classic it is (CE is never one of their codes); for the others it is
    /// a code the receiver's report carries.
    pub const fn ce_is_congestion(self) -> bool {
        matches!(self, Scheme::Erc | Scheme::Classic)
    }

    /// A new sender law of this scheme.
    pub fn law(self, config: LawConfig) -> Box<dyn Law> {
        match self {
            Scheme::Vcp => Box::new(VcpLaw::new(config)),
            Scheme::Evcp => Box::new(EvcpLaw::new(config)),
            Scheme::Dpcp => Box::new(MpcpLaw::new(Chain::Two, config)),
            Scheme::Tpcp => Box::new(MpcpLaw::new(Chain::Three, config)),
            Scheme::Bmcc => Box::new(BmccLaw::new(config)),
            Scheme::Mcp => Box::new(McpLaw::new(config)),
            Scheme::Erc => Box::new(ErcLaw::new(config)),
            Scheme::Classic => Box::new(ClassicLaw::new(config)),
        }
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
            "unknown scheme `{}` (expected one of: vcp, evcp, dpcp, tpcp, bmcc, mcp, classic)",
            self.0
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

/// A scheme as routers tell it from the DSCP tag: the marking it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WireScheme {
    /// Id 0: untagged, classic ECN treatment.
    Classic = 0,
    /// Id 1: VCP and EVCP.
    Vcp = 1,
    /// Id 2: DPCP.
    Dpcp = 2,
    /// Id 3: TPCP.
    Tpcp = 3,
    /// Id 4: BMCC.
    Bmcc = 4,
    /// Id 5: MCP.
    Mcp = 5,
    /// Id 6: erc.
    Erc = 6,
}

impl WireScheme {
    /// The scheme for a DSCP wire id; ids 6 and 7 are unassigned and get
    /// classic treatment, like untagged traffic.
    pub const fn from_id(id: u8) -> WireScheme {
        match id & 0b111 {
            1 => WireScheme::Vcp,
            2 => WireScheme::Dpcp,
            3 => WireScheme::Tpcp,
            4 => WireScheme::Bmcc,
            5 => WireScheme::Mcp,
            6 => WireScheme::Erc,
            _ => WireScheme::Classic,
        }
    }

    /// The DSCP wire id.
    pub const fn id(self) -> u8 {
        self as u8
    }

    /// The codepoint a sender of this scheme puts on its packets, for routers
    /// to raise (DESIGN.md §2): `01` for the VCP family and MPCP (VCP's low
    /// load, MPCP's digit 0), `10` for BMCC (ADPM's unmarked base, BMCC paper
    /// §II-A), `00` for MCP (its lowest utilization code, MCP paper §IV-A.3),
    /// and ECT(0) for classic ECN.
    pub const fn base_ecn(self) -> Ecn {
        match self {
            WireScheme::Vcp | WireScheme::Dpcp | WireScheme::Tpcp => Ecn::Ect1,
            WireScheme::Bmcc | WireScheme::Classic => Ecn::Ect0,
            WireScheme::Erc => Ecn::Ect1,
            WireScheme::Mcp => Ecn::NotEct,
        }
    }

    /// A new receiver decoder for packets of this scheme; classic traffic
    /// carries no scheme feedback, so it has none.
    pub fn decoder(self) -> Option<Box<dyn Decoder>> {
        match self {
            WireScheme::Classic => None,
            WireScheme::Vcp => Some(Box::new(VcpDecoder::default())),
            WireScheme::Dpcp => Some(Box::new(MpcpDecoder::new(Chain::Two))),
            WireScheme::Tpcp => Some(Box::new(MpcpDecoder::new(Chain::Three))),
            WireScheme::Bmcc => Some(Box::new(BmccDecoder::default())),
            WireScheme::Mcp => Some(Box::new(McpDecoder::default())),
            WireScheme::Erc => Some(Box::new(ErcDecoder::default())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in Scheme::ALL {
            assert_eq!(s.to_string().parse::<Scheme>(), Ok(s));
        }
        assert_eq!(" DPCP ".parse::<Scheme>(), Ok(Scheme::Dpcp));
        let err = "reno".parse::<Scheme>().unwrap_err();
        assert!(err.to_string().contains("unknown scheme `reno`"));
    }

    #[test]
    fn base_codepoints() {
        let base: Vec<Ecn> = Scheme::ALL.iter().map(|s| s.wire().base_ecn()).collect();
        use Ecn::*;
        assert_eq!(base, [Ect1, Ect1, Ect1, Ect1, Ect0, NotEct, Ect0]);
    }

    #[test]
    fn wire_ids_match_design_table() {
        let ids: Vec<u8> = Scheme::ALL.iter().map(|s| s.wire().id()).collect();
        assert_eq!(ids, [1, 1, 2, 3, 4, 5, 0]);
        for id in 0..8 {
            let w = WireScheme::from_id(id);
            assert!(w.id() == id || (w == WireScheme::Classic && (id == 0 || id >= 6)));
        }
    }
}

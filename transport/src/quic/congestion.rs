//! Which congestion controller a connection runs, and the factories that
//! build the sans-IO laws and decoders of the core for it.

use std::fmt;
use std::str::FromStr;

use crate::ecn::Ecn;
use crate::evcp::EvcpLaw;
use crate::scheme::{Scheme, WireScheme};
use crate::signal::{Decoder, Law, LawConfig};
use crate::vcp::{VcpDecoder, VcpLaw};

/// The congestion controller of a connection's sending direction: an ecnq
/// scheme fed by router feedback, or one of quinn's own controllers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CongestionControl {
    /// An ecnq scheme. Its packets carry the scheme's DSCP tag; with a peer
    /// that does not run ecnq it falls back to classic NewReno.
    Ecnq(Scheme),
    /// quinn's NewReno, packets untagged.
    NewReno,
    /// quinn's Cubic, packets untagged.
    Cubic,
    /// quinn's BBR, packets untagged.
    Bbr,
}

impl CongestionControl {
    /// Every choice the library can build in this version, ecnq schemes first.
    pub fn available() -> Vec<CongestionControl> {
        Scheme::ROUTER_ASSISTED
            .into_iter()
            .filter(|s| law(*s, LawConfig::default()).is_some())
            .map(CongestionControl::Ecnq)
            .chain([
                CongestionControl::NewReno,
                CongestionControl::Cubic,
                CongestionControl::Bbr,
            ])
            .collect()
    }

    /// The ecnq scheme, if this is one that uses router feedback.
    pub fn scheme(self) -> Option<Scheme> {
        match self {
            CongestionControl::Ecnq(Scheme::Classic) => None,
            CongestionControl::Ecnq(s) => Some(s),
            _ => None,
        }
    }

    /// The name used on command lines (`vcp`, …, `newreno`, `cubic`, `bbr`).
    pub fn name(self) -> &'static str {
        match self {
            CongestionControl::Ecnq(s) => s.name(),
            CongestionControl::NewReno => "newreno",
            CongestionControl::Cubic => "cubic",
            CongestionControl::Bbr => "bbr",
        }
    }

    /// Fails with a one-line message if this build has no sender law for the scheme.
    pub fn check(self) -> Result<(), UnsupportedScheme> {
        match self.scheme() {
            Some(s) if law(s, LawConfig::default()).is_none() => Err(UnsupportedScheme(s)),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for CongestionControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error for a controller name that is neither a scheme nor a quinn controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownController(pub String);

impl fmt::Display for UnknownController {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown congestion controller `{}` (expected one of: vcp, evcp, dpcp, tpcp, bmcc, mcp, classic, newreno, cubic, bbr)",
            self.0
        )
    }
}

impl std::error::Error for UnknownController {}

impl FromStr for CongestionControl {
    type Err = UnknownController;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "newreno" | "reno" => Ok(CongestionControl::NewReno),
            "cubic" => Ok(CongestionControl::Cubic),
            "bbr" => Ok(CongestionControl::Bbr),
            other => other
                .parse::<Scheme>()
                .map(CongestionControl::Ecnq)
                .map_err(|_| UnknownController(s.to_owned())),
        }
    }
}

/// The error for an ecnq scheme whose sender law the core does not have yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnsupportedScheme(pub Scheme);

impl fmt::Display for UnsupportedScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "scheme `{}` has no sender law in this build", self.0)
    }
}

impl std::error::Error for UnsupportedScheme {}

/// The sender law of a router-assisted scheme, if the core has one.
pub(crate) fn law(scheme: Scheme, config: LawConfig) -> Option<Box<dyn Law>> {
    match scheme {
        Scheme::Vcp => Some(Box::new(VcpLaw::new(config))),
        Scheme::Evcp => Some(Box::new(EvcpLaw::new(config))),
        _ => None,
    }
}

/// The receiver decoder for packets tagged with `wire`, if the core has one.
pub(crate) fn decoder(wire: WireScheme) -> Option<Box<dyn Decoder>> {
    match wire {
        WireScheme::Vcp => Some(Box::<VcpDecoder>::default()),
        _ => None,
    }
}

/// The codepoint a sender of `wire` puts on its packets for routers to
/// raise (DESIGN.md §2): `01` for the VCP family and MPCP, `10` for BMCC
/// (ADPM's unmarked base), `00` for MCP (its lowest utilization code).
pub(crate) const fn base_ecn(wire: WireScheme) -> Ecn {
    match wire {
        WireScheme::Vcp | WireScheme::Dpcp | WireScheme::Tpcp => Ecn::Ect1,
        WireScheme::Bmcc | WireScheme::Classic => Ecn::Ect0,
        WireScheme::Mcp => Ecn::NotEct,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse() {
        for cc in CongestionControl::available() {
            assert_eq!(cc.name().parse::<CongestionControl>(), Ok(cc));
        }
        assert_eq!("Cubic".parse(), Ok(CongestionControl::Cubic));
        let err = "foo".parse::<CongestionControl>().unwrap_err();
        assert!(err
            .to_string()
            .starts_with("unknown congestion controller `foo`"));
    }

    #[test]
    fn every_available_scheme_has_law_and_decoder() {
        for cc in CongestionControl::available() {
            assert!(cc.check().is_ok());
            if let Some(s) = cc.scheme() {
                assert!(decoder(s.wire()).is_some(), "{s}");
            }
        }
    }
}

//! Which congestion controller a connection runs, and the factories that
//! build the sans-IO laws and decoders of the core for it.

use std::fmt;
use std::str::FromStr;

use crate::schemes::bbr::Bbr;
use crate::schemes::registry::Scheme;
use crate::session::Session;
use crate::signal::LawConfig;

/// The congestion controller of a connection's sending direction: an ecnq
/// scheme fed by router feedback, the core's BBR, or one of quinn's own
/// controllers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CongestionControl {
    /// An ecnq scheme. Its packets carry the scheme's DSCP tag; with a peer
    /// that does not run ecnq, or when its reports stop, it falls back to
    /// the core's Cubic law. `Ecnq(Scheme::Classic)` is the core's NewReno
    /// law from the start, untagged.
    Ecnq(Scheme),
    /// quinn's NewReno, packets untagged.
    NewReno,
    /// quinn's Cubic, packets untagged.
    Cubic,
    /// The core's BBR v1 ([`crate::schemes::bbr`]), the simulator's BBR
    /// too, paced by the session; packets untagged. quinn's BBR is not
    /// used: its bandwidth samples, taken between two ACKs, grew its window
    /// to several times the path's and lost about half its packets on the
    /// cellular traces (docs/design.md §2, "BBR").
    Bbr,
}

impl CongestionControl {
    /// Every choice, ecnq schemes first.
    pub fn all() -> Vec<CongestionControl> {
        Scheme::ALL
            .into_iter()
            .map(CongestionControl::Ecnq)
            .chain([
                CongestionControl::NewReno,
                CongestionControl::Cubic,
                CongestionControl::Bbr,
            ])
            .collect()
    }

    /// The ecnq scheme, if this is one that uses router feedback.
    pub fn router_assisted(self) -> Option<Scheme> {
        match self {
            CongestionControl::Ecnq(s) if s.is_router_assisted() => Some(s),
            _ => None,
        }
    }

    /// Whether the session's law controls the sending (an ecnq scheme's or
    /// a baseline of the core), rather than one of quinn's controllers.
    pub fn in_session(self) -> bool {
        matches!(self, CongestionControl::Ecnq(_) | CongestionControl::Bbr)
    }

    /// Whether its packets may carry quinn's ECN codepoint: not BBR's, whose
    /// law answers neither loss nor CE, and an ECN-capable sender must
    /// answer CE (RFC 3168 §6.1.2). Its packets are Not-ECT, as in the
    /// simulator, so an AQM drops them rather than marks them and lets its
    /// queue grow to the buffer's limit.
    pub fn ecn_capable(self) -> bool {
        self != CongestionControl::Bbr
    }

    /// The session of a connection that runs this controller, with packets
    /// of `mss` bytes and `header_bytes` of IP and UDP headers each.
    pub(crate) fn session(self, mss: u64, header_bytes: u64) -> Session {
        let config = LawConfig::with_mss(mss);
        match self {
            CongestionControl::Ecnq(scheme) => Session::new(Some(scheme), config, header_bytes),
            CongestionControl::Bbr => {
                Session::with_baseline(Box::new(Bbr::new(config)), config, header_bytes)
            }
            CongestionControl::NewReno | CongestionControl::Cubic => {
                Session::new(None, config, header_bytes)
            }
        }
    }

    /// What applications and tools run unless told otherwise: erc, ecnq's
    /// own scheme (Cubic on paths without an ecnq router).
    pub const DEFAULT: CongestionControl = CongestionControl::Ecnq(Scheme::Erc);

    /// One line about this controller.
    pub fn summary(self) -> &'static str {
        match self {
            CongestionControl::Ecnq(s) => s.summary(),
            CongestionControl::NewReno => "quinn's NewReno, packets untagged",
            CongestionControl::Cubic => "quinn's Cubic, packets untagged",
            CongestionControl::Bbr => "BBR v1, the simulator's too, packets untagged",
        }
    }

    /// One line per controller, name and summary, for `--help`.
    pub fn help() -> String {
        CongestionControl::all()
            .into_iter()
            .map(|cc| format!("  {:<8} {}", cc.name(), cc.summary()))
            .collect::<Vec<_>>()
            .join("\n")
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
            "unknown congestion controller `{}` (expected one of: {})",
            self.0,
            CongestionControl::all()
                .iter()
                .map(|cc| cc.name())
                .collect::<Vec<_>>()
                .join(", ")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse() {
        for cc in CongestionControl::all() {
            assert_eq!(cc.name().parse::<CongestionControl>(), Ok(cc));
        }
        assert_eq!("Cubic".parse(), Ok(CongestionControl::Cubic));
        let err = "foo".parse::<CongestionControl>().unwrap_err();
        assert!(err
            .to_string()
            .starts_with("unknown congestion controller `foo`"));
    }

    #[test]
    fn every_router_assisted_scheme_has_a_decoder_for_its_tag() {
        for cc in CongestionControl::all() {
            if let Some(s) = cc.router_assisted() {
                assert!(s.wire().decoder().is_some(), "{s}");
            }
        }
    }
}

//! The protocols a simulated flow can run: every ecnq scheme (the core's
//! sans-IO laws and decoders) plus the simulator's NewReno and Cubic models,
//! each with drop-tail (Not-ECT) or classic ECN (ECT(0), CE = congestion),
//! the core's BBR law (the real stack's BBR), and the explicit-rate anchors
//! RCP and XCP.

use std::fmt;
use std::str::FromStr;

use ecnq::router::bottleneck::Discipline;
use ecnq::schemes::bbr::Bbr;
use ecnq::signal::{CountReader, Decoder, Law, LawConfig};
use ecnq::{Ecn, Scheme};

use crate::explicit::SenderLaw;
use crate::rcp::RcpLaw;
use crate::xcp::XcpLaw;

/// The NewReno baseline is the core's classic law (RFC 6582 window
/// arithmetic, loss and CE as congestion), the same one ecnq senders fall
/// back to.
pub type NewReno = ecnq::schemes::classic::ClassicLaw;

/// The Cubic baseline is the core's Cubic law (RFC 8312), the one erc keeps
/// beside its advertised rate.
pub type Cubic = ecnq::schemes::cubic::CubicLaw;

/// A baseline model: one of the loss-based laws, with drop-tail (Not-ECT)
/// or classic ECN (ECT(0), CE read as loss), BBR, or one of the
/// explicit-rate protocols whose headers the simulator's routers rewrite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Baseline {
    /// NewReno, Not-ECT.
    Reno,
    /// NewReno, ECT(0).
    RenoEcn,
    /// Cubic, Not-ECT.
    Cubic,
    /// Cubic, ECT(0).
    CubicEcn,
    /// BBR v1, Not-ECT ([`ecnq::schemes::bbr`]): the real stack's too.
    Bbr,
    /// RCP, Not-ECT, with its rate header ([`crate::rcp`]).
    Rcp,
    /// XCP, Not-ECT, with its window header ([`crate::xcp`]).
    Xcp,
}

impl Baseline {
    /// Every baseline, in the order `compare` prints them.
    const ALL: [Baseline; 7] = [
        Baseline::Reno,
        Baseline::RenoEcn,
        Baseline::Cubic,
        Baseline::CubicEcn,
        Baseline::Bbr,
        Baseline::Rcp,
        Baseline::Xcp,
    ];

    /// Whether its packets are ECT(0).
    fn ecn(self) -> bool {
        matches!(self, Baseline::RenoEcn | Baseline::CubicEcn)
    }
}

/// What one flow runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// An ecnq scheme from the core.
    Ecnq(Scheme),
    /// A baseline model.
    Baseline(Baseline),
}

impl Protocol {
    /// Every protocol, in the order `compare` prints them: the registry's
    /// schemes, then the baselines.
    pub const ALL: [Protocol; Scheme::ALL.len() + Baseline::ALL.len()] = {
        let mut list =
            [Protocol::Baseline(Baseline::Reno); Scheme::ALL.len() + Baseline::ALL.len()];
        let mut i = 0;
        while i < Scheme::ALL.len() {
            list[i] = Protocol::Ecnq(Scheme::ALL[i]);
            i += 1;
        }
        while i < list.len() {
            list[i] = Protocol::Baseline(Baseline::ALL[i - Scheme::ALL.len()]);
            i += 1;
        }
        list
    };

    /// The name used in scenario files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Ecnq(s) => s.name(),
            Protocol::Baseline(Baseline::Reno) => "reno",
            Protocol::Baseline(Baseline::RenoEcn) => "reno-ecn",
            Protocol::Baseline(Baseline::Cubic) => "cubic",
            Protocol::Baseline(Baseline::CubicEcn) => "cubic-ecn",
            Protocol::Baseline(Baseline::Bbr) => "bbr",
            Protocol::Baseline(Baseline::Rcp) => "rcp",
            Protocol::Baseline(Baseline::Xcp) => "xcp",
        }
    }

    /// Whether the flow's sender reads router feedback (else CE is congestion).
    pub fn router_assisted(self) -> bool {
        matches!(self, Protocol::Ecnq(s) if s.is_router_assisted())
    }

    /// Whether its packets carry RCP's or XCP's header ([`crate::explicit`]).
    pub fn explicit(self) -> bool {
        matches!(self, Protocol::Baseline(Baseline::Rcp | Baseline::Xcp))
    }

    /// Whether the sender sends presence probes ([`ecnq::session::presence`]).
    pub fn sends_probes(self) -> bool {
        matches!(self, Protocol::Ecnq(s) if s.wire().sends_probes())
    }

    /// Whether the sender answers a CE mark as congestion: baselines do
    /// (BBR's law then ignores it, as it ignores loss), and so do schemes
    /// that never use CE as one of their codes.
    pub fn ce_is_congestion(self) -> bool {
        match self {
            Protocol::Ecnq(s) => s.ce_is_congestion(),
            Protocol::Baseline(_) => true,
        }
    }

    /// The codepoint a sender puts on fresh data packets: each scheme's base
    /// codepoint, which routers only raise (docs/design.md §2).
    pub fn data_ecn(self) -> Ecn {
        match self {
            Protocol::Ecnq(s) => s.wire().base_ecn(),
            Protocol::Baseline(b) if b.ecn() => Ecn::Ect0,
            Protocol::Baseline(_) => Ecn::NotEct,
        }
    }

    /// The sender's law: the core's for ecnq schemes, the simulator's models
    /// for the baselines.
    pub fn law(self, config: LawConfig) -> Box<dyn Law> {
        match self.sender_law(config) {
            SenderLaw::Plain(law) => law,
            SenderLaw::Explicit(law) => law,
        }
    }

    /// The law a flow's sender runs: for RCP and XCP, one that also writes
    /// and reads their header.
    pub fn sender_law(self, config: LawConfig) -> SenderLaw {
        SenderLaw::Plain(match self {
            Protocol::Ecnq(s) => s.law(config),
            Protocol::Baseline(Baseline::Reno | Baseline::RenoEcn) => {
                Box::new(NewReno::new(config))
            }
            Protocol::Baseline(Baseline::Cubic | Baseline::CubicEcn) => {
                Box::new(Cubic::new(config))
            }
            Protocol::Baseline(Baseline::Bbr) => Box::new(Bbr::new(config)),
            Protocol::Baseline(Baseline::Rcp) => {
                return SenderLaw::Explicit(Box::new(RcpLaw::new(config)))
            }
            Protocol::Baseline(Baseline::Xcp) => {
                return SenderLaw::Explicit(Box::new(XcpLaw::new(config)))
            }
        })
    }

    /// The sender's reader of the receiver's ACK-ECN counts, for the schemes
    /// whose marks can be read from them.
    pub fn count_reader(self) -> Option<Box<dyn CountReader>> {
        match self {
            Protocol::Ecnq(s) => s.wire().count_reader(),
            Protocol::Baseline(_) => None,
        }
    }

    /// The receiver's decoder (none for classic traffic: CE is echoed instead).
    pub fn decoder(self) -> Option<Box<dyn Decoder>> {
        match self {
            Protocol::Ecnq(s) => s.wire().decoder(),
            Protocol::Baseline(_) => None,
        }
    }
}

impl Protocol {
    /// One line about the protocol.
    pub fn summary(self) -> &'static str {
        match self {
            Protocol::Ecnq(s) => s.summary(),
            Protocol::Baseline(Baseline::Bbr) => {
                "BBR v1 (the 2017 IETF draft), the real stack's too, Not-ECT, loss and CE ignored"
            }
            Protocol::Baseline(Baseline::Rcp) => {
                "the simulator's RCP (IWQoS 2005): routers write a rate into a header, senders pace at it"
            }
            Protocol::Baseline(Baseline::Xcp) => {
                "the simulator's XCP (SIGCOMM 2002): routers write window feedback into a header"
            }
            Protocol::Baseline(b) if b.ecn() => "the simulator's model, ECT(0), CE read as loss",
            Protocol::Baseline(_) => "the simulator's model, Not-ECT (drop-tail only)",
        }
    }

    /// One line per protocol, name and summary, for `--help`.
    pub fn help() -> String {
        Protocol::ALL
            .map(|p| format!("  {:<10} {}", p.name(), p.summary()))
            .join("\n")
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Protocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Protocol, String> {
        let s = s.trim();
        Protocol::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .or_else(|| {
                s.eq_ignore_ascii_case("newreno")
                    .then_some(Protocol::Baseline(Baseline::Reno))
            })
            .ok_or_else(|| {
                let names: Vec<&str> = Protocol::ALL.iter().map(|p| p.name()).collect();
                format!(
                    "unknown scheme `{s}` (expected one of: {})",
                    names.join(", ")
                )
            })
    }
}

impl<'de> serde::Deserialize<'de> for Protocol {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// One run of `compare`: a protocol, and the queue every link takes if
/// not the scenario's. `cubic@fifo` is Cubic through a drop-tail FIFO and
/// `cubic@dual` Cubic through the dual queue's classic side, under CoDel:
/// a cellular benchmark's baselines (ABC, NSDI 2020) in one line-up.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Case {
    /// The scheme of the flows that do not fix their own.
    pub protocol: Protocol,
    /// Every link's queue discipline, if not the scenario's.
    pub queue: Option<Discipline>,
}

impl Case {
    /// Every protocol in the scenario's queues: `compare`'s default.
    pub fn every_protocol() -> Vec<Case> {
        Protocol::ALL.into_iter().map(Case::from).collect()
    }
}

impl From<Protocol> for Case {
    fn from(protocol: Protocol) -> Case {
        Case {
            protocol,
            queue: None,
        }
    }
}

impl FromStr for Case {
    type Err = String;

    /// `SCHEME` or `SCHEME@QUEUE`, e.g. `erc`, `cubic@fifo`.
    fn from_str(s: &str) -> Result<Case, String> {
        let (protocol, queue) = match s.split_once('@') {
            Some((p, q)) => (p, Some(q.parse::<Discipline>()?)),
            None => (s, None),
        };
        Ok(Case {
            protocol: protocol.parse()?,
            queue,
        })
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.protocol.name())?;
        match self.queue {
            Some(queue) => write!(f, "@{queue}"),
            None => Ok(()),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Case {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The arrival benchmarks' line-up (issue 70): erc beside the deployed
/// schemes (Cubic, BBR, Prague), BMCC, and the explicit-rate anchors RCP
/// and XCP.
const ARRIVALS: [Protocol; 7] = [
    Protocol::Ecnq(Scheme::Erc),
    Protocol::Baseline(Baseline::Cubic),
    Protocol::Baseline(Baseline::Bbr),
    Protocol::Ecnq(Scheme::Prague),
    Protocol::Ecnq(Scheme::Bmcc),
    Protocol::Baseline(Baseline::Rcp),
    Protocol::Baseline(Baseline::Xcp),
];

/// Line-ups a list of cases names in one word: `--schemes arrivals`, or
/// `compare = ["arrivals"]` in a scenario file.
const LINEUPS: [(&str, &[Protocol]); 1] = [("arrivals", &ARRIVALS)];

/// One item of a list of cases (`--schemes`, a scenario's `compare`): a
/// case, or a line-up's name, which stands for its cases.
#[derive(Clone, Debug, PartialEq)]
pub struct Cases(pub Vec<Case>);

impl FromStr for Cases {
    type Err = String;

    fn from_str(s: &str) -> Result<Cases, String> {
        let lineup = LINEUPS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(s.trim()));
        match lineup {
            Some((_, protocols)) => Ok(Cases(protocols.iter().map(|&p| Case::from(p)).collect())),
            None => s.parse().map(|case| Cases(vec![case])).map_err(|e| {
                let names: Vec<&str> = LINEUPS.iter().map(|(name, _)| *name).collect();
                format!("{e}, or a line-up: {}", names.join(", "))
            }),
        }
    }
}

impl Cases {
    /// The cases of every item, in order.
    pub fn flatten(items: Vec<Cases>) -> Vec<Case> {
        items.into_iter().flat_map(|c| c.0).collect()
    }
}

/// Reads a scenario file's list of cases, line-ups expanded.
pub fn deserialize_cases<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Case>, D::Error> {
    let items: Vec<String> = serde::Deserialize::deserialize(d)?;
    let items: Result<Vec<Cases>, String> = items.iter().map(|s| s.parse()).collect();
    items.map(Cases::flatten).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in Protocol::ALL {
            assert_eq!(p.name().parse::<Protocol>(), Ok(p));
        }
        assert_eq!(
            "NewReno".parse::<Protocol>().map(Protocol::name),
            Ok("reno")
        );
        assert!("tahoe"
            .parse::<Protocol>()
            .unwrap_err()
            .contains("unknown scheme `tahoe`"));
    }

    #[test]
    fn router_assisted_protocols_have_decoders() {
        for p in Protocol::ALL {
            assert_eq!(p.decoder().is_some(), p.router_assisted(), "{p}");
            assert!(p.law(LawConfig::default()).window() > 0, "{p}");
        }
    }

    #[test]
    fn a_case_names_a_scheme_and_perhaps_a_queue() {
        let plain: Case = "erc".parse().unwrap();
        assert_eq!(plain, Case::from("erc".parse::<Protocol>().unwrap()));
        assert_eq!(plain.to_string(), "erc");
        let fifo: Case = " Cubic@FIFO".parse().unwrap();
        assert_eq!(fifo.queue, Some(Discipline::Fifo));
        assert_eq!(fifo.to_string(), "cubic@fifo");
        let err = "cubic@codel".parse::<Case>().unwrap_err();
        assert!(err.contains("unknown queue discipline `codel`"), "{err}");
        let err = "tcp@fifo".parse::<Case>().unwrap_err();
        assert!(err.contains("unknown scheme `tcp`"), "{err}");
        assert_eq!(Case::every_protocol().len(), Protocol::ALL.len());
    }

    #[test]
    fn a_line_up_names_its_cases() {
        let arrivals: Cases = " Arrivals".parse().unwrap();
        let names: Vec<String> = arrivals.0.iter().map(Case::to_string).collect();
        assert_eq!(
            names,
            ["erc", "cubic", "bbr", "prague", "bmcc", "rcp", "xcp"]
        );
        let one: Cases = "cubic@fifo".parse().unwrap();
        assert_eq!(Cases::flatten(vec![one, arrivals]).len(), 8);
        let err = "arrival".parse::<Cases>().unwrap_err();
        assert!(err.contains("unknown scheme `arrival`"), "{err}");
        assert!(err.contains("or a line-up: arrivals"), "{err}");
    }
}

//! Building networks: duplex links (a forward and a reverse one-way link),
//! routes over them, and per-flow access delays that set each flow's RTT.
//! A dumbbell is one duplex link, a parking lot a chain of them, and any
//! other topology a list of links and the routes flows take over them.

use ecnq::router::bottleneck::Discipline;
use ecnq::router::capacity::{CapacitySource, LinkRate};
use ecnq::router::MarkingMode;

use crate::engine::{
    BufferLimit, FlowSpec, LinkSpec, Nanos, NewcomerFloodSpec, ParetoSpec, SimConfig,
};

/// A duplex link: the indices of its two one-way links.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Duplex {
    /// Sender-to-receiver direction.
    pub fwd: usize,
    /// The other direction.
    pub rev: usize,
}

/// The parameters of one duplex link (both directions alike).
#[derive(Clone, Debug)]
pub struct DuplexSpec {
    /// Name; the reverse direction is named `<name>-rev`.
    pub name: String,
    /// Bits per second: the nominal rate of a link whose rate varies.
    pub rate: f64,
    /// The forward direction's capacity over time, when it varies; the
    /// reverse direction runs at `rate`.
    pub varies: Option<LinkRate>,
    /// Where both directions' routers take their capacity from.
    pub capacity: CapacitySource,
    /// One-way propagation delay.
    pub delay: Nanos,
    /// Drop-tail limit.
    pub buffer: BufferLimit,
    /// Random loss probability of the forward direction (the papers' lossy
    /// links drop data, not ACKs).
    pub loss: f64,
    /// Random loss probability of the reverse direction.
    pub reverse_loss: f64,
    /// A span of time in which the reverse direction loses everything.
    pub reverse_blackout: Option<(Nanos, Nanos)>,
    /// The reverse direction's loss and blackout hit only feedback reports.
    pub reverse_reports_only: bool,
    /// When both directions' routers restart, their state lost.
    pub router_restart: Option<Nanos>,
    /// Classic ECN marking threshold in bytes.
    pub ecn_threshold: u64,
    /// How both directions queue packets.
    pub discipline: Discipline,
    /// Whether both directions' routers mark.
    pub marking: MarkingMode,
}

/// A network under construction.
#[derive(Clone, Debug, Default)]
pub struct Network {
    /// One-way links.
    pub links: Vec<LinkSpec>,
    /// Flows.
    pub flows: Vec<FlowSpec>,
    /// Finite-flow sources.
    pub pareto: Vec<ParetoSpec>,
    /// Floods of fake newcomers.
    pub floods: Vec<NewcomerFloodSpec>,
}

/// A flow's route: data and ACK link lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// Data path.
    pub path: Vec<usize>,
    /// ACK path.
    pub ack_path: Vec<usize>,
}

impl Network {
    /// Adds a duplex link.
    pub fn duplex(&mut self, spec: &DuplexSpec) -> Duplex {
        let one_way = |name: String, reverse: bool| LinkSpec {
            name,
            rate: Some(spec.rate),
            varies: spec.varies.clone().filter(|_| !reverse),
            capacity: spec.capacity,
            delay: spec.delay,
            buffer: spec.buffer,
            loss: if reverse {
                spec.reverse_loss
            } else {
                spec.loss
            },
            blackout: spec.reverse_blackout.filter(|_| reverse),
            reports_only: reverse && spec.reverse_reports_only,
            router_restart: spec.router_restart,
            ecn_threshold: spec.ecn_threshold,
            discipline: spec.discipline,
            marking: spec.marking,
            report: true,
        };
        let fwd = self.links.len();
        self.links.push(one_way(spec.name.clone(), false));
        self.links.push(one_way(format!("{}-rev", spec.name), true));
        Duplex { fwd, rev: fwd + 1 }
    }

    fn delay_link(&mut self, name: String, delay: Nanos) -> usize {
        self.links.push(LinkSpec {
            name,
            rate: None,
            varies: None,
            capacity: CapacitySource::Configured,
            delay,
            buffer: BufferLimit::Packets(0),
            loss: 0.0,
            blackout: None,
            reports_only: false,
            router_restart: None,
            ecn_threshold: 0,
            discipline: Discipline::Fifo,
            marking: MarkingMode::Off,
            report: false,
        });
        self.links.len() - 1
    }

    /// A route over `hops` (in the data direction; `reverse` sends data over
    /// the reverse links, for two-way traffic). With `rtt`, pure-delay access
    /// links on both ends make the round-trip propagation delay exactly `rtt`;
    /// it is an error if the hops alone are longer.
    pub fn route(
        &mut self,
        hops: &[Duplex],
        reverse: bool,
        rtt: Option<Nanos>,
    ) -> Result<Route, String> {
        let pick = |d: &Duplex, data: bool| if data != reverse { d.fwd } else { d.rev };
        let mut path: Vec<usize> = hops.iter().map(|d| pick(d, true)).collect();
        let mut ack_path: Vec<usize> = hops.iter().rev().map(|d| pick(d, false)).collect();
        // Saturating: any path of delays a file may give must not overflow.
        let delay = |links: &[usize]| {
            links
                .iter()
                .fold(0, |t: Nanos, &l| t.saturating_add(self.links[l].delay))
        };
        let (one_way, back) = (delay(&path), delay(&ack_path));
        if let Some(rtt) = rtt {
            let base = one_way.saturating_add(back);
            if rtt < base {
                return Err(format!(
                    "rtt {} ms is shorter than the path's own round trip of {} ms",
                    rtt as f64 / 1e6,
                    base as f64 / 1e6
                ));
            }
            let extra = rtt - base;
            if extra > 0 {
                let (a, b) = (extra / 2, extra - extra / 2);
                let n = self.links.len();
                path.insert(0, self.delay_link(format!("access-{n}"), a));
                ack_path.push(self.delay_link(format!("access-{}", n + 1), b));
            }
        }
        Ok(Route { path, ack_path })
    }

    /// The simulation configuration for this network.
    pub fn into_config(
        self,
        duration: Nanos,
        seed: u64,
        sample: Nanos,
        measure_from: Nanos,
    ) -> SimConfig {
        SimConfig {
            links: self.links,
            flows: self.flows,
            pareto: self.pareto,
            floods: self.floods,
            duration,
            seed,
            sample,
            measure_from,
            trace: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, delay_ms: u64) -> DuplexSpec {
        DuplexSpec {
            name: name.into(),
            rate: 1e6,
            varies: None,
            capacity: CapacitySource::Configured,
            delay: delay_ms * 1_000_000,
            buffer: BufferLimit::Packets(10),
            loss: 0.0,
            reverse_loss: 0.0,
            reverse_blackout: None,
            reverse_reports_only: false,
            router_restart: None,
            ecn_threshold: 5000,
            discipline: Discipline::Dual,
            marking: MarkingMode::Auto,
        }
    }

    #[test]
    fn routes_pad_to_the_requested_rtt() {
        let mut net = Network::default();
        let a = net.duplex(&spec("A", 10));
        let b = net.duplex(&spec("B", 5));
        let r = net.route(&[a, b], false, Some(100_000_000)).unwrap();
        let total: Nanos = r
            .path
            .iter()
            .chain(&r.ack_path)
            .map(|&l| net.links[l].delay)
            .sum();
        assert_eq!(total, 100_000_000);
        assert_eq!(&r.path[1..], &[a.fwd, b.fwd]);
        assert_eq!(&r.ack_path[..2], &[b.rev, a.rev]);
        let rev = net.route(&[a], true, None).unwrap();
        assert_eq!((rev.path, rev.ack_path), (vec![a.rev], vec![a.fwd]));
        let err = net.route(&[a, b], false, Some(10_000_000)).unwrap_err();
        assert!(err.contains("shorter than the path"), "{err}");
    }
}

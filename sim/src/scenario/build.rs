//! Building a scenario into a [`SimConfig`]: its links become duplex links,
//! each flow of a group gets a route padded to its RTT and a start time,
//! each Pareto source an arrival rate for its offered load, and each flood
//! of fake newcomers its stream.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use ecnq::router::bottleneck::Discipline;
use ecnq::router::capacity::{CapacitySource, DeliveryTrace, LinkRate, RateSchedule};

use ecnq::Scheme;
use toml::Spanned;

use super::file::{FlowGroup, LinkEntry, NewcomerFloodEntry, ParetoEntry};
use super::quantity::{Buffer, Time};
use super::topology::{Duplex, DuplexSpec, Network, Route};
use super::{Overrides, Scenario};
use crate::engine::{
    BufferLimit, FeedbackPath, FlowSpec, Nanos, NewcomerFloodSpec, ParetoSizes, ParetoSpec,
    SimConfig,
};
use crate::protocol::Protocol;
use crate::rng::Rng;

/// The shortest time between a flood's fake flows, s: each is at least one
/// event, and a flood with none between them would never end.
const MIN_FAKE_PERIOD: f64 = 1e-6;

impl Scenario {
    /// Builds the simulation.
    pub fn build(&self, o: &Overrides) -> Result<SimConfig, String> {
        let f = &self.file;
        let seed = o.seed.unwrap_or(f.seed);
        let duration = o.duration.unwrap_or(f.duration.0);
        self.check_traffic()?;
        self.check_cost(duration)?;
        let mss = u32::try_from(f.mss.0)
            .ok()
            .filter(|&m| m >= 64)
            .ok_or_else(|| format!("{}: mss: must be between 64 B and 4 GB", self.origin))?;
        let mut b = Builder {
            scenario: self,
            net: Network::default(),
            duplexes: Vec::new(),
            rng: Rng::new(seed ^ 0x5CE7_A710),
            scheme: self.scheme(o),
            feedback: o.feedback.unwrap_or(f.feedback),
            ack_frame: (f.ack_frame >= 1).then_some(f.ack_frame).ok_or_else(|| {
                format!(
                    "{}: ack_frame: an ACK frame acknowledges at least 1 packet",
                    self.origin
                )
            })?,
            ack_delay: f.ack_delay.map(|t| t.0),
            mss,
            queue: o.queue,
        };
        for (i, entry) in f.links.iter().enumerate() {
            b.add_link(i, entry)?;
        }
        if b.duplexes.is_empty() {
            return Err(format!(
                "{}: links: a scenario needs at least one link",
                self.origin
            ));
        }
        for (gi, group) in f.flows.iter().enumerate() {
            b.add_flow_group(gi, group)?;
        }
        for (pi, source) in f.pareto.iter().enumerate() {
            b.add_pareto_source(pi, source)?;
        }
        b.check_feedback()?;
        for (i, flood) in f.newcomer_flood.iter().enumerate() {
            b.add_newcomer_flood(i, flood)?;
        }
        let sample = self.sample()?;
        let measure_from = f.measure_from.map_or(0, |t| t.0);
        Ok(b.net.into_config(duration, seed, sample, measure_from))
    }
}

/// A scenario being built: the network so far, the links by name, and what
/// every flow shares.
struct Builder<'a> {
    scenario: &'a Scenario,
    net: Network,
    duplexes: Vec<(String, Duplex)>,
    /// Start jitter.
    rng: Rng,
    /// The scheme of flows that do not fix their own.
    scheme: Protocol,
    /// How ecnq flows' feedback reaches their senders.
    feedback: FeedbackPath,
    /// With ACK-count feedback, the packets each ACK frame acknowledges.
    ack_frame: u32,
    /// With ACK-count feedback, how long an ACK frame gathers at most.
    ack_delay: Option<Nanos>,
    /// The scenario's packet size.
    mss: u32,
    /// Every link's queue discipline, if overridden.
    queue: Option<Discipline>,
}

impl Builder<'_> {
    /// Every flow can take its feedback the scenario's way: ACK-ECN counts
    /// serve only the schemes the registry has a count reader for.
    fn check_feedback(&self) -> Result<(), String> {
        let Some(spec) = self
            .net
            .flows
            .iter()
            .find(|s| !s.feedback.serves(s.protocol))
        else {
            return Ok(());
        };
        let readers: Vec<_> = Scheme::ALL
            .into_iter()
            .filter(|s| s.wire().count_reader().is_some())
            .map(|s| s.name())
            .collect();
        Err(format!(
            "{}: feedback `{}`: {} cannot be read from ACK-ECN counts (these can: {})",
            self.scenario.origin,
            spec.feedback.name(),
            spec.protocol,
            readers.join(", ")
        ))
    }

    fn error_at(&self, span: Range<usize>, what: &str, msg: impl std::fmt::Display) -> String {
        self.scenario.error_at(span, what, msg)
    }

    /// Adds link entry `i` as a duplex link.
    fn add_link(&mut self, i: usize, entry: &Spanned<LinkEntry>) -> Result<(), String> {
        let span = entry.span();
        let l = entry.get_ref();
        let what = format!("links[{i}]");
        if self.duplexes.iter().any(|(n, _)| *n == l.name) {
            return Err(self.error_at(span, &what, format!("duplicate link name `{}`", l.name)));
        }
        if !(0.0..=1.0).contains(&l.loss) || !(0.0..=1.0).contains(&l.reverse_loss) {
            return Err(self.error_at(span, &what, "loss must be between 0 and 1"));
        }
        let blackout = self.span_of(l.reverse_blackout, span.clone(), &what, "reverse_blackout")?;
        let (varies, capacity) = self.capacity(l, span.clone(), &what)?;
        let rate = match (l.rate, &varies) {
            (Some(rate), None) => rate.0,
            (None, Some(varies)) => varies.nominal_bps(),
            _ => {
                return Err(self.error_at(
                    span,
                    &what,
                    "a link needs one of `rate`, `trace` and `schedule`",
                ))
            }
        };
        let (buffer, ecn_threshold) = self.buffers(l, rate, span, &what)?;
        let d = self.net.duplex(&DuplexSpec {
            name: l.name.clone(),
            rate,
            varies,
            capacity,
            delay: l.delay.0,
            buffer,
            loss: l.loss,
            reverse_loss: l.reverse_loss,
            reverse_blackout: blackout,
            reverse_reports_only: l.reverse_reports_only,
            router_restart: l.router_restart.map(|t| t.0),
            ecn_threshold,
            discipline: self.queue.unwrap_or(l.queue),
            marking: l.marking.0,
        });
        self.duplexes.push((l.name.clone(), d));
        Ok(())
    }

    /// A link's capacity over time, if it varies (a `trace` or a
    /// `schedule`), and where its router takes its capacity from.
    fn capacity(
        &self,
        l: &LinkEntry,
        span: Range<usize>,
        what: &str,
    ) -> Result<(Option<LinkRate>, CapacitySource), String> {
        let varies = match (l.rate, &l.trace, &l.schedule) {
            (None, Some(file), None) => {
                let trace = DeliveryTrace::read(&self.scenario.trace_path(file))
                    .map_err(|e| self.error_at(span.clone(), &format!("{what}.trace"), e))?;
                Some(LinkRate::Trace(Arc::new(trace)))
            }
            (None, None, Some(steps)) => {
                let steps = steps
                    .iter()
                    .map(|&(from, rate)| (Duration::from_nanos(from.0), rate.0.round() as u64))
                    .collect();
                let schedule = RateSchedule::new(steps)
                    .map_err(|e| self.error_at(span.clone(), &format!("{what}.schedule"), e))?;
                Some(LinkRate::Schedule(Arc::new(schedule)))
            }
            (Some(_), None, None) => None,
            _ => {
                return Err(self.error_at(
                    span,
                    what,
                    "give one of `rate`, `trace` and `schedule`, not several",
                ))
            }
        };
        let capacity = match (l.capacity, &l.trace) {
            (Some(CapacitySource::Configured), Some(_)) => {
                return Err(self.error_at(
                    span,
                    &format!("{what}.capacity"),
                    "a trace has no configured rate: its router measures the capacity",
                ))
            }
            (None, Some(_)) => CapacitySource::Measured,
            (source, _) => source.unwrap_or_default(),
        };
        Ok((varies, capacity))
    }

    /// A link's buffer limit (with its floor) and its classic ECN marking
    /// threshold in bytes (default: half the buffer); `rate` is its
    /// nominal rate, bits per second.
    fn buffers(
        &self,
        l: &LinkEntry,
        rate: f64,
        span: Range<usize>,
        what: &str,
    ) -> Result<(BufferLimit, u64), String> {
        let mss = self.mss;
        let bdp_rtt = self.scenario.file.bdp_rtt;
        let to_limit = |b: Buffer| -> Result<BufferLimit, String> {
            Ok(match b {
                Buffer::Packets(n) => BufferLimit::Packets(n),
                Buffer::Bytes(n) => BufferLimit::Bytes(n),
                Buffer::Bdp(x) => {
                    // Saturating: any delay a file may give must not overflow.
                    let rtt = bdp_rtt.map_or(l.delay.0.saturating_mul(2), |t| t.0);
                    let bytes = x * rate / 8.0 * rtt as f64 / 1e9;
                    BufferLimit::Packets((bytes / f64::from(mss)).round().max(1.0) as u64)
                }
            })
        };
        let buffer = match (to_limit(l.buffer)?, l.min_buffer.map(to_limit).transpose()?) {
            (BufferLimit::Packets(a), Some(BufferLimit::Packets(b))) => {
                BufferLimit::Packets(a.max(b))
            }
            (BufferLimit::Bytes(a), Some(BufferLimit::Bytes(b))) => BufferLimit::Bytes(a.max(b)),
            (_, Some(_)) => {
                return Err(self.error_at(
                    span,
                    what,
                    "buffer and min_buffer must both be in packets (or bdp) or both in bytes",
                ))
            }
            (b, None) => b,
        };
        let ecn_threshold = match l.ecn_threshold.map(to_limit).transpose()?.unwrap_or(buffer) {
            BufferLimit::Packets(n) if l.ecn_threshold.is_some() => {
                n.saturating_mul(u64::from(mss))
            }
            BufferLimit::Bytes(b) if l.ecn_threshold.is_some() => b,
            BufferLimit::Packets(n) => n.saturating_mul(u64::from(mss)) / 2,
            BufferLimit::Bytes(b) => b / 2,
        };
        Ok((buffer, ecn_threshold))
    }

    /// The duplex links a `path` of link names takes (default: every link).
    fn hops(
        &self,
        path: &Option<Vec<String>>,
        span: Range<usize>,
        what: &str,
    ) -> Result<Vec<Duplex>, String> {
        let duplexes = &self.duplexes;
        match path {
            None => Ok(duplexes.iter().map(|(_, d)| *d).collect()),
            Some(names) if names.is_empty() => Err(self.error_at(span, what, "path is empty")),
            Some(names) => names
                .iter()
                .map(|n| {
                    duplexes
                        .iter()
                        .find(|(name, _)| name == n)
                        .map(|(_, d)| *d)
                        .ok_or_else(|| {
                            let known: Vec<&str> =
                                duplexes.iter().map(|(n, _)| n.as_str()).collect();
                            self.error_at(
                                span.clone(),
                                &format!("{what}.path"),
                                format!("unknown link `{n}` (links: {})", known.join(", ")),
                            )
                        })
                })
                .collect(),
        }
    }

    /// A `[from, until]` span of a file, which must end after it starts.
    fn span_of(
        &self,
        span: Option<[Time; 2]>,
        at: Range<usize>,
        what: &str,
        field: &str,
    ) -> Result<Option<(Nanos, Nanos)>, String> {
        match span {
            Some([from, until]) if until.0 <= from.0 => Err(self.error_at(
                at,
                &format!("{what}.{field}"),
                "the span must end after it starts",
            )),
            span => Ok(span.map(|[from, until]| (from.0, until.0))),
        }
    }

    /// Adds the flows of group `gi`, each routed to its RTT.
    fn add_flow_group(&mut self, gi: usize, group: &Spanned<FlowGroup>) -> Result<(), String> {
        let span = group.span();
        let g = group.get_ref();
        let what = format!("flows[{gi}]");
        let hops = self.hops(&g.path, span.clone(), &what)?;
        let protocol = g.scheme.unwrap_or(self.scheme);
        let pause = self.span_of(g.pause, span.clone(), &what, "pause")?;
        let start = g.start.map_or(0, |t| t.0);
        let step = g.start_step.map_or(0, |t| t.0);
        let jitter = g.start_jitter.map_or(0, |t| t.0);
        for i in 0..g.count as usize {
            let rtt = match &g.rtt {
                Some(r) => Some(
                    r.get(i)
                        .ok_or_else(|| self.error_at(span.clone(), &what, "rtt list is empty"))?
                        .0,
                ),
                None => None,
            };
            let route = self
                .net
                .route(&hops, g.reverse, rtt)
                .map_err(|e| self.error_at(span.clone(), &format!("{what}.rtt"), e))?;
            let jitter = (self.rng.uniform() * jitter as f64) as Nanos;
            let mss = self.flow_mss(g, i, span.clone(), &what)?;
            self.net.flows.push(FlowSpec {
                protocol,
                path: route.path,
                ack_path: route.ack_path,
                start: start + step * i as Nanos + jitter,
                stop: g.stop.map(|t| t.0),
                pause,
                size: g.size.map(|b| b.0.max(1)),
                mss,
                max_window: g.max_window.map(|p| u64::from(p) * u64::from(mss)),
                group: g.name.clone().unwrap_or_else(|| format!("flows{gi}")),
                sampled: true,
                background: g.background,
                delayed_ack: g.delayed_ack,
                pace: g.pace,
                feedback: self.feedback,
                ack_frame: self.ack_frame,
                ack_delay: self.ack_delay,
            });
        }
        Ok(())
    }

    /// Flow `i` of group `g`'s packet size (default: the scenario's).
    fn flow_mss(
        &self,
        g: &FlowGroup,
        i: usize,
        span: Range<usize>,
        what: &str,
    ) -> Result<u32, String> {
        match &g.mss {
            None => Ok(self.mss),
            Some(m) => m
                .get(i)
                .and_then(|b| u32::try_from(b.0).ok())
                .filter(|&m| m >= 64)
                .ok_or_else(|| {
                    self.error_at(span, &format!("{what}.mss"), "must be at least 64 B")
                }),
        }
    }

    /// Adds Pareto source `pi`, its arrival rate set for its offered load
    /// on the smallest capacity of its path.
    fn add_pareto_source(
        &mut self,
        pi: usize,
        source: &Spanned<ParetoEntry>,
    ) -> Result<(), String> {
        let span = source.span();
        let p = source.get_ref();
        let what = format!("pareto[{pi}]");
        if p.shape <= 1.0 || !p.shape.is_finite() {
            return Err(self.error_at(
                span,
                &what,
                "shape must be greater than 1 (the mean must exist)",
            ));
        }
        if !(p.load > 0.0 && p.load.is_finite()) || p.mean_size.0 == 0 {
            return Err(self.error_at(span, &what, "load and mean_size must be positive"));
        }
        let mean = p.mean_size.0 as f64;
        let max = p.max_size.map_or(f64::INFINITY, |b| b.0 as f64);
        if max <= mean {
            let field = format!("{what}.max_size");
            return Err(self.error_at(span, &field, "must be more than mean_size"));
        }
        let route = self.source_route(&p.path, p.rtt, span, &what)?;
        let capacity = route
            .path
            .iter()
            .filter_map(|&l| self.net.links[l].rate)
            .fold(f64::INFINITY, f64::min);
        let group = p.name.clone().unwrap_or_else(|| format!("pareto{pi}"));
        self.net.pareto.push(ParetoSpec {
            arrivals_per_sec: p.load * capacity / 8.0 / mean,
            sizes: ParetoSizes::with_mean(p.shape, mean, max),
            until: p.stop.map_or(Nanos::MAX, |t| t.0),
            flow: self.source_flow(p.scheme, route, p.start, group),
        });
        Ok(())
    }

    /// Adds flood `i` of fake newcomers.
    fn add_newcomer_flood(
        &mut self,
        i: usize,
        flood: &Spanned<NewcomerFloodEntry>,
    ) -> Result<(), String> {
        let span = flood.span();
        let n = flood.get_ref();
        let what = format!("newcomer_flood[{i}]");
        let field = |name: &str| format!("{what}.{name}");
        if !(n.rate.0 > 0.0 && n.rate.0.is_finite()) {
            return Err(self.error_at(span, &field("rate"), "must be more than 0"));
        }
        if n.packets == 0 {
            return Err(self.error_at(span, &field("packets"), "must be at least 1"));
        }
        let size = u32::try_from(n.size.0).ok().filter(|&s| s > 0);
        let Some(size) = size else {
            return Err(self.error_at(span, &field("size"), "must be between 1 B and 4 GB"));
        };
        let bits = f64::from(n.packets) * f64::from(size) * 8.0;
        if bits / n.rate.0 < MIN_FAKE_PERIOD {
            let most = format!("at most one fake flow per µs ({} bit/s)", bits * 1e6);
            return Err(self.error_at(span, &field("rate"), most));
        }
        let start = n.start.map_or(0, |t| t.0);
        let until = n.stop.map_or(Nanos::MAX, |t| t.0);
        if until <= start {
            return Err(self.error_at(span, &field("stop"), "must be after start"));
        }
        let route = self.source_route(&n.path, n.rtt, span, &what)?;
        let group = n
            .name
            .clone()
            .unwrap_or_else(|| format!("newcomer_flood{i}"));
        self.net.floods.push(NewcomerFloodSpec {
            rate: n.rate.0,
            packets: n.packets,
            size,
            spread: n.spread.map_or(0, |t| t.0),
            until,
            // Reported with the flows (its delivered bytes), and with no
            // feedback path: nothing answers a fake flow.
            flow: FlowSpec {
                mss: size,
                sampled: true,
                feedback: FeedbackPath::Ack,
                ..self.source_flow(n.scheme, route, n.start, group)
            },
        });
        Ok(())
    }

    /// The route of a source's flows over `path` (default: every link),
    /// padded to `rtt`.
    fn source_route(
        &mut self,
        path: &Option<Vec<String>>,
        rtt: Option<Time>,
        span: Range<usize>,
        what: &str,
    ) -> Result<Route, String> {
        let hops = self.hops(path, span.clone(), what)?;
        self.net
            .route(&hops, false, rtt.map(|t| t.0))
            .map_err(|e| self.error_at(span, &format!("{what}.rtt"), e))
    }

    /// The template of a source's flows: background traffic of `scheme`
    /// (default: the scenario's) in `group`, from `start`, left out of the
    /// per-flow series.
    fn source_flow(
        &self,
        scheme: Option<Protocol>,
        route: Route,
        start: Option<Time>,
        group: String,
    ) -> FlowSpec {
        FlowSpec {
            protocol: scheme.unwrap_or(self.scheme),
            path: route.path,
            ack_path: route.ack_path,
            start: start.map_or(0, |t| t.0),
            stop: None,
            pause: None,
            size: None,
            mss: self.mss,
            max_window: None,
            group,
            sampled: false,
            background: true,
            delayed_ack: false,
            pace: true,
            feedback: self.feedback,
            ack_frame: self.ack_frame,
            ack_delay: self.ack_delay,
        }
    }
}

//! Scenario files (TOML): links, flow groups and finite-flow sources, with
//! the papers' parameters. A scenario names its default scheme; any run may
//! override it, and `--set key=value` changes any field (a dotted path such
//! as `links.0.rate` or `flows.1.count`).
//!
//! Errors name the file, the line and the field.

use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use crate::engine::{BufferLimit, FlowSpec, Nanos, ParetoSpec, SimConfig, SECOND};

/// Longest simulated time a scenario may ask for: a day.
pub const MAX_DURATION: Nanos = 86_400 * SECOND;
/// Memory a scenario's flows and time series may take.
pub const MEMORY_BUDGET: u64 = 4 << 30;
/// A flow's state in the simulator, bytes (its specification, law, sender
/// and receiver): 10 000 000 flows took 5 GB, about 500 each; rounded up.
const BYTES_PER_FLOW: u64 = 1024;
/// One flow's or link's sample of the time series, bytes (at least
/// `size_of` of [`crate::engine::FlowSample`]).
const BYTES_PER_SAMPLE: u64 = 64;
use crate::protocol::Protocol;
use crate::rng::Rng;
use crate::topology::{Duplex, DuplexSpec, Network};
use crate::units::{Buffer, Bytes, Rate, Time};
use ecnq::bottleneck::Discipline;
use ecnq::router::MarkingMode;

/// One value or a list (a list gives one value per flow of a group, cycled).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    /// The same for every flow.
    One(T),
    /// Flow i gets element i mod len.
    Many(Vec<T>),
}

impl<T: Copy> OneOrMany<T> {
    fn get(&self, i: usize) -> Option<T> {
        match self {
            OneOrMany::One(v) => Some(*v),
            OneOrMany::Many(vs) if vs.is_empty() => None,
            OneOrMany::Many(vs) => Some(vs[i % vs.len()]),
        }
    }
}

/// A duplex link.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkEntry {
    /// Unique name (paths refer to it).
    pub name: String,
    /// Rate, e.g. `"20Mbit"`.
    pub rate: Rate,
    /// One-way propagation delay, e.g. `"10ms"`.
    pub delay: Time,
    /// Drop-tail buffer: `"50pkt"`, `"64KB"` or `"1bdp"` (rate × `bdp_rtt`).
    pub buffer: Buffer,
    /// Random loss probability on the forward direction, 0..1.
    #[serde(default)]
    pub loss: f64,
    /// Classic ECN marking threshold (default: half the buffer).
    pub ecn_threshold: Option<Buffer>,
    /// A floor under `buffer` (the BMCC paper: the larger of one BDP and two
    /// packets per flow).
    pub min_buffer: Option<Buffer>,
    /// `"dual"` (default: ecnq traffic in its own queue, the rest under
    /// CoDel) or `"fifo"` (one drop-tail queue, as in the papers).
    #[serde(default, deserialize_with = "discipline")]
    pub queue: Discipline,
    /// `"auto"` (default: the router marks by each packet's tag) or `"off"`
    /// (a drop-tail router that knows nothing of ecnq).
    #[serde(default, deserialize_with = "marking")]
    pub marking: Marking,
}

/// A link's marking, `auto` unless a file says otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marking(pub MarkingMode);

impl Default for Marking {
    fn default() -> Marking {
        Marking(MarkingMode::Auto)
    }
}

fn marking<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Marking, D::Error> {
    let text = String::deserialize(d)?;
    text.parse().map(Marking).map_err(serde::de::Error::custom)
}

fn discipline<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Discipline, D::Error> {
    let text = String::deserialize(d)?;
    text.parse().map_err(serde::de::Error::custom)
}

/// A group of identical long-lived or fixed-size flows.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowGroup {
    /// Name in reports (default `flows<i>`).
    pub name: Option<String>,
    /// How many flows.
    #[serde(default = "one")]
    pub count: u32,
    /// A fixed protocol (background traffic); default: the scenario's scheme.
    pub scheme: Option<Protocol>,
    /// Link names in data order (default: every link, in file order).
    pub path: Option<Vec<String>>,
    /// Send data over the reverse direction (two-way traffic).
    #[serde(default)]
    pub reverse: bool,
    /// Round-trip propagation delay (one value or one per flow).
    pub rtt: Option<OneOrMany<Time>>,
    /// Start of the first flow.
    #[serde(default)]
    pub start: Option<Time>,
    /// Flow i starts `i × start_step` after the first.
    #[serde(default)]
    pub start_step: Option<Time>,
    /// Plus a uniform random delay in `[0, start_jitter)`.
    #[serde(default)]
    pub start_jitter: Option<Time>,
    /// Stop sending new data at this time.
    pub stop: Option<Time>,
    /// Bytes per flow (default: long-lived).
    pub size: Option<Bytes>,
    /// Window cap in packets (the papers' background TCP flows use 20).
    pub max_window: Option<u32>,
    /// Background traffic: reported, but left out of Jain's index and of
    /// the fair share that convergence time refers to.
    #[serde(default)]
    pub background: bool,
    /// The receiver acknowledges every second packet, or after 40 ms.
    #[serde(default)]
    pub delayed_ack: bool,
    /// Window senders pace at 1.25 × window / srtt, as ecnq's QUIC stack
    /// (quinn) does; `false` sends on ACK clocking alone, like ns-2's TCP.
    #[serde(default = "yes")]
    pub pace: bool,
    /// Packet size for this group (one value or one per flow; default: the scenario's `mss`).
    pub mss: Option<OneOrMany<Bytes>>,
}

/// Finite flows arriving as a Poisson process with Pareto sizes.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParetoEntry {
    /// Name in reports.
    pub name: Option<String>,
    /// A fixed protocol; default: the scenario's scheme.
    pub scheme: Option<Protocol>,
    /// Link names (default: every link).
    pub path: Option<Vec<String>>,
    /// Round-trip propagation delay.
    pub rtt: Option<Time>,
    /// Offered load as a fraction of the path's smallest capacity.
    pub load: f64,
    /// Mean flow size.
    pub mean_size: Bytes,
    /// Pareto shape α (> 1).
    pub shape: f64,
    /// First arrival.
    pub start: Option<Time>,
    /// Last arrival.
    pub stop: Option<Time>,
}

fn one() -> u32 {
    1
}

fn yes() -> bool {
    true
}

/// A scenario file's contents.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// What the scenario reproduces.
    pub title: String,
    /// Paper file and figure.
    #[serde(default)]
    pub paper: String,
    /// The paper's reported result, for the one-screen summary.
    #[serde(default)]
    pub expect: String,
    /// Default scheme for flows that do not fix one.
    pub scheme: Protocol,
    /// Simulated time.
    pub duration: Time,
    /// RNG seed.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Data packet size.
    #[serde(default = "default_mss")]
    pub mss: Bytes,
    /// Time-series sampling period (default 100 ms).
    pub sample: Option<Time>,
    /// Summary statistics start here (default 0).
    pub measure_from: Option<Time>,
    /// The RTT that `bdp` buffers refer to (default: the link's own round trip).
    pub bdp_rtt: Option<Time>,
    /// Links.
    pub links: Vec<Spanned<LinkEntry>>,
    /// Flow groups.
    #[serde(default)]
    pub flows: Vec<Spanned<FlowGroup>>,
    /// Finite-flow sources.
    #[serde(default)]
    pub pareto: Vec<Spanned<ParetoEntry>>,
}

fn default_seed() -> u64 {
    1
}

fn default_mss() -> Bytes {
    Bytes(1000)
}

/// A loaded scenario: its name, source text and parsed contents.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// File stem.
    pub name: String,
    /// Where it came from (for messages).
    pub origin: String,
    /// The TOML text (after overrides).
    pub source: String,
    /// The parsed file.
    pub file: ScenarioFile,
}

/// Run-time overrides from the command line.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// Replaces the scenario's scheme.
    pub scheme: Option<Protocol>,
    /// Replaces the seed.
    pub seed: Option<u64>,
    /// Replaces the duration.
    pub duration: Option<Nanos>,
}

fn line_of(source: &str, offset: usize) -> usize {
    source[..offset.min(source.len())].matches('\n').count() + 1
}

impl Scenario {
    /// Reads and parses a scenario file, applying `set` edits first.
    pub fn load(path: &Path, set: &[String]) -> Result<Scenario, String> {
        let origin = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("{origin}: cannot read: {e}"))?;
        let name = path
            .file_stem()
            .map_or_else(|| origin.clone(), |s| s.to_string_lossy().into_owned());
        Scenario::parse(&name, &origin, &text, set)
    }

    /// Parses scenario text; `origin` names it in error messages.
    pub fn parse(name: &str, origin: &str, text: &str, set: &[String]) -> Result<Scenario, String> {
        let source = apply_edits(text, set).map_err(|e| format!("{origin}: {e}"))?;
        let file: ScenarioFile = toml::from_str(&source).map_err(|e| {
            let line = e.span().map(|s| line_of(&source, s.start));
            let field = line
                .and_then(|l| source.lines().nth(l - 1))
                .and_then(|l| l.split_once('='))
                .map(|(key, _)| format!("field `{}`: ", key.trim()))
                .unwrap_or_default();
            let at = line.map(|l| format!(":{l}")).unwrap_or_default();
            format!("{origin}{at}: {field}{}", e.message().trim())
        })?;
        Ok(Scenario {
            name: name.to_owned(),
            origin: origin.to_owned(),
            source,
            file,
        })
    }

    fn error_at(
        &self,
        span: std::ops::Range<usize>,
        what: &str,
        msg: impl std::fmt::Display,
    ) -> String {
        format!(
            "{}:{}: {what}: {msg}",
            self.origin,
            line_of(&self.source, span.start)
        )
    }

    /// The protocol the scenario's main flows run under these overrides.
    pub fn scheme(&self, o: &Overrides) -> Protocol {
        o.scheme.unwrap_or(self.file.scheme)
    }

    /// Checks what the scenario would cost before anything is allocated:
    /// a simulated duration of at most [`MAX_DURATION`], and flows and
    /// samples within [`MEMORY_BUDGET`].
    fn check_cost(&self, duration: Nanos) -> Result<(), String> {
        if duration == 0 || duration > MAX_DURATION {
            return Err(format!(
                "{}: duration: must be more than 0 s and at most {} s, got {} s",
                self.origin,
                MAX_DURATION / SECOND,
                duration as f64 / 1e9
            ));
        }
        let f = &self.file;
        let flows: u64 = f.flows.iter().map(|g| u64::from(g.get_ref().count)).sum();
        let sample = f.sample.map_or(SECOND / 10, |t| t.0.max(1_000_000));
        let series = (flows + f.links.len() as u64) * (duration / sample) * BYTES_PER_SAMPLE;
        let need = flows.saturating_mul(BYTES_PER_FLOW).saturating_add(series);
        if need > MEMORY_BUDGET {
            return Err(format!(
                "{}: {flows} flows over {} s sampled every {} ms need about {} MB, more than the {} MB allowed (fewer flows, a shorter duration or a longer sample)",
                self.origin,
                duration / SECOND,
                sample / 1_000_000,
                need >> 20,
                MEMORY_BUDGET >> 20
            ));
        }
        Ok(())
    }

    /// Builds the simulation.
    pub fn build(&self, o: &Overrides) -> Result<SimConfig, String> {
        let f = &self.file;
        let scheme = self.scheme(o);
        let seed = o.seed.unwrap_or(f.seed);
        let duration = o.duration.unwrap_or(f.duration.0);
        self.check_cost(duration)?;
        let mss = u32::try_from(f.mss.0)
            .ok()
            .filter(|&m| m >= 64)
            .ok_or_else(|| format!("{}: mss: must be between 64 B and 4 GB", self.origin))?;
        let mut rng = Rng::new(seed ^ 0x5CE7_A710);
        let mut net = Network::default();
        let mut duplexes: Vec<(String, Duplex)> = Vec::new();
        for (i, entry) in f.links.iter().enumerate() {
            let span = entry.span();
            let l = entry.get_ref();
            let what = format!("links[{i}]");
            if duplexes.iter().any(|(n, _)| *n == l.name) {
                return Err(self.error_at(
                    span,
                    &what,
                    format!("duplicate link name `{}`", l.name),
                ));
            }
            if !(0.0..=1.0).contains(&l.loss) {
                return Err(self.error_at(span, &what, "loss must be between 0 and 1"));
            }
            let to_limit = |b: Buffer| -> Result<BufferLimit, String> {
                Ok(match b {
                    Buffer::Packets(n) => BufferLimit::Packets(n),
                    Buffer::Bytes(n) => BufferLimit::Bytes(n),
                    Buffer::Bdp(x) => {
                        // Saturating: a fuzzer's `delay = "1e30s"` overflowed.
                        let rtt = f.bdp_rtt.map_or(l.delay.0.saturating_mul(2), |t| t.0);
                        let bytes = x * l.rate.0 / 8.0 * rtt as f64 / 1e9;
                        BufferLimit::Packets((bytes / f64::from(mss)).round().max(1.0) as u64)
                    }
                })
            };
            let buffer =
                match (to_limit(l.buffer)?, l.min_buffer.map(to_limit).transpose()?) {
                    (BufferLimit::Packets(a), Some(BufferLimit::Packets(b))) => {
                        BufferLimit::Packets(a.max(b))
                    }
                    (BufferLimit::Bytes(a), Some(BufferLimit::Bytes(b))) => {
                        BufferLimit::Bytes(a.max(b))
                    }
                    (_, Some(_)) => return Err(self.error_at(
                        span,
                        &what,
                        "buffer and min_buffer must both be in packets (or bdp) or both in bytes",
                    )),
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
            let d = net.duplex(&DuplexSpec {
                name: l.name.clone(),
                rate: l.rate.0,
                delay: l.delay.0,
                buffer,
                loss: l.loss,
                ecn_threshold,
                discipline: l.queue,
                marking: l.marking.0,
            });
            duplexes.push((l.name.clone(), d));
        }
        if duplexes.is_empty() {
            return Err(format!(
                "{}: links: a scenario needs at least one link",
                self.origin
            ));
        }
        let hops = |path: &Option<Vec<String>>,
                    span: std::ops::Range<usize>,
                    what: &str|
         -> Result<Vec<Duplex>, String> {
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
        };
        for (gi, group) in f.flows.iter().enumerate() {
            let span = group.span();
            let g = group.get_ref();
            let what = format!("flows[{gi}]");
            let hops = hops(&g.path, span.clone(), &what)?;
            let protocol = g.scheme.unwrap_or(scheme);
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
                let route = net
                    .route(&hops, g.reverse, rtt)
                    .map_err(|e| self.error_at(span.clone(), &format!("{what}.rtt"), e))?;
                let jitter = (rng.uniform() * jitter as f64) as Nanos;
                let mss = match &g.mss {
                    None => mss,
                    Some(m) => m
                        .get(i)
                        .and_then(|b| u32::try_from(b.0).ok())
                        .filter(|&m| m >= 64)
                        .ok_or_else(|| {
                            self.error_at(
                                span.clone(),
                                &format!("{what}.mss"),
                                "must be at least 64 B",
                            )
                        })?,
                };
                net.flows.push(FlowSpec {
                    protocol,
                    path: route.path,
                    ack_path: route.ack_path,
                    start: start + step * i as Nanos + jitter,
                    stop: g.stop.map(|t| t.0),
                    size: g.size.map(|b| b.0.max(1)),
                    mss,
                    max_window: g.max_window.map(|p| u64::from(p) * u64::from(mss)),
                    group: g.name.clone().unwrap_or_else(|| format!("flows{gi}")),
                    sampled: true,
                    background: g.background,
                    delayed_ack: g.delayed_ack,
                    pace: g.pace,
                });
            }
        }
        for (pi, source) in f.pareto.iter().enumerate() {
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
            let hops = hops(&p.path, span.clone(), &what)?;
            let route = net
                .route(&hops, false, p.rtt.map(|t| t.0))
                .map_err(|e| self.error_at(span.clone(), &format!("{what}.rtt"), e))?;
            let capacity = route
                .path
                .iter()
                .filter_map(|&l| net.links[l].rate)
                .fold(f64::INFINITY, f64::min);
            let mean = p.mean_size.0 as f64;
            net.pareto.push(ParetoSpec {
                arrivals_per_sec: p.load * capacity / 8.0 / mean,
                shape: p.shape,
                mean_size: mean,
                until: p.stop.map_or(Nanos::MAX, |t| t.0),
                flow: FlowSpec {
                    protocol: p.scheme.unwrap_or(scheme),
                    path: route.path,
                    ack_path: route.ack_path,
                    start: p.start.map_or(0, |t| t.0),
                    stop: None,
                    size: None,
                    mss,
                    max_window: None,
                    group: p.name.clone().unwrap_or_else(|| format!("pareto{pi}")),
                    sampled: false,
                    background: true,
                    delayed_ack: false,
                    pace: true,
                },
            });
        }
        let sample = f.sample.map_or(SECOND / 10, |t| t.0.max(1_000_000));
        let measure_from = f.measure_from.map_or(0, |t| t.0);
        Ok(net.into_config(duration, seed, sample, measure_from))
    }
}

/// Applies `key=value` edits (dotted paths, numeric segments index arrays)
/// to TOML text, keeping its layout so line numbers still point at the file.
pub fn apply_edits(text: &str, set: &[String]) -> Result<String, String> {
    if set.is_empty() {
        return Ok(text.to_owned());
    }
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| e.to_string())?;
    for edit in set {
        let (key, value) = edit
            .split_once('=')
            .ok_or_else(|| format!("--set `{edit}`: expected key=value"))?;
        let value: toml_edit::Value = value
            .trim()
            .parse()
            .unwrap_or_else(|_| toml_edit::Value::from(value.trim()));
        let parts: Vec<&str> = key.trim().split('.').collect();
        set_in_table(doc.as_table_mut(), &parts, value)
            .ok_or_else(|| format!("--set `{edit}`: no field `{}` in the scenario", key.trim()))?;
    }
    Ok(doc.to_string())
}

fn set_in_table(
    table: &mut dyn toml_edit::TableLike,
    parts: &[&str],
    value: toml_edit::Value,
) -> Option<()> {
    let (head, rest) = parts.split_first()?;
    if rest.is_empty() {
        table.insert(head, toml_edit::Item::Value(value));
        return Some(());
    }
    match table.get_mut(head)? {
        toml_edit::Item::ArrayOfTables(array) => {
            let (index, rest) = rest.split_first()?;
            let inner = array.get_mut(index.parse().ok()?)?;
            set_in_table(inner, rest, value)
        }
        toml_edit::Item::Value(toml_edit::Value::Array(array)) if rest.len() == 1 => {
            let slot = array.get_mut(rest[0].parse().ok()?)?;
            *slot = value;
            Some(())
        }
        item => set_in_table(item.as_table_like_mut()?, rest, value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"
title = "t"
scheme = "vcp"
duration = "10s"
[[links]]
name = "L"
rate = "10Mbit"
delay = "5ms"
buffer = "20pkt"
[[flows]]
count = 2
rtt = ["20ms", "40ms"]
"#;

    #[test]
    fn edits_change_fields_and_keep_lines() {
        let set = [
            "links.0.rate=4Mbit".to_owned(),
            "flows.0.count=3".to_owned(),
            "flows.0.rtt.1=60ms".to_owned(),
            "seed=9".to_owned(),
        ];
        let s = Scenario::parse("t", "t", TEXT, &set).unwrap();
        assert_eq!(s.file.links[0].get_ref().rate, Rate(4e6));
        assert_eq!(s.file.flows[0].get_ref().count, 3);
        assert_eq!(s.file.seed, 9);
        let config = s.build(&Overrides::default()).unwrap();
        assert_eq!(config.flows.len(), 3);
        // Flow 1 got the edited 60 ms RTT: 10 ms on the link, 50 ms of access delay.
        let rtt: Nanos = config.flows[1]
            .path
            .iter()
            .chain(&config.flows[1].ack_path)
            .map(|&l| config.links[l].delay)
            .sum();
        assert_eq!(rtt, 60_000_000);
        // Editing an existing key keeps every line where it was.
        let edited = apply_edits(TEXT, &set[..3]).unwrap();
        assert_eq!(line_of(&edited, edited.find("rate").unwrap()), 7);
        assert_eq!(edited.lines().count(), TEXT.lines().count());
        let err = apply_edits(TEXT, &["links.3.rate=1Mbit".to_owned()]).unwrap_err();
        assert!(err.contains("no field `links.3.rate`"), "{err}");
    }

    #[test]
    fn overrides_replace_scheme_seed_and_duration() {
        let s = Scenario::parse("t", "t", TEXT, &[]).unwrap();
        let o = Overrides {
            scheme: Some("cubic".parse().unwrap()),
            seed: Some(4),
            duration: Some(1_000_000_000),
        };
        let config = s.build(&o).unwrap();
        assert_eq!((config.seed, config.duration), (4, 1_000_000_000));
        assert!(config.flows.iter().all(|f| f.protocol.name() == "cubic"));
    }

    #[test]
    fn costly_scenarios_fail_before_allocating() {
        let build = |set: &[&str]| {
            let set: Vec<String> = set.iter().map(|s| (*s).to_owned()).collect();
            Scenario::parse("t", "t", TEXT, &set)?.build(&Overrides::default())
        };
        let err = build(&["flows.0.count=10000000"]).unwrap_err();
        assert!(
            err.contains("10000000 flows") && err.contains("MB allowed"),
            "{err}"
        );
        let err = build(&["duration=1e30s"]).unwrap_err();
        assert!(err.contains("duration: must be"), "{err}");
        let err = build(&["duration=0s"]).unwrap_err();
        assert!(err.contains("duration: must be"), "{err}");
        assert!(build(&["flows.0.count=1000", "duration=600s"]).is_ok());
    }

    proptest::proptest! {
        /// Quantities parse or fail, never panic, whatever the text.
        #[test]
        fn quantities_never_panic(text in "\\PC{0,24}", number in proptest::num::f64::ANY, unit in "(ns|us|ms|s|Mbit|KB|pkt|bdp|GiB|)") {
            for t in [text.clone(), format!("{number}{unit}"), format!("{number:e}{unit}")] {
                let _ = t.parse::<Time>();
                let _ = t.parse::<Rate>();
                let _ = t.parse::<Bytes>();
                let _ = t.parse::<Buffer>();
            }
        }

        /// Any edit of the scenario's fields gives a scenario or an error.
        #[test]
        fn edits_never_panic(key in "(duration|seed|flows.0.count|flows.0.rtt.0|links.0.rate|links.0.buffer|links.0.loss|mss|sample)", value in "[0-9a-zA-Z.e+-]{0,12}") {
            let set = [format!("{key}={value}")];
            if let Ok(s) = Scenario::parse("t", "t", TEXT, &set) {
                let _ = s.build(&Overrides::default());
            }
        }
    }
}

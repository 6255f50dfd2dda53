//! The scenario file format: what each table and field of a scenario's
//! TOML means, with its default. Quantities parse with [`super::quantity`].

use serde::Deserialize;
use toml::Spanned;

use super::quantity::{Buffer, Bytes, Rate, Time};
use crate::engine::FeedbackPath;
use crate::protocol::Case;
use crate::protocol::Protocol;
use ecnq::router::bottleneck::Discipline;
use ecnq::router::capacity::CapacitySource;
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
    /// The value for flow `i` (None for an empty list).
    pub(super) fn get(&self, i: usize) -> Option<T> {
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
    /// Rate, e.g. `"20Mbit"`; a link gives this, `trace` or `schedule`.
    pub rate: Option<Rate>,
    /// A Mahimahi delivery trace for the forward direction, e.g.
    /// `"ATT-LTE-driving.down"`: a path from the scenario file's directory,
    /// else from `ECNQ_TRACES` ([`super::trace_dir`]). The reverse
    /// direction runs at the trace's mean rate.
    pub trace: Option<String>,
    /// Piecewise-constant rates for the forward direction, e.g.
    /// `[["0s", "100Mbit"], ["10s", "20Mbit"]]`; the reverse direction runs
    /// at the first.
    pub schedule: Option<Vec<(Time, Rate)>>,
    /// `"configured"` (the router meters against the rate in force, the
    /// default for `rate` and `schedule`) or `"measured"` (against what the
    /// link drains, the default and the only choice for `trace`).
    #[serde(default, deserialize_with = "capacity")]
    pub capacity: Option<CapacitySource>,
    /// One-way propagation delay, e.g. `"10ms"`.
    pub delay: Time,
    /// Drop-tail buffer: `"50pkt"`, `"64kb"` (bytes, powers of 1024) or `"1bdp"` (rate × `bdp_rtt`).
    pub buffer: Buffer,
    /// Random loss probability on the forward direction, 0..1.
    #[serde(default)]
    pub loss: f64,
    /// Random loss probability on the reverse direction (ACKs, reports), 0..1.
    #[serde(default)]
    pub reverse_loss: f64,
    /// The reverse direction loses what it transmits from the first time
    /// to the second, e.g. `["8s", "10s"]`.
    pub reverse_blackout: Option<[Time; 2]>,
    /// The reverse direction's loss and blackout hit only session feedback
    /// reports: a path that passes ACKs but not reports (default false).
    #[serde(default)]
    pub reverse_reports_only: bool,
    /// The routers of both directions restart at this time, e.g. `"15s"`:
    /// their flow tables, meters and advertised shares are lost; packets
    /// already queued stay.
    pub router_restart: Option<Time>,
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

fn capacity<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<CapacitySource>, D::Error> {
    let text = String::deserialize(d)?;
    text.parse().map(Some).map_err(serde::de::Error::custom)
}

fn feedback_path<'de, D: serde::Deserializer<'de>>(d: D) -> Result<FeedbackPath, D::Error> {
    let text = String::deserialize(d)?;
    text.parse().map_err(serde::de::Error::custom)
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
    /// The application has nothing to send from the first time to the
    /// second, e.g. `["10s", "12s"]`; what is in flight is still delivered.
    pub pause: Option<[Time; 2]>,
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
    /// The largest flow size: a bounded Pareto whose mean is still
    /// `mean_size`, so that the flows of a run offer `load` (default:
    /// unbounded).
    pub max_size: Option<Bytes>,
    /// Pareto shape α (> 1).
    pub shape: f64,
    /// First arrival.
    pub start: Option<Time>,
    /// Last arrival.
    pub stop: Option<Time>,
}

/// A stream of fake newcomers: every `packets` packets come from a new flow
/// that never answers anything, together at `rate`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewcomerFloodEntry {
    /// Name in reports (default `newcomer_flood<i>`).
    pub name: Option<String>,
    /// The scheme whose tag and fresh-flow codepoint its packets carry;
    /// default: the scenario's scheme.
    pub scheme: Option<Protocol>,
    /// Link names (default: every link).
    pub path: Option<Vec<String>>,
    /// Round-trip propagation delay of its path.
    pub rtt: Option<Time>,
    /// The stream's total rate: fake flows arrive at rate / (packets × size).
    pub rate: Rate,
    /// Packets per fake flow.
    pub packets: u32,
    /// Bytes per packet.
    pub size: Bytes,
    /// A fake flow's packets are spread evenly over this span (default 0:
    /// back to back).
    pub spread: Option<Time>,
    /// The first fake flow starts here (default 0).
    pub start: Option<Time>,
    /// No fake flow starts from here on (default: the end of the run).
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
    /// What `compare` runs when not told (`--schemes`): cases such as
    /// `"erc"` or `"cubic@fifo"` (a scheme and the queue every link takes),
    /// or a line-up such as `"arrivals"`; default: every scheme in the
    /// scenario's queues.
    #[serde(default, deserialize_with = "crate::protocol::deserialize_cases")]
    pub compare: Vec<Case>,
    /// How ecnq flows' feedback reaches their senders: `"ack"` (default:
    /// every ACK carries the receiver's estimate, as in the papers' ns-2
    /// models) or `"session"` (each end runs the QUIC stack's connection
    /// session; reports are packets of their own on the reverse path, and
    /// the session decides fallback, recovery and router presence) or
    /// `"ack-counts"` (the receiver runs no ecnq: ACKs carry its ECN
    /// counts, which the sender reads; erc only).
    #[serde(default, deserialize_with = "feedback_path")]
    pub feedback: FeedbackPath,
    /// With `"ack-counts"`: how many packets each of the receiver's ACK
    /// frames newly acknowledges (1, the default, is an ACK per packet;
    /// Chromium's is 10). The sender reads the counts once per frame.
    #[serde(default = "one")]
    pub ack_frame: u32,
    /// With `"ack-counts"`: a frame also ends once its oldest ACK has
    /// waited this long, e.g. `10ms` for a receiver that acknowledges
    /// every quarter RTT of 40 ms (default: by count only).
    #[serde(default)]
    pub ack_delay: Option<Time>,
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
    /// The end of an arrival period that starts at `measure_from`: the
    /// summary and `compare` add its queue and loss, and when Jain's index
    /// settled (default: none).
    pub arrivals: Option<Time>,
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
    /// Floods of fake newcomers.
    #[serde(default)]
    pub newcomer_flood: Vec<Spanned<NewcomerFloodEntry>>,
}

fn default_seed() -> u64 {
    1
}

fn default_mss() -> Bytes {
    Bytes(1000)
}

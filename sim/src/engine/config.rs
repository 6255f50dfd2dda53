//! What a run is built from: one-way links, flows and finite-flow sources,
//! as the scenario files and the topology builder produce them.

use crate::protocol::Protocol;
use ecnq::router::bottleneck::Discipline;
use ecnq::router::MarkingMode;

use super::clock::Nanos;

/// A link's buffer limit (the core's queue limit).
pub use ecnq::router::bottleneck::QueueLimit as BufferLimit;

/// One one-way link.
#[derive(Clone, Debug)]
pub struct LinkSpec {
    /// Name for reports.
    pub name: String,
    /// Rate in bits per second; `None` is a pure delay with no queue.
    pub rate: Option<f64>,
    /// Propagation delay.
    pub delay: Nanos,
    /// Drop-tail limit.
    pub buffer: BufferLimit,
    /// Probability that a transmitted packet is lost on the wire.
    pub loss: f64,
    /// Untagged ECT packets are marked CE while this many bytes wait
    /// (FIFO links; a dual-queue link runs CoDel on them instead).
    pub ecn_threshold: u64,
    /// How the link queues packets.
    pub discipline: Discipline,
    /// Whether its router marks (auto, by tag) or only queues (off: a
    /// drop-tail router with no ecnq support).
    pub marking: MarkingMode,
    /// Whether reports and time series include this link.
    pub report: bool,
}

/// One flow: a sender, a receiver and the paths between them.
#[derive(Clone, Debug)]
pub struct FlowSpec {
    /// What the flow runs.
    pub protocol: Protocol,
    /// Link indices from sender to receiver.
    pub path: Vec<usize>,
    /// Link indices from receiver to sender (for ACKs).
    pub ack_path: Vec<usize>,
    /// When the sender starts.
    pub start: Nanos,
    /// When the sender stops sending new data, if ever.
    pub stop: Option<Nanos>,
    /// Bytes to send; `None` is a long-lived flow.
    pub size: Option<u64>,
    /// Data packet size in bytes.
    pub mss: u32,
    /// Window cap in bytes (the papers' background TCP flows cap at 20 packets).
    pub max_window: Option<u64>,
    /// The scenario group the flow came from.
    pub group: String,
    /// Whether per-flow time series record this flow.
    pub sampled: bool,
    /// Background traffic: left out of fairness and convergence figures.
    pub background: bool,
    /// The receiver acknowledges every second packet (or after 40 ms).
    pub delayed_ack: bool,
    /// A window law's sender paces at 1.25 × window / srtt (as quinn) instead
    /// of sending whole windows back to back on ACKs.
    pub pace: bool,
}

/// Finite flows arriving as a Poisson process with Pareto sizes (the ADPM
/// completion-time experiment).
#[derive(Clone, Debug)]
pub struct ParetoSpec {
    /// The template for every flow; its `size` and `start` are drawn.
    pub flow: FlowSpec,
    /// Mean flow arrivals per second.
    pub arrivals_per_sec: f64,
    /// Pareto shape α.
    pub shape: f64,
    /// Mean flow size in bytes.
    pub mean_size: f64,
    /// No arrivals after this time.
    pub until: Nanos,
}

/// Everything a run needs.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// The links.
    pub links: Vec<LinkSpec>,
    /// Flows known in advance.
    pub flows: Vec<FlowSpec>,
    /// Finite-flow arrival processes.
    pub pareto: Vec<ParetoSpec>,
    /// Simulated time.
    pub duration: Nanos,
    /// RNG seed.
    pub seed: u64,
    /// Time-series sampling period.
    pub sample: Nanos,
    /// Summary statistics start here (warm-up excluded).
    pub measure_from: Nanos,
    /// Record every queue event for invariant checks (tests only; slow).
    pub trace: bool,
}

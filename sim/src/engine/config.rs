//! What a run is built from: one-way links, flows, finite-flow sources and
//! floods of fake newcomers, as the scenario files and the topology builder
//! produce them.

use crate::protocol::Protocol;
use ecnq::router::bottleneck::Discipline;
use ecnq::router::capacity::{CapacitySource, LinkRate};
use ecnq::router::MarkingMode;

use super::clock::Nanos;
use super::packet::PacketKind;
use crate::rng::Rng;

/// A link's buffer limit (the core's queue limit).
pub use ecnq::router::bottleneck::QueueLimit as BufferLimit;

/// One one-way link.
#[derive(Clone, Debug)]
pub struct LinkSpec {
    /// Name for reports.
    pub name: String,
    /// Rate in bits per second; `None` is a pure delay with no queue. A
    /// link whose rate varies gives its nominal rate here (a schedule's
    /// first, a trace's mean: buffers in BDPs and loads are sized by it).
    pub rate: Option<f64>,
    /// The capacity over time of a link whose rate varies.
    pub varies: Option<LinkRate>,
    /// Where its router takes the capacity it meters against.
    pub capacity: CapacitySource,
    /// Propagation delay.
    pub delay: Nanos,
    /// Drop-tail limit.
    pub buffer: BufferLimit,
    /// Probability that a transmitted packet is lost on the wire.
    pub loss: f64,
    /// A span of time in which the link loses what it transmits.
    pub blackout: Option<(Nanos, Nanos)>,
    /// `loss` and `blackout` hit only feedback reports: a path that passes
    /// ACKs but not reports. (The simulator's ACKs acknowledge one or two
    /// packets, not ranges as QUIC's do, so a lost ACK costs its data.)
    pub reports_only: bool,
    /// When the link's router restarts, its state lost.
    pub router_restart: Option<Nanos>,
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

/// Where an ecnq sender's router feedback comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FeedbackPath {
    /// Every ACK carries the receiver decoder's estimate, as in the papers'
    /// ns-2 models.
    #[default]
    Ack,
    /// Each end holds the core's connection session (`ecnq::session`), as
    /// the QUIC stack does: reports travel as packets of their own, and the
    /// session decides fallback, recovery and router presence.
    Session,
    /// The receiver runs no ecnq: its ACKs carry only its cumulative ECN
    /// counts, as a QUIC receiver's ACK-ECN frames do, and the sender reads
    /// the routers' marks from them (`ecnq::signal::CountReader`). Only a
    /// scheme with a count reader in the registry can run it.
    AckCounts,
}

impl FeedbackPath {
    /// The name in scenario files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FeedbackPath::Ack => "ack",
            FeedbackPath::Session => "session",
            FeedbackPath::AckCounts => "ack-counts",
        }
    }

    /// Every path, in the order `--help` lists them.
    const ALL: [FeedbackPath; 3] = [
        FeedbackPath::Ack,
        FeedbackPath::Session,
        FeedbackPath::AckCounts,
    ];

    /// Whether a flow of `protocol` can take its feedback this way: from
    /// ACK-ECN counts only with a count reader, and always where the
    /// protocol takes no router feedback at all.
    pub fn serves(self, protocol: Protocol) -> bool {
        self != FeedbackPath::AckCounts
            || !protocol.router_assisted()
            || protocol.count_reader().is_some()
    }
}

impl std::str::FromStr for FeedbackPath {
    type Err = String;
    fn from_str(s: &str) -> Result<FeedbackPath, String> {
        FeedbackPath::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                format!("unknown feedback path `{s}` (expected ack, session or ack-counts)")
            })
    }
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
    /// A span in which the application gives the sender nothing to send.
    pub pause: Option<(Nanos, Nanos)>,
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
    /// How an ecnq flow's feedback reaches its sender (other flows ignore it).
    pub feedback: FeedbackPath,
    /// With ACK-count feedback, how many packets each of the receiver's
    /// ACK frames newly acknowledges: the sender reads the counts once per
    /// frame.
    pub ack_frame: u32,
    /// With ACK-count feedback, a frame also ends at the first ACK once
    /// its oldest has waited this long (a receiver that acknowledges by
    /// time, or its max_ack_delay, RFC 9000 §13.2.1); `None`: by count only.
    pub ack_delay: Option<Nanos>,
}

impl LinkSpec {
    /// Whether the link loses a packet of `kind` it transmits at `now`
    /// (`chance` draws the random loss).
    pub(super) fn loses(
        &self,
        now: Nanos,
        kind: PacketKind,
        chance: impl FnOnce(f64) -> bool,
    ) -> bool {
        let exposed = !self.reports_only || kind == PacketKind::Report;
        let blackout = self
            .blackout
            .is_some_and(|(from, until)| (from..until).contains(&now));
        exposed && (blackout || chance(self.loss))
    }
}

impl FlowSpec {
    /// The links a packet of `kind` takes: data and the server's handshake
    /// the path, ACKs, reports and the client's handshake the ACK path.
    pub fn path_of(&self, kind: PacketKind) -> &[usize] {
        match kind {
            PacketKind::Data | PacketKind::Fake | PacketKind::ServerHandshake => &self.path,
            PacketKind::Ack | PacketKind::Report | PacketKind::ClientHandshake => &self.ack_path,
        }
    }
}

/// Finite flows arriving as a Poisson process with Pareto sizes (the ADPM
/// completion-time experiment).
#[derive(Clone, Debug)]
pub struct ParetoSpec {
    /// The template for every flow; its `size` and `start` are drawn.
    pub flow: FlowSpec,
    /// Mean flow arrivals per second.
    pub arrivals_per_sec: f64,
    /// The flows' sizes in bytes.
    pub sizes: ParetoSizes,
    /// No arrivals after this time.
    pub until: Nanos,
}

impl ParetoSpec {
    /// The next flow's size in bytes and the gap until the one after it,
    /// drawn from `workload` (size first): how the engine starts each of
    /// the source's flows, and [`ParetoSpec::arrivals`] lists them.
    pub fn draw(&self, workload: &mut Rng) -> (u64, Nanos) {
        let size = self.sizes.at(workload.uniform()).round().max(1.0) as u64;
        let gap = (workload.exponential(1.0 / self.arrivals_per_sec) * 1e9) as Nanos;
        (size, gap.max(1))
    }

    /// The flows this source starts in a run of `seed` where it is the
    /// only source, (start, size), as the engine draws them: from its
    /// template's start, Poisson arrivals until `until` (the real stack's
    /// web benchmark fetches the same flows). Test:
    /// a_lone_source_lists_the_flows_the_engine_starts.
    pub fn arrivals(&self, seed: u64) -> Vec<(Nanos, u64)> {
        let mut workload = Rng::new(seed ^ WORKLOAD_SEED);
        let mut out = Vec::new();
        let mut now = self.flow.start;
        while now <= self.until {
            let (size, gap) = self.draw(&mut workload);
            out.push((now, size));
            now = now.saturating_add(gap);
        }
        out
    }
}

/// Mixed into the seed of the finite-flow workload's generator.
pub(super) const WORKLOAD_SEED: u64 = 0x00F1_0A5D_5EED;

/// Halvings of the interval that [`ParetoSizes::with_mean`] searches: past
/// 64 an f64 interval no longer shrinks.
const SCALE_BISECTIONS: u32 = 64;

/// Pareto-distributed flow sizes: shape α, scale x_m (the smallest size)
/// and, for a bounded Pareto, a largest size H (`f64::INFINITY`:
/// unbounded).
///
/// Unbounded, shapes α ≤ 2 have an infinite variance, so the sample mean
/// of a few thousand flows falls well short of the mean, and so does the
/// load they offer; bounded, every moment is finite (`web-100mbit`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParetoSizes {
    /// Shape α (> 1).
    pub shape: f64,
    /// Scale x_m, bytes.
    pub scale: f64,
    /// Largest size H, bytes.
    pub max: f64,
}

impl ParetoSizes {
    /// Sizes of shape α > 1 whose mean is `mean`, bounded by `max` (more
    /// than `mean`, or infinite). Unbounded, x_m = mean·(α − 1)/α; bounded,
    /// the mean grows with x_m, from 0 at x_m = 0 to H at x_m = H, and
    /// bisection finds the x_m that gives `mean`.
    pub fn with_mean(shape: f64, mean: f64, max: f64) -> ParetoSizes {
        let with_scale = |scale| ParetoSizes { shape, scale, max };
        if max.is_infinite() {
            return with_scale(mean * (shape - 1.0) / shape);
        }
        // The mean is at least x_m, so x_m is at most `mean`.
        let (mut low, mut high) = (0.0, mean);
        for _ in 0..SCALE_BISECTIONS {
            let middle = 0.5 * (low + high);
            if with_scale(middle).mean() < mean {
                low = middle;
            } else {
                high = middle;
            }
        }
        with_scale(0.5 * (low + high))
    }

    /// The mean size: the bounded Pareto's α x_m^α (x_m^(1−α) − H^(1−α)) /
    /// ((α − 1)(1 − (x_m/H)^α)) (Harchol-Balter, "Task assignment with
    /// unknown duration", J. ACM 49(2), 2002), with r = x_m/H
    /// α x_m (1 − r^(α−1)) / ((α − 1)(1 − r^α)); unbounded (r = 0),
    /// α x_m / (α − 1).
    pub fn mean(&self) -> f64 {
        let (a, r) = (self.shape, self.scale / self.max);
        a * self.scale * (1.0 - r.powf(a - 1.0)) / ((a - 1.0) * (1.0 - r.powf(a)))
    }

    /// The size at `u`, uniform in [0, 1): the inverse of the CDF
    /// F(x) = (1 − (x_m/x)^α) / (1 − (x_m/H)^α), x_m ≤ x < H.
    pub fn at(&self, u: f64) -> f64 {
        let mass = 1.0 - (self.scale / self.max).powf(self.shape);
        self.scale / (1.0 - u * mass).powf(1.0 / self.shape)
    }
}

/// A stream of fake newcomers: every `packets` packets of `size` bytes come
/// from a new flow (a new 5-tuple to routers) that never answers anything
/// and then stops; together they offer `rate`. A router that hands each
/// newcomer a share is abused by it (`erc-fake-newcomers`).
#[derive(Clone, Debug)]
pub struct NewcomerFloodSpec {
    /// The flow the fake flows' delivered bytes count to (its group names
    /// them in reports); its protocol gives their tag and codepoint, its
    /// path theirs, and its start the first fake flow's. Its sender never
    /// runs.
    pub flow: FlowSpec,
    /// The stream's rate, bits per second.
    pub rate: f64,
    /// Packets per fake flow.
    pub packets: u32,
    /// Bytes per packet.
    pub size: u32,
    /// A fake flow's packets are spread evenly over this span (0: back to
    /// back).
    pub spread: Nanos,
    /// No fake flow starts at or after this time.
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
    /// Streams of fake newcomers.
    pub floods: Vec<NewcomerFloodSpec>,
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

#[cfg(test)]
mod tests {
    use super::ParetoSizes;
    use crate::rng::Rng;

    #[test]
    fn pareto_sizes_have_the_mean_they_are_made_with() {
        let unbounded = ParetoSizes::with_mean(1.2, 100_000.0, f64::INFINITY);
        assert!((unbounded.scale - 100_000.0 / 6.0).abs() < 1e-9);
        assert!((unbounded.mean() / 100_000.0 - 1.0).abs() < 1e-12);
        let bounded = ParetoSizes::with_mean(1.2, 100_000.0, 10e6);
        assert!((bounded.mean() / 100_000.0 - 1.0).abs() < 1e-9);
        // Bounding cuts the tail, so the smallest flows grow to keep the mean.
        assert!(bounded.scale > unbounded.scale);
        let (first, last) = (bounded.at(0.0), bounded.at(1.0 - 1e-16));
        assert!((first - bounded.scale).abs() < 1e-6, "{first}");
        assert!(last <= 10e6, "{last}");
    }

    #[test]
    fn draws_average_to_the_mean() {
        // Shape 2.5 unbounded and shape 1.2 bounded at 100 means have a
        // finite variance, so the sample mean settles.
        let mut r = Rng::new(1);
        let n = 400_000;
        for sizes in [
            ParetoSizes::with_mean(2.5, 10.0, f64::INFINITY),
            ParetoSizes::with_mean(1.2, 10.0, 1000.0),
        ] {
            let mean = (0..n).map(|_| sizes.at(r.uniform())).sum::<f64>() / f64::from(n);
            assert!((mean / 10.0 - 1.0).abs() < 0.03, "{sizes:?}: {mean}");
        }
    }
}

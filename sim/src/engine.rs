//! The discrete-event engine: a virtual nanosecond clock, an event heap and
//! a seeded RNG driving links, routers, senders and receivers.
//!
//! Links are one-way: a drop-tail queue served at the link rate, then a
//! constant propagation delay (a FIFO "pipe"). A link without a rate is a
//! pure delay (access links). Because every link serves in FIFO order and
//! its delay is constant, each link needs at most two pending events (the
//! end of the current transmission and the head of its pipe), which keeps
//! the heap small however many packets are in flight.
//!
//! Senders are QUIC-like: packet numbers are never reused, every data packet
//! is acknowledged by its own ACK carrying the receiver's decoded feedback
//! (the papers' ACK piggyback), a packet is lost when three later ones are
//! acknowledged or 9/8 RTT passed (RFC 9002 §6.1), and a retransmission
//! timeout catches tail losses (RFC 6298).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use ecnq::cubic::CubicLaw;
use ecnq::presence::{RouterPresence, PROBE_EVERY};
use ecnq::signal::{Congestion, Decoder, Feedback, Law, LawConfig, PacketMarks, RttSample};
use ecnq::{Ecn, SchemeTag};

use crate::protocol::Protocol;
use crate::rng::Rng;
use ecnq::bottleneck::{Bottleneck, BottleneckConfig, Discipline, Queued, CLASSES};
use ecnq::router::{MarkCounters, MarkingMode, RouterConfig};

/// Virtual time in nanoseconds.
pub type Nanos = u64;

/// Nanoseconds in one second.
pub const SECOND: Nanos = 1_000_000_000;

/// Size of an ACK packet in bytes (a 40-byte TCP/IP header, as in ns-2).
pub const ACK_LEN: u32 = 40;
/// RTO before the first RTT sample (RFC 6298 §2.1 allows 1 s; 3 s covers the
/// papers' 2-second parking-lot RTTs without spurious timeouts).
const INITIAL_RTO: Nanos = 3 * SECOND;
/// Lower bound of the RTO (Linux's 200 ms rather than RFC 6298's 1 s).
const MIN_RTO: Nanos = 200_000_000;
/// Packet reordering threshold (RFC 9002 §6.1.1).
const PACKET_THRESHOLD: u64 = 3;
/// Paced window senders send at this multiple of window / srtt, as quinn's
/// pacer does (docs/design.md §3).
const PACING_GAIN: f64 = 1.25;
/// A delayed ACK waits at most this long for a second packet (Linux's 40 ms
/// minimum; RFC 1122 §4.2.3.2 allows up to 500 ms).
const DELAYED_ACK_TIMEOUT: Nanos = 40_000_000;

fn dur(t: Nanos) -> Duration {
    Duration::from_nanos(t)
}

/// A link's buffer limit (the core's queue limit).
pub use ecnq::bottleneck::QueueLimit as BufferLimit;

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

/// A packet on the wire.
#[derive(Clone, Copy, Debug)]
pub struct Packet {
    /// Unique id in injection order.
    pub id: u64,
    /// Flow index.
    pub flow: u32,
    /// Index of the link it is on within its path.
    pub hop: u16,
    /// Whether this is an ACK (travels the ack path).
    pub is_ack: bool,
    /// Size in bytes.
    pub len: u32,
    /// ECN, DSCP tag, hash.
    pub marks: PacketMarks,
    /// Data: packet number. ACK: the packet number acknowledged.
    pub pn: u64,
    /// Data: send time. ACK: the acknowledged packet's send time.
    pub sent: Nanos,
    /// ACK: the receiver's estimate.
    pub feedback: Feedback,
    /// ACK: the acknowledged packet arrived with CE.
    pub ce: bool,
    /// ACK: how many of the acknowledged packets arrived Not-ECT (presence
    /// probes no ecnq router raised).
    pub unraised: u8,
    /// ACK: an earlier packet number this (delayed) ACK also acknowledges.
    pub also: Option<u64>,
}

impl Queued for Packet {
    fn wire_len(&self) -> u32 {
        self.len
    }
    fn marks(&self) -> Option<PacketMarks> {
        Some(self.marks)
    }
    fn set_marks(&mut self, marks: &PacketMarks) {
        self.marks = *marks;
    }
}

/// What the trace records (tests check engine invariants on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceKind {
    /// Accepted into the link (queue or straight into transmission).
    Enqueue,
    /// Finished transmission.
    Depart,
    /// Dropped by the full buffer.
    Drop,
    /// Lost on the wire.
    Lost,
}

/// One trace record.
#[derive(Clone, Copy, Debug)]
pub struct TraceRecord {
    /// When.
    pub time: Nanos,
    /// Which link.
    pub link: usize,
    /// What happened.
    pub kind: TraceKind,
    /// Packet id.
    pub id: u64,
    /// Packet size.
    pub len: u32,
}

/// Counters over a link's measured period.
#[derive(Clone, Debug, Default)]
pub struct LinkStats {
    /// Packets offered.
    pub arrived_packets: u64,
    /// Bytes offered.
    pub arrived_bytes: u64,
    /// Packets dropped by the full buffer.
    pub dropped_packets: u64,
    /// Packets lost on the wire (random loss).
    pub lost_packets: u64,
    /// Packets transmitted.
    pub departed_packets: u64,
    /// Bytes transmitted.
    pub departed_bytes: u64,
    /// ∫ queue bytes dt, in byte·ns.
    pub queue_byte_ns: f64,
    /// ∫ queue packets dt, in packet·ns.
    pub queue_packet_ns: f64,
    /// Largest queue in packets.
    pub peak_queue_packets: u64,
    /// Largest queue in bytes.
    pub peak_queue_bytes: u64,
    /// Histograms of the queue (packets) each arriving packet found in its
    /// class, indexed by [`Class`] (a FIFO link's only queue is the ecnq
    /// class's).
    pub queue_seen: [Vec<u64>; CLASSES],
    /// Classic packets CoDel dropped (dual-queue links).
    pub aqm_drops: u64,
}

/// A link as the engine runs it.
#[derive(Debug)]
pub struct Link {
    /// The configuration.
    pub spec: LinkSpec,
    bottleneck: Option<Bottleneck<Packet>>,
    pipe: VecDeque<(Nanos, Packet)>,
    last_queue_change: Nanos,
    sample_departed: u64,
    /// Counters since `measure_from`.
    pub stats: LinkStats,
}

impl Link {
    fn new(spec: LinkSpec) -> Link {
        let bottleneck = spec.rate.map(|bps| {
            let mut router = RouterConfig::new(bps / 8.0, 0);
            router.classic_threshold = spec.ecn_threshold.max(1);
            router.mode = spec.marking;
            let config = BottleneckConfig {
                rate: Some(bps.round() as u64),
                limit: spec.buffer,
                discipline: spec.discipline,
                router,
            };
            Bottleneck::new(config, Duration::ZERO)
        });
        Link {
            spec,
            bottleneck,
            pipe: VecDeque::new(),
            last_queue_change: 0,
            sample_departed: 0,
            stats: LinkStats::default(),
        }
    }

    /// Packets queued, in transmission or propagating.
    pub fn packets_inside(&self) -> usize {
        let serializing = self.bottleneck.as_ref().map_or(0, |b| {
            b.queue_packets() + usize::from(b.next_departure().is_some())
        });
        serializing + self.pipe.len()
    }

    /// Waiting packets.
    pub fn queue_packets(&self) -> usize {
        self.bottleneck
            .as_ref()
            .map_or(0, Bottleneck::queue_packets)
    }

    /// Waiting bytes.
    pub fn queue_bytes(&self) -> u64 {
        self.bottleneck.as_ref().map_or(0, Bottleneck::queue_bytes)
    }

    /// The router's mark counters (None for pure delays).
    pub fn mark_counters(&self) -> Option<&MarkCounters> {
        self.bottleneck.as_ref().map(|b| b.router().counters())
    }

    /// The bottleneck (None for pure delays).
    pub fn bottleneck(&self) -> Option<&Bottleneck<Packet>> {
        self.bottleneck.as_ref()
    }

    fn account_queue(&mut self, now: Nanos) {
        let (bytes, packets) = (self.queue_bytes(), self.queue_packets() as u64);
        let dt = (now - self.last_queue_change) as f64;
        self.stats.queue_byte_ns += bytes as f64 * dt;
        self.stats.queue_packet_ns += packets as f64 * dt;
        self.last_queue_change = now;
        self.stats.peak_queue_packets = self.stats.peak_queue_packets.max(packets);
        self.stats.peak_queue_bytes = self.stats.peak_queue_bytes.max(bytes);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SentState {
    InFlight,
    Acked,
    Lost,
}

#[derive(Clone, Copy, Debug)]
struct SentPacket {
    len: u32,
    sent: Nanos,
    state: SentState,
}

/// RFC 6298 smoothed RTT.
#[derive(Clone, Copy, Debug, Default)]
struct RttEstimator {
    srtt: Nanos,
    rttvar: Nanos,
    min: Nanos,
    latest: Nanos,
    has_sample: bool,
}

impl RttEstimator {
    fn update(&mut self, r: Nanos) {
        self.latest = r;
        if !self.has_sample {
            self.has_sample = true;
            self.srtt = r;
            self.rttvar = r / 2;
            self.min = r;
            return;
        }
        self.min = self.min.min(r);
        self.rttvar = (3 * self.rttvar + self.srtt.abs_diff(r)) / 4;
        self.srtt = (7 * self.srtt + r) / 8;
    }

    fn rto(&self) -> Nanos {
        if self.has_sample {
            (self.srtt + 4 * self.rttvar).max(MIN_RTO)
        } else {
            INITIAL_RTO
        }
    }

    fn sample(&self) -> RttSample {
        RttSample {
            smoothed: dur(self.srtt),
            min: dur(self.min),
            latest: dur(self.latest),
        }
    }
}

/// Where a flow is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowState {
    /// Not started yet.
    Pending,
    /// Sending.
    Active,
    /// Past its stop time: no new data.
    Stopped,
    /// Every byte of a finite flow was acknowledged at this time.
    Done(Nanos),
}

/// A flow as the engine runs it.
#[derive(Debug)]
pub struct Flow {
    /// The configuration.
    pub spec: FlowSpec,
    law: Box<dyn Law>,
    decoder: Option<Box<dyn Decoder>>,
    data_ecn: Ecn,
    router_assisted: bool,
    /// Presence probes, for the schemes that send them.
    probes: Option<Probes>,
    /// Life stage.
    pub state: FlowState,
    next_pn: u64,
    base_pn: u64,
    sent: VecDeque<SentPacket>,
    bytes_in_flight: u64,
    largest_acked: Option<u64>,
    rtt: RttEstimator,
    new_bytes_left: u64,
    retransmit_bytes: u64,
    /// Unique data bytes acknowledged.
    pub acked_bytes: u64,
    rto_at: Nanos,
    rto_pending: bool,
    rto_backoff: u32,
    pace_next: Nanos,
    pace_pending: bool,
    /// Data bytes the receiver got.
    pub received_bytes: u64,
    sample_received: u64,
    /// Delayed ACKs: a received packet not yet acknowledged, and its timer.
    held: Option<Packet>,
    delack_at: Nanos,
    delack_pending: bool,
    /// `received_bytes` when statistics started.
    pub received_at_measure: u64,
    /// Data packets sent (retransmissions included).
    pub packets_sent: u64,
    /// Data packets declared lost.
    pub packets_lost: u64,
}

/// A probing sender's presence probes (`ecnq::presence`): what it sent,
/// what came back unraised, and the verdict.
#[derive(Debug)]
struct Probes {
    presence: RouterPresence,
    tag: SchemeTag,
    sent: u64,
    unraised: u64,
    config: LawConfig,
}

impl Flow {
    /// Whether Cubic stands in for the scheme's law (no ecnq router).
    fn fallen_back(&self) -> bool {
        self.probes.as_ref().is_some_and(|p| !p.presence.present())
    }

    /// An ACK echoed `unraised` probes that arrived Not-ECT: on a change of
    /// verdict, Cubic with ECT(0) takes over from the scheme's law at its
    /// window, or hands back to it, as the QUIC sender does.
    fn on_probe_echo(&mut self, unraised: u8) {
        let Some(probes) = self.probes.as_mut() else {
            return;
        };
        probes.unraised += u64::from(unraised);
        let was = probes.presence.present();
        let present = probes.presence.on_report(probes.unraised, probes.sent);
        if present == was {
            return;
        }
        let config = LawConfig {
            initial_window: self.law.window(),
            ..probes.config
        };
        if present {
            self.law = self.spec.protocol.law(config);
            self.data_ecn = self.spec.protocol.data_ecn();
        } else {
            let mut cubic = CubicLaw::new(config);
            cubic.set_window(config.initial_window as f64);
            self.law = Box::new(cubic);
            self.data_ecn = Ecn::Ect0;
        }
    }

    fn new(spec: FlowSpec) -> Flow {
        let mut config = LawConfig::with_mss(u64::from(spec.mss));
        if let Some(cap) = spec.max_window {
            config.max_window = cap.max(config.min_window);
            config.initial_window = config.initial_window.min(config.max_window);
        }
        Flow {
            law: spec.protocol.law(config),
            decoder: spec.protocol.decoder(),
            data_ecn: spec.protocol.data_ecn(),
            router_assisted: spec.protocol.router_assisted(),
            probes: spec.protocol.sends_probes().then(|| Probes {
                presence: RouterPresence::default(),
                tag: spec.protocol.law(config).tag(),
                sent: 0,
                unraised: 0,
                config,
            }),
            new_bytes_left: spec.size.unwrap_or(u64::MAX),
            spec,
            state: FlowState::Pending,
            next_pn: 0,
            base_pn: 0,
            sent: VecDeque::new(),
            bytes_in_flight: 0,
            largest_acked: None,
            rtt: RttEstimator::default(),
            retransmit_bytes: 0,
            acked_bytes: 0,
            rto_at: Nanos::MAX,
            rto_pending: false,
            rto_backoff: 0,
            pace_next: 0,
            pace_pending: false,
            received_bytes: 0,
            sample_received: 0,
            held: None,
            delack_at: Nanos::MAX,
            delack_pending: false,
            received_at_measure: 0,
            packets_sent: 0,
            packets_lost: 0,
        }
    }

    /// The congestion window in bytes.
    pub fn window(&self) -> u64 {
        self.law.window()
    }

    /// The smoothed RTT.
    pub fn srtt(&self) -> Nanos {
        self.rtt.srtt
    }

    /// Completion time of a finite flow that finished.
    pub fn completion(&self) -> Option<Nanos> {
        match self.state {
            FlowState::Done(t) => Some(t - self.spec.start),
            _ => None,
        }
    }

    fn declare_lost(&mut self, i: usize) {
        let e = &mut self.sent[i];
        e.state = SentState::Lost;
        self.bytes_in_flight -= u64::from(e.len);
        self.retransmit_bytes += u64::from(e.len);
        self.packets_lost += 1;
    }

    fn pop_settled(&mut self) {
        while self
            .sent
            .front()
            .is_some_and(|e| e.state != SentState::InFlight)
        {
            self.sent.pop_front();
            self.base_pn += 1;
        }
    }
}

/// One time-series row for a flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowSample {
    /// End of the sampling period.
    pub time: Nanos,
    /// Flow index.
    pub flow: u32,
    /// Receive rate over the period, bits per second.
    pub rate: f64,
    /// Congestion window, bytes.
    pub window: u64,
}

/// One time-series row for a link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkSample {
    /// End of the sampling period.
    pub time: Nanos,
    /// Link index.
    pub link: u32,
    /// Departures over capacity in the period.
    pub utilization: f64,
    /// Waiting packets now.
    pub queue_packets: u64,
    /// Waiting bytes now.
    pub queue_bytes: u64,
    /// VCP's ρ of the last completed interval.
    pub load_vcp: f64,
    /// BMCC's f.
    pub load_bmcc: f64,
    /// MCP's U.
    pub load_mcp: f64,
}

/// Whole-run packet counters (the conservation invariant).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets handed to their first link.
    pub injected: u64,
    /// Packets that reached their endpoint.
    pub delivered: u64,
    /// Packets dropped (buffer) or lost (wire).
    pub dropped: u64,
    /// Events processed.
    pub events: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    TxDone(u32),
    PipeHead(u32),
    Start(u32),
    Stop(u32),
    Pace(u32),
    Rto(u32),
    DelayedAck(u32),
    Arrival(u32),
    Sample,
    Measure,
}

/// A simulation.
pub struct Sim {
    now: Nanos,
    seq: u64,
    heap: BinaryHeap<Reverse<(Nanos, u64, Event)>>,
    /// The links.
    pub links: Vec<Link>,
    /// The flows, including those the Pareto sources created.
    pub flows: Vec<Flow>,
    pareto: Vec<ParetoSpec>,
    rng: Rng,
    duration: Nanos,
    sample: Nanos,
    measure_from: Nanos,
    last_sample: Nanos,
    /// Per-flow time series.
    pub flow_series: Vec<FlowSample>,
    /// Per-link time series.
    pub link_series: Vec<LinkSample>,
    /// Packet conservation counters.
    pub counters: Counters,
    /// Queue events, when tracing.
    pub trace: Option<Vec<TraceRecord>>,
}

impl Sim {
    /// Builds a simulation; fails if a flow's path is empty or names a link
    /// that does not exist.
    pub fn new(config: SimConfig) -> Result<Sim, String> {
        let nlinks = config.links.len();
        let check_path = |f: &FlowSpec| -> Result<(), String> {
            if f.path.is_empty() || f.ack_path.is_empty() {
                return Err(format!("flow group `{}` has an empty path", f.group));
            }
            match f.path.iter().chain(&f.ack_path).find(|&&l| l >= nlinks) {
                Some(l) => Err(format!("flow group `{}` uses unknown link {l}", f.group)),
                None => Ok(()),
            }
        };
        let mut flows = Vec::with_capacity(config.flows.len());
        for spec in config.flows {
            check_path(&spec)?;
            flows.push(Flow::new(spec));
        }
        for p in &config.pareto {
            check_path(&p.flow)?;
        }
        let mut sim = Sim {
            now: 0,
            seq: 0,
            heap: BinaryHeap::new(),
            links: config.links.into_iter().map(Link::new).collect(),
            flows,
            pareto: config.pareto,
            rng: Rng::new(config.seed),
            duration: config.duration,
            sample: config.sample.max(1),
            measure_from: config.measure_from.min(config.duration),
            last_sample: 0,
            flow_series: Vec::new(),
            link_series: Vec::new(),
            counters: Counters::default(),
            trace: config.trace.then(Vec::new),
        };
        let times: Vec<_> = sim
            .flows
            .iter()
            .map(|f| (f.spec.start, f.spec.stop))
            .collect();
        for (i, (start, stop)) in times.into_iter().enumerate() {
            sim.schedule_at(start, Event::Start(i as u32));
            if let Some(stop) = stop {
                sim.schedule_at(stop, Event::Stop(i as u32));
            }
        }
        for i in 0..sim.pareto.len() {
            let first = sim.pareto[i].flow.start;
            sim.schedule_at(first, Event::Arrival(i as u32));
        }
        let sample = sim.sample;
        sim.schedule_at(sample, Event::Sample);
        if sim.measure_from > 0 {
            sim.schedule_at(sim.measure_from, Event::Measure);
        }
        Ok(sim)
    }

    /// The current virtual time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// The end of the run.
    pub fn duration(&self) -> Nanos {
        self.duration
    }

    /// When statistics started.
    pub fn measure_from(&self) -> Nanos {
        self.measure_from
    }

    /// The sampling period.
    pub fn sample_period(&self) -> Nanos {
        self.sample
    }

    /// Packets queued, in transmission or propagating anywhere.
    pub fn packets_in_network(&self) -> u64 {
        self.links.iter().map(|l| l.packets_inside() as u64).sum()
    }

    #[inline]
    fn schedule_at(&mut self, t: Nanos, ev: Event) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, ev)));
    }

    /// Runs to the end of the configured duration.
    pub fn run(&mut self) {
        self.run_until(self.duration);
    }

    /// Runs every event up to and including time `until` (capped at the duration).
    pub fn run_until(&mut self, until: Nanos) {
        let until = until.min(self.duration);
        while let Some(&Reverse((t, _, ev))) = self.heap.peek() {
            if t > until {
                break;
            }
            self.heap.pop();
            self.now = t;
            self.counters.events += 1;
            self.dispatch(ev);
        }
        self.now = self.now.max(until);
    }

    fn dispatch(&mut self, ev: Event) {
        match ev {
            Event::TxDone(l) => self.tx_done(l as usize),
            Event::PipeHead(l) => self.pipe_head(l as usize),
            Event::Start(f) => {
                let flow = &mut self.flows[f as usize];
                if flow.state == FlowState::Pending {
                    flow.state = FlowState::Active;
                    flow.pace_next = self.now;
                    self.try_send(f as usize);
                }
            }
            Event::Stop(f) => {
                let flow = &mut self.flows[f as usize];
                if matches!(flow.state, FlowState::Active | FlowState::Pending) {
                    flow.state = FlowState::Stopped;
                }
            }
            Event::Pace(f) => {
                self.flows[f as usize].pace_pending = false;
                self.try_send(f as usize);
            }
            Event::Rto(f) => self.rto(f as usize),
            Event::DelayedAck(f) => self.delayed_ack(f as usize),
            Event::Arrival(s) => self.pareto_arrival(s as usize),
            Event::Sample => self.take_sample(),
            Event::Measure => self.reset_stats(),
        }
    }

    // ---- links ----

    fn trace(&mut self, link: usize, kind: TraceKind, pkt: &Packet) {
        if let Some(trace) = self.trace.as_mut() {
            trace.push(TraceRecord {
                time: self.now,
                link,
                kind,
                id: pkt.id,
                len: pkt.len,
            });
        }
    }

    fn link_arrive(&mut self, l: usize, pkt: Packet) {
        let now = self.now;
        let link = &mut self.links[l];
        let Some(bottleneck) = link.bottleneck.as_mut() else {
            let was_empty = link.pipe.is_empty();
            let at = now + link.spec.delay;
            link.pipe.push_back((at, pkt));
            if was_empty {
                self.schedule_at(at, Event::PipeHead(l as u32));
            }
            return;
        };
        let class = bottleneck.class_of(Some(&pkt.marks));
        let seen = bottleneck.class_packets(class);
        let idle = bottleneck.next_departure().is_none();
        let stats = &mut link.stats;
        stats.arrived_packets += 1;
        stats.arrived_bytes += u64::from(pkt.len);
        let histogram = &mut stats.queue_seen[class as usize];
        if histogram.len() <= seen {
            histogram.resize(seen + 1, 0);
        }
        histogram[seen] += 1;
        link.account_queue(now);
        let Some(bottleneck) = link.bottleneck.as_mut() else {
            return;
        };
        match bottleneck.offer(dur(now), pkt) {
            Ok(()) => {
                let queue = (link.queue_packets() as u64, link.queue_bytes());
                link.stats.peak_queue_packets = link.stats.peak_queue_packets.max(queue.0);
                link.stats.peak_queue_bytes = link.stats.peak_queue_bytes.max(queue.1);
                self.trace(l, TraceKind::Enqueue, &pkt);
            }
            Err((_, pkt)) => {
                link.stats.dropped_packets += 1;
                self.counters.dropped += 1;
                self.trace(l, TraceKind::Drop, &pkt);
            }
        }
        self.after_service_change(l, idle);
    }

    /// Counts CoDel's drops and schedules the next departure when the link
    /// went from idle to busy (`was_idle`) or a departure just happened.
    fn after_service_change(&mut self, l: usize, was_idle: bool) {
        let link = &mut self.links[l];
        let Some(bottleneck) = link.bottleneck.as_mut() else {
            return;
        };
        let dropped: Vec<Packet> = bottleneck.take_aqm_drops().collect();
        let next = bottleneck.next_departure();
        link.stats.aqm_drops += dropped.len() as u64;
        link.stats.dropped_packets += dropped.len() as u64;
        self.counters.dropped += dropped.len() as u64;
        for pkt in &dropped {
            self.trace(l, TraceKind::Drop, pkt);
        }
        if was_idle {
            if let Some(t) = next {
                self.schedule_at(t.as_nanos() as Nanos, Event::TxDone(l as u32));
            }
        }
    }

    fn tx_done(&mut self, l: usize) {
        let now = self.now;
        let link = &mut self.links[l];
        link.account_queue(now);
        let Some(bottleneck) = link.bottleneck.as_mut() else {
            return;
        };
        let Some((_, pkt)) = bottleneck.depart(dur(now)) else {
            return;
        };
        link.stats.departed_packets += 1;
        link.stats.departed_bytes += u64::from(pkt.len);
        link.sample_departed += u64::from(pkt.len);
        self.after_service_change(l, true);
        self.trace(l, TraceKind::Depart, &pkt);
        let link = &mut self.links[l];
        if self.rng.chance(link.spec.loss) {
            link.stats.lost_packets += 1;
            self.counters.dropped += 1;
            self.trace(l, TraceKind::Lost, &pkt);
            return;
        }
        let was_empty = link.pipe.is_empty();
        let at = now + link.spec.delay;
        link.pipe.push_back((at, pkt));
        if was_empty {
            self.schedule_at(at, Event::PipeHead(l as u32));
        }
    }

    fn pipe_head(&mut self, l: usize) {
        let link = &mut self.links[l];
        let Some((_, mut pkt)) = link.pipe.pop_front() else {
            return;
        };
        if let Some(&(next, _)) = link.pipe.front() {
            self.schedule_at(next, Event::PipeHead(l as u32));
        }
        pkt.hop += 1;
        let flow = &self.flows[pkt.flow as usize];
        let path = if pkt.is_ack {
            &flow.spec.ack_path
        } else {
            &flow.spec.path
        };
        match path.get(usize::from(pkt.hop)) {
            Some(&next) => self.link_arrive(next, pkt),
            None => {
                self.counters.delivered += 1;
                if pkt.is_ack {
                    self.on_ack(pkt);
                } else {
                    self.on_data(pkt);
                }
            }
        }
    }

    fn inject(&mut self, mut pkt: Packet) {
        pkt.id = self.counters.injected;
        self.counters.injected += 1;
        let flow = &self.flows[pkt.flow as usize];
        let first = if pkt.is_ack {
            flow.spec.ack_path[0]
        } else {
            flow.spec.path[0]
        };
        self.link_arrive(first, pkt);
    }

    // ---- senders ----

    fn try_send(&mut self, f: usize) {
        loop {
            let now = self.now;
            let flow = &mut self.flows[f];
            if flow.state != FlowState::Active {
                return;
            }
            let available = flow.retransmit_bytes.saturating_add(flow.new_bytes_left);
            if available == 0 {
                return;
            }
            let len = available.min(u64::from(flow.spec.mss));
            let rate = match flow.law.pacing_rate() {
                Some(rate) => Some(rate),
                None => {
                    let window = flow.law.window();
                    if flow.bytes_in_flight > 0 && flow.bytes_in_flight + len > window.max(len) {
                        return;
                    }
                    (flow.spec.pace && flow.rtt.has_sample)
                        .then(|| PACING_GAIN * window as f64 * 1e9 / flow.rtt.srtt.max(1) as f64)
                }
            };
            if let Some(rate) = rate {
                if now < flow.pace_next {
                    if !flow.pace_pending {
                        flow.pace_pending = true;
                        let at = flow.pace_next;
                        self.schedule_at(at, Event::Pace(f as u32));
                    }
                    return;
                }
                let gap = (len as f64 * 1e9 / rate.max(1.0)).ceil() as Nanos;
                flow.pace_next = now.max(flow.pace_next) + gap;
            }
            self.send_one(f, len as u32);
        }
    }

    fn send_one(&mut self, f: usize, len: u32) {
        let now = self.now;
        let hash = self.rng.next_u32();
        let flow = &mut self.flows[f];
        let from_retransmit = u64::from(len).min(flow.retransmit_bytes);
        flow.retransmit_bytes -= from_retransmit;
        flow.new_bytes_left = flow
            .new_bytes_left
            .saturating_sub(u64::from(len) - from_retransmit);
        let pn = flow.next_pn;
        flow.next_pn += 1;
        flow.sent.push_back(SentPacket {
            len,
            sent: now,
            state: SentState::InFlight,
        });
        flow.bytes_in_flight += u64::from(len);
        flow.packets_sent += 1;
        let mut marks = PacketMarks {
            ecn: flow.data_ecn,
            tag: flow.law.tag(),
            hash,
            flow: f as u64,
        };
        if let Some(probes) = flow.probes.as_mut() {
            // The scheme's tag also while Cubic stands in for its law.
            marks.tag = probes.tag;
            if flow.packets_sent % PROBE_EVERY == 0 {
                marks.ecn = Ecn::NotEct;
                probes.sent += 1;
            }
        }
        self.arm_rto(f);
        self.inject(Packet {
            id: 0,
            flow: f as u32,
            hop: 0,
            is_ack: false,
            len,
            marks,
            pn,
            sent: now,
            feedback: Feedback::default(),
            ce: false,
            unraised: 0,
            also: None,
        });
    }

    fn arm_rto(&mut self, f: usize) {
        let now = self.now;
        let flow = &mut self.flows[f];
        if flow.bytes_in_flight == 0 {
            flow.rto_at = Nanos::MAX;
            return;
        }
        flow.rto_at = now + (flow.rtt.rto() << flow.rto_backoff.min(6));
        if !flow.rto_pending {
            flow.rto_pending = true;
            let at = flow.rto_at;
            self.schedule_at(at, Event::Rto(f as u32));
        }
    }

    fn rto(&mut self, f: usize) {
        let now = self.now;
        let flow = &mut self.flows[f];
        flow.rto_pending = false;
        if flow.rto_at == Nanos::MAX {
            return;
        }
        if flow.rto_at > now {
            flow.rto_pending = true;
            let at = flow.rto_at;
            self.schedule_at(at, Event::Rto(f as u32));
            return;
        }
        let mut last_sent = None;
        for i in 0..flow.sent.len() {
            if flow.sent[i].state == SentState::InFlight {
                last_sent = Some(flow.sent[i].sent);
                flow.declare_lost(i);
            }
        }
        flow.pop_settled();
        flow.rto_backoff += 1;
        flow.rto_at = Nanos::MAX;
        if let Some(sent) = last_sent {
            let rtt = flow.rtt.sample();
            flow.law
                .on_congestion(dur(now), dur(sent), Congestion::Loss, &rtt);
        }
        self.try_send(f);
    }

    fn on_ack(&mut self, ack: Packet) {
        let f = ack.flow as usize;
        self.flows[f].on_probe_echo(ack.unraised);
        let earlier = ack.also.is_some_and(|pn| self.ack_packet(f, pn, &ack));
        if !(self.ack_packet(f, ack.pn, &ack) || earlier) {
            return;
        }
        self.detect_losses(f);
        let now = self.now;
        let flow = &mut self.flows[f];
        if flow.spec.size.is_some_and(|size| flow.acked_bytes >= size) {
            flow.state = FlowState::Done(now);
            flow.rto_at = Nanos::MAX;
            return;
        }
        self.arm_rto(f);
        self.try_send(f);
    }

    /// Packet `pn` of flow `f` was acknowledged by `ack`; returns whether it
    /// was still in flight (a late ACK for a packet declared lost is ignored:
    /// its data is already queued again).
    fn ack_packet(&mut self, f: usize, pn: u64, ack: &Packet) -> bool {
        let now = self.now;
        let t = dur(now);
        let flow = &mut self.flows[f];
        let Some(i) = pn.checked_sub(flow.base_pn).map(|i| i as usize) else {
            return false;
        };
        let Some(entry) = flow.sent.get_mut(i) else {
            return false;
        };
        if entry.state != SentState::InFlight {
            return false;
        }
        entry.state = SentState::Acked;
        let (len, sent) = (entry.len, entry.sent);
        flow.bytes_in_flight -= u64::from(len);
        flow.acked_bytes += u64::from(len);
        flow.rto_backoff = 0;
        flow.rtt.update(now - sent);
        flow.largest_acked = Some(flow.largest_acked.map_or(pn, |l| l.max(pn)));
        let rtt = flow.rtt.sample();
        if flow.router_assisted {
            flow.law.on_feedback(t, ack.feedback, &rtt);
        }
        if ack.ce && (flow.spec.protocol.ce_is_congestion() || flow.fallen_back()) {
            flow.law.on_congestion(t, dur(sent), Congestion::Ce, &rtt);
        }
        flow.law.on_ack(t, u64::from(len), &rtt);
        true
    }

    fn detect_losses(&mut self, f: usize) {
        let now = self.now;
        let flow = &mut self.flows[f];
        let Some(largest) = flow.largest_acked else {
            return;
        };
        let window = flow.rtt.srtt.max(flow.rtt.latest) * 9 / 8;
        let rtt = flow.rtt.sample();
        for i in 0..flow.sent.len() {
            let pn = flow.base_pn + i as u64;
            if pn >= largest {
                break;
            }
            let e = flow.sent[i];
            if e.state != SentState::InFlight {
                continue;
            }
            if pn + PACKET_THRESHOLD <= largest || e.sent + window <= now {
                flow.declare_lost(i);
                flow.law
                    .on_congestion(dur(now), dur(e.sent), Congestion::Loss, &rtt);
            } else {
                break;
            }
        }
        flow.pop_settled();
    }

    // ---- receivers ----

    fn on_data(&mut self, pkt: Packet) {
        let now = self.now;
        let f = pkt.flow as usize;
        let flow = &mut self.flows[f];
        flow.received_bytes += u64::from(pkt.len);
        flow.sample_received += u64::from(pkt.len);
        if let Some(d) = flow.decoder.as_mut() {
            d.on_packet(dur(now), pkt.marks.ecn, pkt.marks.tag, pkt.marks.hash);
        }
        if !flow.spec.delayed_ack {
            self.send_ack(&pkt, None);
            return;
        }
        match flow.held.take() {
            Some(earlier) => self.send_ack(&pkt, Some(&earlier)),
            None => {
                flow.held = Some(pkt);
                flow.delack_at = now + DELAYED_ACK_TIMEOUT;
                if !flow.delack_pending {
                    flow.delack_pending = true;
                    self.schedule_at(now + DELAYED_ACK_TIMEOUT, Event::DelayedAck(f as u32));
                }
            }
        }
    }

    fn delayed_ack(&mut self, f: usize) {
        let now = self.now;
        let flow = &mut self.flows[f];
        flow.delack_pending = false;
        let Some(held) = flow.held else {
            return;
        };
        if now < flow.delack_at {
            flow.delack_pending = true;
            let at = flow.delack_at;
            self.schedule_at(at, Event::DelayedAck(f as u32));
            return;
        }
        flow.held = None;
        self.send_ack(&held, None);
    }

    /// Acknowledges `data` (and `earlier`, for a delayed ACK) with the
    /// receiver's current estimate.
    fn send_ack(&mut self, data: &Packet, earlier: Option<&Packet>) {
        let t = dur(self.now);
        let flow = &self.flows[data.flow as usize];
        let feedback = flow
            .decoder
            .as_ref()
            .map_or(Feedback::default(), |d| d.estimate(t));
        let ce = |p: &Packet| p.marks.ecn == Ecn::Ce;
        let unraised = |p: &Packet| u8::from(p.marks.ecn == Ecn::NotEct);
        self.inject(Packet {
            id: 0,
            flow: data.flow,
            hop: 0,
            is_ack: true,
            len: ACK_LEN,
            // An ecnq receiver tags its packets too (QUIC tags every
            // packet), so ACKs queue with their connection's class.
            marks: PacketMarks {
                ecn: Ecn::NotEct,
                tag: SchemeTag::new(data.marks.tag.wire_id),
                hash: 0,
                flow: u64::from(data.flow),
            },
            pn: data.pn,
            sent: data.sent,
            feedback,
            ce: ce(data) || earlier.is_some_and(ce),
            unraised: unraised(data) + earlier.map_or(0, unraised),
            also: earlier.map(|p| p.pn),
        });
    }

    // ---- traffic sources ----

    fn pareto_arrival(&mut self, s: usize) {
        let now = self.now;
        let src = &self.pareto[s];
        if now > src.until {
            return;
        }
        let (shape, mean, rate) = (src.shape, src.mean_size, src.arrivals_per_sec);
        let mut spec = src.flow.clone();
        let size = self.rng.pareto(shape, mean).round().max(1.0) as u64;
        spec.size = Some(size);
        spec.start = now;
        let gap = (self.rng.exponential(1.0 / rate) * 1e9) as Nanos;
        self.schedule_at(now + gap.max(1), Event::Arrival(s as u32));
        let f = self.flows.len();
        self.flows.push(Flow::new(spec));
        self.dispatch(Event::Start(f as u32));
    }

    // ---- measurement ----

    fn take_sample(&mut self) {
        let now = self.now;
        let dt = (now - self.last_sample) as f64 / 1e9;
        self.last_sample = now;
        if dt > 0.0 {
            for (i, flow) in self.flows.iter_mut().enumerate() {
                let received = std::mem::take(&mut flow.sample_received);
                let live = flow.state == FlowState::Active || received > 0;
                if flow.spec.sampled && flow.state != FlowState::Pending && live {
                    self.flow_series.push(FlowSample {
                        time: now,
                        flow: i as u32,
                        rate: received as f64 * 8.0 / dt,
                        window: flow.law.window(),
                    });
                }
            }
            for (i, link) in self.links.iter_mut().enumerate() {
                let departed = std::mem::take(&mut link.sample_departed);
                let (queue_packets, queue_bytes) =
                    (link.queue_packets() as u64, link.queue_bytes());
                let (Some(bps), Some(bottleneck), true) =
                    (link.spec.rate, link.bottleneck.as_mut(), link.spec.report)
                else {
                    continue;
                };
                let port = bottleneck.router_mut();
                port.advance(dur(now));
                let load = *port.meter().load();
                self.link_series.push(LinkSample {
                    time: now,
                    link: i as u32,
                    utilization: departed as f64 * 8.0 / (bps * dt),
                    queue_packets,
                    queue_bytes,
                    load_vcp: load.vcp.get(),
                    load_bmcc: load.bmcc.get(),
                    load_mcp: load.mcp.get(),
                });
            }
        }
        let next = now + self.sample;
        self.schedule_at(next, Event::Sample);
    }

    fn reset_stats(&mut self) {
        let now = self.now;
        for flow in &mut self.flows {
            flow.received_at_measure = flow.received_bytes;
        }
        for link in &mut self.links {
            link.account_queue(now);
            link.stats = LinkStats {
                peak_queue_packets: link.queue_packets() as u64,
                peak_queue_bytes: link.queue_bytes(),
                ..LinkStats::default()
            };
        }
    }

    /// Closes the queue integrals at the current time (call once after `run`).
    pub fn finish(&mut self) {
        let now = self.now;
        for link in &mut self.links {
            link.account_queue(now);
        }
    }
}

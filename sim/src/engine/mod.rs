//! The discrete-event engine: a virtual nanosecond clock, an event heap and
//! a seeded RNG driving links, routers, senders and receivers.
//!
//! Links are one-way: a queue served at the link rate (the core's
//! bottleneck: marking router, meter and queue discipline), then a constant
//! propagation delay (a FIFO "pipe"). A link without a rate is a pure delay
//! (access links). Senders are QUIC-like, and every data packet is
//! acknowledged by an ACK carrying the receiver's decoded feedback, or,
//! with session feedback, each end runs the core's connection session and
//! reports travel as packets of their own.
//!
//! [`Sim`] owns the state and runs the event loop; each job has its file:
//!
//! | file | job |
//! |---|---|
//! | `clock` | virtual time and the event queue |
//! | `config` | what a run is built from: links, flows, sources |
//! | `packet` | a packet on the wire |
//! | `link`, `network` | a link's state; driving packets through links |
//! | `flow`, `rtt`, `probes` | a flow's state; its RTT estimate; presence probes and fallback |
//! | `sender`, `receiver` | sending, loss detection and the law; decoding and ACKs |
//! | `session` | session feedback: each end's session, and reports as packets |
//! | `sources` | flow starts and stops, Pareto arrivals |
//! | `handshake` | QUIC's handshake ahead of every flow's data |
//! | `flood` | floods of fake newcomers: short flows that never answer |
//! | `measure`, `trace` | time series and measured-period counters; conservation counters and the queue trace |

mod clock;
mod config;
mod flood;
mod flow;
mod handshake;
mod link;
mod measure;
mod network;
mod packet;
mod probes;
mod receiver;
mod rtt;
mod sender;
mod session;
mod sources;
mod state;
mod trace;

pub use clock::{Nanos, SECOND};
pub use config::{
    BufferLimit, FeedbackPath, FlowSpec, LinkSpec, NewcomerFloodSpec, ParetoSizes, ParetoSpec,
    SimConfig,
};
pub use flow::{Flow, FlowSample};
pub use handshake::FLIGHT_BYTES;
pub use link::{Link, LinkSample, LinkStats};
pub use packet::{Packet, PacketKind, ACK_LEN};
pub use session::FeedbackRecord;
pub use state::FlowState;
pub use trace::{Counters, TraceKind, TraceRecord};

use crate::rng::Rng;
use clock::{Clock, Event};
use config::WORKLOAD_SEED;
use flood::Flood;

/// A simulation.
pub struct Sim {
    clock: Clock,
    /// The links.
    pub links: Vec<Link>,
    /// The flows, including those the Pareto sources created.
    pub flows: Vec<Flow>,
    pareto: Vec<ParetoSpec>,
    floods: Vec<Flood>,
    rng: Rng,
    /// Draws the finite flows' arrivals and sizes, apart from `rng`, so that
    /// every scheme run with one seed meets the same flows.
    workload: Rng,
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
        // Each flood's bytes count to a flow of its own, after the others.
        let planned = flows.len();
        let mut floods = Vec::with_capacity(config.floods.len());
        for spec in config.floods {
            check_path(&spec.flow)?;
            flows.push(Flow::new(spec.flow.clone()));
            floods.push(Flood::new(spec, flows.len() - 1));
        }
        let mut sim = Sim {
            clock: Clock::default(),
            links: (config.links.into_iter().enumerate())
                .map(|(i, spec)| Link::new(spec, config.seed ^ ((i as u64) << 32)))
                .collect(),
            flows,
            pareto: config.pareto,
            floods,
            rng: Rng::new(config.seed),
            workload: Rng::new(config.seed ^ WORKLOAD_SEED),
            duration: config.duration,
            sample: config.sample.max(1),
            measure_from: config.measure_from.min(config.duration),
            last_sample: 0,
            flow_series: Vec::new(),
            link_series: Vec::new(),
            counters: Counters::default(),
            trace: config.trace.then(Vec::new),
        };
        for (i, f) in sim.flows[..planned].iter().enumerate() {
            sim.clock.schedule_at(f.spec.start, Event::Start(i as u32));
            if let Some(stop) = f.spec.stop {
                sim.clock.schedule_at(stop, Event::Stop(i as u32));
            }
            if let Some((_, until)) = f.spec.pause {
                sim.clock.schedule_at(until, Event::Resume(i as u32));
            }
        }
        for (i, l) in sim.links.iter().enumerate() {
            if let Some(at) = l.spec.router_restart {
                sim.clock.schedule_at(at, Event::RouterRestart(i as u32));
            }
        }
        for i in 0..sim.pareto.len() {
            let first = sim.pareto[i].flow.start;
            sim.clock.schedule_at(first, Event::Arrival(i as u32));
        }
        for (s, flood) in sim.floods.iter().enumerate() {
            let first = sim.flows[flood.flow].spec.start;
            sim.clock.schedule_at(first, Event::Flood(s as u32));
        }
        let sample = sim.sample;
        sim.clock.schedule_at(sample, Event::Sample);
        if sim.measure_from > 0 {
            sim.clock.schedule_at(sim.measure_from, Event::Measure);
        }
        Ok(sim)
    }

    /// The current virtual time.
    pub fn now(&self) -> Nanos {
        self.clock.now()
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

    /// Runs to the end of the configured duration.
    pub fn run(&mut self) {
        self.run_until(self.duration);
    }

    /// Runs every event up to and including time `until` (capped at the duration).
    pub fn run_until(&mut self, until: Nanos) {
        let until = until.min(self.duration);
        while let Some(ev) = self.clock.next_until(until) {
            self.counters.events += 1;
            self.dispatch(ev);
        }
        self.clock.advance_to(until);
    }

    fn dispatch(&mut self, ev: Event) {
        match ev {
            Event::TxDone(l) => self.tx_done(l as usize),
            Event::PipeHead(l) => self.pipe_head(l as usize),
            Event::Start(f) => self.start(f as usize),
            Event::Stop(f) => self.stop(f as usize),
            Event::Resume(f) => self.try_send(f as usize),
            Event::RouterRestart(l) => {
                let now = self.clock.now();
                self.links[l as usize].restart_router(now);
            }
            Event::Pace(f) => {
                self.flows[f as usize].pace_pending = false;
                self.try_send(f as usize);
            }
            Event::Rto(f) => self.rto(f as usize),
            Event::DelayedAck(f) => self.delayed_ack(f as usize),
            Event::Report(f) => self.report_timer(f as usize),
            Event::Handshake(f) => self.handshake_timer(f as usize),
            Event::Arrival(s) => self.pareto_arrival(s as usize),
            Event::Flood(s) => self.flood(s as usize),
            Event::Sample => self.take_sample(),
            Event::Measure => self.reset_stats(),
        }
    }
}

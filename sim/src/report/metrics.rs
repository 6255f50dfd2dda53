//! What a run measured: per-link utilization, queue and loss; per-flow
//! throughput; Jain's fairness index over time; convergence time as the EVCP
//! paper defines it; completion time of finite flows.

use ecnq::router::bottleneck::Class;
use ecnq::statistics::{histogram_percentile, jain_index, SojournHistogram};
use serde::Serialize;

use super::sharing::{self, Finite, Job};
use crate::engine::{FeedbackRecord, Flow, FlowSample, FlowSpec, FlowState, Link, Nanos, Sim};

/// Jain's index at which rates count as fair: issue 19's goal (0.99).
pub const JAIN_FAIR: f64 = 0.99;

/// One link's figures over the measured period.
#[derive(Clone, Debug, Serialize)]
pub struct LinkSummary {
    /// Link name.
    pub name: String,
    /// Capacity, bits per second.
    pub rate_bps: f64,
    /// Departures over capacity.
    pub utilization: f64,
    /// Time-weighted mean queue, packets.
    pub mean_queue_packets: f64,
    /// 99th percentile of the queue arriving packets found in their class,
    /// packets.
    pub p99_queue_packets: u64,
    /// Largest queue, packets.
    pub peak_queue_packets: u64,
    /// Mean queueing delay, ms.
    pub mean_queue_ms: f64,
    /// 99th percentile queueing delay, ms (p99 packets at the mean packet
    /// size).
    pub p99_queue_ms: f64,
    /// The same for each queue that packets took: ecnq, classic, L4S.
    pub p99_class_queue_ms: ClassQueues,
    /// 99th percentile of the sojourn of each queue's departed packets, ms:
    /// from arrival to the start of serialization, measured (not converted
    /// at the link's rate, which in a dual queue misses the other classes'
    /// turns), to the upper edge of its 0.1 ms bucket.
    pub p99_class_sojourn_ms: ClassQueues,
    /// Largest queueing delay, ms.
    pub peak_queue_ms: f64,
    /// The sojourn of every departed packet, whatever its queue: the
    /// per-packet queueing delay Pantheon ranks schemes by (its p95).
    pub sojourn_ms: SojournPercentiles,
    /// Whether the link's capacity varies (a trace or a schedule):
    /// `rate_bps` is then the mean it carried over the measured period.
    pub varies: bool,
    /// Dropped or lost packets over offered packets.
    pub loss: f64,
    /// Packets dropped by the full buffer.
    pub drops: u64,
    /// Packets lost on the wire.
    pub random_losses: u64,
    /// The first sample at which utilization reached 90 %, s (the MPCP
    /// paper's "transition time" from an idle link).
    pub time_to_90pct_s: Option<f64>,
}

impl LinkSummary {
    /// What the link carried over the measured period, bit/s: its
    /// utilization of the capacity in force, times that capacity.
    pub fn throughput_bps(&self) -> f64 {
        self.utilization * self.rate_bps
    }
}

/// Percentiles of a link's per-packet sojourn, ms, each the upper edge of
/// its 0.1 ms bucket; zero where no packet departed.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct SojournPercentiles {
    /// The median.
    pub p50: f64,
    /// The 95th percentile.
    pub p95: f64,
    /// The 99th percentile.
    pub p99: f64,
}

impl SojournPercentiles {
    /// The percentiles of every queue of `link` together.
    fn of(link: &Link) -> SojournPercentiles {
        let mut all = SojournHistogram::new();
        for class in Class::ALL {
            all += &link.sojourns(class);
        }
        let at = |p: f64| all.percentile_ms(p).unwrap_or(0.0);
        SojournPercentiles {
            p50: at(50.0),
            p95: at(95.0),
            p99: at(99.0),
        }
    }
}

/// One figure per queue of a link; none for a queue no packet took.
#[derive(Clone, Debug, Serialize)]
pub struct ClassQueues {
    /// The ecnq queue (a FIFO link's only queue).
    pub ecnq: Option<f64>,
    /// The classic queue.
    pub classic: Option<f64>,
    /// The L4S queue.
    pub l4s: Option<f64>,
}

impl ClassQueues {
    /// Each queue's figure from `figure`.
    fn by(figure: impl Fn(Class) -> Option<f64>) -> ClassQueues {
        ClassQueues {
            ecnq: figure(Class::Ecnq),
            classic: figure(Class::Classic),
            l4s: figure(Class::L4s),
        }
    }

    /// The figure of `class`'s queue.
    pub fn of(&self, class: Class) -> Option<f64> {
        match class {
            Class::Ecnq => self.ecnq,
            Class::Classic => self.classic,
            Class::L4s => self.l4s,
        }
    }
}

/// A flow group's aggregate.
#[derive(Clone, Debug, Serialize)]
pub struct GroupSummary {
    /// Group name.
    pub name: String,
    /// Flows in the group.
    pub flows: usize,
    /// Sum of the flows' throughputs over the measured period, bits per second.
    pub throughput_bps: f64,
}

/// One flow's figures.
#[derive(Clone, Debug, Serialize)]
pub struct FlowSummary {
    /// Flow index.
    pub id: usize,
    /// Scenario group.
    pub group: String,
    /// Protocol name.
    pub scheme: String,
    /// Start time, s.
    pub start_s: f64,
    /// Received bits per second over the measured part of its life.
    pub throughput_bps: f64,
    /// Data packets declared lost over the measured period (as the links'
    /// drops count).
    pub packets_lost: u64,
    /// Completion time for a finite flow that finished, s.
    pub completion_s: Option<f64>,
    /// EVCP-paper convergence time for a long-lived flow that started after
    /// the first: seconds from its start until its throughput first reached
    /// its fair share (None if it never did).
    pub convergence_s: Option<f64>,
    /// One of the scenario's own long-lived flows, those that Jain's index
    /// and convergence count: not finite, not background (a flood's fake
    /// flows are). Not in summary.json, whose groups say it.
    #[serde(skip)]
    pub long_lived: bool,
    /// With session feedback, what the sender's session went through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feedback: Option<FeedbackSummary>,
}

/// What an ecnq flow's sender session went through (session feedback only).
#[derive(Clone, Debug, Serialize)]
pub struct FeedbackSummary {
    /// The sender's mode at the end.
    pub mode: String,
    /// Fallbacks to classic congestion control.
    pub fallbacks: usize,
    /// Returns to the scheme's law after a fallback.
    pub recoveries: usize,
    /// Reports the receiver sent.
    pub reports_sent: u64,
    /// Reports that reached the sender.
    pub reports_arrived: u64,
    /// (time s, mode) at every mode change.
    pub mode_changes: Vec<(f64, String)>,
}

impl FeedbackSummary {
    fn of(record: &FeedbackRecord) -> FeedbackSummary {
        FeedbackSummary {
            mode: record.mode().name().to_owned(),
            fallbacks: record.fallbacks(),
            recoveries: record.recoveries(),
            reports_sent: record.reports_sent,
            reports_arrived: record.reports_arrived,
            mode_changes: record
                .mode_changes
                .iter()
                .map(|&(t, mode)| (secs(t), mode.name().to_owned()))
                .collect(),
        }
    }
}

/// Jain's fairness index of the long-lived flows' rates, sample by sample.
#[derive(Clone, Debug, Default, Serialize)]
pub struct JainSummary {
    /// Mean over the measured samples.
    pub mean: f64,
    /// Smallest.
    pub min: f64,
    /// At the last sample.
    pub last: f64,
    /// (time s, index) pairs.
    pub series: Vec<(f64, f64)>,
}

impl JainSummary {
    /// Seconds from `from` (s) to the first sample after it from which the
    /// index stays at least [`JAIN_FAIR`] until `until` (s; infinite: the
    /// end of the run). None if the last sample before `until` is below
    /// it, or none comes between.
    pub fn fair_after(&self, from: f64, until: f64) -> Option<f64> {
        let after: Vec<&(f64, f64)> = (self.series.iter())
            .filter(|(t, _)| *t > from && *t < until)
            .collect();
        let settled = match after.iter().rposition(|(_, j)| *j < JAIN_FAIR) {
            None => after.first(),
            Some(i) => after.get(i + 1),
        };
        settled.map(|(t, _)| t - from)
    }
}

/// The arrival period's figures, for a scenario that sets `arrivals`: it
/// runs from `measure_from` to there (`erc-flash-100`).
#[derive(Clone, Debug, Serialize)]
pub struct ArrivalSummary {
    /// The period's end, s.
    pub until_s: f64,
    /// Each reported link's figures over the period.
    pub links: Vec<LinkSummary>,
    /// Seconds from the period's start until Jain's index is fair for good
    /// ([`JainSummary::fair_after`]).
    pub fair_after_s: Option<f64>,
}

/// Finite flows.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CompletionSummary {
    /// Flows started.
    pub started: usize,
    /// Bytes the started flows carry.
    pub offered_bytes: u64,
    /// Flows finished.
    pub finished: usize,
    /// Mean completion time of finished flows, s.
    pub mean_s: f64,
    /// Median, s.
    pub median_s: f64,
    /// Mean completion time the same finished flows would have with
    /// processor sharing at their bottleneck ([`super::sharing`]), s.
    pub sharing_mean_s: f64,
    /// The same by decade of flow size.
    pub by_size: Vec<SizeClass>,
    /// The same in the benchmark's size classes ([`SIZE_CLASS_BOUNDS`]),
    /// all four, empty ones included.
    pub by_size_class: Vec<SizeBand>,
}

/// Where the size classes of the short-flow benchmark (issue 54, item 3)
/// part: under 100 kB (a web page's objects), 100 kB–1 MB, 1–10 MB and
/// 10 MB up, each from its lower bound (included) to the next (excluded).
/// Bytes, powers of ten as the issue counts them.
pub const SIZE_CLASS_BOUNDS: [u64; 3] = [100_000, 1_000_000, 10_000_000];

/// Which of the size classes a flow of `bytes` falls in, from 0 (under
/// the first of [`SIZE_CLASS_BOUNDS`]) to their number.
pub fn size_class(bytes: u64) -> usize {
    SIZE_CLASS_BOUNDS.partition_point(|&bound| bound <= bytes)
}

/// Finished finite flows of one of the benchmark's size classes.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SizeBand {
    /// The smallest size in the class, bytes.
    pub from_bytes: u64,
    /// Sizes up to this, excluded (bytes; none for the last class).
    pub below_bytes: Option<u64>,
    /// Flows finished.
    pub flows: usize,
    /// Their mean completion time, s (none without flows).
    pub mean_s: Option<f64>,
    /// Theirs with processor sharing, s (none without flows).
    pub sharing_mean_s: Option<f64>,
}

/// A mean completion time over processor sharing's for the same flows
/// (a processor-sharing time of zero counts as a nanosecond).
pub fn over_sharing(mean_s: f64, sharing_mean_s: f64) -> f64 {
    mean_s / sharing_mean_s.max(1e-9)
}

impl CompletionSummary {
    /// The finished flows' mean completion time over processor sharing's.
    pub fn vs_sharing(&self) -> f64 {
        over_sharing(self.mean_s, self.sharing_mean_s)
    }
}

impl SizeBand {
    /// The class's mean completion time over processor sharing's.
    pub fn vs_sharing(&self) -> Option<f64> {
        Some(over_sharing(self.mean_s?, self.sharing_mean_s?))
    }
}

/// Finished finite flows of one decade of size.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SizeClass {
    /// Flows from a tenth of this size up to it (bytes, excluded).
    pub below_bytes: u64,
    /// Flows finished.
    pub flows: usize,
    /// Their mean completion time, s.
    pub mean_s: f64,
    /// Theirs with processor sharing, s.
    pub sharing_mean_s: f64,
}

/// Everything `run` reports.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// Scenario name.
    pub scenario: String,
    /// The protocol the scenario's main flows ran.
    pub scheme: String,
    /// RNG seed.
    pub seed: u64,
    /// Simulated seconds.
    pub duration_s: f64,
    /// Statistics start, s.
    pub measure_from_s: f64,
    /// Events processed.
    pub events: u64,
    /// Reported links.
    pub links: Vec<LinkSummary>,
    /// Flows that per-flow series record (Pareto flows are summarized in `completion`).
    pub flows: Vec<FlowSummary>,
    /// Per-group totals.
    pub groups: Vec<GroupSummary>,
    /// Fairness.
    pub jain: JainSummary,
    /// Finite flows, if any.
    pub completion: Option<CompletionSummary>,
    /// The arrival period, if the scenario sets one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<ArrivalSummary>,
}

fn secs(t: Nanos) -> f64 {
    t as f64 / 1e9
}

/// The flow samples grouped by sampling instant.
fn by_time(series: &[FlowSample]) -> impl Iterator<Item = &[FlowSample]> {
    series.chunk_by(|a, b| a.time == b.time)
}

impl Summary {
    /// Computes the summary of a finished run (call `Sim::finish` first).
    pub fn of(sim: &Sim, scenario: &str, scheme: &str, seed: u64) -> Summary {
        let flows = flow_summaries(sim);
        Summary {
            scenario: scenario.to_owned(),
            scheme: scheme.to_owned(),
            seed,
            duration_s: secs(sim.duration()),
            measure_from_s: secs(sim.measure_from()),
            events: sim.counters.events,
            links: link_summaries(sim),
            groups: group_totals(&flows),
            flows,
            jain: jain_over_time(sim),
            completion: completion_times(sim),
            arrivals: None,
        }
    }

    /// The summary with its arrival period: `links`, the links' figures at
    /// the period's end (s), and when Jain's index settled.
    pub fn with_arrivals(self, until_s: f64, links: Vec<LinkSummary>) -> Summary {
        let fair_after_s = self.jain.fair_after(self.measure_from_s, f64::INFINITY);
        Summary {
            arrivals: Some(ArrivalSummary {
                until_s,
                links,
                fair_after_s,
            }),
            ..self
        }
    }
}

/// Whether a flow is one of the scenario's own long-lived flows: not
/// finite, not background, recorded in the per-flow series.
fn long_lived(f: &FlowSpec) -> bool {
    f.size.is_none() && f.sampled && !f.background
}

/// Each reported link's figures from the measured period's start to now
/// (call `Sim::finish` first).
pub fn link_summaries(sim: &Sim) -> Vec<LinkSummary> {
    let measured = secs(sim.now().saturating_sub(sim.measure_from())).max(1e-9);
    sim.links
        .iter()
        .enumerate()
        .filter(|(_, l)| l.spec.report)
        .filter_map(|(index, l)| {
            let rate = l.spec.rate?;
            let s = &l.stats;
            let ms_per_byte = 8.0 / rate * 1e3;
            let mean_pkt = if s.arrived_packets > 0 {
                s.arrived_bytes as f64 / s.arrived_packets as f64
            } else {
                0.0
            };
            let p99 = percentile(&merged(&s.queue_seen), 99.0);
            let p99_ms = |class: Class| {
                let seen = &s.queue_seen[class as usize];
                (seen.iter().sum::<u64>() > 0)
                    .then(|| percentile(seen, 99.0) as f64 * mean_pkt * ms_per_byte)
            };
            let sojourn_ms = |class: Class| l.sojourns(class).percentile_ms(99.0);
            let varying = l.varying_capacity_bytes(sim.measure_from(), sim.now());
            let (rate_bps, utilization) = match varying {
                Some(bytes) => (
                    bytes * 8.0 / measured,
                    s.departed_bytes as f64 / bytes.max(1.0),
                ),
                None => (rate, s.departed_bytes as f64 * 8.0 / (rate * measured)),
            };
            Some(LinkSummary {
                name: l.spec.name.clone(),
                rate_bps,
                utilization,
                mean_queue_packets: s.queue_packet_ns / (measured * 1e9),
                p99_queue_packets: p99,
                peak_queue_packets: s.peak_queue_packets,
                mean_queue_ms: s.queue_byte_ns / (measured * 1e9) * ms_per_byte,
                p99_queue_ms: p99 as f64 * mean_pkt * ms_per_byte,
                p99_class_queue_ms: ClassQueues::by(p99_ms),
                p99_class_sojourn_ms: ClassQueues::by(sojourn_ms),
                peak_queue_ms: s.peak_queue_bytes as f64 * ms_per_byte,
                sojourn_ms: SojournPercentiles::of(l),
                varies: varying.is_some(),
                loss: (s.dropped_packets + s.lost_packets) as f64
                    / (s.arrived_packets.max(1)) as f64,
                drops: s.dropped_packets,
                random_losses: s.lost_packets,
                time_to_90pct_s: sim
                    .link_series
                    .iter()
                    .find(|x| x.link as usize == index && x.utilization >= 0.9)
                    .map(|x| secs(x.time)),
            })
        })
        .collect()
}

/// Each sampled flow's figures.
fn flow_summaries(sim: &Sim) -> Vec<FlowSummary> {
    let convergence = convergence_times(sim);
    sim.flows
        .iter()
        .enumerate()
        .filter(|(_, f)| f.spec.sampled)
        .map(|(i, f)| {
            let from = f.spec.start.max(sim.measure_from());
            let until = match f.state {
                FlowState::Done(t) => t,
                _ => sim.now(),
            };
            let span = secs(until.saturating_sub(from));
            let bytes = f.received_bytes - f.received_at_measure;
            FlowSummary {
                id: i,
                group: f.spec.group.clone(),
                scheme: f.spec.protocol.name().to_owned(),
                start_s: secs(f.spec.start),
                throughput_bps: if span > 0.0 {
                    bytes as f64 * 8.0 / span
                } else {
                    0.0
                },
                packets_lost: f.packets_lost - f.lost_at_measure,
                completion_s: f.completion().map(secs),
                convergence_s: convergence.get(i).copied().flatten(),
                long_lived: long_lived(&f.spec),
                feedback: f.feedback_record().map(FeedbackSummary::of),
            }
        })
        .collect()
}

/// Each flow group's totals, in order of first appearance.
fn group_totals(flows: &[FlowSummary]) -> Vec<GroupSummary> {
    let mut groups: Vec<GroupSummary> = Vec::new();
    for f in flows {
        match groups.iter_mut().find(|g| g.name == f.group) {
            Some(g) => {
                g.flows += 1;
                g.throughput_bps += f.throughput_bps;
            }
            None => groups.push(GroupSummary {
                name: f.group.clone(),
                flows: 1,
                throughput_bps: f.throughput_bps,
            }),
        }
    }
    groups
}

/// Jain's index of the long-lived, non-background flows active for a
/// whole sampling period, at each sample of the measured period.
fn jain_over_time(sim: &Sim) -> JainSummary {
    let mut series = Vec::new();
    for group in by_time(&sim.flow_series) {
        let t = group[0].time;
        if t <= sim.measure_from() {
            continue;
        }
        let rates: Vec<f64> = group
            .iter()
            .filter(|s| {
                let f = &sim.flows[s.flow as usize];
                long_lived(&f.spec)
                    && f.state == FlowState::Active
                    && f.spec.start + sim.sample_period() <= t
            })
            .map(|s| s.rate)
            .collect();
        if !rates.is_empty() {
            series.push((secs(t), jain_index(&rates)));
        }
    }
    JainSummary {
        mean: series.iter().map(|s| s.1).sum::<f64>() / series.len().max(1) as f64,
        min: series.iter().map(|s| s.1).fold(1.0, f64::min),
        last: series.last().map_or(1.0, |s| s.1),
        series,
    }
}

/// Completion times of the finite flows, if there are any, beside those of
/// processor sharing.
fn completion_times(sim: &Sim) -> Option<CompletionSummary> {
    let finite: Vec<&Flow> = sim.flows.iter().filter(|f| f.spec.size.is_some()).collect();
    (!finite.is_empty()).then(|| {
        let reference = sharing_reference(sim, &finite);
        let finished: Vec<(u64, f64, f64)> = finite
            .iter()
            .zip(&reference)
            .filter_map(|(f, &ps)| Some((f.spec.size?, secs(f.completion()?), ps)))
            .collect();
        let mut done: Vec<f64> = finished.iter().map(|&(_, t, _)| t).collect();
        done.sort_by(f64::total_cmp);
        let mean = |v: Vec<f64>| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let started: Vec<&&Flow> = finite
            .iter()
            .filter(|f| f.state != FlowState::Pending)
            .collect();
        CompletionSummary {
            started: started.len(),
            offered_bytes: started.iter().filter_map(|f| f.spec.size).sum(),
            finished: done.len(),
            median_s: done.get(done.len() / 2).copied().unwrap_or(0.0),
            mean_s: mean(done),
            sharing_mean_s: mean(finished.iter().map(|&(_, _, ps)| ps).collect()),
            by_size: size_classes(&finished),
            by_size_class: size_bands(&finished),
        }
    })
}

/// Mean completion times of finished flows (size, time, processor-sharing
/// time) by decade of size, from under 10 kB up.
fn size_classes(finished: &[(u64, f64, f64)]) -> Vec<SizeClass> {
    let mut classes: Vec<SizeClass> = Vec::new();
    let mut sorted = finished.to_vec();
    sorted.sort_by_key(|&(size, _, _)| size);
    for &(size, t, ps) in &sorted {
        let mut below = 10_000;
        while size >= below {
            below *= 10;
        }
        if classes.last().is_none_or(|c| c.below_bytes != below) {
            classes.push(SizeClass {
                below_bytes: below,
                ..SizeClass::default()
            });
        }
        let class = classes.last_mut().expect("pushed above");
        class.flows += 1;
        class.mean_s += t;
        class.sharing_mean_s += ps;
    }
    for c in &mut classes {
        c.mean_s /= c.flows as f64;
        c.sharing_mean_s /= c.flows as f64;
    }
    classes
}

/// Mean completion times of finished flows (size, time, processor-sharing
/// time) in each of the benchmark's size classes.
fn size_bands(finished: &[(u64, f64, f64)]) -> Vec<SizeBand> {
    let lower = std::iter::once(0).chain(SIZE_CLASS_BOUNDS);
    let upper = SIZE_CLASS_BOUNDS.map(Some).into_iter().chain([None]);
    lower
        .zip(upper)
        .enumerate()
        .map(|(class, (from_bytes, below_bytes))| {
            let members: Vec<(f64, f64)> = finished
                .iter()
                .filter(|&&(size, _, _)| size_class(size) == class)
                .map(|&(_, t, ps)| (t, ps))
                .collect();
            let mean = |v: f64| (!members.is_empty()).then(|| v / members.len() as f64);
            SizeBand {
                from_bytes,
                below_bytes,
                flows: members.len(),
                mean_s: mean(members.iter().map(|m| m.0).sum()),
                sharing_mean_s: mean(members.iter().map(|m| m.1).sum()),
            }
        })
        .collect()
}

/// What each finite flow's completion time would be with processor sharing
/// at its path's slowest link, flows meeting there sharing it
/// ([`sharing::completion_times`]).
fn sharing_reference(sim: &Sim, finite: &[&Flow]) -> Vec<f64> {
    let slowest = |f: &Flow| {
        f.spec.path.iter().copied().min_by(|&a, &b| {
            let rate = |l: usize| sim.links[l].spec.rate.unwrap_or(f64::INFINITY);
            rate(a).total_cmp(&rate(b))
        })
    };
    let delay = |links: &[usize]| secs(links.iter().map(|&l| sim.links[l].spec.delay).sum());
    let mut reference = vec![0.0; finite.len()];
    let bottleneck: Vec<Option<usize>> = finite.iter().map(|f| slowest(f)).collect();
    let mut links = bottleneck.clone();
    links.sort_unstable();
    links.dedup();
    for link in links {
        let members: Vec<usize> = (0..finite.len())
            .filter(|&i| bottleneck[i] == link)
            .collect();
        let flows: Vec<Finite> = (members.iter())
            .map(|&i| Finite {
                job: Job {
                    start: secs(finite[i].spec.start),
                    bytes: finite[i].spec.size.unwrap_or(0) as f64,
                },
                data_delay: delay(&finite[i].spec.path),
                ack_delay: delay(&finite[i].spec.ack_path),
            })
            .collect();
        let capacity = link
            .and_then(|l| sim.links[l].spec.rate)
            .unwrap_or(f64::INFINITY)
            / 8.0;
        for (&i, time) in members
            .iter()
            .zip(sharing::completion_times(&flows, capacity))
        {
            reference[i] = time;
        }
    }
    reference
}

/// The histograms of every class added up.
fn merged(histograms: &[Vec<u64>]) -> Vec<u64> {
    let len = histograms.iter().map(Vec::len).max().unwrap_or(0);
    (0..len)
        .map(|v| histograms.iter().filter_map(|h| h.get(v)).sum())
        .collect()
}

/// The `p`-th percentile (0–100) of a histogram, 0 if it is empty.
fn percentile(histogram: &[u64], p: f64) -> u64 {
    histogram_percentile(histogram, p).unwrap_or(0) as u64
}

/// The EVCP paper's convergence time (§"Simulation environment"): for every
/// long-lived flow that starts after the earliest one, the time from its
/// start until its measured throughput exceeds its fair share. The fair
/// share at a sample is, over the rated links on its path, the smallest
/// mean rate of the long-lived flows active through that link. With
/// staggered arrivals the paper's definition only makes sense up to the next
/// arrival (a newcomer's near-zero rate drags the mean down), so a flow that
/// has not converged when the next flow starts gets none.
fn convergence_times(sim: &Sim) -> Vec<Option<f64>> {
    let long: Vec<bool> = sim.flows.iter().map(|f| long_lived(&f.spec)).collect();
    let first_start = sim
        .flows
        .iter()
        .zip(&long)
        .filter(|(_, &l)| l)
        .map(|(f, _)| f.spec.start)
        .min()
        .unwrap_or(0);
    let mut result: Vec<Option<f64>> = vec![None; sim.flows.len()];
    let mut pending: Vec<usize> = (0..sim.flows.len())
        .filter(|&i| long[i] && sim.flows[i].spec.start > first_start)
        .collect();
    let next_arrival = next_arrivals(sim, &long);
    let mut sum = vec![0.0; sim.links.len()];
    let mut count = vec![0u32; sim.links.len()];
    let mut rate = vec![f64::NAN; sim.flows.len()];
    for group in by_time(&sim.flow_series) {
        if pending.is_empty() {
            break;
        }
        sum.iter_mut().for_each(|s| *s = 0.0);
        count.iter_mut().for_each(|c| *c = 0);
        rate.iter_mut().for_each(|r| *r = f64::NAN);
        for s in group.iter().filter(|s| long[s.flow as usize]) {
            rate[s.flow as usize] = s.rate;
            for &l in &sim.flows[s.flow as usize].spec.path {
                sum[l] += s.rate;
                count[l] += 1;
            }
        }
        let t = group[0].time;
        pending.retain(|&f| {
            let flow = &sim.flows[f];
            if t >= next_arrival[f] {
                // A newer flow's arrival changes the fair share: a flow that
                // had not converged by then did not converge in its own epoch.
                return false;
            }
            if rate[f].is_nan() {
                return true;
            }
            let fair = fair_share(sim, &flow.spec.path, &sum, &count);
            if rate[f] >= fair {
                result[f] = Some(secs(t.saturating_sub(flow.spec.start)));
                false
            } else {
                true
            }
        });
    }
    result
}

/// When the next long-lived flow after each flow arrives (`Nanos::MAX`
/// if none does); `long` says which flows are long-lived.
fn next_arrivals(sim: &Sim, long: &[bool]) -> Vec<Nanos> {
    let mut starts: Vec<Nanos> = sim
        .flows
        .iter()
        .zip(long)
        .filter(|(_, &l)| l)
        .map(|(f, _)| f.spec.start)
        .collect();
    starts.sort_unstable();
    sim.flows
        .iter()
        .map(|f| {
            let after = starts.partition_point(|&s| s <= f.spec.start);
            starts.get(after).copied().unwrap_or(Nanos::MAX)
        })
        .collect()
}

/// A flow's fair share at one sample: over the rated links of its `path`,
/// the smallest mean rate of the long-lived flows through the link (`sum`
/// and `count` of their rates, by link).
fn fair_share(sim: &Sim, path: &[usize], sum: &[f64], count: &[u32]) -> f64 {
    path.iter()
        .filter(|&&l| sim.links[l].spec.rate.is_some() && count[l] > 0)
        .map(|&l| sum[l] / f64::from(count[l]))
        .fold(f64::INFINITY, f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_size_class_runs_from_its_lower_bound_to_below_the_next() {
        let classes = [
            0,
            99_999,
            100_000,
            999_999,
            1_000_000,
            9_999_999,
            10_000_000,
            u64::MAX,
        ];
        assert_eq!(classes.map(size_class), [0, 0, 1, 1, 2, 2, 3, 3]);
    }

    #[test]
    fn every_size_class_is_reported_and_an_empty_one_has_no_mean() {
        // (size, completion, processor sharing): two flows of exactly
        // 100 kB and one of 20 MB.
        let bands = size_bands(&[
            (100_000, 1.0, 0.5),
            (100_000, 3.0, 0.5),
            (20_000_000, 8.0, 4.0),
        ]);
        let flows: Vec<usize> = bands.iter().map(|b| b.flows).collect();
        assert_eq!(flows, [0, 2, 0, 1]);
        assert_eq!((bands[0].mean_s, bands[0].vs_sharing()), (None, None));
        assert_eq!(
            (bands[1].mean_s, bands[1].vs_sharing()),
            (Some(2.0), Some(4.0))
        );
        assert_eq!(
            (bands[1].from_bytes, bands[1].below_bytes),
            (100_000, Some(1_000_000))
        );
        assert_eq!(
            (bands[3].from_bytes, bands[3].below_bytes),
            (10_000_000, None)
        );
        assert_eq!(bands[3].vs_sharing(), Some(2.0));
    }

    #[test]
    fn jain_is_fair_after_its_last_sample_below_the_goal() {
        let jain = JainSummary {
            series: vec![
                (0.5, 0.5),
                (1.0, 0.995),
                (1.5, 0.98),
                (2.0, 0.99),
                (2.5, 1.0),
            ],
            ..JainSummary::default()
        };
        let end = f64::INFINITY;
        assert_eq!(jain.fair_after(0.0, end), Some(2.0));
        assert_eq!(jain.fair_after(1.5, end), Some(0.5));
        // Samples from `until` on are not looked at.
        assert_eq!(jain.fair_after(0.0, 1.5), Some(1.0));
        let unfair_at_the_end = JainSummary {
            series: vec![(0.5, 1.0), (1.0, 0.9)],
            ..JainSummary::default()
        };
        assert_eq!(unfair_at_the_end.fair_after(0.0, end), None);
        assert_eq!(unfair_at_the_end.fair_after(0.0, 1.0), Some(0.5));
        assert_eq!(JainSummary::default().fair_after(0.0, end), None);
    }

    #[test]
    fn percentiles_of_a_histogram() {
        // 90 samples of 0, 9 of 5, 1 of 40.
        let mut h = vec![0u64; 41];
        h[0] = 90;
        h[5] = 9;
        h[40] = 1;
        assert_eq!(percentile(&h, 50.0), 0);
        assert_eq!(percentile(&h, 99.0), 5);
        assert_eq!(percentile(&h, 100.0), 40);
    }
}

//! Measurement: the periodic time-series samples of flows and links, the
//! reset of the counters when the measured period starts, and the closing
//! of the queue integrals at the end.

use super::clock::{dur, Event};
use super::flow::FlowSample;
use super::link::{LinkSample, LinkStats};
use super::state::FlowState;
use super::Sim;

impl Sim {
    /// Records one time-series row per live flow and reported link.
    pub(super) fn take_sample(&mut self) {
        let now = self.clock.now();
        let since = self.last_sample;
        let dt = (now - since) as f64 / 1e9;
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
                let router_bps = bottleneck.capacity() * 8.0;
                let port = bottleneck.router_mut();
                port.advance(dur(now));
                let load = *port.meter().load();
                let (utilization, capacity_bps) = match link.varying_capacity_bytes(since, now) {
                    Some(bytes) => (departed as f64 / bytes.max(1.0), bytes * 8.0 / dt),
                    None => (departed as f64 * 8.0 / (bps * dt), bps),
                };
                self.link_series.push(LinkSample {
                    time: now,
                    link: i as u32,
                    utilization,
                    capacity_bps,
                    router_bps,
                    queue_packets,
                    queue_bytes,
                    load,
                });
            }
        }
        let next = now + self.sample;
        self.clock.schedule_at(next, Event::Sample);
    }

    /// The measured period starts: counters restart from here.
    pub(super) fn reset_stats(&mut self) {
        let now = self.clock.now();
        for flow in &mut self.flows {
            flow.received_at_measure = flow.received_bytes;
            flow.lost_at_measure = flow.packets_lost;
        }
        for link in &mut self.links {
            link.account_queue(now);
            link.stats = LinkStats {
                peak_queue_packets: link.queue_packets() as u64,
                peak_queue_bytes: link.queue_bytes(),
                ..LinkStats::default()
            };
            link.start_measuring_sojourns();
        }
    }

    /// Closes the queue integrals at the current time (call once after `run`).
    pub fn finish(&mut self) {
        let now = self.clock.now();
        for link in &mut self.links {
            link.account_queue(now);
        }
    }
}

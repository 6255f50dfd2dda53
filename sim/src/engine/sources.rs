//! When flows begin and end: scheduled starts and stops, and finite flows
//! arriving as a Poisson process with Pareto sizes.

use super::clock::{Event, Nanos};
use super::flow::Flow;
use super::state::FlowState;
use super::Sim;

impl Sim {
    /// Flow `f` opens its connection, and sends once its handshake is done
    /// (unless it was stopped before it started).
    pub(super) fn start(&mut self, f: usize) {
        if self.flows[f].state == FlowState::Pending {
            self.open(f);
        }
    }

    /// Flow `f` sends no new data from now on.
    pub(super) fn stop(&mut self, f: usize) {
        let flow = &mut self.flows[f];
        if matches!(
            flow.state,
            FlowState::Active | FlowState::Pending | FlowState::Connecting
        ) {
            flow.state = FlowState::Stopped;
        }
    }

    /// Pareto source `s` starts a new finite flow and schedules its next one.
    pub(super) fn pareto_arrival(&mut self, s: usize) {
        let now = self.clock.now();
        let src = &self.pareto[s];
        if now > src.until {
            return;
        }
        let (sizes, rate) = (src.sizes, src.arrivals_per_sec);
        let mut spec = src.flow.clone();
        let size = sizes.at(self.workload.uniform()).round().max(1.0) as u64;
        spec.size = Some(size);
        spec.start = now;
        let gap = (self.workload.exponential(1.0 / rate) * 1e9) as Nanos;
        self.clock
            .schedule_at(now + gap.max(1), Event::Arrival(s as u32));
        let f = self.flows.len();
        self.flows.push(Flow::new(spec));
        self.start(f);
    }
}

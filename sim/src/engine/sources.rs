//! When flows begin and end: scheduled starts and stops, and finite flows
//! arriving as a Poisson process with Pareto sizes.

use super::clock::Event;
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
        let (size, gap) = src.draw(&mut self.workload);
        let mut spec = src.flow.clone();
        spec.size = Some(size);
        spec.start = now;
        self.clock.schedule_at(now + gap, Event::Arrival(s as u32));
        let f = self.flows.len();
        self.flows.push(Flow::new(spec));
        self.start(f);
    }
}

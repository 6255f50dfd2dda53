//! Helpers shared by the simulator's integration tests.

use ecnq_sim::runner;
use ecnq_sim::scenario::Scenario;

/// A scenario of `sim/scenarios` by name, with `--set`-style changes.
pub fn scenario(name: &str, set: &[&str]) -> Scenario {
    let path = runner::resolve(name).unwrap();
    let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
    Scenario::load(&path, &set).unwrap()
}

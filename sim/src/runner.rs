//! Finding and running scenarios: the scenario files by name, one run to
//! its end, and one run per protocol for `compare`.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::engine::Sim;
use crate::protocol::Case;
use crate::report::metrics::{link_summaries, Summary};
use crate::report::text::Row;
use crate::scenario::{Overrides, Scenario};

/// A finished run.
pub struct Run {
    /// The simulation in its final state (time series included).
    pub sim: Sim,
    /// What it measured.
    pub summary: Summary,
    /// Wall-clock seconds the run took.
    pub wall_s: f64,
}

/// Runs a scenario to its end; with an arrival period, the links'
/// figures are taken at its end on the way.
pub fn run(scenario: &Scenario, o: &Overrides) -> Result<Run, String> {
    let config = scenario.build(o)?;
    let arrivals = scenario.arrivals(o)?;
    let seed = config.seed;
    let started = Instant::now();
    let mut sim = Sim::new(config).map_err(|e| format!("{}: {e}", scenario.origin))?;
    let period = arrivals.map(|until| {
        sim.run_until(until);
        sim.finish();
        (until as f64 / 1e9, link_summaries(&sim))
    });
    sim.run();
    sim.finish();
    let wall_s = started.elapsed().as_secs_f64();
    let mut summary = Summary::of(&sim, &scenario.name, scenario.scheme(o).name(), seed);
    if let Some((until_s, links)) = period {
        summary = summary.with_arrivals(until_s, links);
    }
    Ok(Run {
        sim,
        summary,
        wall_s,
    })
}

/// Where scenario files live: `ECNQ_SIM_SCENARIOS`, else `sim/scenarios` of this source tree.
pub fn scenario_dir() -> PathBuf {
    std::env::var_os("ECNQ_SIM_SCENARIOS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios"))
}

/// A scenario file by path, or by name in [`scenario_dir`].
pub fn resolve(name: &str) -> Result<PathBuf, String> {
    let direct = Path::new(name);
    if direct.is_file() {
        return Ok(direct.to_path_buf());
    }
    let named = scenario_dir().join(format!("{}.toml", name.trim_end_matches(".toml")));
    if named.is_file() {
        return Ok(named);
    }
    Err(format!(
        "no scenario `{name}`: not a file, and not in {} (try `ecnq-sim list`)",
        scenario_dir().display()
    ))
}

/// Every scenario in [`scenario_dir`], sorted by name.
pub fn list() -> Result<Vec<(String, Scenario)>, String> {
    let dir = scenario_dir();
    let entries = fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| Scenario::load(p, &[]).map(|s| (s.name.clone(), s)))
        .collect()
}

/// Runs the scenario once per case of `cases`, in parallel, each row
/// labelled with its case.
pub fn compare(scenario: &Scenario, o: &Overrides, cases: &[Case]) -> Vec<Row> {
    use rayon::prelude::*;
    cases
        .par_iter()
        .map(|case| Row {
            label: vec![case.to_string()],
            result: run(scenario, &o.for_case(*case)).map(|r| r.summary),
        })
        .collect()
}

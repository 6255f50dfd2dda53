//! Finding and running scenarios: the scenario files by name, one run to
//! its end, and one run per protocol for `compare`.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Instant;

use ecnq::router::bottleneck::Discipline;

use crate::engine::Sim;
use crate::protocol::Protocol;
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

/// One run of `compare`: a protocol, and the queue every link takes if
/// not the scenario's. `cubic@fifo` is Cubic through a drop-tail FIFO and
/// `cubic@dual` Cubic through the dual queue's classic side, under CoDel:
/// a cellular benchmark's baselines (ABC, NSDI 2020) in one line-up.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Case {
    /// The scheme of the flows that do not fix their own.
    pub protocol: Protocol,
    /// Every link's queue discipline, if not the scenario's.
    pub queue: Option<Discipline>,
}

impl Case {
    /// Every protocol in the scenario's queues: `compare`'s default.
    pub fn every_protocol() -> Vec<Case> {
        Protocol::ALL.into_iter().map(Case::from).collect()
    }
}

impl From<Protocol> for Case {
    fn from(protocol: Protocol) -> Case {
        Case {
            protocol,
            queue: None,
        }
    }
}

impl FromStr for Case {
    type Err = String;

    /// `SCHEME` or `SCHEME@QUEUE`, e.g. `erc`, `cubic@fifo`.
    fn from_str(s: &str) -> Result<Case, String> {
        let (protocol, queue) = match s.split_once('@') {
            Some((p, q)) => (p, Some(q.parse::<Discipline>()?)),
            None => (s, None),
        };
        Ok(Case {
            protocol: protocol.parse()?,
            queue,
        })
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.protocol.name())?;
        match self.queue {
            Some(queue) => write!(f, "@{queue}"),
            None => Ok(()),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Case {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Runs the scenario once per case of `cases`, in parallel, each row
/// labelled with its case.
pub fn compare(scenario: &Scenario, o: &Overrides, cases: &[Case]) -> Vec<Row> {
    use rayon::prelude::*;
    cases
        .par_iter()
        .map(|case| {
            let o = Overrides {
                scheme: Some(case.protocol),
                queue: case.queue.or(o.queue),
                ..o.clone()
            };
            Row {
                label: vec![case.to_string()],
                result: run(scenario, &o).map(|r| r.summary),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_names_a_scheme_and_perhaps_a_queue() {
        let plain: Case = "erc".parse().unwrap();
        assert_eq!(plain, Case::from("erc".parse::<Protocol>().unwrap()));
        assert_eq!(plain.to_string(), "erc");
        let fifo: Case = " Cubic@FIFO".parse().unwrap();
        assert_eq!(fifo.queue, Some(Discipline::Fifo));
        assert_eq!(fifo.to_string(), "cubic@fifo");
        let err = "cubic@codel".parse::<Case>().unwrap_err();
        assert!(err.contains("unknown queue discipline `codel`"), "{err}");
        let err = "tcp@fifo".parse::<Case>().unwrap_err();
        assert!(err.contains("unknown scheme `tcp`"), "{err}");
        assert_eq!(Case::every_protocol().len(), Protocol::ALL.len());
    }
}

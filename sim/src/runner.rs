//! Running scenarios and writing what they measured: CSV time series, a
//! summary JSON, SVG plots and a one-screen text summary.

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::engine::Sim;
use crate::metrics::Summary;
use crate::protocol::Protocol;
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

/// Runs a scenario to its end.
pub fn run(scenario: &Scenario, o: &Overrides) -> Result<Run, String> {
    let config = scenario.build(o)?;
    let seed = config.seed;
    let started = Instant::now();
    let mut sim = Sim::new(config).map_err(|e| format!("{}: {e}", scenario.origin))?;
    sim.run();
    sim.finish();
    let wall_s = started.elapsed().as_secs_f64();
    let summary = Summary::of(&sim, &scenario.name, scenario.scheme(o).name(), seed);
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

fn create(dir: &Path, name: &str) -> Result<fs::File, String> {
    let path = dir.join(name);
    fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes `flows.csv`, `links.csv` and `summary.json` into `dir`.
pub fn write_outputs(run: &Run, dir: &Path) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let io = |e: std::io::Error| format!("{}: {e}", dir.display());
    let mut out = String::from("time_s,flow,group,scheme,rate_bps,window_bytes\n");
    for s in &run.sim.flow_series {
        let f = &run.sim.flows[s.flow as usize].spec;
        let _ = writeln!(
            out,
            "{:.3},{},{},{},{:.0},{}",
            s.time as f64 / 1e9,
            s.flow,
            f.group,
            f.protocol,
            s.rate,
            s.window
        );
    }
    create(dir, "flows.csv")?
        .write_all(out.as_bytes())
        .map_err(io)?;
    let mut out = String::from(
        "time_s,link,utilization,queue_packets,queue_bytes,load_vcp,load_bmcc,load_mcp\n",
    );
    for s in &run.sim.link_series {
        let _ = writeln!(
            out,
            "{:.3},{},{:.4},{},{},{:.4},{:.4},{:.4}",
            s.time as f64 / 1e9,
            run.sim.links[s.link as usize].spec.name,
            s.utilization,
            s.queue_packets,
            s.queue_bytes,
            s.load_vcp,
            s.load_bmcc,
            s.load_mcp
        );
    }
    create(dir, "links.csv")?
        .write_all(out.as_bytes())
        .map_err(io)?;
    let json = serde_json::to_string_pretty(&run.summary).map_err(|e| e.to_string())?;
    create(dir, "summary.json")?
        .write_all(json.as_bytes())
        .map_err(io)?;
    crate::plot::write_plots(run, dir)
}

/// The one-screen summary `run` prints.
pub fn one_screen(scenario: &Scenario, run: &Run) -> String {
    let s = &run.summary;
    let mut out = String::new();
    let _ = writeln!(out, "{} — {}", scenario.name, scenario.file.title);
    if !scenario.file.paper.is_empty() {
        let _ = writeln!(out, "paper: {}", scenario.file.paper);
    }
    if !scenario.file.expect.is_empty() {
        let _ = writeln!(out, "paper reports: {}", scenario.file.expect);
    }
    let _ = writeln!(
        out,
        "scheme {}  seed {}  {:.0} s simulated (stats from {:.0} s) in {:.2} s wall, {} events ({:.1} M/s)",
        s.scheme,
        s.seed,
        s.duration_s,
        s.measure_from_s,
        run.wall_s,
        s.events,
        s.events as f64 / run.wall_s.max(1e-9) / 1e6
    );
    let _ = writeln!(
        out,
        "{:<10} {:>10} {:>6} {:>8} {:>8} {:>8} {:>9} {:>9} {:>8}",
        "link", "rate", "util", "q mean", "q p99", "q peak", "q p99 ms", "peak ms", "loss"
    );
    for l in s
        .links
        .iter()
        .filter(|l| l.utilization > 0.01 || l.drops > 0)
    {
        let _ = writeln!(
            out,
            "{:<10} {:>10} {:>6.3} {:>8.1} {:>8} {:>8} {:>9.1} {:>9.1} {:>8.4}",
            l.name,
            crate::units::ShowRate(l.rate_bps).to_string(),
            l.utilization,
            l.mean_queue_packets,
            l.p99_queue_packets,
            l.peak_queue_packets,
            l.p99_queue_ms,
            l.peak_queue_ms,
            l.loss
        );
    }
    let shown = s.flows.len().min(12);
    let _ = writeln!(
        out,
        "{:<5} {:<10} {:<9} {:>8} {:>12} {:>6} {:>10}",
        "flow", "group", "scheme", "start s", "throughput", "lost", "converge s"
    );
    for f in &s.flows[..shown] {
        let _ = writeln!(
            out,
            "{:<5} {:<10} {:<9} {:>8.1} {:>12} {:>6} {:>10}",
            f.id,
            f.group,
            f.scheme,
            f.start_s,
            crate::units::ShowRate(f.throughput_bps).to_string(),
            f.packets_lost,
            f.convergence_s.map_or("-".into(), |c| format!("{c:.1}"))
        );
    }
    if s.flows.len() > shown {
        let _ = writeln!(
            out,
            "… {} more flows (see summary.json)",
            s.flows.len() - shown
        );
    }
    if s.groups.len() > 1 {
        let groups: Vec<String> = s
            .groups
            .iter()
            .map(|g| {
                format!(
                    "{} ×{} {}",
                    g.name,
                    g.flows,
                    crate::units::ShowRate(g.throughput_bps)
                )
            })
            .collect();
        let _ = writeln!(out, "groups: {}", groups.join(", "));
    }
    if !s.jain.series.is_empty() {
        let _ = writeln!(
            out,
            "Jain's index: mean {:.3}, min {:.3}, last {:.3}",
            s.jain.mean, s.jain.min, s.jain.last
        );
    }
    if let Some(c) = &s.completion {
        let _ = writeln!(
            out,
            "finite flows: {} started, {} finished, mean completion {:.3} s, median {:.3} s",
            c.started, c.finished, c.mean_s, c.median_s
        );
    }
    out
}

/// One row of `compare` / `sweep`: the headline figures of a run.
pub struct Row {
    /// What distinguishes this run.
    pub label: Vec<String>,
    /// The run's summary, or why it did not run.
    pub result: Result<Summary, String>,
}

/// The most utilized reported link (the bottleneck for tables).
pub fn bottleneck(s: &Summary) -> Option<&crate::metrics::LinkSummary> {
    s.links
        .iter()
        .max_by(|a, b| a.utilization.total_cmp(&b.utilization))
}

/// A table of headline figures; `heads` name the label columns.
pub fn table(heads: &[&str], rows: &[Row]) -> String {
    let mut out = String::new();
    for h in heads {
        let _ = write!(out, "{h:<12} ");
    }
    let _ = writeln!(
        out,
        "{:<8} {:>6} {:>7} {:>6} {:>6} {:>8} {:>7} {:>9} {:>9}",
        "link", "util", "q mean", "q p99", "q peak", "loss", "Jain", "conv s", "FCT s"
    );
    for row in rows {
        for l in &row.label {
            let _ = write!(out, "{l:<12} ");
        }
        match &row.result {
            Err(e) => {
                let _ = writeln!(out, "skipped: {e}");
            }
            Ok(s) => {
                let (name, util, qm, q99, qp, loss) =
                    bottleneck(s).map_or(("-".into(), 0.0, 0.0, 0, 0, 0.0), |l| {
                        (
                            l.name.clone(),
                            l.utilization,
                            l.mean_queue_packets,
                            l.p99_queue_packets,
                            l.peak_queue_packets,
                            l.loss,
                        )
                    });
                // Convergence: the slowest later flow, and how many later flows converged.
                let later: Vec<Option<f64>> = s
                    .flows
                    .iter()
                    .filter(|f| f.start_s > 0.0 && f.completion_s.is_none())
                    .map(|f| f.convergence_s)
                    .collect();
                let converged: Vec<f64> = later.iter().flatten().copied().collect();
                let conv = match converged.iter().copied().reduce(f64::max) {
                    _ if later.is_empty() => "-".to_owned(),
                    None => format!("none/{}", later.len()),
                    Some(max) if converged.len() == later.len() => format!("{max:.1}"),
                    Some(max) => format!("{max:.0}({}/{})", converged.len(), later.len()),
                };
                let jain = if s.jain.series.is_empty() {
                    "-".to_owned()
                } else {
                    format!("{:.3}", s.jain.mean)
                };
                let fct = s
                    .completion
                    .as_ref()
                    .filter(|c| c.finished > 0)
                    .map(|c| c.mean_s);
                let _ = writeln!(
                    out,
                    "{:<8} {:>6.3} {:>7.1} {:>6} {:>6} {:>8.4} {:>7} {:>9} {:>9}",
                    name,
                    util,
                    qm,
                    q99,
                    qp,
                    loss,
                    jain,
                    conv,
                    fct.map_or("-".into(), |c| format!("{c:.3}"))
                );
            }
        }
    }
    out
}

/// Runs the scenario once per available protocol, in parallel.
pub fn compare(scenario: &Scenario, o: &Overrides) -> Vec<Row> {
    use rayon::prelude::*;
    Protocol::ALL
        .par_iter()
        .map(|&p| {
            let o = Overrides {
                scheme: Some(p),
                ..o.clone()
            };
            Row {
                label: vec![p.name().to_owned()],
                result: run(scenario, &o).map(|r| r.summary),
            }
        })
        .collect()
}

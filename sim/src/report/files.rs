//! Files a run writes with `--out`: the time series as CSV (`flows.csv`,
//! `links.csv`), the summary as JSON and the SVG plots.

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::Path;

use ecnq::FORMULAS;

use super::metrics::Summary;
use super::plot;
use crate::engine::Sim;

/// Writes `flows.csv`, `links.csv`, `summary.json` and the plots into `dir`.
pub fn write_outputs(sim: &Sim, summary: &Summary, dir: &Path) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    write_file(dir, "flows.csv", &flows_csv(sim))?;
    write_file(dir, "links.csv", &links_csv(sim))?;
    let json = serde_json::to_string_pretty(summary).map_err(|e| e.to_string())?;
    write_file(dir, "summary.json", &json)?;
    plot::write_plots(sim, summary, dir)
}

fn write_file(dir: &Path, name: &str, text: &str) -> Result<(), String> {
    let path = dir.join(name);
    let mut file = fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    file.write_all(text.as_bytes())
        .map_err(|e| format!("{}: {e}", dir.display()))
}

/// Every flow sample: time, flow, group, scheme, receive rate, window.
fn flows_csv(sim: &Sim) -> String {
    let mut out = String::from("time_s,flow,group,scheme,rate_bps,window_bytes\n");
    for s in &sim.flow_series {
        let f = &sim.flows[s.flow as usize].spec;
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
    out
}

/// Every link sample: time, link, utilization, queue, capacity in force
/// and load factors.
fn links_csv(sim: &Sim) -> String {
    let mut out =
        String::from("time_s,link,utilization,queue_packets,queue_bytes,capacity_bps,router_bps");
    for formula in &FORMULAS {
        let _ = write!(out, ",load_{}", formula.name);
    }
    out.push('\n');
    for s in &sim.link_series {
        let _ = write!(
            out,
            "{:.3},{},{:.4},{},{},{:.0},{:.0}",
            s.time as f64 / 1e9,
            sim.links[s.link as usize].spec.name,
            s.utilization,
            s.queue_packets,
            s.queue_bytes,
            s.capacity_bps,
            s.router_bps,
        );
        for (_, load) in s.load.iter() {
            let _ = write!(out, ",{:.4}", load.get());
        }
        out.push('\n');
    }
    out
}

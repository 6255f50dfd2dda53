//! SVG plots in the papers' style: per-flow rate and window over time, and
//! each reported link's queue, utilization and load factor over time.

use std::collections::BTreeMap;
use std::path::Path;

use ecnq::schemes::vcp;
use ecnq_charts::{Chart, Look, Point, Series};

use super::metrics::Summary;
use super::text::{bottleneck, Row};
use crate::engine::Sim;

/// Plots with more lines than this show only the first ones (1000-flow runs).
const MAX_LINES: usize = 12;

/// Plots `lines` (the first [`MAX_LINES`]) on axes that fit all of them,
/// with a legend when there is more than one.
fn chart(path: &Path, title: &str, y_label: &str, lines: &[Series]) -> Result<(), String> {
    let all = || lines.iter().flat_map(|l| &l.points);
    let x_max = all().map(|p| p.0).fold(0.0, f64::max).max(1e-3);
    let y_max = all().map(|p| p.1).fold(0.0, f64::max).max(1e-9) * 1.05;
    let chart = Chart {
        path,
        look: Look::THIN,
        title,
        x_label: "time (s)",
        y_label,
        max: (x_max, y_max),
    };
    chart.lines(&lines[..lines.len().min(MAX_LINES)], lines.len() > 1)
}

/// Writes `rates.svg`, `windows.svg`, `queue.svg`, `utilization.svg` and `load.svg`.
pub fn write_plots(sim: &Sim, summary: &Summary, dir: &Path) -> Result<(), String> {
    let (mut rates, windows) = flow_lines(sim);
    rates.extend(capacity_lines(sim));
    let [queue, util, load] = link_lines(sim);
    let title = &summary.scenario;
    let scheme = &summary.scheme;
    chart(
        &dir.join("rates.svg"),
        &format!("{title} ({scheme}): flow rates"),
        "Mbit/s",
        &rates,
    )?;
    chart(
        &dir.join("windows.svg"),
        &format!("{title} ({scheme}): congestion windows"),
        "packets",
        &windows,
    )?;
    chart(
        &dir.join("queue.svg"),
        &format!("{title} ({scheme}): queue"),
        "packets",
        &queue,
    )?;
    chart(
        &dir.join("utilization.svg"),
        &format!("{title} ({scheme}): utilization"),
        "fraction of capacity",
        &util,
    )?;
    chart(
        &dir.join("load.svg"),
        &format!("{title} ({scheme}): VCP load factor"),
        "load factor",
        &load,
    )
}

/// The capacity in force of each reported link whose rate varies, Mbit/s,
/// drawn beside the flows' rates.
fn capacity_lines(sim: &Sim) -> Vec<Series> {
    let mut lines: BTreeMap<u32, Series> = BTreeMap::new();
    for s in &sim.link_series {
        let link = &sim.links[s.link as usize];
        if link.spec.varies.is_none() {
            continue;
        }
        lines
            .entry(s.link)
            .or_insert_with(|| Series {
                name: format!("{} capacity", link.spec.name),
                points: Vec::new(),
            })
            .points
            .push((s.time as f64 / 1e9, s.capacity_bps / 1e6));
    }
    lines.into_values().collect()
}

/// Each flow's rate (Mbit/s) and window (packets) over time.
fn flow_lines(sim: &Sim) -> (Vec<Series>, Vec<Series>) {
    let mut rates: BTreeMap<u32, Series> = BTreeMap::new();
    let mut windows: BTreeMap<u32, Series> = BTreeMap::new();
    for s in &sim.flow_series {
        let t = s.time as f64 / 1e9;
        let name = || {
            let f = &sim.flows[s.flow as usize].spec;
            Series {
                name: format!("flow {} ({})", s.flow, f.protocol),
                points: Vec::new(),
            }
        };
        rates
            .entry(s.flow)
            .or_insert_with(name)
            .points
            .push((t, s.rate / 1e6));
        let mss = f64::from(sim.flows[s.flow as usize].spec.mss);
        windows
            .entry(s.flow)
            .or_insert_with(name)
            .points
            .push((t, s.window as f64 / mss));
    }
    (
        rates.into_values().collect(),
        windows.into_values().collect(),
    )
}

/// Each busy link's queue (packets), utilization and VCP load factor over
/// time.
fn link_lines(sim: &Sim) -> [Vec<Series>; 3] {
    let mut queue: BTreeMap<u32, Series> = BTreeMap::new();
    let mut util: BTreeMap<u32, Series> = BTreeMap::new();
    let mut load: BTreeMap<u32, Series> = BTreeMap::new();
    for s in &sim.link_series {
        let t = s.time as f64 / 1e9;
        let name = || Series {
            name: sim.links[s.link as usize].spec.name.clone(),
            points: Vec::new(),
        };
        queue
            .entry(s.link)
            .or_insert_with(name)
            .points
            .push((t, s.queue_packets as f64));
        util.entry(s.link)
            .or_insert_with(name)
            .points
            .push((t, s.utilization));
        load.entry(s.link)
            .or_insert_with(name)
            .points
            .push((t, s.load[vcp::FORMULA].get()));
    }
    // Links that carried nothing (idle reverse directions) only clutter the plots.
    let busy = |m: BTreeMap<u32, Series>| -> Vec<Series> {
        m.into_iter()
            .filter(|(l, _)| {
                sim.links[*l as usize].stats.departed_packets > 0 || sim.measure_from() > 0
            })
            .map(|(_, line)| line)
            .collect()
    };
    [busy(queue), busy(util), busy(load)]
}

/// Writes Pantheon's plot of a `compare` run to `path`: one point per run,
/// its bottleneck's throughput against the 95th percentile of its
/// per-packet queueing delay on a logarithmic axis (up and left is
/// better). Runs that failed are left out.
pub fn goodput_delay(scenario: &str, rows: &[Row], path: &Path) -> Result<(), String> {
    let points: Vec<Point> = (rows.iter())
        .filter_map(|r| {
            let link = bottleneck(r.result.as_ref().ok()?)?;
            Some(Point {
                name: r.label.join(" "),
                x: link.sojourn_ms.p95,
                y: link.throughput_bps() / 1e6,
            })
        })
        .collect();
    let chart = Chart {
        path,
        look: Look {
            size: (900, 520),
            ..Look::THIN
        },
        title: &format!("{scenario}: throughput against delay (up and left is better)"),
        x_label: "per-packet queueing delay, 95th percentile (ms, logarithmic)",
        y_label: "throughput (Mbit/s)",
        max: (1.0, 1.0),
    };
    chart.scatter(&points, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner;
    use crate::scenario::{Overrides, Scenario};

    /// Two cases over a link whose rate steps: one point each, on a
    /// logarithmic delay axis, and the runs' figures in the table below
    /// the headline one.
    #[test]
    fn a_compare_of_a_varying_link_plots_each_case_against_its_p95() {
        let text = r#"
title = "steps"
scheme = "erc"
duration = "3s"
compare = ["erc", "cubic@fifo"]
[[links]]
name = "L"
schedule = [["0s", "20Mbit"], ["1s", "5Mbit"]]
delay = "10ms"
buffer = "50pkt"
[[flows]]
rtt = "20ms"
"#;
        let scenario = Scenario::parse("steps", "steps", text, &[]).unwrap();
        let rows = runner::compare(&scenario, &Overrides::default(), &scenario.file.compare);
        let dir = std::env::temp_dir().join(format!("ecnq-sim-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("goodput-delay.svg");
        goodput_delay("steps", &rows, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(svg.contains(">erc<") || svg.contains(">\nerc\n<"), "{svg}");
        assert!(svg.contains("cubic@fifo"), "{svg}");
        assert!(svg.contains("logarithmic"), "{svg}");
        let table = crate::report::text::table(&["scheme"], &rows);
        assert!(table.contains("p95 ms"), "{table}");
        let cubic = bottleneck(rows[1].result.as_ref().unwrap()).unwrap();
        assert!(cubic.varies && cubic.sojourn_ms.p95 >= cubic.sojourn_ms.p50);
    }
}

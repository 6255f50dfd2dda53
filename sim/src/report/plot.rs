//! SVG plots in the papers' style: per-flow rate and window over time, and
//! each reported link's queue, utilization and load factor over time.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use super::metrics::Summary;
use crate::engine::Sim;

/// One named line.
type Line = (String, Vec<(f64, f64)>);

/// Plots with more lines than this show only the first ones (1000-flow runs).
const MAX_LINES: usize = 12;

fn chart(path: &Path, title: &str, y_label: &str, lines: &[Line]) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let x_max = lines
        .iter()
        .flat_map(|l| &l.1)
        .map(|p| p.0)
        .fold(0.0, f64::max)
        .max(1e-3);
    let y_max = lines
        .iter()
        .flat_map(|l| &l.1)
        .map(|p| p.1)
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.05;
    let root = SVGBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut c = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(|e| err(&e))?;
    c.configure_mesh()
        .x_desc("time (s)")
        .y_desc(y_label)
        .draw()
        .map_err(|e| err(&e))?;
    for (i, (name, points)) in lines.iter().take(MAX_LINES).enumerate() {
        let color = Palette99::pick(i).to_rgba();
        c.draw_series(LineSeries::new(
            points.iter().copied(),
            color.stroke_width(1),
        ))
        .map_err(|e| err(&e))?
        .label(name.as_str())
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 15, y)], color));
    }
    if lines.len() > 1 {
        c.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))
}

/// Writes `rates.svg`, `windows.svg`, `queue.svg`, `utilization.svg` and `load.svg`.
pub fn write_plots(sim: &Sim, summary: &Summary, dir: &Path) -> Result<(), String> {
    let (rates, windows) = flow_lines(sim);
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

/// Each flow's rate (Mbit/s) and window (packets) over time.
fn flow_lines(sim: &Sim) -> (Vec<Line>, Vec<Line>) {
    let mut rates: BTreeMap<u32, Line> = BTreeMap::new();
    let mut windows: BTreeMap<u32, Line> = BTreeMap::new();
    for s in &sim.flow_series {
        let t = s.time as f64 / 1e9;
        let name = || {
            let f = &sim.flows[s.flow as usize].spec;
            (format!("flow {} ({})", s.flow, f.protocol), Vec::new())
        };
        rates
            .entry(s.flow)
            .or_insert_with(name)
            .1
            .push((t, s.rate / 1e6));
        let mss = f64::from(sim.flows[s.flow as usize].spec.mss);
        windows
            .entry(s.flow)
            .or_insert_with(name)
            .1
            .push((t, s.window as f64 / mss));
    }
    (
        rates.into_values().collect(),
        windows.into_values().collect(),
    )
}

/// Each busy link's queue (packets), utilization and VCP load factor over
/// time.
fn link_lines(sim: &Sim) -> [Vec<Line>; 3] {
    let mut queue: BTreeMap<u32, Line> = BTreeMap::new();
    let mut util: BTreeMap<u32, Line> = BTreeMap::new();
    let mut load: BTreeMap<u32, Line> = BTreeMap::new();
    for s in &sim.link_series {
        let t = s.time as f64 / 1e9;
        let name = || (sim.links[s.link as usize].spec.name.clone(), Vec::new());
        queue
            .entry(s.link)
            .or_insert_with(name)
            .1
            .push((t, s.queue_packets as f64));
        util.entry(s.link)
            .or_insert_with(name)
            .1
            .push((t, s.utilization));
        load.entry(s.link)
            .or_insert_with(name)
            .1
            .push((t, s.load_vcp));
    }
    // Links that carried nothing (idle reverse directions) only clutter the plots.
    let busy = |m: BTreeMap<u32, Line>| -> Vec<Line> {
        m.into_iter()
            .filter(|(l, _)| {
                sim.links[*l as usize].stats.departed_packets > 0 || sim.measure_from() > 0
            })
            .map(|(_, line)| line)
            .collect()
    };
    [busy(queue), busy(util), busy(load)]
}

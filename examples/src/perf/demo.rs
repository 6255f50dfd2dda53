//! `ecnq-perf demo`: every scheme through one emulated bottleneck on
//! loopback, with nothing to set up.
//!
//! An ecnq server, a relay-mode shim (in this process: link emulation,
//! metering and re-marking by DSCP tag) and clients. Each controller runs
//! alone with two flows, the second arriving a third of the way in; then a
//! mixed run adds one flow of every controller, one after another. The
//! comparison table and SVG plots come from the shim's link statistics and
//! the flows' own interval samples.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use ecnq::quic::CongestionControl;
use ecnq_shim::spec::{parse_rate, parse_size, parse_time, LinkSpec};

use super::loopback::{Flow, LinkSeries, LoopbackBed, RunSummary};
use super::plot::{line_chart, Series};
use super::stats::FlowSeries;

/// Options of `ecnq-perf demo`.
#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// Bottleneck rate, both directions (tc words: 50mbit, 1gbit, …).
    #[arg(long, default_value = "50mbit", value_parser = rate_arg)]
    pub rate: u64,
    /// Round-trip propagation delay (half each way).
    #[arg(long, default_value = "40ms", value_parser = time_arg)]
    pub rtt: Duration,
    /// Bottleneck buffer: a size (e.g. 250kb) or `bdp` for one bandwidth-delay product.
    #[arg(long, default_value = "bdp")]
    pub buffer: String,
    /// Length of each single-controller run, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Seconds between flow arrivals in the mixed run.
    #[arg(long, default_value_t = 2.0)]
    pub stagger: f64,
    /// Controllers to compare, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "vcp,evcp,dpcp,tpcp,bmcc,mcp,cubic,bbr", value_parser = cc_arg)]
    pub cc: Vec<CongestionControl>,
    /// Skip the mixed run.
    #[arg(long)]
    pub no_mixed: bool,
    /// Where to write plots and summary.json.
    #[arg(long, default_value = "ecnq-demo")]
    pub out: PathBuf,
}

fn rate_arg(s: &str) -> Result<u64, String> {
    parse_rate(s).map_err(|e| e.to_string())
}

fn time_arg(s: &str) -> Result<Duration, String> {
    parse_time(s).map_err(|e| e.to_string())
}

fn cc_arg(s: &str) -> Result<CongestionControl, String> {
    s.parse::<CongestionControl>().map_err(|e| e.to_string())
}

/// Runs the demo.
pub async fn run(args: DemoArgs) -> Result<(), String> {
    if !(args.duration.is_finite() && args.duration >= 2.0) {
        return Err("--duration must be at least 2 seconds".into());
    }
    if !(args.stagger.is_finite() && args.stagger >= 0.0) {
        return Err("--stagger must be zero or more seconds".into());
    }
    if args.cc.is_empty() {
        return Err("--cc needs at least one controller".into());
    }
    let buffer = match args.buffer.trim() {
        "bdp" => ((args.rate as f64 / 8.0) * args.rtt.as_secs_f64()).max(3000.0) as u64,
        size => parse_size(size).map_err(|e| format!("--buffer: {e}"))?,
    };
    let half = args.rtt / 2;
    let spec: LinkSpec = format!(
        "rate {}bit delay {}us limit {}b",
        args.rate,
        half.as_micros(),
        buffer
    )
    .parse()
    .map_err(|e| format!("bad link: {e}"))?;
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;

    let bed = LoopbackBed::ecnq().await?;
    println!(
        "ecnq-perf demo: bottleneck {} Mbit/s, RTT {} ms, buffer {} KB, {} s per controller; plots in {}",
        args.rate as f64 / 1e6,
        args.rtt.as_millis(),
        buffer / 1000,
        args.duration,
        args.out.display()
    );
    let mut summaries = Vec::new();
    for &cc in &args.cc {
        let flows = [
            Flow {
                cc,
                offset: 0.0,
                seconds: args.duration,
            },
            Flow {
                cc,
                offset: args.duration / 3.0,
                seconds: args.duration * 2.0 / 3.0,
            },
        ];
        eprint!("  running {cc:<8} …");
        let summary = run_plotted(&bed, cc.name(), &flows, &spec, &args.out).await?;
        eprintln!(" {:.1} Mbit/s", summary.goodput_mbit);
        summaries.push(summary);
    }
    if !args.no_mixed && args.cc.len() > 1 {
        let n = args.cc.len() as f64;
        let total = args.stagger * n + args.duration / 2.0;
        let flows: Vec<Flow> = args
            .cc
            .iter()
            .enumerate()
            .map(|(i, &cc)| Flow {
                cc,
                offset: args.stagger * i as f64,
                seconds: total - args.stagger * i as f64,
            })
            .collect();
        eprint!("  running mixed …");
        let summary = run_plotted(&bed, "mixed", &flows, &spec, &args.out).await?;
        eprintln!(" {:.1} Mbit/s", summary.goodput_mbit);
        summaries.push(summary);
    }
    print_table(&summaries);
    let json = serde_json::to_string_pretty(&summaries).map_err(|e| e.to_string())?;
    let path = args.out.join("summary.json");
    std::fs::write(&path, json).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("Plots and summary.json in {}", args.out.display());
    Ok(())
}

/// One run through the bottleneck, plotted.
async fn run_plotted(
    bed: &LoopbackBed,
    name: &str,
    flows: &[Flow],
    spec: &LinkSpec,
    out: &Path,
) -> Result<RunSummary, String> {
    let result = bed.run(flows, std::slice::from_ref(spec)).await?;
    plot_run(name, flows, &result.series, &result.links[0], out)?;
    Ok(result.summary(name, 0))
}

fn plot_run(
    name: &str,
    flows: &[Flow],
    series: &[FlowSeries],
    link: &LinkSeries,
    out: &Path,
) -> Result<(), String> {
    let throughput: Vec<Series> = flows
        .iter()
        .zip(series)
        .enumerate()
        .map(|(i, (f, s))| Series {
            name: format!("flow {} ({})", i + 1, f.cc),
            points: s.samples.iter().map(|&(t, r)| (t, r / 1e6)).collect(),
        })
        .collect();
    line_chart(
        &out.join(format!("{name}-throughput.svg")),
        &format!("{name}: sending rate per flow"),
        "seconds",
        "Mbit/s",
        &throughput,
    )?;
    let queue = [Series {
        name: "queueing delay".into(),
        points: link
            .samples
            .iter()
            .map(|s| (s.t, s.queue_bytes * 8.0 / link.capacity_bps * 1e3))
            .collect(),
    }];
    line_chart(
        &out.join(format!("{name}-queue.svg")),
        &format!("{name}: bottleneck queue"),
        "seconds",
        "ms",
        &queue,
    )?;
    let pick = |i: usize| {
        link.samples
            .iter()
            .map(|s| (s.t, s.load[i] * 100.0))
            .collect()
    };
    let load = [
        Series {
            name: "VCP ρ".into(),
            points: pick(0),
        },
        Series {
            name: "BMCC f".into(),
            points: pick(1),
        },
        Series {
            name: "MCP U".into(),
            points: pick(2),
        },
    ];
    line_chart(
        &out.join(format!("{name}-load.svg")),
        &format!("{name}: bottleneck load factor"),
        "seconds",
        "%",
        &load,
    )
}

fn print_table(rows: &[RunSummary]) {
    println!();
    println!(
        "{:<8} {:>10} {:>7} {:>10} {:>10} {:>7} {:>6} {:>10}",
        "run", "goodput", "util", "queue p50", "queue p99", "loss", "Jain", "converge"
    );
    for r in rows {
        println!(
            "{:<8} {:>5.1} Mb/s {:>6.1}% {:>7.1} ms {:>7.1} ms {:>6.2}% {:>6.3} {:>10}",
            r.name,
            r.goodput_mbit,
            r.utilization * 100.0,
            r.queue_p50_ms,
            r.queue_p99_ms,
            r.loss * 100.0,
            r.jain,
            r.converge_s
                .map_or("never".to_owned(), |s| format!("{s:.1} s"))
        );
    }
    if let Some(mixed) = rows.iter().find(|r| r.name == "mixed") {
        let list: Vec<String> = mixed
            .flows
            .iter()
            .map(|(cc, g)| format!("{cc} {g:.1}"))
            .collect();
        println!(
            "mixed run, Mbit/s per flow in arrival order: {}",
            list.join(", ")
        );
    }
}

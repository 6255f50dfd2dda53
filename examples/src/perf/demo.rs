//! `ecnq-perf demo`: every scheme through one emulated bottleneck on
//! loopback, with nothing to set up.
//!
//! An ecnq server, a relay-mode shim (in this process: link emulation,
//! metering and re-marking by DSCP tag) and clients. Each controller runs
//! alone with two flows, the second arriving a third of the way in; then a
//! mixed run adds one flow of every controller, one after another. The
//! comparison table and SVG plots come from the shim's link statistics and
//! the flows' own interval samples.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use ecnq::quic::{CongestionControl, Endpoint, Options};
use ecnq::Scheme;
use ecnq_shim::link::router_config;
use ecnq_shim::relay::{Direction, Relay, RelayConfig};
use ecnq_shim::spec::{parse_rate, parse_size, parse_time, LinkSpec};
use ecnq_shim::stats::StatsSink;
use rustls::RootCertStore;
use serde::Serialize;
use tokio::time::Instant;

use super::client::{self, ClientConfig};
use super::plot::{line_chart, Series};
use super::proto::{self, TestRequest};
use super::report::StreamInterval;
use super::stats::{convergence_time, jain_index, percentile, FlowSeries};

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

/// One row of the comparison.
#[derive(Clone, Debug, Serialize)]
pub struct RunSummary {
    /// Run name.
    pub name: String,
    /// Flows' goodput summed, Mbit/s (bytes the server received over the run).
    pub goodput_mbit: f64,
    /// Bottleneck departures over capacity during the run.
    pub utilization: f64,
    /// Queueing delay percentiles at the bottleneck, ms.
    pub queue_p50_ms: f64,
    /// 99th percentile.
    pub queue_p99_ms: f64,
    /// Packets dropped at the bottleneck (overflow) over packets offered.
    pub loss: f64,
    /// Jain's index over the flows' throughput in the last third of the run.
    pub jain: f64,
    /// Seconds from the last flow's arrival until it reached 80 % of its
    /// fair share (EVCP paper's definition, 20 % tolerance); None if never.
    pub converge_s: Option<f64>,
    /// Per flow: controller and goodput in Mbit/s.
    pub flows: Vec<(String, f64)>,
}

struct Flow {
    cc: CongestionControl,
    offset: f64,
    seconds: f64,
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

    let (identity, _) = proto::self_signed(&["localhost".to_owned()])?;
    let roots = roots_of(&identity);
    // The server is an ecnq endpoint whatever the flows run, so it decodes
    // and reports; its own controller only paces its acks and results.
    let options = Options::new(CongestionControl::Ecnq(Scheme::Vcp)).alpn(&[proto::ALPN]);
    let server = Endpoint::server("127.0.0.1:0".parse().expect("literal"), identity, options)
        .map_err(|e| format!("cannot start the server: {e}"))?;
    let server_addr = server.local_addr().map_err(|e| e.to_string())?;
    let serving = tokio::spawn(super::server::serve(server, false, |_| {}));

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
        let summary = run_one(cc.name(), &flows, &spec, server_addr, &roots, &args).await?;
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
        let summary = run_one("mixed", &flows, &spec, server_addr, &roots, &args).await?;
        eprintln!(" {:.1} Mbit/s", summary.goodput_mbit);
        summaries.push(summary);
    }
    serving.abort();
    print_table(&summaries);
    let json = serde_json::to_string_pretty(&summaries).map_err(|e| e.to_string())?;
    let path = args.out.join("summary.json");
    std::fs::write(&path, json).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("Plots and summary.json in {}", args.out.display());
    Ok(())
}

fn roots_of(identity: &ecnq::quic::Identity) -> RootCertStore {
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(identity.chain.iter().cloned());
    roots
}

/// Stats lines of the relay, collected in memory.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn run_one(
    name: &str,
    flows: &[Flow],
    spec: &LinkSpec,
    server: SocketAddr,
    roots: &RootCertStore,
    args: &DemoArgs,
) -> Result<RunSummary, String> {
    let direction = Direction {
        spec: *spec,
        router: router_config(spec),
    };
    let config = RelayConfig {
        listen: "127.0.0.1:0".parse().expect("literal"),
        target: server,
        up: direction.clone(),
        down: direction,
        seed: 1,
        session_idle: Duration::from_secs(30),
        max_sessions: 64,
        stats_interval: Duration::from_millis(50),
    };
    let lines = Lines::default();
    let sink = Arc::new(StatsSink::new(Box::new(lines.clone())));
    let relay =
        Relay::bind(config, Some(sink)).map_err(|e| format!("cannot start the relay: {e}"))?;
    let relay_addr = relay.local_addr().map_err(|e| e.to_string())?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let relaying = tokio::spawn(relay.run(async {
        let _ = stopped.await;
    }));

    let start = Instant::now();
    let mut tasks = Vec::new();
    for (i, flow) in flows.iter().enumerate() {
        let config = ClientConfig {
            server: relay_addr,
            server_name: "localhost".into(),
            roots: roots.clone(),
            cc: flow.cc,
            request: TestRequest {
                version: 1,
                reverse: false,
                seconds: flow.seconds,
                bytes: 0,
            },
            interval: Duration::from_millis(250),
            qlog: None,
        };
        let offset = flow.offset;
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start + Duration::from_secs_f64(offset)).await;
            let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
            client::run_stream(&config, i as u32 + 1, Instant::now(), tx).await
        }));
    }
    let mut runs = Vec::new();
    for task in tasks {
        runs.push(task.await.map_err(|e| format!("a flow failed: {e}"))??);
    }
    let _ = stop.send(());
    let _ = relaying.await;
    let end = start.elapsed().as_secs_f64();

    let text =
        String::from_utf8_lossy(&lines.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned();
    let link = LinkSeries::parse(&text, spec.rate.unwrap_or(1) as f64);
    let series: Vec<FlowSeries> = flows
        .iter()
        .zip(&runs)
        .map(|(flow, run)| FlowSeries {
            start: flow.offset,
            samples: shifted(&run.intervals, flow.offset),
        })
        .collect();
    plot_run(name, flows, &series, &link, &args.out)?;

    let goodputs: Vec<f64> = flows
        .iter()
        .zip(&runs)
        .map(|(f, r)| r.peer_result.bytes as f64 * 8.0 / f.seconds / 1e6)
        .collect();
    let tail_from = end * 2.0 / 3.0;
    let tail: Vec<f64> = series
        .iter()
        .map(|s| {
            s.samples
                .iter()
                .filter(|(t, _)| *t > tail_from)
                .map(|(_, r)| r)
                .sum::<f64>()
        })
        .collect();
    Ok(RunSummary {
        name: name.to_owned(),
        goodput_mbit: runs
            .iter()
            .map(|r| r.peer_result.bytes as f64 * 8.0)
            .sum::<f64>()
            / end
            / 1e6,
        utilization: link.utilization(),
        queue_p50_ms: percentile(&link.queue_ms, 50.0).unwrap_or(0.0),
        queue_p99_ms: percentile(&link.queue_ms, 99.0).unwrap_or(0.0),
        loss: link.loss(),
        jain: jain_index(&tail),
        converge_s: convergence_time(&series, series.len() - 1, 0.2),
        flows: flows
            .iter()
            .map(|f| f.cc.to_string())
            .zip(goodputs)
            .collect(),
    })
}

/// A flow's sending rate on the wire, on the run's clock.
fn shifted(intervals: &[StreamInterval], offset: f64) -> Vec<(f64, f64)> {
    intervals
        .iter()
        .map(|i| (offset + i.end, super::report::rate(i.wire_bytes, i.seconds)))
        .collect()
}

/// The bottleneck (client → server direction) as the relay reported it.
#[derive(Default)]
struct LinkSeries {
    time: Vec<f64>,
    queue_ms: Vec<f64>,
    load: Vec<(f64, f64, f64, f64)>,
    last: Option<serde_json::Value>,
    capacity_bps: f64,
}

impl LinkSeries {
    fn parse(text: &str, capacity_bps: f64) -> LinkSeries {
        let mut s = LinkSeries {
            capacity_bps,
            ..LinkSeries::default()
        };
        for v in text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        {
            if v["dir"] != "up" {
                continue;
            }
            let t = v["t"].as_f64().unwrap_or(0.0);
            let queue = v["queue_bytes"].as_f64().unwrap_or(0.0);
            s.time.push(t);
            s.queue_ms.push(queue * 8.0 / capacity_bps * 1e3);
            let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
            s.load
                .push((t, f("load_vcp"), f("load_bmcc"), f("load_mcp")));
            s.last = Some(v);
        }
        s
    }

    fn counter(&self, name: &str) -> f64 {
        let get = |v: &Option<serde_json::Value>| {
            v.as_ref().and_then(|v| v[name].as_f64()).unwrap_or(0.0)
        };
        get(&self.last)
    }

    fn utilization(&self) -> f64 {
        let span = self.time.last().copied().unwrap_or(0.0);
        if span <= 0.0 {
            return 0.0;
        }
        self.counter("departure_bytes") * 8.0 / (self.capacity_bps * span)
    }

    fn loss(&self) -> f64 {
        let arrivals = self.counter("arrivals");
        if arrivals <= 0.0 {
            return 0.0;
        }
        (self.counter("drops_overflow") + self.counter("drops_loss")) / arrivals
    }
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
            .time
            .iter()
            .copied()
            .zip(link.queue_ms.iter().copied())
            .collect(),
    }];
    line_chart(
        &out.join(format!("{name}-queue.svg")),
        &format!("{name}: bottleneck queue"),
        "seconds",
        "ms",
        &queue,
    )?;
    let pick = |sel: fn(&(f64, f64, f64, f64)) -> f64| {
        link.load.iter().map(|l| (l.0, sel(l) * 100.0)).collect()
    };
    let load = [
        Series {
            name: "VCP ρ".into(),
            points: pick(|l| l.1),
        },
        Series {
            name: "BMCC f".into(),
            points: pick(|l| l.2),
        },
        Series {
            name: "MCP U".into(),
            points: pick(|l| l.3),
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

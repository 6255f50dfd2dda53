//! From option values to what the shim runs with: the two directions'
//! links and routers, the observers and the seed, each option checked with
//! a one-line error that names it.

use std::fs::File;
use std::io::{self, BufWriter};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::ArgMatches;
use ecnq::router::bottleneck::Discipline;
use ecnq::router::{MarkingMode, RouterConfig};
use ecnq::FlowTableConfig;

use ecnq::units::UnitError;
use ecnq_shim::link::spec::{parse_rate, parse_size, parse_time, LinkSpec};
use ecnq_shim::link::{router_config, Direction};
use ecnq_shim::observe::{Observers, PcapWriter, SnapshotBoard, StatsSink};

/// `--name`'s value, if given.
pub fn text<'a>(m: &'a ArgMatches, name: &str) -> Option<&'a str> {
    m.get_one::<String>(name).map(String::as_str)
}

/// `--name` parsed with its type's `FromStr`, if given.
pub fn parsed<T: std::str::FromStr>(m: &ArgMatches, name: &str) -> Result<Option<T>, String>
where
    T::Err: std::fmt::Display,
{
    text(m, name)
        .map(|v| v.parse::<T>().map_err(|e| format!("--{name} `{v}`: {e}")))
        .transpose()
}

/// `--name` parsed with `parse` (a rate, size or time), if given.
pub fn with<T>(
    m: &ArgMatches,
    name: &str,
    parse: impl Fn(&str) -> Result<T, UnitError>,
) -> Result<Option<T>, String> {
    text(m, name)
        .map(|v| parse(v).map_err(|e| format!("--{name}: {e}")))
        .transpose()
}

/// `--name`, if given, within `min..=max`.
pub fn in_range<T>(m: &ArgMatches, name: &str, min: T, max: T) -> Result<Option<T>, String>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display,
    T::Err: std::fmt::Display,
{
    match parsed::<T>(m, name)? {
        Some(v) if v < min || v > max => {
            Err(format!("--{name} must be between {min} and {max}, got {v}"))
        }
        other => Ok(other),
    }
}

/// `--name`, if given, a positive number.
fn factor(m: &ArgMatches, name: &str) -> Result<Option<f64>, String> {
    match parsed::<f64>(m, name)? {
        Some(x) if !(x.is_finite() && x > 0.0) => {
            Err(format!("--{name} must be a positive number, got {x}"))
        }
        other => Ok(other),
    }
}

/// `--gamma`, if given: a target utilization, above zero and at most one.
fn target_utilization(m: &ArgMatches) -> Result<Option<f64>, String> {
    match factor(m, "gamma")? {
        Some(g) if g > 1.0 => Err(format!(
            "--gamma is a target utilization, at most 1 (the papers use 0.94-0.985), got {g}"
        )),
        other => Ok(other),
    }
}

/// The two directions' links and routers from the shared options.
pub fn directions(m: &ArgMatches) -> Result<(Direction, Direction), String> {
    let spec = |name: &str| -> Result<Option<LinkSpec>, String> { parsed::<LinkSpec>(m, name) };
    let both = spec("link")?.unwrap_or_default();
    let up = spec("link-up")?.unwrap_or(both.clone());
    let down = spec("link-down")?.unwrap_or(both);
    let queue = parsed::<Discipline>(m, "queue")?.unwrap_or_default();
    let routers = RouterOptions::parse(m)?;
    let direction = |spec: LinkSpec| Direction {
        router: routers.router(&spec),
        spec,
        queue,
    };
    Ok((direction(up), direction(down)))
}

/// The marking and metering options, each overriding what a link's spec
/// implies.
struct RouterOptions {
    mode: MarkingMode,
    tp: Option<Duration>,
    queue_sample: Option<Duration>,
    capacity: Option<u64>,
    threshold: Option<u64>,
    gamma: Option<f64>,
    kappa_q: Option<f64>,
    k1: Option<f64>,
    flows: Option<usize>,
    flow_idle: Option<Duration>,
}

impl RouterOptions {
    fn parse(m: &ArgMatches) -> Result<RouterOptions, String> {
        let options = RouterOptions {
            mode: parsed::<MarkingMode>(m, "scheme")?.unwrap_or(MarkingMode::Auto),
            tp: with(m, "tp", parse_time)?,
            queue_sample: with(m, "queue-sample", parse_time)?,
            capacity: with(m, "capacity", parse_rate)?,
            threshold: with(m, "classic-threshold", parse_size)?,
            gamma: target_utilization(m)?,
            kappa_q: factor(m, "kappa-q")?,
            k1: factor(m, "k1")?,
            flows: in_range::<usize>(m, "flows", 1, FlowTableConfig::MAX_CAPACITY)?,
            flow_idle: with(m, "flow-idle", parse_time)?,
        };
        if options.tp.is_some_and(|t| t.is_zero()) {
            return Err("--tp must be longer than zero".to_owned());
        }
        Ok(options)
    }

    /// The router of a link with `spec`: what the spec implies
    /// ([`router_config`]), then the options given; a spec's `ecn` marking
    /// is its own, as its `queue` is (`--scheme` and `--classic-threshold`
    /// set the other links').
    fn router(&self, spec: &LinkSpec) -> RouterConfig {
        let mut cfg = match self.capacity {
            Some(bps) => RouterConfig {
                meter: ecnq::MeterConfig::new(bps as f64 / 8.0),
                ..router_config(spec)
            },
            None => router_config(spec),
        };
        if spec.ecn.is_none() {
            cfg.mode = self.mode;
            if let Some(bytes) = self.threshold {
                cfg.classic_threshold = bytes;
            }
        }
        if let Some(t) = self.tp {
            cfg.meter.interval = t;
        }
        if let Some(t) = self.queue_sample {
            cfg.meter.queue_sample = t;
        }
        if let Some(g) = self.gamma {
            cfg.meter.formulas.vcp.gamma = g;
            cfg.meter.formulas.bmcc.gamma = g;
        }
        if let Some(k) = self.kappa_q {
            cfg.meter.formulas.vcp.k_q = k;
        }
        if let Some(k) = self.k1 {
            cfg.meter.formulas.bmcc.k1 = k;
        }
        if let Some(n) = self.flows {
            cfg.flows.capacity = n;
        }
        if let Some(idle) = self.flow_idle {
            cfg.flows.idle_timeout = idle;
        }
        cfg
    }
}

/// JSON lines, metrics endpoint and pcap file from the options.
pub fn observers(m: &ArgMatches) -> Result<Observers, String> {
    let interval = stats_interval(m)?;
    let stats = match text(m, "stats") {
        None => None,
        Some("-") => Some(Arc::new(StatsSink::new(Box::new(io::stdout())))),
        Some(path) => {
            let file = File::create(path).map_err(|e| format!("--stats {path}: {e}"))?;
            Some(Arc::new(StatsSink::new(Box::new(BufWriter::new(file)))))
        }
    };
    let board = match parsed::<SocketAddr>(m, "metrics")? {
        None => None,
        Some(addr) => {
            let board = Arc::new(SnapshotBoard::default());
            let local = board
                .serve(addr)
                .map_err(|e| format!("--metrics {addr}: {e}"))?;
            eprintln!("ecnq-shim: metrics on http://{local}/metrics");
            Some(board)
        }
    };
    let pcap = match text(m, "pcap") {
        None => None,
        Some(path) => Some(Arc::new(
            PcapWriter::create(Path::new(path)).map_err(|e| format!("--pcap {path}: {e}"))?,
        )),
    };
    Ok(Observers {
        stats,
        board,
        pcap,
        interval,
    })
}

/// `--seed`, or one from the clock.
pub fn seed(m: &ArgMatches) -> Result<u64, String> {
    Ok(parsed::<u64>(m, "seed")?.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    }))
}

fn stats_interval(m: &ArgMatches) -> Result<Duration, String> {
    let interval = with(m, "stats-interval", parse_time)?.unwrap_or(Duration::from_millis(100));
    if interval.is_zero() {
        return Err("--stats-interval must be longer than zero".to_owned());
    }
    Ok(interval)
}

//! `ecnq-perf web`: web traffic and video through one emulated bottleneck
//! on loopback, every controller in one run.
//!
//! An HTTP/3 file server (`h3-server`'s, in this process, its sending
//! direction running the controller under test) sits behind a relay-mode
//! shim (link emulation, metering and re-marking, as in `ecnq-perf demo`).
//! HTTP/3 clients fetch through the relay: in the web mix, one new
//! connection per file, files of Pareto sizes arriving as a Poisson process
//! at a set load, drawn as the simulator's web mixes draw them
//! ([`ParetoSpec::arrivals`]); with `--dash`, video clients each fetching a
//! two-second chunk every two seconds on one connection. The table gives
//! completion time by size class over processor sharing's
//! ([`completion_times`]), the link's utilization and each packet's sojourn
//! at the bottleneck (server to client: the direction the files take).
//!
//! A subcommand of its own rather than a demo mode: its flows are files
//! (a size, a completion time) from a file server, not timed uploads, and
//! its figures are completion times by size class, not rates per flow.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};
use ecnq::quic::CongestionControl;
use ecnq::router::bottleneck::Discipline;
use ecnq::statistics::percentile;
use ecnq::units::{Size, UNITS_HELP};
use ecnq_sim::engine::{FlowSpec, ParetoSizes, ParetoSpec, Sim, SimConfig};
use ecnq_sim::report::metrics::link_summaries;
use ecnq_sim::report::metrics::{over_sharing, size_class, SIZE_CLASS_BOUNDS};
use ecnq_sim::report::sharing::{completion_times, Finite, Job};
use ecnq_sim::report::text::size_class_labels;
use http::Uri;
use rustls::RootCertStore;
use tokio::time::Instant;

pub mod flash;

use super::client::{Fetched, GetConfig, Session};
use super::server::{FileServer, Served, ServerConfig, SEND_WINDOW};
use crate::perf::demo::{bottleneck, cc_arg, rate_arg, time_arg};
use crate::perf::host::{steal_note, StealMeter};
use crate::perf::loopback::{LinkSeries, RelayChain, RelayLink, DOWN};
use crate::perf::paired::{
    self, nanos, sim_flow, sim_link, sim_protocol, Case, Figures, PairedArgs, PairedRow, APP_BYTES,
    SIM_PACKET, SIM_SAMPLE,
};
use crate::perf::{check_seconds, parse_args, parse_seconds, proto};

/// Options of `ecnq-perf web`. The defaults are the simulator's web mix at
/// 10 Mbit/s (sim/scenarios/web-10mbit.toml; the test
/// the_defaults_are_the_simulators_web_mix keeps them so), its arrivals cut
/// to a run of about a minute per controller.
#[derive(Args, Debug, Clone)]
pub struct WebArgs {
    /// Bottleneck rate, both directions (e.g. 10mbit, 100mbit).
    #[arg(long, default_value = "10mbit", value_parser = rate_arg, long_help = format!("Bottleneck rate, both directions (e.g. 10mbit, 100mbit). {UNITS_HELP}"))]
    pub rate: u64,
    /// Round-trip propagation delay (half each way).
    #[arg(long, default_value = "40ms", value_parser = time_arg)]
    pub rtt: Duration,
    /// Bottleneck buffer: a size (e.g. 64kb) or `bdp` for one bandwidth-delay product.
    #[arg(long, default_value = "bdp")]
    pub buffer: String,
    /// Offered load: the files' bytes per second over the link's (above 0, at most 1).
    #[arg(long, default_value_t = 0.5, value_name = "FRACTION")]
    pub load: f64,
    /// Seconds during which files are requested, or video played (2 to
    /// 3600; or a time such as 90s); a web run then waits for the last
    /// file.
    #[arg(long, default_value_t = 40.0, value_name = "SECONDS", value_parser = parse_seconds)]
    pub duration: f64,
    /// Seed of the arrivals and sizes: one seed, the same files at the same
    /// times for every controller (and in `ecnq-perf paired web`).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Mean file size (bytes, or a size such as 64kb: powers of 1024).
    #[arg(long, default_value = "100000b", value_parser = size_arg)]
    pub mean_size: u64,
    /// Shape of the files' Pareto sizes (above 1; 1.2 is web-like, heavy-tailed).
    #[arg(long, default_value_t = 1.2)]
    pub shape: f64,
    /// Largest file (more than --mean-size).
    #[arg(long, default_value = "30000000b", value_parser = size_arg)]
    pub max_size: u64,
    /// Server controllers to compare, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "erc,cubic,bbr,prague", value_parser = cc_arg, long_help = format!("Server controllers to compare, comma separated (each runs the whole mix in turn):\n{}", CongestionControl::help()))]
    pub cc: Vec<CongestionControl>,
    /// HTTP/3 clients, comma separated, taking the files in turn.
    #[arg(long, value_delimiter = ',', default_value = "ecnq,quic-go", long_help = CLIENTS_HELP)]
    pub clients: Vec<ClientKind>,
    /// Instead of the web mix, this many video clients (1 to 100).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100), long_help = DASH_HELP)]
    pub dash: Option<u32>,
    /// Instead of the web mix, a flash crowd: this many clients (2 to
    /// 1000) starting within 10 ms.
    #[arg(long, value_name = "N", conflicts_with = "dash", value_parser = clap::value_parser!(u32).range(2..=1000), long_help = FLASH_HELP)]
    pub flash: Option<u32>,
    /// The server's handshake flight, comma separated: each controller
    /// runs with each.
    #[arg(long, value_delimiter = ',', default_value = "short", long_help = FLIGHT_HELP)]
    pub flight: Vec<Flight>,
    /// Each video client's bitrate with --dash [default: --load of the link
    /// shared among the clients].
    #[arg(long, value_parser = rate_arg, requires = "dash")]
    pub bitrate: Option<u64>,
    /// The server's qlog, a file per connection, into a directory per run
    /// below this one.
    #[arg(long, value_name = "DIR")]
    pub qlog: Option<PathBuf>,
    /// Also write the table, and the notes under it, as Markdown to this
    /// file (what scripts/update-results puts in docs/results.md).
    #[arg(long, value_name = "PATH")]
    pub markdown: Option<PathBuf>,
}

/// `--clients`' long help.
const CLIENTS_HELP: &str = "HTTP/3 clients, comma separated, taking the web mix's files in \
    turn: `ecnq` is ecnq-perf h3-get's client in this process (an ecnq receiver: it reports \
    the router's feedback); `quic-go` is quic-go's interop client (interop/setup-peers installs \
    it into interop/.peers/bin), a process per file in its own mount namespace (root or user \
    namespaces), whose completion time includes the process's start; it reports only the \
    ACK-ECN counts of any QUIC receiver. Where quic-go's client is not installed, it is left \
    out with a message. Video clients (--dash) are always ecnq's.";

/// `--dash`'s long help.
const DASH_HELP: &str = "Instead of the web mix, the app-limited case: this many video \
    clients (1 to 100), each on one connection fetching a two-second chunk (--bitrate times \
    2 s) every two seconds for --duration, the clients' first chunks spread over the first \
    two seconds. A chunk due while the previous one is still coming is asked for as soon as \
    that one ends, as a player does. The table shows the chunks' download times (mean, p95, \
    and how many were late: over two seconds) and the queue.";

/// `--flash`'s long help.
const FLASH_HELP: &str = "Instead of the web mix, a flash crowd: this many of ecnq's clients \
    (2 to 1000), one every 10 ms over the number, each fetching one file of the link's rate \
    times --duration over the number, so the crowd keeps the link busy for about --duration. \
    The table shows the loss, the queue from the third round trip on, Jain's index over the \
    flows' rates in the crowd's second second, the files' mean completion time over \
    processor sharing's, and the start codes the server read.";

/// `--flight`'s long help.
const FLIGHT_HELP: &str = "The server's handshake flight, comma separated (each controller \
    runs with each): `short`, a self-signed certificate for localhost, which fits the flight \
    in one datagram; `long`, a certificate of many names, which makes the flight three \
    datagrams, as an internet server's certificate chain does. erc's start code (a router \
    clears some of the first three datagrams) can be read only from a flight of two or more.";

/// The server's handshake flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Flight {
    /// One datagram: a short self-signed certificate.
    Short,
    /// Three datagrams: a certificate of [`LONG_CERTIFICATE`] bytes.
    Long,
}

/// A certificate of this many bytes makes the server's handshake flight
/// three datagrams of 1200 bytes and no more (the anti-amplification limit
/// of RFC 9000 §8.1: three times the client's 1200-byte Initial), as an
/// internet server's chain of two or three certificates does
/// (`ecnq-perf web --flash 50 --flight short,long`: 42 of 50
/// connections read a code of 2 with a long flight).
pub const LONG_CERTIFICATE: usize = 2600;

impl Flight {
    /// The server's identity, for localhost.
    fn identity(self) -> Result<ecnq::quic::Identity, String> {
        let at_least = match self {
            Flight::Short => 0,
            Flight::Long => LONG_CERTIFICATE,
        };
        Ok(proto::self_signed_of_size(&["localhost".to_owned()], at_least)?.0)
    }
}

impl std::fmt::Display for Flight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = self.to_possible_value().expect("no variant is skipped");
        write!(f, "{} flight", value.get_name())
    }
}

/// One HTTP/3 client program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientKind {
    /// ecnq-perf h3-get's client, in this process.
    Ecnq,
    /// quic-go's interop client (interop/setup-peers).
    QuicGo,
}

impl std::fmt::Display for ClientKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = self.to_possible_value().expect("no variant is skipped");
        f.write_str(value.get_name())
    }
}

fn size_arg(s: &str) -> Result<u64, String> {
    s.parse::<Size>()
        .map(Size::bytes)
        .map_err(|e| e.to_string())
}

/// A video chunk's length, seconds: DASH's segment (and what counts as
/// late), as the issue sets it.
pub const CHUNK_SECONDS: f64 = 2.0;

/// Most seconds a web run waits, after its last arrival, beyond what its
/// largest file takes alone at the link's rate times [`DRAIN_FACTOR`]: the
/// files still coming then count as unfinished.
const DRAIN_SECONDS: f64 = 10.0;
/// See [`DRAIN_SECONDS`].
const DRAIN_FACTOR: f64 = 4.0;

/// One file of a web mix.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fetch {
    /// When its client starts connecting, seconds into the run.
    pub start: f64,
    /// Its size, bytes.
    pub bytes: u64,
}

/// What a run's clients fetch and through what.
#[derive(Clone, Debug)]
pub struct Mix {
    /// The relay's link (the files take `to_client`).
    pub link: RelayLink,
    /// The link's rate, bit/s.
    pub rate_bps: f64,
    /// Its one-way propagation delay, s.
    pub delay: f64,
    /// Seconds of arrivals (or of video).
    pub span: f64,
    /// The web mix's files, in arrival order (empty with video).
    pub fetches: Vec<Fetch>,
    /// Video clients and each one's chunk in bytes, if a DASH run.
    pub video: Option<(u32, u64)>,
    /// Whether the files are a flash crowd (`--flash`).
    pub flash: bool,
}

impl WebArgs {
    /// Checks the options and draws the mix.
    pub fn mix(&self) -> Result<Mix, String> {
        check_seconds("--duration", self.duration, 2.0, 3600.0)?;
        if !(self.load > 0.0 && self.load <= 1.0) {
            return Err(format!(
                "--load must be above 0 and at most 1, got {}",
                self.load
            ));
        }
        if !(self.shape > 1.0 && self.shape.is_finite()) {
            return Err(format!(
                "--shape must be above 1 (the mean must exist), got {}",
                self.shape
            ));
        }
        if self.mean_size == 0 || self.max_size <= self.mean_size {
            return Err(format!(
                "--max-size ({} bytes) must be more than --mean-size ({} bytes), which must be above 0",
                self.max_size, self.mean_size
            ));
        }
        if self.cc.is_empty() || self.clients.is_empty() {
            return Err("--cc and --clients each need at least one".into());
        }
        if self.rate == 0 {
            return Err("--rate must be above 0".into());
        }
        let (spec, _) = bottleneck(self.rate, self.rtt, &self.buffer)?;
        let rate_bps = self.rate as f64;
        let mut mix = Mix {
            link: RelayLink::from(spec),
            rate_bps,
            delay: self.rtt.as_secs_f64() / 2.0,
            span: self.duration,
            fetches: Vec::new(),
            video: None,
            flash: self.flash.is_some(),
        };
        if let Some(n) = self.dash {
            let bitrate =
                (self.bitrate.map(|b| b as f64)).unwrap_or(self.load * rate_bps / f64::from(n));
            let chunk = (bitrate * CHUNK_SECONDS / 8.0).round() as u64;
            if chunk == 0 {
                return Err("--bitrate must be above 0".into());
            }
            mix.video = Some((n, chunk));
            return Ok(mix);
        }
        if let Some(n) = self.flash {
            mix.fetches = flash::crowd(n, rate_bps, self.duration)?;
            return Ok(mix);
        }
        mix.fetches = (self.source().arrivals(self.seed).into_iter())
            .map(|(start, bytes)| Fetch {
                start: start as f64 / 1e9,
                bytes,
            })
            .collect();
        Ok(mix)
    }

    /// The simulator's Pareto source of this mix: arrivals from 0 until
    /// --duration, at --load of the link's rate.
    pub fn source(&self) -> ParetoSpec {
        let mean = self.mean_size as f64;
        ParetoSpec {
            flow: sim_flow(sim_protocol(CongestionControl::DEFAULT), 0.0, None, "web"),
            arrivals_per_sec: self.load * self.rate as f64 / 8.0 / mean,
            sizes: ParetoSizes::with_mean(self.shape, mean, self.max_size as f64),
            until: nanos(self.duration),
        }
    }
}

impl Mix {
    /// Each file's completion time with processor sharing at the link
    /// (the simulator's reference, with the same handshake), s.
    pub fn sharing(&self) -> Vec<f64> {
        let flows: Vec<Finite> = (self.fetches.iter())
            .map(|f| Finite {
                job: Job {
                    start: f.start,
                    bytes: f.bytes as f64,
                },
                data_delay: self.delay,
                ack_delay: self.delay,
            })
            .collect();
        completion_times(&flows, self.rate_bps / 8.0)
    }

    /// How long a web run waits for its files: the arrivals, then
    /// `DRAIN_SECONDS` plus `DRAIN_FACTOR` times the largest file's
    /// time alone at the link's rate.
    pub fn deadline(&self) -> f64 {
        let largest = self.fetches.iter().map(|f| f.bytes).max().unwrap_or(0);
        self.span + DRAIN_SECONDS + DRAIN_FACTOR * largest as f64 * 8.0 / self.rate_bps
    }
}

/// How one fetch (a file, or a video chunk) went.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Seconds from its start to its body's end; `None` if it failed or
    /// was still coming at the deadline.
    pub seconds: Option<f64>,
    /// Body bytes received.
    pub bytes: u64,
    /// Why it failed.
    pub error: Option<String>,
    /// A flash crowd's file: the bytes its connection received in the
    /// crowd's second second, if it was still coming at its end.
    pub second_bytes: Option<u64>,
}

impl Outcome {
    pub(super) fn failed(error: String) -> Outcome {
        Outcome {
            seconds: None,
            bytes: 0,
            error: Some(error),
            second_bytes: None,
        }
    }
}

/// One real run: each fetch's outcome (files in arrival order; a video
/// run's chunks client by client), the data direction of the link, and the
/// host's steal.
pub struct RealRun {
    /// Each fetch's outcome.
    pub outcomes: Vec<Outcome>,
    /// Each outcome's size as planned, bytes.
    pub planned: Vec<u64>,
    /// The client of each outcome.
    pub clients: Vec<ClientKind>,
    /// The server-to-client direction of the bottleneck.
    pub link: LinkSeries,
    /// Seconds the run took, until its last fetch ended or the deadline.
    pub elapsed: f64,
    /// The host's share of the CPU time during the run (steal).
    pub host_steal: Option<f64>,
    /// The server's connections by the start code it read: 0, 1, 2 or 3
    /// flight datagrams cleared (erc's servers only; none without counts).
    pub start_codes: [usize; 4],
}

/// quic-go's interop client and how to give it its own /downloads.
#[derive(Clone, Debug)]
pub struct QuicGo {
    bin: PathBuf,
    unshare: Vec<&'static str>,
}

/// quic-go's interop client writes its downloads and log to these fixed
/// paths, so each run of it mounts its own empty ones, prints the body's
/// size and is gone (as scripts/h3-downloads runs it).
const QUIC_GO_SCRIPT: &str =
    "for d in /downloads /logs; do mkdir -p $d && mount -t tmpfs tmpfs $d || exit 90; done; \
     \"$0\" \"$1\" >/dev/null 2>&1 || exit $?; stat -c %s \"/downloads/$2\"";

impl QuicGo {
    /// The client installed by interop/setup-peers, if it is there and a
    /// mount namespace can be had; else why not.
    pub fn find() -> Result<QuicGo, String> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let bin = root.join("interop/.peers/bin/quic-go-client");
        if !bin.is_file() {
            return Err(format!(
                "quic-go's client is not installed ({} is missing: run interop/setup-peers)",
                bin.display()
            ));
        }
        for unshare in [vec!["unshare", "-m"], vec!["unshare", "-rm"]] {
            let probe = std::process::Command::new(unshare[0])
                .args(&unshare[1..])
                .args(["sh", "-c", "mount -t tmpfs tmpfs /mnt"])
                .output();
            if probe.is_ok_and(|o| o.status.success()) {
                return Ok(QuicGo { bin, unshare });
            }
        }
        Err("quic-go's client needs its own /downloads: neither `unshare -m` (root) nor `unshare -rm` (user namespaces) works here".into())
    }

    /// Fetches `url` (file `name`, `bytes` long) and times it.
    async fn fetch(&self, url: &str, name: &str) -> Outcome {
        let started = Instant::now();
        let output = tokio::process::Command::new(self.unshare[0])
            .args(&self.unshare[1..])
            .args(["sh", "-c", QUIC_GO_SCRIPT])
            .arg(&self.bin)
            .args([url, name])
            .env("TESTCASE", "http3")
            .env("SSLKEYLOGFILE", "/dev/null")
            .kill_on_drop(true)
            .output()
            .await;
        let seconds = started.elapsed().as_secs_f64();
        match output {
            Err(e) => Outcome::failed(format!("cannot run quic-go's client: {e}")),
            Ok(o) if !o.status.success() => Outcome::failed(format!(
                "quic-go's client failed ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Ok(o) => match String::from_utf8_lossy(&o.stdout).trim().parse::<u64>() {
                Ok(bytes) => Outcome {
                    seconds: Some(seconds),
                    bytes,
                    error: None,
                    second_bytes: None,
                },
                Err(_) => Outcome::failed("quic-go's client saved no file".into()),
            },
        }
    }
}

/// The clients of `--clients` that can run here, saying on stderr why any
/// is left out.
fn usable_clients(wanted: &[ClientKind]) -> Result<(Vec<ClientKind>, Option<QuicGo>), String> {
    let mut clients = wanted.to_vec();
    clients.dedup();
    let mut quic_go = None;
    if clients.contains(&ClientKind::QuicGo) {
        match QuicGo::find() {
            Ok(found) => quic_go = Some(found),
            Err(why) => {
                eprintln!("ecnq-perf web: {why}; its files go to the other clients");
                clients.retain(|&c| c != ClientKind::QuicGo);
            }
        }
    }
    if clients.is_empty() {
        return Err("no HTTP/3 client of --clients can run here".into());
    }
    Ok((clients, quic_go))
}

/// The served files: one per file of the mix (its index), or the video
/// chunk, sparse (zeros on disk cost nothing).
fn write_files(dir: &Path, mix: &Mix) -> Result<(), String> {
    let make = |name: String, bytes: u64| {
        let path = dir.join(name);
        std::fs::File::create(&path)
            .and_then(|f| f.set_len(bytes))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    };
    for (i, f) in mix.fetches.iter().enumerate() {
        make(file_name(i), f.bytes)?;
    }
    match mix.video {
        Some((_, chunk)) => make(CHUNK_FILE.to_owned(), chunk),
        None => Ok(()),
    }
}

/// The name of the mix's `i`-th file.
pub(super) fn file_name(i: usize) -> String {
    format!("{i}.bin")
}

/// The video chunk's file.
const CHUNK_FILE: &str = "chunk.bin";

/// How often a run says how far it got, on stderr.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// Runs `mix` with the server sending with `cc` (the files take the link's
/// `to_client` direction, whose queue `queue` replaces if given), the files
/// in `www`, the web mix's files taken by `clients` in turn.
pub async fn run_real(
    mix: &Mix,
    cc: CongestionControl,
    clients: &[ClientKind],
    quic_go: Option<&QuicGo>,
    www: &Path,
    flight: Flight,
    qlog: Option<PathBuf>,
) -> Result<RealRun, String> {
    let identity = flight.identity()?;
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(identity.chain.iter().cloned());
    let server = FileServer::bind(ServerConfig {
        listen: "127.0.0.1:0".parse().expect("literal"),
        identity,
        cc,
        root: www.to_owned(),
        send_window: SEND_WINDOW,
        qlog,
    })?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server_addr = server.local_addr()?;
    let codes = Arc::new(std::sync::Mutex::new([0; 4]));
    let serving = tokio::spawn({
        let codes = codes.clone();
        async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            let count = move |served: Result<Served, String>| {
                let code = served.ok().and_then(|s| s.stats.start_code);
                if let Some(code) = code {
                    let mut codes = codes.lock().unwrap_or_else(|e| e.into_inner());
                    codes[usize::from(code).min(3)] += 1;
                }
            };
            server.serve(shutdown, count).await;
        }
    });
    let chain = RelayChain::start(std::slice::from_ref(&mix.link), server_addr)?;
    let config = GetConfig {
        server: chain.entry,
        server_name: "localhost".into(),
        roots,
        cc,
        output: None,
    };
    let steal = StealMeter::start();
    let start = Instant::now();
    let done = Arc::new(AtomicUsize::new(0));
    let (tasks, planned, client_of) = match mix.video {
        Some((n, chunk)) => {
            let (tasks, planned) = video_tasks(mix, n, chunk, &config, start, &done);
            let client_of = vec![ClientKind::Ecnq; planned.len()];
            (tasks, planned, client_of)
        }
        None if mix.flash => {
            let (tasks, planned) = flash::tasks(mix, &config, start, &done);
            (
                tasks,
                planned.clone(),
                vec![ClientKind::Ecnq; planned.len()],
            )
        }
        None => {
            let (tasks, planned) = web_tasks(mix, clients, quic_go, &config, start, &done);
            let client_of = (0..planned.len()).map(|i| clients[i % clients.len()]);
            (tasks, planned, client_of.collect())
        }
    };
    let total = planned.len();
    let deadline = start + Duration::from_secs_f64(mix.deadline());
    let ticker = tokio::spawn({
        let done = done.clone();
        async move {
            let mut tick = tokio::time::interval_at(start + PROGRESS_EVERY, PROGRESS_EVERY);
            loop {
                tick.tick().await;
                eprintln!(
                    "  {cc}: {:.0} s, {} of {total} fetches done",
                    start.elapsed().as_secs_f64(),
                    done.load(Ordering::Relaxed)
                );
            }
        }
    });
    let mut outcomes = Vec::with_capacity(total);
    for (mut task, count) in tasks {
        let failed = |why: String| vec![Outcome::failed(why); count];
        let outcome = match tokio::time::timeout_at(deadline, &mut task).await {
            Ok(Ok(outcomes)) => outcomes,
            Ok(Err(e)) => failed(format!("a client failed: {e}")),
            Err(_) => {
                task.abort();
                failed("still coming at the run's deadline".into())
            }
        };
        outcomes.extend(outcome);
    }
    ticker.abort();
    let elapsed = start.elapsed().as_secs_f64();
    let link = chain.stop_direction(DOWN).await.remove(0);
    let _ = stop.send(());
    let _ = serving.await;
    let start_codes = *codes.lock().unwrap_or_else(|e| e.into_inner());
    Ok(RealRun {
        outcomes,
        planned,
        clients: client_of,
        link,
        elapsed,
        host_steal: steal.fraction(),
        start_codes,
    })
}

/// Each client's task and how many fetches it makes.
pub(super) type Tasks = Vec<(tokio::task::JoinHandle<Vec<Outcome>>, usize)>;

/// One task per file of the web mix, each its own connection, started at
/// its arrival; and the files' sizes.
fn web_tasks(
    mix: &Mix,
    clients: &[ClientKind],
    quic_go: Option<&QuicGo>,
    config: &GetConfig,
    start: Instant,
    done: &Arc<AtomicUsize>,
) -> (Tasks, Vec<u64>) {
    let tasks = (mix.fetches.iter().enumerate())
        .map(|(i, f)| {
            let kind = clients[i % clients.len()];
            let (config, quic_go, done) = (config.clone(), quic_go.cloned(), done.clone());
            let at = start + Duration::from_secs_f64(f.start);
            let name = file_name(i);
            let task = tokio::spawn(async move {
                tokio::time::sleep_until(at).await;
                let outcome = match (kind, quic_go) {
                    (ClientKind::QuicGo, Some(quic_go)) => {
                        let url = format!("https://{}/{name}", config.server);
                        quic_go.fetch(&url, &name).await
                    }
                    _ => fetch_once(&config, &name).await,
                };
                done.fetch_add(1, Ordering::Relaxed);
                vec![outcome]
            });
            (task, 1)
        })
        .collect();
    (tasks, mix.fetches.iter().map(|f| f.bytes).collect())
}

/// `name` over a connection of its own, timed from the connection's first
/// packet to the body's end.
pub(super) async fn fetch_once(config: &GetConfig, name: &str) -> Outcome {
    let started = Instant::now();
    let session = match Session::connect(config).await {
        Ok(session) => session,
        Err(e) => return Outcome::failed(e),
    };
    let outcome = fetched(session.fetch(uri(name), None).await, started);
    // The close's wait for the server's acknowledgement is not the file's.
    tokio::spawn(session.close());
    outcome
}

/// The outcome of a fetch that started at `started`.
pub(super) fn fetched(result: Result<Fetched, String>, started: Instant) -> Outcome {
    match result {
        Ok(f) if f.status.is_success() => Outcome {
            seconds: Some(started.elapsed().as_secs_f64()),
            bytes: f.bytes,
            error: None,
            second_bytes: None,
        },
        Ok(f) => Outcome::failed(format!("{}: status {}", f.uri, f.status)),
        Err(e) => Outcome::failed(e),
    }
}

/// The URL of file `name` (the connection picks the server).
pub(super) fn uri(name: &str) -> Uri {
    format!("https://localhost/{name}")
        .parse()
        .expect("a file name is a path")
}

/// One task per video client: a connection, then a chunk every
/// [`CHUNK_SECONDS`] until the run's span ends, the clients' first chunks
/// spread over the first period; and the chunks' sizes.
fn video_tasks(
    mix: &Mix,
    clients: u32,
    chunk: u64,
    config: &GetConfig,
    start: Instant,
    done: &Arc<AtomicUsize>,
) -> (Tasks, Vec<u64>) {
    let chunks = (mix.span / CHUNK_SECONDS).floor().max(1.0) as usize;
    let tasks = (0..clients)
        .map(|c| {
            let (config, done) = (config.clone(), done.clone());
            let first = CHUNK_SECONDS * f64::from(c) / f64::from(clients);
            let task = tokio::spawn(async move {
                tokio::time::sleep_until(start + Duration::from_secs_f64(first)).await;
                let session = match Session::connect(&config).await {
                    Ok(session) => session,
                    Err(e) => return vec![Outcome::failed(e); chunks],
                };
                let mut outcomes = Vec::with_capacity(chunks);
                for k in 0..chunks {
                    let due = first + CHUNK_SECONDS * k as f64;
                    tokio::time::sleep_until(start + Duration::from_secs_f64(due)).await;
                    let started = Instant::now();
                    outcomes.push(fetched(session.fetch(uri(CHUNK_FILE), None).await, started));
                    done.fetch_add(1, Ordering::Relaxed);
                }
                session.close().await;
                outcomes
            });
            (task, chunks)
        })
        .collect();
    (tasks, vec![chunk; chunks * clients as usize])
}

/// A class of files: how many finished, their mean completion time over
/// processor sharing's, and the 95th percentile of each file's time over
/// its processor-sharing time.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct ClassFigures {
    /// Files finished.
    pub flows: usize,
    /// Their mean completion time over processor sharing's mean.
    pub mean_x: Option<f64>,
    /// The 95th percentile of their completion times over processor sharing's.
    pub p95_x: Option<f64>,
}

/// Completion figures over all files, then by size class (the simulator's
/// [`SIZE_CLASS_BOUNDS`]): `sizes` (bytes), `times` (s, `None`
/// unfinished) and `sharing` (s) file by file.
pub fn by_class(sizes: &[u64], times: &[Option<f64>], sharing: &[f64]) -> Vec<ClassFigures> {
    let classes = SIZE_CLASS_BOUNDS.len() + 1;
    let figures = |member: &dyn Fn(u64) -> bool| {
        let done: Vec<(f64, f64)> = (sizes.iter().zip(times).zip(sharing))
            .filter(|((&size, _), _)| member(size))
            .filter_map(|((_, t), &ps)| Some(((*t)?, ps)))
            .collect();
        let n = done.len();
        let mean = |v: f64| (n > 0).then(|| v / n as f64);
        let (time, ps) = (done.iter()).fold((0.0, 0.0), |(a, b), &(t, p)| (a + t, b + p));
        let ratios: Vec<f64> = done.iter().map(|&(t, p)| over_sharing(t, p)).collect();
        ClassFigures {
            flows: n,
            mean_x: mean(time).zip(mean(ps)).map(|(t, p)| over_sharing(t, p)),
            p95_x: percentile(&ratios, 95.0),
        }
    };
    std::iter::once(figures(&|_| true))
        .chain((0..classes).map(|c| figures(&move |size| size_class(size) == c)))
        .collect()
}

/// What one controller's run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct WebRow {
    /// The controller.
    pub name: String,
    /// Fetches planned.
    pub planned: usize,
    /// Fetches that ended with every byte.
    pub finished: usize,
    /// Bottleneck departures over what it could carry during the span.
    pub utilization: f64,
    /// Each packet's sojourn at the bottleneck: p50, p95, p99, ms.
    pub queue_ms: [f64; 3],
    /// Dropped over offered packets at the bottleneck.
    pub loss: f64,
    /// Web: all files, then by size class. Video: the chunks' mean and
    /// p95 download time (s) and how many were late.
    pub completion: Completion,
    /// The first failure, if any fetch failed.
    pub failure: Option<String>,
    /// With more than one client, each one's files (all classes).
    pub by_client: Vec<(ClientKind, ClassFigures)>,
    /// The host's share of the CPU time during the run.
    pub host_steal: Option<f64>,
}

/// A row's completion figures.
#[derive(Clone, Debug, serde::Serialize)]
pub enum Completion {
    /// Files: all, then by size class.
    Web(Vec<ClassFigures>),
    /// Video chunks: mean and p95 download time (s), chunks over two seconds.
    Video {
        /// Mean download time, s.
        mean_s: Option<f64>,
        /// Its 95th percentile, s.
        p95_s: Option<f64>,
        /// Chunks that took over [`CHUNK_SECONDS`] (or never came).
        late: usize,
    },
}

impl RealRun {
    /// Each fetch's time (s; `None` unless every byte came), and why the
    /// first that failed did.
    pub fn times(&self) -> (Vec<Option<f64>>, Option<String>) {
        let full = |o: &Outcome, planned: u64| o.seconds.filter(|_| o.bytes == planned);
        let times = (self.outcomes.iter().zip(&self.planned))
            .map(|(o, &p)| full(o, p))
            .collect();
        let failure = (self.outcomes.iter().zip(&self.planned))
            .find(|(o, &p)| full(o, p).is_none())
            .map(|(o, &p)| match &o.error {
                Some(e) => e.clone(),
                None => format!("{} of {p} bytes arrived", o.bytes),
            });
        (times, failure)
    }
}

/// The note on a run whose fetches did not all arrive whole, if any.
pub(super) fn failure_note(
    name: &str,
    (planned, finished): (usize, usize),
    failure: Option<&String>,
) -> Option<String> {
    failure.map(|failure| {
        format!(
            "{name}: {} of {planned} fetches did not arrive whole; the first: {failure}",
            planned - finished
        )
    })
}

impl WebRow {
    /// The figures of `run`, the run of `mix` with controller `name`.
    pub fn of(name: &str, mix: &Mix, run: &RealRun) -> WebRow {
        let (times, failure) = run.times();
        let sojourns = run.link.sojourn_hist(0.0, f64::INFINITY);
        let sharing = mix.sharing();
        let mut kinds = run.clients.clone();
        kinds.sort_by_key(|k| *k as u8);
        kinds.dedup();
        let by_client = match (&mix.video, kinds.len()) {
            (None, 2..) => (kinds.into_iter())
                .map(|kind| {
                    let of = |v: &[Option<f64>]| -> Vec<Option<f64>> {
                        (v.iter().zip(&run.clients))
                            .map(|(t, &k)| t.filter(|_| k == kind))
                            .collect()
                    };
                    (kind, by_class(&run.planned, &of(&times), &sharing)[0])
                })
                .collect(),
            _ => Vec::new(),
        };
        let completion = match mix.video {
            Some(_) => video_completion(&times),
            None => Completion::Web(by_class(&run.planned, &times, &sharing)),
        };
        WebRow {
            name: name.to_owned(),
            planned: run.planned.len(),
            finished: times.iter().flatten().count(),
            utilization: run.link.utilization(0.0, mix.span),
            queue_ms: [50.0, 95.0, 99.0].map(|p| sojourns.percentile_ms(p).unwrap_or(0.0)),
            loss: run.link.loss(),
            completion,
            failure,
            by_client,
            host_steal: run.host_steal,
        }
    }
}

/// The chunks' download times' figures (`None`: a chunk that never came).
fn video_completion(times: &[Option<f64>]) -> Completion {
    let came: Vec<f64> = times.iter().flatten().copied().collect();
    Completion::Video {
        mean_s: (!came.is_empty()).then(|| came.iter().sum::<f64>() / came.len() as f64),
        p95_s: percentile(&came, 95.0),
        late: (times.iter())
            .filter(|t| t.is_none_or(|s| s > CHUNK_SECONDS))
            .count(),
    }
}

/// The table's heads: the link's, then completion's.
fn heads(video: bool) -> Vec<String> {
    let link = ["run", "done", "util", "queue p50", "queue p99", "loss"];
    let completion = match video {
        true => vec!["chunk mean".to_owned(), "chunk p95".into(), "late".into()],
        false => (std::iter::once("all".to_owned()))
            .chain(size_class_labels())
            .collect(),
    };
    link.iter()
        .map(|&s| s.to_owned())
        .chain(completion)
        .collect()
}

/// A class's cell: mean/p95 over processor sharing (files), `–` for none.
fn class_cell(c: &ClassFigures) -> String {
    match (c.mean_x, c.p95_x) {
        (Some(mean), Some(p95)) => format!("{mean:.2}/{p95:.2} ({})", c.flows),
        _ => "–".to_owned(),
    }
}

/// One row's cells under [`heads`].
fn cells(r: &WebRow) -> Vec<String> {
    let [p50, _, p99] = r.queue_ms.map(|ms| format!("{ms:.1} ms"));
    let link = [
        r.name.clone(),
        format!("{}/{}", r.finished, r.planned),
        format!("{:.1}%", r.utilization * 100.0),
        p50,
        p99,
        format!("{:.2}%", r.loss * 100.0),
    ];
    let seconds = |s: Option<f64>| s.map_or("–".to_owned(), |s| format!("{s:.2} s"));
    let completion = match &r.completion {
        Completion::Web(classes) => classes.iter().map(class_cell).collect(),
        Completion::Video {
            mean_s,
            p95_s,
            late,
        } => vec![seconds(*mean_s), seconds(*p95_s), late.to_string()],
    };
    link.into_iter().chain(completion).collect()
}

/// The table's column widths in text.
const WIDTHS: [usize; 11] = [8, 9, 6, 10, 10, 6, 17, 17, 17, 17, 17];

/// Issue 70's goal for the real stack: erc's mean completion time at most
/// Cubic's in every size class with at least this many files...
const GOAL_CLASS_FLOWS: usize = 10;
/// ...and its queue p99 at most this share of Cubic's.
const GOAL_QUEUE_SHARE: f64 = 0.2;

/// What the table needs beside it: what the cells are, failures, host
/// steal, and issue 70's goal where erc and Cubic both ran.
fn notes(rows: &[WebRow], mix: &Mix) -> Vec<String> {
    let mut notes = vec![match mix.video {
        Some((n, chunk)) => format!(
            "{n} video client(s), a {:.0} kB chunk each every {CHUNK_SECONDS} s ({:.2} Mbit/s); \
             a chunk is late if it takes over {CHUNK_SECONDS} s. Queue: each packet's sojourn at \
             the bottleneck (server to client).",
            chunk as f64 / 1e3,
            chunk as f64 * 8.0 / CHUNK_SECONDS / 1e6
        ),
        None => "Size classes: mean/p95 completion time over processor sharing's (files \
                 finished), from the client's first packet to the body's end; processor \
                 sharing pays the same handshake and round trip (the simulator's reference). \
                 done: files that arrived whole. util: over the arrivals' span. Queue: each \
                 packet's sojourn at the bottleneck (server to client)."
            .to_owned(),
    }];
    for r in rows {
        let done = (r.planned, r.finished);
        notes.extend(failure_note(&r.name, done, r.failure.as_ref()));
        if !r.by_client.is_empty() {
            let parts: Vec<String> = (r.by_client.iter())
                .map(|(kind, c)| format!("{kind} {}", class_cell(c)))
                .collect();
            notes.push(format!(
                "{}, all files by client: {}",
                r.name,
                parts.join(", ")
            ));
        }
        notes.extend(steal_note(&r.name, r.host_steal));
    }
    notes.extend(goal_note(rows));
    notes
}

/// Issue 70's real-stack goal, where erc and Cubic both ran the web mix:
/// which classes (with at least [`GOAL_CLASS_FLOWS`] files in both) meet
/// erc ≤ Cubic, and the queue p99 against a fifth of Cubic's.
fn goal_note(rows: &[WebRow]) -> Option<String> {
    let row = |name: &str| rows.iter().find(|r| r.name == name);
    let (erc, cubic) = (row("erc")?, row("cubic")?);
    let (Completion::Web(e), Completion::Web(c)) = (&erc.completion, &cubic.completion) else {
        return None;
    };
    let labels = size_class_labels();
    let verdicts: Vec<String> = (e.iter().zip(c).skip(1).zip(&labels))
        .filter(|((e, c), _)| e.flows.min(c.flows) >= GOAL_CLASS_FLOWS)
        .filter_map(|((e, c), label)| {
            let met = e.mean_x? <= c.mean_x?;
            Some(format!("{label} {}", if met { "met" } else { "missed" }))
        })
        .collect();
    let (q_erc, q_cubic) = (erc.queue_ms[2], cubic.queue_ms[2]);
    let queue = match q_erc <= GOAL_QUEUE_SHARE * q_cubic {
        true => "met",
        false => "missed",
    };
    Some(format!(
        "goal (issue 70): erc's mean ≤ Cubic's per class with at least {GOAL_CLASS_FLOWS} files: {}; \
         erc's queue p99 ≤ 1/5 of Cubic's: {queue} ({q_erc:.1} ms against {q_cubic:.1} ms).",
        match verdicts.is_empty() {
            true => "no class has enough files".to_owned(),
            false => verdicts.join(", "),
        }
    ))
}

/// The table as text, with its notes.
pub fn table_text(rows: &[WebRow], mix: &Mix) -> String {
    use ecnq_charts::table::aligned;
    let video = mix.video.is_some();
    let widths = &WIDTHS[..heads(video).len()];
    let mut out = format!("\n{}\n", aligned(&heads(video), widths).trim_end());
    for r in rows {
        out += &format!("{}\n", aligned(&cells(r), widths).trim_end());
    }
    for note in notes(rows, mix) {
        out += &format!("{note}\n");
    }
    out
}

/// The table as Markdown, the notes under it as paragraphs.
pub fn table_markdown(rows: &[WebRow], mix: &Mix) -> String {
    let heads = heads(mix.video.is_some());
    let heads: Vec<&str> = heads.iter().map(String::as_str).collect();
    let cells: Vec<Vec<String>> = rows.iter().map(cells).collect();
    let mut out = ecnq_charts::table::markdown(&heads, &cells);
    for note in notes(rows, mix) {
        out += &format!("\n{note}\n");
    }
    out
}

/// One run of the mix of `args` per controller of `--cc`: the mix, and
/// each controller's run and its row of the table. Says on stderr which
/// client is left out, and how far each run got.
pub async fn measure(args: &WebArgs) -> Result<(Mix, Vec<(RealRun, WebRow)>), String> {
    let mix = args.mix()?;
    let (clients, quic_go) = match mix.video {
        Some(_) => (vec![ClientKind::Ecnq], None),
        None if mix.flash => (vec![ClientKind::Ecnq], None),
        None => usable_clients(&args.clients)?,
    };
    let www = tempfile::tempdir().map_err(|e| format!("cannot make a directory: {e}"))?;
    write_files(www.path(), &mix)?;
    let what = match mix.video {
        Some((n, _)) => format!("{n} video client(s) for {} s", mix.span),
        None if mix.flash => flash::what(&mix),
        None => format!(
            "{} files over {} s ({} load; clients {})",
            mix.fetches.len(),
            mix.span,
            args.load,
            (clients.iter().map(ClientKind::to_string))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    println!(
        "ecnq-perf web: {what} through {} (server to client), each controller in turn",
        mix.link.to_client
    );
    let mut runs = Vec::new();
    // Controller by controller within each flight, so that runs of one
    // controller with different flights alternate with the others'.
    for &flight in &args.flight {
        for &cc in &args.cc {
            let name = match args.flight.len() {
                1 => cc.to_string(),
                _ => format!("{cc}, {flight}"),
            };
            eprintln!("  {name} …");
            let qlog =
                (args.qlog.as_ref()).map(|dir| dir.join(name.replace(", ", "-").replace(' ', "-")));
            let run = run_real(
                &mix,
                cc,
                &clients,
                quic_go.as_ref(),
                www.path(),
                flight,
                qlog,
            )
            .await?;
            let row = WebRow::of(&name, &mix, &run);
            runs.push((run, row));
        }
    }
    Ok((mix, runs))
}

/// Runs `ecnq-perf web`.
pub async fn run(args: WebArgs) -> Result<(), String> {
    let (mix, runs) = measure(&args).await?;
    if mix.flash {
        let rows: Vec<flash::FlashRow> = (runs.iter())
            .map(|(run, row)| flash::FlashRow::of(&row.name, &mix, run))
            .collect();
        print!("{}", flash::table_text(&rows, &mix));
        return match &args.markdown {
            Some(path) => std::fs::write(path, flash::table_markdown(&rows, &mix))
                .map_err(|e| format!("cannot write {}: {e}", path.display())),
            None => Ok(()),
        };
    }
    let rows: Vec<WebRow> = runs.into_iter().map(|(_, row)| row).collect();
    print!("{}", table_text(&rows, &mix));
    match &args.markdown {
        Some(path) => std::fs::write(path, table_markdown(&rows, &mix))
            .map_err(|e| format!("cannot write {}: {e}", path.display())),
        None => Ok(()),
    }
}

/// The group of the web mix's files in the simulator.
const WEB_GROUP: &str = "web";

impl Mix {
    /// The relay's link with the files' direction through `queue` if given.
    fn link_for(&self, queue: Option<Discipline>) -> RelayLink {
        let mut link = self.link.clone();
        if queue.is_some() {
            link.to_client.queue = queue;
        }
        link
    }

    /// When the last finished file of `times` (s, file by file) ended,
    /// seconds into the run.
    fn last_end(&self, times: &[Option<f64>]) -> f64 {
        (self.fetches.iter().zip(times))
            .filter_map(|(f, t)| Some(f.start + (*t)?))
            .fold(0.0, f64::max)
    }

    /// The application bytes of the finished files of `times` over the
    /// time until the last of them ended, Mbit/s.
    fn goodput_mbit(&self, times: &[Option<f64>]) -> f64 {
        let bytes: u64 = (self.fetches.iter().zip(times))
            .filter(|(_, t)| t.is_some())
            .map(|(f, _)| f.bytes)
            .sum();
        bytes as f64 * 8.0 / self.last_end(times).max(1e-9) / 1e6
    }
}

/// The web mix of `case` in the simulator, from the same files at the
/// same times as the real run: its figures as `ecnq-perf paired` counts
/// them, and each file's completion time (s; `None` unfinished by the
/// deadline).
pub fn simulate(mix: &Mix, case: Case) -> Result<(Figures, Vec<Option<f64>>), String> {
    let link = mix.link_for(case.queue);
    let protocol = sim_protocol(case.cc);
    // A file of so many application bytes is this many bytes of the
    // simulator's whole packets.
    let wire = |bytes: u64| (bytes as f64 * f64::from(SIM_PACKET) / f64::from(APP_BYTES)).ceil();
    let flows = (mix.fetches.iter())
        .map(|f| FlowSpec {
            size: Some(wire(f.bytes) as u64),
            sampled: false,
            ..sim_flow(protocol, f.start, None, WEB_GROUP)
        })
        .collect();
    let deadline = nanos(mix.deadline());
    let mut sim = Sim::new(SimConfig {
        links: vec![
            sim_link("data", &link.to_client, true)?,
            sim_link("acks", &link.to_server, false)?,
        ],
        flows,
        pareto: Vec::new(),
        floods: Vec::new(),
        duration: deadline,
        seed: 1,
        sample: nanos(SIM_SAMPLE),
        measure_from: 0,
        trace: false,
    })?;
    let data_link = |sim: &Sim| {
        (link_summaries(sim).into_iter().next())
            .ok_or("the simulator reported no figures for the data link")
    };
    // Utilization over the arrivals' span, as the real run judges it.
    let mut until = nanos(mix.span);
    sim.run_until(until);
    sim.finish();
    let utilization = data_link(&sim)?.utilization;
    let done = |sim: &Sim| sim.flows.iter().all(|f| f.completion().is_some());
    while !done(&sim) && until < deadline {
        until += nanos(SIM_SAMPLE);
        sim.run_until(until);
    }
    sim.finish();
    let data = data_link(&sim)?;
    let times: Vec<Option<f64>> = (sim.flows.iter())
        .map(|f| f.completion().map(|t| t as f64 / 1e9))
        .collect();
    let figures = Figures {
        goodput_mbit: mix.goodput_mbit(&times),
        utilization,
        queue_p50_ms: data.sojourn_ms.p50,
        queue_p95_ms: data.sojourn_ms.p95,
        queue_p99_ms: data.sojourn_ms.p99,
        loss: data.loss,
        kept: None,
    };
    Ok((figures, times))
}

/// The real run's figures as `ecnq-perf paired` counts them, and each
/// file's completion time.
fn real_figures(mix: &Mix, run: &RealRun) -> (Figures, Vec<Option<f64>>) {
    let row = WebRow::of("", mix, run);
    let times: Vec<Option<f64>> = (run.outcomes.iter().zip(&run.planned))
        .map(|(o, &p)| o.seconds.filter(|_| o.bytes == p))
        .collect();
    let [p50, p95, p99] = row.queue_ms;
    let figures = Figures {
        goodput_mbit: mix.goodput_mbit(&times),
        utilization: row.utilization,
        queue_p50_ms: p50,
        queue_p95_ms: p95,
        queue_p99_ms: p99,
        loss: row.loss,
        kept: None,
    };
    (figures, times)
}

/// `ecnq-perf paired web`: the web mix of `ecnq-perf web`'s defaults with
/// arrivals for `--duration`, each case in the simulator and on the real
/// stack (ecnq's client), the paired table and, under it, completion over
/// processor sharing by size class, simulator against real stack.
pub async fn run_paired(args: &PairedArgs) -> Result<(), String> {
    if args.link_down.is_some() || args.link_up.is_some() || args.trace.is_some() {
        return Err(
            "paired web takes ecnq-perf web's link (10 Mbit/s, 40 ms, one BDP): --link-down, --link-up and --trace are not for it"
                .into(),
        );
    }
    let words = ["--duration", &args.duration.to_string()];
    let web: WebArgs = parse_args("web", &words)?;
    check_seconds("--duration", args.duration, 3.0, 3600.0)?;
    let mix = web.mix()?;
    let www = tempfile::tempdir().map_err(|e| format!("cannot make a directory: {e}"))?;
    write_files(www.path(), &mix)?;
    println!(
        "ecnq-perf paired web: {} files over {} s at {} load through {} (server to client); \
         the simulator, then the real stack (ecnq's HTTP/3 client) through the relay shim on loopback",
        mix.fetches.len(),
        mix.span,
        web.load,
        mix.link.to_client
    );
    let sharing = mix.sharing();
    let sizes: Vec<u64> = mix.fetches.iter().map(|f| f.bytes).collect();
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for &case in &args.cc {
        eprint!("  {case:<12} simulator …");
        let (sim, sim_times) = simulate(&mix, case)?;
        eprint!(" {:.1} Mbit/s", sim.goodput_mbit);
        let (real, real_times, host_steal) = match args.sim_only {
            true => (None, None, None),
            false => {
                eprint!("; real stack …");
                let mut real_mix = mix.clone();
                real_mix.link = mix.link_for(case.queue);
                let run = run_real(
                    &real_mix,
                    case.cc,
                    &[ClientKind::Ecnq],
                    None,
                    www.path(),
                    Flight::Short,
                    None,
                );
                let run = run.await?;
                let (figures, times) = real_figures(&mix, &run);
                eprint!(" {:.1} Mbit/s", figures.goodput_mbit);
                (Some(figures), Some(times), run.host_steal)
            }
        };
        eprintln!();
        let classes = |times: &[Option<f64>]| by_class(&sizes, times, &sharing);
        notes.push(completion_note(
            &case.to_string(),
            &classes(&sim_times),
            real_times.as_deref().map(classes).as_deref(),
        ));
        rows.push(PairedRow {
            case: case.to_string(),
            sim,
            real,
            host_steal,
        });
    }
    notes.push(
        "web: goodput is the files' application bytes over the time until the last one \
         ended; util is over the arrivals' span. A real file's time ends at its last byte, a \
         simulated one's (and processor sharing's) at that byte's ACK, half a round trip later."
            .to_owned(),
    );
    paired::report("web", &rows, &notes, false, args)
}

/// One case's completion over processor sharing (mean, files) by class,
/// the simulator's and, if it ran, the real stack's.
fn completion_note(case: &str, sim: &[ClassFigures], real: Option<&[ClassFigures]>) -> String {
    let labels: Vec<String> = std::iter::once("all".to_owned())
        .chain(size_class_labels())
        .collect();
    let mean = |c: &ClassFigures| match c.mean_x {
        Some(x) => format!("{x:.2} ({})", c.flows),
        None => "–".to_owned(),
    };
    let parts: Vec<String> = (labels.iter().zip(sim).enumerate())
        .map(|(i, (label, s))| match real {
            Some(real) => format!("{label} {} → {}", mean(s), mean(&real[i])),
            None => format!("{label} {}", mean(s)),
        })
        .collect();
    let what = match real {
        Some(_) => "simulator → real stack",
        None => "simulator",
    };
    format!(
        "{case}: mean completion over processor sharing (files), {what}: {}",
        parts.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ecnq_shim::link::spec::Limit;
    use ecnq_sim::engine::BufferLimit;
    use ecnq_sim::scenario::{Overrides, Scenario};

    fn web(words: &[&str]) -> Result<WebArgs, String> {
        parse_args("web", words)
    }

    /// The defaults are sim/scenarios/web-10mbit.toml's link and files,
    /// so that the real stack's table and the simulator's speak of one mix.
    #[test]
    fn the_defaults_are_the_simulators_web_mix() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sim/scenarios/web-10mbit.toml");
        let scenario = Scenario::load(&path, &[]).unwrap();
        let config = scenario.build(&Overrides::default()).unwrap();
        let (sim_link, sim_source) = (&config.links[0], &config.pareto[0]);
        let args = web(&[]).unwrap();
        let (mix, source) = (args.mix().unwrap(), args.source());
        assert_eq!(source.sizes, sim_source.sizes);
        assert!((source.arrivals_per_sec / sim_source.arrivals_per_sec - 1.0).abs() < 1e-12);
        assert_eq!(Some(mix.rate_bps), sim_link.rate);
        assert_eq!(nanos(mix.delay), sim_link.delay);
        // One bandwidth-delay product both ways: the simulator's in whole
        // packets of its flows' size, the relay's in bytes.
        let BufferLimit::Packets(packets) = sim_link.buffer else {
            panic!("{:?}", sim_link.buffer);
        };
        let mss = u64::from(sim_source.flow.mss);
        let Limit::Bytes(bytes) = mix.link.to_client.limit else {
            panic!("{:?}", mix.link.to_client.limit);
        };
        assert!(
            bytes.abs_diff(packets * mss) < mss,
            "{bytes} B, {packets} packets"
        );
    }

    /// The files the real stack fetches are those the simulator's engine
    /// starts from the same source and seed.
    #[test]
    fn a_lone_source_lists_the_flows_the_engine_starts() {
        let args = web(&["--duration", "20", "--seed", "7"]).unwrap();
        let source = args.source();
        let link = args.mix().unwrap().link;
        let mut sim = Sim::new(SimConfig {
            links: vec![
                sim_link("data", &link.to_client, true).unwrap(),
                sim_link("acks", &link.to_server, false).unwrap(),
            ],
            flows: Vec::new(),
            pareto: vec![source.clone()],
            floods: Vec::new(),
            duration: nanos(21.0),
            seed: 7,
            sample: nanos(SIM_SAMPLE),
            measure_from: 0,
            trace: false,
        })
        .unwrap();
        sim.run_until(nanos(21.0));
        let started: Vec<(u64, u64)> = (sim.flows.iter())
            .map(|f| (f.spec.start, f.spec.size.unwrap()))
            .collect();
        assert_eq!(started, source.arrivals(7));
        assert!(started.len() > 50, "{}", started.len());
        let files = args.mix().unwrap().fetches;
        assert_eq!(files.len(), started.len());
        assert_eq!(files[3].bytes, started[3].1);
    }

    /// The simulator runs the mix's files to their ends, and its figures
    /// fit their definitions; a paired web run takes no link of its own.
    #[test]
    fn a_simulated_web_mix_finishes_every_file() {
        let mix = web(&["--duration", "3"]).unwrap().mix().unwrap();
        let (figures, times) = simulate(&mix, "erc".parse().unwrap()).unwrap();
        assert_eq!(times.len(), mix.fetches.len());
        assert!(times.iter().all(Option::is_some), "{times:?}");
        assert!(figures.utilization > 0.0 && figures.utilization <= 1.0);
        assert!(figures.queue_p50_ms <= figures.queue_p99_ms);
        let classes = by_class(
            &mix.fetches.iter().map(|f| f.bytes).collect::<Vec<_>>(),
            &times,
            &mix.sharing(),
        );
        assert!(classes[0].mean_x.is_some_and(|x| x > 0.9), "{classes:?}");
        let args: PairedArgs = parse_args("paired", &["web", "--link-down", "rate 5mbit"]).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let error = runtime.block_on(run_paired(&args)).unwrap_err();
        assert!(error.contains("--link-down"), "{error}");
    }

    /// Each class counts its files; the mean is of times over processor
    /// sharing's means, the p95 of each file's ratio; unfinished files
    /// count nowhere.
    #[test]
    fn files_are_judged_by_size_class() {
        let sizes = [50_000, 60_000, 500_000, 2_000_000, 20_000_000];
        let times = [Some(0.2), Some(0.4), Some(1.0), None, Some(30.0)];
        let sharing = [0.1, 0.1, 0.5, 2.0, 20.0];
        let classes = by_class(&sizes, &times, &sharing);
        let flows: Vec<usize> = classes.iter().map(|c| c.flows).collect();
        assert_eq!(flows, [4, 2, 1, 0, 1]);
        let close = |x: Option<f64>, y: f64| x.is_some_and(|x| (x - y).abs() < 1e-9);
        assert!(close(classes[1].mean_x, 3.0), "{classes:?}");
        assert!(classes[1].p95_x.is_some_and(|p| p > 3.0 && p <= 4.0));
        assert!(close(classes[2].mean_x, 2.0), "{classes:?}");
        assert_eq!((classes[3].mean_x, classes[3].p95_x), (None, None));
        assert!(close(classes[4].mean_x, 1.5), "{classes:?}");
        let cells: Vec<String> = classes.iter().map(class_cell).collect();
        assert_eq!(cells[2], "2.00/2.00 (1)");
        assert_eq!(cells[3], "–");
    }

    /// A chunk that never came, or took over two seconds, is late.
    #[test]
    fn late_chunks_are_counted() {
        let Completion::Video {
            mean_s,
            p95_s,
            late,
        } = video_completion(&[Some(0.5), Some(2.5), None, Some(1.0)])
        else {
            unreachable!()
        };
        assert_eq!((mean_s, late), (Some(4.0 / 3.0), 2));
        assert!(p95_s.is_some_and(|p| p > 2.0));
    }

    /// Video clients share --load of the link unless --bitrate says; a
    /// chunk is two seconds of it.
    #[test]
    fn a_video_chunk_is_two_seconds_of_the_bitrate() {
        let mix = web(&["--dash", "4"]).unwrap().mix().unwrap();
        assert_eq!(mix.video, Some((4, 312_500)));
        assert!(mix.fetches.is_empty());
        let mix = (web(&["--dash", "2", "--bitrate", "800kbit"]).unwrap().mix()).unwrap();
        assert_eq!(mix.video, Some((2, 200_000)));
    }

    /// Bad options are errors that name them.
    #[test]
    fn bad_input_is_an_error_that_says_why() {
        for (words, wants) in [
            (&["--load", "0"][..], "--load must be above 0"),
            (&["--load", "1.5"], "--load must be above 0 and at most 1"),
            (&["--shape", "1"], "--shape must be above 1"),
            (
                &["--max-size", "1000b"],
                "--max-size (1000 bytes) must be more",
            ),
            (
                &["--duration", "1"],
                "--duration must be between 2 and 3600",
            ),
            (&["--buffer", "lots"], "--buffer"),
        ] {
            let error = web(words).and_then(|a| a.mix().map(|_| ())).unwrap_err();
            assert!(error.contains(wants), "{words:?}: {error}");
        }
        for (words, wants) in [
            (&["--bitrate", "1mbit"][..], "--dash"),
            (&["--clients", "curl"], "possible values: ecnq, quic-go"),
            (&["--dash", "0"], "--dash"),
            (&["--cc", "tcp"], "tcp"),
        ] {
            let error = web(words).unwrap_err();
            assert!(error.contains(wants), "{words:?}: {error}");
        }
    }

    /// The table keeps its layout; the goal note judges erc against Cubic
    /// in classes with enough files in both.
    #[test]
    fn the_table_and_the_goal() {
        let mix = web(&["--duration", "2"]).unwrap().mix().unwrap();
        let class = |flows, mean| ClassFigures {
            flows,
            mean_x: Some(mean),
            p95_x: Some(mean * 2.0),
        };
        let row = |name: &str, small: f64, p99: f64| WebRow {
            name: name.into(),
            planned: 20,
            finished: 20,
            utilization: 0.5,
            queue_ms: [1.0, 2.0, p99],
            loss: 0.0,
            completion: Completion::Web(vec![
                class(20, small),
                class(15, small),
                class(5, 1.0),
                ClassFigures::default(),
                ClassFigures::default(),
            ]),
            failure: None,
            by_client: Vec::new(),
            host_steal: None,
        };
        let rows = [row("erc", 1.5, 4.0), row("cubic", 1.4, 30.0)];
        let text = table_text(&rows, &mix);
        assert!(
            text.contains(
                "erc          20/20  50.0%     1.0 ms     4.0 ms  0.00%    1.50/3.00 (20)"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "<100kB missed; erc's queue p99 ≤ 1/5 of Cubic's: met (4.0 ms against 30.0 ms)"
            ),
            "{text}"
        );
        let markdown = table_markdown(&rows, &mix);
        assert!(markdown.starts_with("| run | done | util |"), "{markdown}");
        assert!(markdown.contains("| cubic | 20/20 | 50.0% |"), "{markdown}");
    }
}

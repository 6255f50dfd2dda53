//! `ecnq-perf`: iperf3's habits for ecnq's QUIC transport, and the demo.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use ecnq::quic::{CongestionControl, Endpoint, Options};
use ecnq::units::Size;
use ecnq_examples::http3;
use ecnq_examples::perf::client::{self, ClientConfig};
use ecnq_examples::perf::output;
use ecnq_examples::perf::proto::{self, TestRequest, DEFAULT_PORT};
use ecnq_examples::perf::pump::Pause;
use ecnq_examples::perf::report::{self, Interval, Report, Sum};
use ecnq_examples::perf::{
    check_seconds, demo, paired, parse_seconds, server, testbed, MAX_SECONDS,
};
use ecnq_shim::shutdown_signal;

/// Measure ecnq's QUIC transport like iperf3 measures TCP: `ecnq-perf -s` on
/// one side, `ecnq-perf -c HOST` on the other. `ecnq-perf demo` runs every
/// scheme through an emulated bottleneck on loopback, no setup needed.
#[derive(Parser, Debug)]
#[command(name = "ecnq-perf", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    perf: PerfArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Every scheme, then Cubic and BBR, through an emulated bottleneck on
    /// loopback (a relay-mode shim in this process); prints a comparison and
    /// writes SVG plots.
    // Boxed: its link specs make it many times the size of the others.
    Demo(Box<demo::DemoCommand>),
    /// The demo's comparison through `ecnq-shim testbed` (network
    /// namespaces, a TUN shim per router; root), with kernel TCP through
    /// iperf3 (reno, cubic, bbr; ECN on) as extra baselines. Always removes
    /// the testbed again, also on an error or Ctrl-C. `--router bpf` runs
    /// it through the kernel's router instead (an htb and the ecnq-bpf
    /// program; every ecnq scheme but prague), `--router shim,bpf` through both.
    ///
    /// The link options describe each router's link: the parking lot's long
    /// flow crosses two, so its round trip is twice --rtt. Plots and
    /// summary.json go to OUT/testbed-TOPOLOGY.
    Testbed(testbed::TestbedArgs),
    /// One scenario run both ways, in the simulator (ecnq-sim in this
    /// process) and on the real stack (QUIC through the relay shim on
    /// loopback, as the demo runs it), from one description of its link,
    /// flows and start times; prints both sets of figures and real/sim per
    /// controller, and draws goodput against p95 queueing delay.
    Paired(Box<paired::PairedArgs>),
    /// Web traffic through an emulated bottleneck on loopback: HTTP/3
    /// clients fetch files of Pareto sizes from the h3 server at a set
    /// load (or, with --dash, video chunks every two seconds), each
    /// controller in turn; prints completion time by size class over
    /// processor sharing's (or the chunks' download times), the link's
    /// utilization and the queue.
    ///
    /// A command of its own rather than a demo mode: its flows are files
    /// from an HTTP/3 server, each on a connection of its own and judged
    /// by its completion time in its size class, where the demo's are
    /// timed uploads judged by rate. The files are those the simulator's
    /// web mixes draw (web-10mbit's by default, one --seed for every
    /// controller); `ecnq-perf paired web` runs the same mix in the
    /// simulator beside the real stack.
    Web(Box<http3::web::WebArgs>),
    /// An HTTP/3 file server (ALPN h3) on ecnq: every connection's sending
    /// direction runs --cc, whatever the client. Prints the certificate's
    /// SPKI hash for Chromium and, as each connection ends, its bytes,
    /// goodput and congestion-control mode.
    #[command(name = "h3-server")]
    H3Server(http3::command::ServerArgs),
    /// Downloads https:// URLs over HTTP/3 on one ecnq connection; prints
    /// each response's bytes and goodput. Fails unless every response is
    /// a 2xx.
    #[command(name = "h3-get")]
    H3Get(http3::command::GetArgs),
}

#[derive(Args, Debug)]
struct PerfArgs {
    /// Run as a server.
    #[arg(short = 's', long, conflicts_with = "client")]
    server: bool,
    /// Run as a client of the server at HOST.
    #[arg(short = 'c', long, value_name = "HOST")]
    client: Option<String>,
    /// Server port.
    #[arg(short = 'p', long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Seconds to send for (0.001 to 86400; a bare number or a time such as 90s, 500ms).
    #[arg(short = 't', long, default_value_t = 10.0, value_name = "SECONDS", value_parser = parse_seconds)]
    time: f64,
    /// Bytes to send instead of a time (k, m, g, t: powers of 1024, as tc(8)
    /// counts; at most 1t).
    #[arg(short = 'n', long, value_name = "SIZE", value_parser = parse_size)]
    bytes: Option<u64>,
    /// Parallel streams, each its own QUIC connection and congestion controller.
    #[arg(short = 'P', long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=128))]
    parallel: u32,
    /// Reverse: the server sends (with the server's --cc).
    #[arg(short = 'R', long)]
    reverse: bool,
    /// Seconds between interval reports: 0 for none, else 0.01 to 3600 (or a time such as 500ms).
    #[arg(short = 'i', long, default_value_t = 1.0, value_name = "SECONDS", value_parser = parse_seconds)]
    interval: f64,
    /// Print one JSON report, shaped like iperf3's, at the end.
    #[arg(short = 'J', long)]
    json: bool,
    /// Congestion control of the sending side [default: erc].
    #[arg(long, default_value_t = CongestionControl::DEFAULT, value_parser = parse_cc, long_help = format!("Congestion control of the sending side:\n{}", CongestionControl::help()))]
    cc: CongestionControl,
    /// Client: write nothing from FROM until UNTIL seconds into the test
    /// (e.g. 10..12), as an application with nothing to send. Bytes
    /// already written still go out: with quinn's default send window that
    /// can be seconds of data on a slow path, so pair it with
    /// --send-window.
    #[arg(long, value_name = "FROM..UNTIL", value_parser = parse_pause, conflicts_with_all = ["server", "reverse"])]
    pause: Option<Pause>,
    /// Client: most bytes held written but not yet acknowledged (quinn's
    /// send window; k, m, g: powers of 1024) [default: quinn's 10 MB]. About two
    /// bandwidth-delay products keeps a --pause's stop within a round trip
    /// or two of the writes' without limiting the rate.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, conflicts_with_all = ["server", "reverse"])]
    send_window: Option<u64>,
    /// Write one qlog file per connection into this directory: quinn's
    /// events and ecnq's (`ecnq:mode_updated` names the feedback the
    /// sender runs on, `ecnq:decrease` its law's cuts).
    #[arg(long, value_name = "DIR")]
    qlog: Option<PathBuf>,
    /// Start tokio-console's subscriber (needs the `console` feature).
    #[arg(long)]
    console: bool,
    /// Server: serve Prometheus metrics over HTTP on ADDR (host:port):
    /// ecnq_connections{cc,mode}, the open connections by congestion
    /// control and mode (EcnqAckCounts, ClassicNoEcnCounts, …), and
    /// ecnq_connections_closed_total{cc,mode}, the ended ones by the mode
    /// they ended in.
    #[arg(long, value_name = "ADDR", conflicts_with = "client")]
    metrics: Option<SocketAddr>,
    /// Server: handle one test, then exit.
    #[arg(short = '1', long)]
    one_off: bool,
    /// Address to bind (server) — default all addresses, IPv4 and IPv6.
    #[arg(short = 'B', long, value_name = "ADDR")]
    bind: Option<IpAddr>,
    /// Server certificate chain (PEM); default a fresh self-signed one.
    #[arg(long, requires = "key", value_name = "FILE")]
    cert: Option<PathBuf>,
    /// Server private key (PEM).
    #[arg(long, requires = "cert", value_name = "FILE")]
    key: Option<PathBuf>,
    /// Client: trust this CA (PEM). Default: the certificate a server on this
    /// machine left for the address named, in the private directory
    /// $TMPDIR/ecnq-perf-UID (0700).
    #[arg(long, value_name = "FILE")]
    ca: Option<PathBuf>,
    /// Name the server's certificate is for (and the client checks).
    #[arg(long, default_value = "localhost", value_name = "NAME")]
    server_name: String,
}

fn parse_pause(s: &str) -> Result<Pause, String> {
    s.parse()
}

fn parse_cc(s: &str) -> Result<CongestionControl, String> {
    s.parse::<CongestionControl>().map_err(|e| e.to_string())
}

/// Most bytes a test may ask for (`-n`).
const MAX_BYTES: u64 = 1 << 40;

fn parse_size(s: &str) -> Result<u64, String> {
    let bytes = s.parse::<Size>().map_err(|e| e.to_string())?.bytes();
    if !(1..=MAX_BYTES).contains(&bytes) {
        return Err(format!("`{s}` must be a size from 1 byte to 1t"));
    }
    Ok(bytes)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(format!("cannot start the runtime: {e}")),
    };
    let result = runtime.block_on(async {
        match cli.command {
            Some(Command::Demo(args)) => demo::run(*args).await,
            Some(Command::Testbed(args)) => testbed::run(args).await,
            // The web mix is a mix of files from the h3 server.
            Some(Command::Paired(args)) if args.scenario == paired::Named::Web => {
                http3::web::run_paired(&args).await
            }
            Some(Command::Paired(args)) => paired::run(*args).await,
            Some(Command::Web(args)) => http3::web::run(*args).await,
            Some(Command::H3Server(args)) => http3::command::run_server(args).await,
            Some(Command::H3Get(args)) => http3::command::run_get(args).await,
            None => perf(cli.perf).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn fail(message: String) -> ExitCode {
    eprintln!("ecnq-perf: error: {message}");
    ExitCode::FAILURE
}

async fn perf(args: PerfArgs) -> Result<(), String> {
    if args.console {
        start_console()?;
    } else {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
    check_seconds("-t", args.time, 0.001, MAX_SECONDS)?;
    if args.interval != 0.0 {
        check_seconds("-i (0 for none)", args.interval, 0.01, 3600.0)?;
    }
    if let Some(pause) = args
        .pause
        .filter(|p| args.bytes.is_none() && p.from.as_secs_f64() >= args.time)
    {
        return Err(format!(
            "--pause starts at {} s, after the test's {} s (-t)",
            pause.from.as_secs_f64(),
            args.time
        ));
    }
    match (&args.client, args.server) {
        (Some(host), false) => run_client(host.clone(), &args).await,
        (None, true) => run_server(&args).await,
        _ => Err("say -s (server) or -c HOST (client); see --help".into()),
    }
}

#[cfg(feature = "console")]
fn start_console() -> Result<(), String> {
    console_subscriber::init();
    Ok(())
}

#[cfg(not(feature = "console"))]
fn start_console() -> Result<(), String> {
    Err("--console needs a build with the `console` feature: RUSTFLAGS=\"--cfg tokio_unstable\" cargo build -p ecnq-examples --features console".into())
}

async fn run_server(args: &PerfArgs) -> Result<(), String> {
    let bind = SocketAddr::new(
        args.bind.unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
        args.port,
    );
    let (identity, self_signed) = match (&args.cert, &args.key) {
        (Some(cert), Some(key)) => (proto::load_identity(cert, key)?, None),
        _ => {
            let (identity, pem) = proto::self_signed(std::slice::from_ref(&args.server_name))?;
            (identity, Some(pem))
        }
    };
    let mut options = Options::new(args.cc).alpn(&[proto::ALPN]);
    if let Some(dir) = &args.qlog {
        options = options.qlog_dir(dir.clone());
    }
    let endpoint = Endpoint::server(bind, identity, options)
        .map_err(|e| format!("cannot listen on {bind}: {e}"))?;
    let board = ecnq_examples::metrics::serve_if_asked(args.metrics)?;
    // Only once the address is ours: a server that cannot bind leaves the
    // certificate of the one that did alone.
    if let Some(pem) = self_signed {
        let local = endpoint.local_addr().map_err(|e| e.to_string())?;
        let path = proto::store_cert(&proto::cert_dir(), local, &pem)?;
        println!(
            "Self-signed certificate for `{}` in {}",
            args.server_name,
            path.display()
        );
    }
    println!(
        "Server listening on {} (congestion control {} when sending)",
        bind, args.cc
    );
    let serving = server::serve(
        endpoint,
        args.one_off,
        board,
        shutdown_signal(),
        |finished| match finished {
            Ok(f) => println!(
                "[{}] {} {} in {:.2} s = {} (client asked {}; {} mode {})",
                f.peer,
                if f.request.reverse {
                    "sent"
                } else {
                    "received"
                },
                output::bytes(f.result.bytes),
                f.result.seconds,
                output::bits_per_second(report::rate(f.result.bytes, f.result.seconds)),
                if f.request.bytes > 0 {
                    format!("{} bytes", f.request.bytes)
                } else {
                    format!("{} s", f.request.seconds)
                },
                f.stats.controller,
                client::mode_name(&f.stats),
            ),
            Err(e) => eprintln!("ecnq-perf: test failed: {e}"),
        },
    );
    serving.await;
    Ok(())
}

async fn run_client(host: String, args: &PerfArgs) -> Result<(), String> {
    let config = client_config(&host, args).await?;
    let human = !args.json;
    if human {
        println!(
            "Connecting to host {host}, port {} ({} stream(s), {})",
            args.port, args.parallel, args.cc
        );
        if args.interval > 0.0 {
            println!("{}", output::INTERVAL_HEADER);
        }
    }
    let progress = output::Progress::new(human, args.bytes.is_none().then_some(args.time));
    let ticker = progress.spawn_ticker();
    let parallel = args.parallel;
    let mut pending: Vec<report::StreamInterval> = Vec::new();
    let runs = client::run_parallel(&config, parallel, |record| {
        if !human || args.interval <= 0.0 {
            return;
        }
        let single = (parallel == 1).then_some(record.bits_per_second);
        progress.line(&output::interval_line(&record), single);
        pending.push(record);
        if parallel > 1 && pending.len() == parallel as usize {
            let sum = Sum::of(
                &pending,
                pending[0].start,
                pending[0].end,
                pending[0].sender,
            );
            progress.line(&output::sum_line(&sum), Some(sum.bits_per_second));
            pending.clear();
        }
    })
    .await;
    if let Some(ticker) = ticker {
        ticker.abort();
    }
    progress.clear();
    let runs = runs?;
    let report = build_report(&host, args, &runs);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?
        );
    } else {
        print_ends(&runs, &report);
    }
    Ok(())
}

/// Where and how the client connects: `host` resolved, the server's
/// certificate (`--ca`, or the one a server on this machine stored) and
/// the test asked for.
async fn client_config(host: &str, args: &PerfArgs) -> Result<ClientConfig, String> {
    let server = tokio::net::lookup_host((host, args.port))
        .await
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host} has no address"))?;
    let ca = match &args.ca {
        Some(ca) => ca.clone(),
        None => proto::find_cert(&proto::cert_dir(), server)?,
    };
    Ok(ClientConfig {
        server,
        server_name: args.server_name.clone(),
        roots: proto::load_roots(&ca)?,
        cc: args.cc,
        request: TestRequest {
            version: 1,
            reverse: args.reverse,
            seconds: args.time,
            bytes: args.bytes.unwrap_or(0),
        },
        interval: Duration::from_secs_f64(if args.interval > 0.0 {
            args.interval
        } else {
            3600.0
        }),
        qlog: args.qlog.clone(),
        pause: args.pause,
        send_window: args.send_window,
        ack_every: None,
    })
}

/// iperf3's closing lines: each stream's sender and receiver totals, and
/// with several streams their sums and fairness.
fn print_ends(runs: &[client::StreamRun], report: &Report) {
    println!("- - - - - - - - - - - - - - - - - - - - - - - - -");
    for (run, end) in runs.iter().zip(&report.end.streams) {
        println!("{}", output::end_line(&run.socket.to_string(), &end.sender));
        println!(
            "{}",
            output::end_line(&run.socket.to_string(), &end.receiver)
        );
    }
    if runs.len() > 1 {
        println!("{}", output::end_line("SUM", &report.end.sum_sent));
        println!("{}", output::end_line("SUM", &report.end.sum_received));
        println!(
            "Jain's fairness index over streams: {:.3}",
            report.end.fairness
        );
    }
}

/// The iperf3-shaped report of a client run to `host`.
fn build_report(host: &str, args: &PerfArgs, runs: &[client::StreamRun]) -> Report {
    let streams: Vec<report::StreamEnd> = runs
        .iter()
        .map(|run| stream_end(run, args.reverse))
        .collect();
    let received: Vec<f64> = streams.iter().map(|s| s.receiver.bits_per_second).collect();
    Report {
        start: report_start(host, args, runs),
        intervals: Interval::group(&runs.iter().map(|r| r.intervals.clone()).collect::<Vec<_>>()),
        end: report::End {
            sum_sent: total(&streams, |s| &s.sender, true),
            sum_received: total(&streams, |s| &s.receiver, false),
            streams,
            sender_tcp_congestion: args.cc.to_string(),
            receiver_tcp_congestion: args.cc.to_string(),
            fairness: ecnq::statistics::jain_index(&received),
        },
    }
}

/// One stream's totals at both ends (the peer's from its result; which end
/// sent depends on `reverse`), its largest window and its RTTs.
fn stream_end(run: &client::StreamRun, reverse: bool) -> report::StreamEnd {
    let peer = Sum {
        start: 0.0,
        end: run.peer_result.seconds,
        seconds: run.peer_result.seconds,
        bytes: run.peer_result.bytes,
        bits_per_second: report::rate(run.peer_result.bytes, run.peer_result.seconds),
        retransmits: 0,
        sender: reverse,
    };
    let rtts: Vec<u64> = run
        .intervals
        .iter()
        .map(|i| i.rtt)
        .filter(|&r| r > 0)
        .collect();
    let (sender, receiver) = if reverse {
        (peer, run.local_total.clone())
    } else {
        (run.local_total.clone(), peer)
    };
    report::StreamEnd {
        sender,
        receiver,
        max_snd_cwnd: run.intervals.iter().map(|i| i.snd_cwnd).max().unwrap_or(0),
        min_rtt: rtts.iter().copied().min().unwrap_or(0),
        max_rtt: rtts.iter().copied().max().unwrap_or(0),
        mean_rtt: if rtts.is_empty() {
            0
        } else {
            rtts.iter().sum::<u64>() / rtts.len() as u64
        },
    }
}

/// The sum of the streams' `pick`ed totals, over the longest stream's time.
fn total(streams: &[report::StreamEnd], pick: fn(&report::StreamEnd) -> &Sum, sender: bool) -> Sum {
    let sums: Vec<&Sum> = streams.iter().map(pick).collect();
    let bytes = sums.iter().map(|s| s.bytes).sum();
    let seconds = sums.iter().map(|s| s.seconds).fold(0.0, f64::max);
    Sum {
        start: 0.0,
        end: seconds,
        seconds,
        bytes,
        bits_per_second: report::rate(bytes, seconds),
        retransmits: sums.iter().map(|s| s.retransmits).sum(),
        sender,
    }
}

/// The report's opening: who connected where, and the test asked for.
fn report_start(host: &str, args: &PerfArgs, runs: &[client::StreamRun]) -> report::Start {
    report::Start {
        connected: runs
            .iter()
            .map(|r| report::Connected {
                socket: r.socket,
                local_host: r.local.ip().to_string(),
                local_port: r.local.port(),
                remote_host: host.to_owned(),
                remote_port: args.port,
            })
            .collect(),
        version: format!("ecnq-perf {}", env!("CARGO_PKG_VERSION")),
        connecting_to: report::ConnectingTo {
            host: host.to_owned(),
            port: args.port,
        },
        test_start: report::TestStart {
            protocol: "QUIC".into(),
            num_streams: args.parallel,
            duration: if args.bytes.is_some() { 0.0 } else { args.time },
            bytes: args.bytes.unwrap_or(0),
            reverse: u8::from(args.reverse),
            congestion: args.cc.to_string(),
        },
        timesecs: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    }
}

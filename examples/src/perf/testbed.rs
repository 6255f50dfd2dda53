//! `ecnq-perf testbed`: the demo's comparison through `ecnq-shim testbed`
//! (network namespaces, one TUN shim per router, kernel forwarding), with
//! kernel TCP (iperf3 with ECN on) as extra baselines. Root only.
//!
//! The topology stays up for the whole comparison and is always removed at
//! the end, also on an error or Ctrl-C. Each run's flows go from sender
//! hosts to receiver hosts (the shims' `up` direction): ecnq-perf clients
//! and servers run in this process on threads moved into the hosts'
//! namespaces; iperf3 runs as processes there. Queue, utilization, loss and
//! load factors come from the shims' `--stats` lines.
//!
//! `--versus` adds runs where one ecnq-perf flow and one iperf3 flow share
//! the bottleneck, started together, to see how each fares against the
//! other.
//!
//! `--router bpf` runs the same comparison through the kernel's router:
//! a dual queue of htb classes on each router's up device is the
//! bottleneck (rate and buffer) and `ecnq-bpf attach` marks erc there, in
//! the kernel, from its control loop; the shims only delay (no rate, `--scheme off`), since the kernel
//! may lack netem. `--router shim,bpf` runs both, one after the other, for
//! figures side by side from one invocation.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use ecnq::quic::CongestionControl;
use ecnq::Scheme;
use ecnq_shim::link::spec::LinkSpec;
use ecnq_shim::testbed::{self as bed, namespace, Shape, Topology};
use rustls::RootCertStore;
use serde::Serialize;

use super::client::{self, StreamRun};
use super::demo::{self, DemoArgs};
use super::host::StealMeter;
use super::loopback::{
    client_config, flow_totals, summarize, Flow, FlowTotal, LinkSeries, LoopbackBed, RunResult,
    RunSummary,
};
use ecnq::statistics::FlowSeries;

/// The ecnq-perf servers' port on the receiver hosts.
const PERF_PORT: u16 = 5201;
/// iperf3 servers listen on this port plus the flow's index.
const IPERF_PORT: u16 = 5301;
/// How often the shims write a stats line.
const STATS_INTERVAL: &str = "50ms";
/// Longest wait for a server to listen.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(10);
/// How often `ecnq-bpf attach` writes a stats line, seconds (as
/// [`STATS_INTERVAL`]).
const BPF_STATS_INTERVAL: &str = "0.05";
/// Longest wait for `ecnq-bpf attach` to write its first stats line.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(10);
/// Kernel TCP congestion controls the iperf3 baselines may use.
const TCP_CONTROLS: [&str; 3] = ["reno", "cubic", "bbr"];
/// The QUIC controller a kernel TCP flow's [`Flow`] names: it only
/// schedules the flow; iperf3 runs the TCP control.
const TCP_PLACEHOLDER: CongestionControl = CongestionControl::Ecnq(Scheme::Vcp);

/// Topologies of `ecnq-perf testbed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Layout {
    /// Two sender/receiver pairs around one router: one bottleneck.
    Dumbbell,
    /// Two routers in a chain: a long flow crosses both bottlenecks, a
    /// local flow crosses each one.
    ParkingLot,
}

impl Layout {
    fn shape(self) -> Shape {
        match self {
            Layout::Dumbbell => Shape::Dumbbell(2),
            Layout::ParkingLot => Shape::ParkingLot(2),
        }
    }

    fn routers(self) -> &'static [&'static str] {
        match self {
            Layout::Dumbbell => &["rt"],
            Layout::ParkingLot => &["rt1", "rt2"],
        }
    }

    /// (sender, receiver) host pairs; flows use them in turn.
    fn paths(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Layout::Dumbbell => &[("s1", "r1"), ("s2", "r2")],
            Layout::ParkingLot => &[("s0", "r0"), ("s1", "r1"), ("s2", "r2")],
        }
    }

    fn label(self) -> &'static str {
        match self {
            Layout::Dumbbell => "dumbbell",
            Layout::ParkingLot => "parking-lot",
        }
    }
}

/// Which router marks and queues at the bottleneck.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Router {
    /// `ecnq-shim tun`: its link emulation is the bottleneck (rate, buffer,
    /// delay) and its router marks every scheme.
    Shim,
    /// The kernel: an htb dual queue on each router's up device is the
    /// bottleneck and `ecnq-bpf` marks erc there; the shim only delays.
    Bpf,
}

impl Router {
    /// Where a router's stats lines go in the testbed's state directory.
    fn log(self, router: &str) -> String {
        match self {
            Router::Shim => format!("{router}.log"),
            Router::Bpf => format!("{router}-bpf.log"),
        }
    }

    /// The folder under --out for this router's plots, on `layout`.
    fn folder(self, layout: Layout) -> String {
        match self {
            Router::Shim => format!("testbed-{}", layout.label()),
            Router::Bpf => format!("testbed-{}-bpf", layout.label()),
        }
    }
}

/// Options of `ecnq-perf testbed`.
#[derive(Args, Debug, Clone)]
pub struct TestbedArgs {
    /// The link, durations, controllers and mixed run, as for `demo`; the
    /// link is each router's (a parking lot's long flow crosses two, so its
    /// round trip is twice --rtt). Plots go to OUT/testbed-TOPOLOGY.
    #[command(flatten)]
    pub run: DemoArgs,
    /// Topology.
    #[arg(long, value_enum, default_value = "dumbbell")]
    pub topology: Layout,
    /// Kernel TCP baselines through iperf3 (ECN on), comma separated: reno,
    /// cubic, bbr; `none` for none.
    #[arg(long, value_delimiter = ',', default_value = "reno,cubic,bbr", value_parser = tcp_arg)]
    pub tcp: Vec<String>,
    /// Shared-bottleneck runs against kernel TCP, comma separated: reno,
    /// cubic, bbr; `none` (the default) for none. For each --cc controller
    /// and each TCP control named, one ecnq-perf flow (first sender/receiver
    /// pair) and one iperf3 flow (second pair) start together and send for
    /// --duration seconds (rounded to whole seconds); prints each flow's
    /// goodput and their ratio, QUIC over TCP. On the parking lot the ecnq
    /// flow is the long one and TCP is local at the first router, where the
    /// run is judged.
    #[arg(long, value_delimiter = ',', default_value = "none", value_parser = tcp_arg)]
    pub versus: Vec<String>,
    /// The routers to run the comparison through, one after the other,
    /// comma separated: shim (the TUN shim's link and marking), bpf (the
    /// kernel's htb dual queue and the ecnq-bpf program, which marks every ecnq scheme
    /// but prague; the shim only delays). Plots of bpf's go to OUT/testbed-TOPOLOGY-bpf.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "shim")]
    pub router: Vec<Router>,
    /// The `ecnq-shim` program [default: next to this one, else on PATH].
    #[arg(long, value_name = "PATH")]
    pub shim: Option<PathBuf>,
    /// The `ecnq-bpf` program, for --router bpf [default: next to this
    /// one, else on PATH].
    #[arg(long, value_name = "PATH")]
    pub bpf: Option<PathBuf>,
    /// Testbed name (namespaces are ecnq-NAME-*; at most 8 characters).
    #[arg(long, default_value = "perf")]
    pub name: String,
}

fn tcp_arg(s: &str) -> Result<String, String> {
    if s == "none" || TCP_CONTROLS.contains(&s) {
        Ok(s.to_owned())
    } else {
        Err(format!("`{s}`: expected reno, cubic, bbr or none"))
    }
}

/// One run of a comparison: flows and the paths they take.
struct Plan {
    name: String,
    flows: Vec<Flow>,
    /// Per flow: index into [`Layout::paths`].
    paths: Vec<usize>,
}

impl Plan {
    /// Splits off the flows from `at` on, with their paths, as a plan of
    /// the same name.
    fn split_off(&mut self, at: usize) -> Plan {
        Plan {
            name: self.name.clone(),
            flows: self.flows.split_off(at),
            paths: self.paths.split_off(at),
        }
    }

    /// Each flow with its index and its sender and receiver hosts.
    fn placed(
        &self,
        layout: Layout,
    ) -> impl Iterator<Item = (usize, &Flow, &'static str, &'static str)> {
        self.flows
            .iter()
            .zip(&self.paths)
            .enumerate()
            .map(move |(i, (flow, &path))| {
                let (sender, receiver) = layout.paths()[path];
                (i, flow, sender, receiver)
            })
    }
}

/// Flow `i` takes the next path: on the dumbbell the pairs take turns; on
/// the parking lot the first flow is the long one and later ones alternate
/// between the local paths.
fn plan(layout: Layout, name: &str, flows: &[Flow]) -> Plan {
    let n = layout.paths().len();
    Plan {
        name: name.to_owned(),
        flows: flows.to_vec(),
        paths: (0..flows.len())
            .map(|i| match (layout, i) {
                (Layout::Dumbbell, _) => i % n,
                (Layout::ParkingLot, 0) => 0,
                (Layout::ParkingLot, _) => 1 + (i - 1) % (n - 1),
            })
            .collect(),
    }
}

/// A single controller's run: the demo's two flows, and on the parking lot
/// a second late flow so that both bottlenecks get one.
fn single_plan(layout: Layout, args: &DemoArgs, cc: CongestionControl, name: &str) -> Plan {
    let mut flows = args.single(cc).to_vec();
    if layout == Layout::ParkingLot {
        flows.push(flows[1]);
    }
    plan(layout, name, &flows)
}

/// Runs the comparison through each `--router`. Needs root, `ecnq-shim`,
/// `ecnq-bpf` for `--router bpf` and (for `--tcp`) iperf3.
pub async fn run(args: TestbedArgs) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(
            "ecnq-perf testbed needs root (network namespaces and TUN devices); try sudo".into(),
        );
    }
    let (spec, buffer) = args.run.link()?;
    let tcp = TcpRuns {
        alone: named(&args.tcp),
        versus: named(&args.versus),
    };
    if !(tcp.alone.is_empty() && tcp.versus.is_empty()) && which("iperf3").is_none() {
        return Err(
            "iperf3 is not installed (apt install iperf3, or interop/setup-peers), or pass --tcp none and no --versus"
                .into(),
        );
    }
    let shim = match &args.shim {
        Some(path) => path.clone(),
        None => find_shim()?,
    };
    let bpf = if args.router.contains(&Router::Bpf) {
        kernel_marks_all(&args.run.cc)?;
        Some(match &args.bpf {
            Some(path) => path.clone(),
            None => find_program("ecnq-bpf", "--bpf")?,
        })
    } else {
        None
    };
    let mut routers = args.router.clone();
    routers.dedup();
    for router in routers {
        let link = Link {
            spec: &spec,
            buffer,
            router,
            bpf: bpf.as_deref(),
        };
        run_through(&args, &link, &shim, &tcp).await?;
    }
    Ok(())
}

/// Refuses ecnq controllers the kernel router does not mark
/// ([`ecnq_bpf::SCHEMES`]).
fn kernel_marks_all(cc: &[CongestionControl]) -> Result<(), String> {
    let unmarked = |c: &&CongestionControl| matches!(c, CongestionControl::Ecnq(s) if !ecnq_bpf::SCHEMES.contains(s));
    match cc.iter().find(unmarked) {
        Some(c) => {
            let marked: Vec<&str> = ecnq_bpf::SCHEMES.iter().map(|s| s.name()).collect();
            Err(format!(
                "--router bpf marks {} only, not {c}: pass --cc with those (or quinn controllers)",
                marked.join(", ")
            ))
        }
        None => Ok(()),
    }
}

/// The bottleneck link of every router and who makes it.
struct Link<'a> {
    spec: &'a LinkSpec,
    /// The buffer, bytes.
    buffer: u64,
    router: Router,
    /// The `ecnq-bpf` program, for [`Router::Bpf`].
    bpf: Option<&'a Path>,
}

impl Link<'_> {
    /// The shims' link: the whole link for [`Router::Shim`]; for
    /// [`Router::Bpf`] the delay alone, at no rate, with the default
    /// buffer (the delay line never queues).
    fn shim_spec(&self) -> LinkSpec {
        match self.router {
            Router::Shim => self.spec.clone(),
            Router::Bpf => LinkSpec {
                delay: self.spec.delay,
                ..LinkSpec::default()
            },
        }
    }

    /// The shims' arguments.
    fn shim_args(&self) -> Vec<String> {
        let mut args = vec![
            "--link".to_owned(),
            self.shim_spec().to_string(),
            "--stats".to_owned(),
            "-".to_owned(),
            "--stats-interval".to_owned(),
            STATS_INTERVAL.to_owned(),
        ];
        if self.router == Router::Bpf {
            args.extend(["--scheme".to_owned(), "off".to_owned()]);
        }
        args
    }
}

/// Builds the testbed for `link.router`, runs the comparison on it and
/// removes it (also on an error or Ctrl-C), then reports.
async fn run_through(
    args: &TestbedArgs,
    link: &Link<'_>,
    shim: &Path,
    tcp: &TcpRuns,
) -> Result<(), String> {
    let topology = Topology::new(&args.name, args.topology.shape())?;
    let out = args.run.out.join(link.router.folder(args.topology));
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    println!(
        "ecnq-perf testbed {} through the {}: {} Mbit/s per router, RTT {} ms per router, buffer {} KB, {} s per controller; plots in {}",
        args.topology.label(),
        match link.router {
            Router::Shim => "TUN shim",
            Router::Bpf => "kernel router (htb dual queue, ecnq-bpf)",
        },
        args.run.rate as f64 / 1e6,
        args.run.rtt.as_millis(),
        link.buffer / 1000,
        args.run.duration,
        out.display()
    );
    bed::up(&topology, shim, &link.shim_args())?;
    let kernel = match link.bpf.filter(|_| link.router == Router::Bpf) {
        Some(bpf) => match KernelRouters::attach(args, link, bpf) {
            Ok(kernel) => Some(kernel),
            Err(e) => {
                let _ = bed::down(&args.name);
                return Err(e);
            }
        },
        None => None,
    };
    // The comparison runs on its own thread so that Ctrl-C can interrupt it;
    // either way the testbed goes.
    let (done, finished) = tokio::sync::oneshot::channel();
    let (plots, spec, router) = (out.clone(), link.spec.clone(), link.router);
    let (args_copy, topology_copy, tcp_copy) = (args.clone(), topology.clone(), tcp.clone());
    thread::spawn(move || {
        let runs = (&args_copy, &topology_copy, &spec, router);
        let _ = done.send(compare(runs, &tcp_copy, &plots));
    });
    let outcome = tokio::select! {
        result = finished => result.unwrap_or_else(|_| Err("the comparison panicked".into())),
        _ = tokio::signal::ctrl_c() => {
            eprintln!();
            Err("interrupted; the testbed is removed".into())
        }
    };
    let removed = bed::down(&args.name);
    if let Some(kernel) = kernel {
        kernel.reap();
    }
    let comparison = outcome?;
    removed.map_err(|e| format!("removing the testbed: {e}"))?;
    comparison.report(&out)
}

/// The `ecnq-bpf attach` processes of a testbed's routers. `bed::down`
/// stops them (SIGTERM to every process of its namespaces: each takes its
/// program off its device); [`KernelRouters::reap`] then collects them.
struct KernelRouters(Vec<Child>);

impl KernelRouters {
    /// On each router of `args.topology`: a [`dual_queue`] at the link's
    /// rate and buffer on the up device, and `ecnq-bpf attach` on it, writing its
    /// stats lines to the state directory; waits for each one's first.
    fn attach(args: &TestbedArgs, link: &Link<'_>, bpf: &Path) -> Result<KernelRouters, String> {
        let rate = link.spec.rate.unwrap_or(args.run.rate);
        // The program marks single packets only (a GSO batch's segments
        // would need marks of their own): the senders send single packets,
        // as a wire delivers them, not a batch per system call.
        for &(sender, _) in args.topology.paths() {
            let ns = namespace(&args.name, sender);
            let device = bed::HOST_DEVICE;
            run_in(
                &ns,
                "ip",
                &["link", "set", "dev", device, "gso_max_segs", "1"],
            )?;
        }
        let mut children = KernelRouters(Vec::new());
        for router in args.topology.routers() {
            let ns = namespace(&args.name, router);
            for command in dual_queue(rate, link.buffer) {
                let words: Vec<&str> = command.split(' ').collect();
                run_in(&ns, "tc", &words)?;
            }
            let path = bed::state_dir(&args.name).join(Router::Bpf.log(router));
            let log = std::fs::File::create(&path)
                .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
            let err_log = log.try_clone().map_err(|e| e.to_string())?;
            let child = Command::new("ip")
                .args(["netns", "exec", &ns])
                .arg(bpf)
                .args(["attach", "--dev", bed::UP_DEVICE, "--stats"])
                .arg(BPF_STATS_INTERVAL)
                .arg(format!("--rate={rate}bit"))
                .arg(format!("--ecnq-class={ECNQ_CLASS}"))
                .arg(format!("--ecnq-rate={}bit", rate / 2))
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(err_log)
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", bpf.display()))?;
            children.0.push(child);
            wait_first_line(&path, children.0.last_mut().expect("just pushed"))?;
        }
        Ok(children)
    }

    /// Waits for the stopped processes.
    fn reap(mut self) {
        for child in &mut self.0 {
            let _ = child.wait();
        }
    }
}

/// The dual queue's ecnq class; [`CLASSIC_CLASS`] is the other.
const ECNQ_CLASS: &str = "1:10";
/// The htb class that untagged traffic queues in.
const CLASSIC_CLASS: &str = "1:20";

/// The tc commands that make a router's up device a dual queue at
/// `rate_bps`, as the shim's default `--queue dual` is one: an htb whose
/// two leaves, a byte FIFO of `buffer` bytes each, share the rate, each
/// guaranteed half and lent what the other leaves. The ecnq-bpf program
/// puts ecnq-tagged packets in [`ECNQ_CLASS`]; the rest go to
/// [`CLASSIC_CLASS`]. htb's bucket: 2 ms at the rate, at least two
/// full-size packets (a deeper one lets bursts through unqueued).
fn dual_queue(rate_bps: u64, buffer: u64) -> Vec<String> {
    let dev = bed::UP_DEVICE;
    let burst = (rate_bps / 8 / 500).max(2 * 1514);
    let shape =
        |rate: u64| format!("rate {rate}bit ceil {rate_bps}bit burst {burst} cburst {burst}");
    let default = CLASSIC_CLASS.split(':').nth(1).unwrap_or_default();
    let mut commands = vec![
        format!("qdisc replace dev {dev} root handle 1: htb default {default}"),
        format!(
            "class add dev {dev} parent 1: classid 1:1 htb {}",
            shape(rate_bps)
        ),
    ];
    for class in [ECNQ_CLASS, CLASSIC_CLASS] {
        commands.push(format!(
            "class add dev {dev} parent 1:1 classid {class} htb {}",
            shape(rate_bps / 2)
        ));
        commands.push(format!(
            "qdisc add dev {dev} parent {class} bfifo limit {buffer}"
        ));
    }
    commands
}

/// Waits until `ecnq-bpf attach` writes its first stats line to `log`;
/// fails with its log when it exits first or takes longer than
/// [`ATTACH_TIMEOUT`].
fn wait_first_line(log: &Path, child: &mut Child) -> Result<(), String> {
    let deadline = Instant::now() + ATTACH_TIMEOUT;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.lines().any(|l| l.starts_with('{')) {
            return Ok(());
        }
        let exited = child.try_wait().ok().flatten();
        if exited.is_some() || Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "ecnq-bpf attach did not start: {}",
                text.trim().lines().last().unwrap_or("no output")
            ));
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `program` in namespace `ns`; errors carry its stderr.
fn run_in(ns: &str, program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, program])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "`{program} {}` in {ns} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

/// The TCP controls named in a `--tcp` or `--versus` list (`none` dropped).
fn named(list: &[String]) -> Vec<String> {
    list.iter().filter(|t| *t != "none").cloned().collect()
}

/// The kernel TCP controls to run: alone (`--tcp`) and against each
/// ecnq-perf controller (`--versus`).
#[derive(Clone)]
struct TcpRuns {
    alone: Vec<String>,
    versus: Vec<String>,
}

/// What a comparison measured.
struct Comparison {
    /// The table's rows: each controller's run, the mixed run, kernel TCP's.
    runs: Vec<RunSummary>,
    /// The shared-bottleneck runs.
    pairings: Vec<Pairing>,
}

/// A row of summary.json.
#[derive(Serialize)]
#[serde(untagged)]
enum Row<'a> {
    Run(&'a RunSummary),
    Versus(&'a Pairing),
}

impl Comparison {
    /// Prints the table and the pairings; writes every row to summary.json.
    fn report(&self, out: &Path) -> Result<(), String> {
        let mut notes = Vec::new();
        if !self.pairings.is_empty() {
            notes.push(
                "\nshared bottleneck, ecnq-perf flow / kernel TCP flow (ratio: QUIC over TCP):"
                    .to_owned(),
            );
            notes.extend(self.pairings.iter().map(Pairing::line));
        }
        let rows: Vec<Row> = (self.runs.iter().map(Row::Run))
            .chain(self.pairings.iter().map(Row::Versus))
            .collect();
        demo::report_rows(&self.runs, &notes, &rows, out)
    }
}

/// A `--versus` run: an ecnq-perf flow (the row's first) and a kernel TCP
/// flow (its second) through one bottleneck at the same time.
#[derive(Serialize)]
struct Pairing {
    #[serde(flatten)]
    run: RunSummary,
    versus: Versus,
}

/// The figures a pairing adds to its row in summary.json.
#[derive(Serialize)]
struct Versus {
    /// The ecnq-perf flow's controller.
    quic: String,
    /// The iperf3 flow's (`tcp-cubic`, …).
    tcp: String,
    /// The QUIC flow's goodput, Mbit/s.
    quic_mbit: f64,
    /// The TCP flow's goodput, Mbit/s.
    tcp_mbit: f64,
    /// The QUIC flow's goodput over the TCP flow's; None when TCP moved nothing.
    ratio: Option<f64>,
}

impl Pairing {
    /// The pairing of a run whose flows are the QUIC one, then the TCP one.
    fn new(run: RunSummary) -> Pairing {
        let flow = |i: usize| run.flows.get(i).cloned().unwrap_or_default();
        let ((quic, quic_mbit), (tcp, tcp_mbit)) = (flow(0), flow(1));
        let ratio = (tcp_mbit > 0.0).then(|| quic_mbit / tcp_mbit);
        Pairing {
            versus: Versus {
                quic,
                tcp,
                quic_mbit,
                tcp_mbit,
                ratio,
            },
            run,
        }
    }

    /// Goodputs (Mbit/s), their ratio and the bottleneck's figures.
    fn line(&self) -> String {
        let (v, r) = (&self.versus, &self.run);
        let mut line = format!(
            "{:<20} {:>5.1} / {:>5.1} Mb/s  ratio {:>5}  util {:>5.1}%  queue p50 {:.1} ms p99 {:.1} ms  loss {:.2}%",
            format!("{} vs {}", v.quic, v.tcp),
            v.quic_mbit,
            v.tcp_mbit,
            v.ratio.map_or("n/a".to_owned(), |x| format!("{x:.2}")),
            r.utilization * 100.0,
            r.queue_p50_ms,
            r.queue_p99_ms,
            r.loss * 100.0,
        );
        if r.unjoined.contains(&1) {
            line.push_str("  (the QUIC flow never got in)");
        }
        line
    }
}

/// Every run, one after another, on a testbed that is up with `router`
/// making each bottleneck of `spec`.
fn compare(
    (args, topology, spec, router): (&TestbedArgs, &Topology, &LinkSpec, Router),
    tcp: &TcpRuns,
    out: &Path,
) -> Result<Comparison, String> {
    let layout = args.topology;
    for host in layout.paths().iter().flat_map(|&(s, r)| [s, r]) {
        sysctl(&namespace(&args.name, host), "net.ipv4.tcp_ecn=1")?;
    }
    let servers = PerfServers::start(&args.name, topology, layout)?;
    let bed = Bed {
        name: &args.name,
        topology,
        layout,
        logs: ShimLogs::new(&args.name, layout, spec, router),
        out,
    };
    let plans = quic_plans(args);
    let tcp_plans = tcp_plans(args, &tcp.alone);
    let pairs: Vec<(CongestionControl, &String)> = (args.run.cc.iter())
        .flat_map(|&cc| tcp.versus.iter().map(move |t| (cc, t)))
        .collect();
    let mut progress = Progress::new(plans.len() + tcp_plans.len() + pairs.len());
    let mut runs = Vec::new();
    for plan in &plans {
        progress.begin(&plan.name);
        runs.push(progress.end(bed.quic_run(plan, &servers)?));
    }
    for (cc, plan) in &tcp_plans {
        progress.begin(&plan.name);
        runs.push(progress.end(bed.tcp_run(plan, cc)?));
    }
    let mut pairings = Vec::new();
    for (cc, tcp) in pairs {
        progress.begin(&format!("{cc} vs tcp-{tcp}"));
        let seconds = whole_seconds(args.run.duration);
        let pairing = Pairing::new(bed.versus_run(cc, tcp, seconds, &servers)?);
        let v = &pairing.versus;
        eprintln!(" {:.1} / {:.1} Mbit/s", v.quic_mbit, v.tcp_mbit);
        pairings.push(pairing);
    }
    servers.stop();
    Ok(Comparison { runs, pairings })
}

/// Each --cc controller's run, then the mixed run.
fn quic_plans(args: &TestbedArgs) -> Vec<Plan> {
    let layout = args.topology;
    let mut plans: Vec<Plan> = (args.run.cc.iter())
        .map(|&cc| single_plan(layout, &args.run, cc, cc.name()))
        .collect();
    if let Some(flows) = args.run.mixed() {
        plans.push(plan(layout, "mixed", &flows));
    }
    plans
}

/// Each kernel TCP control's run alone, as a controller's.
fn tcp_plans(args: &TestbedArgs, tcp: &[String]) -> Vec<(String, Plan)> {
    tcp.iter()
        .map(|name| {
            let run = &args.run;
            let mut plan = single_plan(args.topology, run, TCP_PLACEHOLDER, &format!("tcp-{name}"));
            for flow in &mut plan.flows {
                flow.seconds = whole_seconds(flow.seconds);
            }
            (name.clone(), plan)
        })
        .collect()
}

/// iperf3 sends for whole seconds.
fn whole_seconds(seconds: f64) -> f64 {
    seconds.round().max(1.0)
}

/// The runs' progress on stderr: `[3/7] name … 40.1 Mbit/s`.
struct Progress {
    done: usize,
    total: usize,
}

impl Progress {
    fn new(total: usize) -> Progress {
        Progress { done: 0, total }
    }

    fn begin(&mut self, name: &str) {
        self.done += 1;
        eprint!("  [{}/{}] {name:<9} …", self.done, self.total);
    }

    fn end(&self, run: RunSummary) -> RunSummary {
        eprintln!(" {:.1} Mbit/s", run.goodput_mbit);
        run
    }
}

/// A testbed that is up, and where its runs' plots go.
struct Bed<'a> {
    name: &'a str,
    topology: &'a Topology,
    layout: Layout,
    logs: ShimLogs,
    out: &'a Path,
}

impl Bed<'_> {
    /// The ecnq-perf flows of `plan`.
    fn quic_run(&self, plan: &Plan, servers: &PerfServers) -> Result<RunSummary, String> {
        let (mark, steal) = (self.logs.mark()?, StealMeter::start());
        let (runs, elapsed) = run_quic(self.name, self.layout, plan, servers, soon())?;
        let links = self.logs.since(&mark)?;
        let (totals, series) = quic_flows(&plan.flows, runs);
        self.summarize(&plan.name, &totals, &series, &links[0], elapsed, steal)
    }

    /// The iperf3 flows of `plan`, with TCP congestion control `cc`.
    fn tcp_run(&self, plan: &Plan, cc: &str) -> Result<RunSummary, String> {
        let (mark, steal) = (self.logs.mark()?, StealMeter::start());
        let (totals, series, elapsed) = run_tcp(self.name, self.topology, self.layout, plan, cc)?;
        let links = self.logs.since(&mark)?;
        self.summarize(&plan.name, &totals, &series, &links[0], elapsed, steal)
    }

    /// One ecnq-perf flow of `cc` on the first path and one iperf3 flow of
    /// `tcp` on the second, started together, each sending for `seconds`.
    /// The row's flows are the QUIC one, then the TCP one.
    fn versus_run(
        &self,
        cc: CongestionControl,
        tcp: &str,
        seconds: f64,
        servers: &PerfServers,
    ) -> Result<RunSummary, String> {
        let name = format!("{cc}-vs-tcp-{tcp}");
        let flow = |cc| Flow {
            cc,
            offset: 0.0,
            seconds,
        };
        let mut quic = plan(self.layout, &name, &[flow(cc), flow(TCP_PLACEHOLDER)]);
        let kernel = quic.split_off(1);
        let (mark, steal) = (self.logs.mark()?, StealMeter::start());
        let iperf = IperfServers::start(self.name, self.layout, &kernel)?;
        let start = soon();
        let (quic_side, tcp_side) = thread::scope(|s| {
            let quic_side = s.spawn(|| run_quic(self.name, self.layout, &quic, servers, start));
            let tcp_side = run_iperf3(self.name, self.topology, self.layout, &kernel, tcp, start);
            (quic_side.join(), tcp_side)
        });
        drop(iperf);
        let (runs, quic_elapsed) = quic_side.map_err(|_| "the ecnq-perf flow panicked")??;
        let (tcp_totals, tcp_series, tcp_elapsed) = tcp_side?;
        let links = self.logs.since(&mark)?;
        let (mut totals, mut series) = quic_flows(&quic.flows, runs);
        totals.extend(tcp_totals);
        series.extend(tcp_series);
        let elapsed = quic_elapsed.max(tcp_elapsed);
        self.summarize(&name, &totals, &series, &links[0], elapsed, steal)
    }

    /// Plots a run and returns its row, judged at the first router, with
    /// the host's steal since `steal` started.
    fn summarize(
        &self,
        name: &str,
        totals: &[FlowTotal],
        series: &[FlowSeries],
        link: &LinkSeries,
        elapsed: f64,
        steal: StealMeter,
    ) -> Result<RunSummary, String> {
        let labels: Vec<String> = totals.iter().map(|t| t.label.clone()).collect();
        demo::plot_run(name, &labels, series, link, self.out)?;
        Ok(summarize(
            name,
            totals,
            series,
            link,
            elapsed,
            steal.fraction(),
        ))
    }
}

/// A run's start: a moment from now, for every flow's thread to be ready.
fn soon() -> Instant {
    Instant::now() + Duration::from_millis(100)
}

/// The totals and sending-rate series of ecnq-perf flows `flows` whose
/// client runs came back as `runs` (as [`RunResult::summary`] counts them).
fn quic_flows(flows: &[Flow], runs: Vec<Option<StreamRun>>) -> (Vec<FlowTotal>, Vec<FlowSeries>) {
    let totals = flow_totals(flows, &runs);
    (totals, RunResult::new(flows, runs, 0.0, Vec::new()).series)
}

/// The routers' logs, where their stats lines go: the shims' `--stats -`,
/// or `ecnq-bpf attach`'s, which carry the same names.
struct ShimLogs {
    paths: Vec<PathBuf>,
    spec: LinkSpec,
}

impl ShimLogs {
    fn new(testbed: &str, layout: Layout, spec: &LinkSpec, router: Router) -> ShimLogs {
        let dir = bed::state_dir(testbed);
        ShimLogs {
            paths: layout
                .routers()
                .iter()
                .map(|r| dir.join(router.log(r)))
                .collect(),
            spec: spec.clone(),
        }
    }

    /// How long each log is now.
    fn mark(&self) -> Result<Vec<u64>, String> {
        self.paths
            .iter()
            .map(|p| {
                std::fs::metadata(p)
                    .map(|m| m.len())
                    .map_err(|e| format!("cannot read {}: {e}", p.display()))
            })
            .collect()
    }

    /// Each router's link series written after `mark`, timed from its first
    /// sample (within one stats interval of the run's start).
    fn since(&self, mark: &[u64]) -> Result<Vec<LinkSeries>, String> {
        // Let the shims write the samples that cover the run's end.
        thread::sleep(Duration::from_millis(150));
        self.paths
            .iter()
            .zip(mark)
            .map(|(path, &from)| {
                let text = std::fs::read(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                let new = text.get(from as usize..).unwrap_or_default();
                let series = LinkSeries::parse(&String::from_utf8_lossy(new), &self.spec).rebased();
                if series.samples.is_empty() {
                    return Err(format!("the router wrote no stats to {}", path.display()));
                }
                Ok(series)
            })
            .collect()
    }
}

/// Runs `task` on a new thread inside namespace `ns`, on a runtime of its own.
pub fn spawn_in<T, F, Fut>(ns: String, task: F) -> JoinHandle<Result<T, String>>
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, String>>,
{
    thread::spawn(move || {
        bed::enter(&ns).map_err(|e| format!("cannot enter {ns}: {e}"))?;
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime: {e}"))?
            .block_on(task())
    })
}

/// ecnq-perf servers (an ecnq peer each) on the receiver hosts.
pub struct PerfServers {
    /// Per receiver host: where its server listens and the roots that trust it.
    pub servers: Vec<(SocketAddr, RootCertStore)>,
    stops: Vec<tokio::sync::oneshot::Sender<()>>,
}

impl PerfServers {
    /// Starts a server on every receiver host of `layout`.
    fn start(testbed: &str, topology: &Topology, layout: Layout) -> Result<PerfServers, String> {
        let hosts: Vec<&str> = layout.paths().iter().map(|&(_, r)| r).collect();
        PerfServers::on(testbed, topology, &hosts)
    }

    /// Starts a server on each of `hosts`.
    pub fn on(testbed: &str, topology: &Topology, hosts: &[&str]) -> Result<PerfServers, String> {
        let mut servers = PerfServers {
            servers: Vec::new(),
            stops: Vec::new(),
        };
        for host in hosts {
            let addr: SocketAddr = format!("{}:{PERF_PORT}", host_addr(topology, host)?)
                .parse()
                .map_err(|e| format!("bad address of {host}: {e}"))?;
            let (ready, listening) = mpsc::channel();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            spawn_in(namespace(testbed, host), move || async move {
                let started =
                    LoopbackBed::start_at(addr, CongestionControl::Ecnq(Scheme::Vcp)).await;
                let roots = started.as_ref().map(|s| s.roots().clone());
                let _ = ready.send(roots.map_err(String::clone));
                let _server = started?;
                let _ = stopped.await;
                Ok(())
            });
            let roots = listening
                .recv_timeout(LISTEN_TIMEOUT)
                .map_err(|_| format!("the ecnq-perf server on {host} did not start"))??;
            servers.servers.push((addr, roots));
            servers.stops.push(stop);
        }
        Ok(servers)
    }

    /// Stops every server.
    pub fn stop(self) {
        for stop in self.stops {
            let _ = stop.send(());
        }
    }
}

fn host_addr(topology: &Topology, host: &str) -> Result<String, String> {
    topology
        .host_addr(host)
        .ok_or_else(|| format!("the topology has no host {host}"))
}

/// The ecnq-perf flows of `plan`, timed from `start`; returns their client
/// records (None for a flow that never got in) and the seconds from `start`
/// to the last end.
fn run_quic(
    testbed: &str,
    layout: Layout,
    plan: &Plan,
    servers: &PerfServers,
    start: Instant,
) -> Result<(Vec<Option<StreamRun>>, f64), String> {
    let receivers: Vec<&str> = layout.paths().iter().map(|&(_, r)| r).collect();
    let tasks: Vec<_> = plan
        .placed(layout)
        .map(|(i, flow, sender, receiver)| {
            let index = receivers.iter().position(|r| *r == receiver).unwrap_or(0);
            let (server, roots) = &servers.servers[index];
            let config = client_config(*server, roots, flow.cc, flow.seconds);
            let at = start + Duration::from_secs_f64(flow.offset);
            let end = at + Duration::from_secs_f64(flow.seconds);
            spawn_in(namespace(testbed, sender), move || async move {
                tokio::time::sleep_until(at.into()).await;
                client::run_scheduled(&config, i as u32 + 1, end.into()).await
            })
        })
        .collect();
    let mut runs = Vec::new();
    for task in tasks {
        runs.push(task.join().map_err(|_| "a flow panicked".to_owned())??);
    }
    Ok((runs, start.elapsed().as_secs_f64()))
}

/// What iperf3 flows measured: each flow's total, its sending rate over
/// time, and the seconds from the start to the last end.
type TcpResult = (Vec<FlowTotal>, Vec<FlowSeries>, f64);

/// The iperf3 flows of `plan` with TCP congestion control `cc`.
fn run_tcp(
    testbed: &str,
    topology: &Topology,
    layout: Layout,
    plan: &Plan,
    cc: &str,
) -> Result<TcpResult, String> {
    let _servers = IperfServers::start(testbed, layout, plan)?;
    run_iperf3(testbed, topology, layout, plan, cc, soon())
}

/// iperf3 servers for a plan's flows (flow `i` on port [`IPERF_PORT`] + `i`
/// of its receiver host), killed when dropped.
struct IperfServers(Vec<Child>);

impl IperfServers {
    /// Starts them and waits until each listens.
    fn start(testbed: &str, layout: Layout, plan: &Plan) -> Result<IperfServers, String> {
        let mut servers = IperfServers(Vec::new());
        for (i, _, _, receiver) in plan.placed(layout) {
            let receiver = namespace(testbed, receiver);
            let port = (IPERF_PORT + i as u16).to_string();
            servers.0.push(
                Command::new("ip")
                    .args([
                        "netns", "exec", &receiver, "iperf3", "-s", "-1", "-p", &port,
                    ])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .map_err(|e| format!("cannot start iperf3: {e}"))?,
            );
            wait_listening(&receiver, &port)?;
        }
        Ok(servers)
    }
}

impl Drop for IperfServers {
    fn drop(&mut self) {
        for server in &mut self.0 {
            let _ = server.kill();
            let _ = server.wait();
        }
    }
}

/// The iperf3 clients of `plan` (its servers listening), timed from `start`.
fn run_iperf3(
    testbed: &str,
    topology: &Topology,
    layout: Layout,
    plan: &Plan,
    cc: &str,
    start: Instant,
) -> Result<TcpResult, String> {
    let tasks: Vec<JoinHandle<Result<String, String>>> = plan
        .placed(layout)
        .map(|(i, flow, sender, receiver)| {
            let sender = namespace(testbed, sender);
            let to = host_addr(topology, receiver);
            let port = (IPERF_PORT + i as u16).to_string();
            let (at, seconds, cc) = (
                start + Duration::from_secs_f64(flow.offset),
                format!("{}", flow.seconds),
                cc.to_owned(),
            );
            thread::spawn(move || {
                let to = to?;
                thread::sleep(at.saturating_duration_since(Instant::now()));
                let args = [
                    "netns", "exec", &sender, "iperf3", "-c", &to, "-p", &port, "-t", &seconds,
                    "-C", &cc, "-J", "-i", "0.25",
                ];
                let out = Command::new("ip")
                    .args(args)
                    .stdin(Stdio::null())
                    .output()
                    .map_err(|e| format!("cannot run iperf3: {e}"))?;
                Ok(String::from_utf8_lossy(&out.stdout).into_owned())
            })
        })
        .collect();
    let mut totals = Vec::new();
    let mut series = Vec::new();
    for (task, flow) in tasks.into_iter().zip(&plan.flows) {
        let json = task
            .join()
            .map_err(|_| "an iperf3 flow panicked".to_owned())??;
        let (total, samples) = parse_iperf3(&json, cc, flow)?;
        totals.push(total);
        series.push(samples);
    }
    Ok((totals, series, start.elapsed().as_secs_f64()))
}

/// A flow's total and sending-rate series from iperf3's `-J` report.
fn parse_iperf3(json: &str, cc: &str, flow: &Flow) -> Result<(FlowTotal, FlowSeries), String> {
    let report: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("iperf3 printed no JSON report: {e}"))?;
    if let Some(error) = report["error"].as_str() {
        return Err(format!("iperf3: {error}"));
    }
    let received = report["end"]["sum_received"]["bytes"]
        .as_u64()
        .ok_or("iperf3's report has no end.sum_received.bytes")?;
    let samples = report["intervals"]
        .as_array()
        .map(|intervals| {
            intervals
                .iter()
                .filter_map(|i| {
                    let sum = &i["sum"];
                    Some((
                        flow.offset + sum["end"].as_f64()?,
                        sum["bits_per_second"].as_f64()?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    Ok((
        FlowTotal {
            label: format!("tcp-{cc}"),
            seconds: flow.seconds,
            received,
            joined: true,
        },
        FlowSeries {
            start: flow.offset,
            samples,
        },
    ))
}

/// Waits until a TCP server listens on `port` in namespace `ns`.
fn wait_listening(ns: &str, port: &str) -> Result<(), String> {
    let deadline = Instant::now() + LISTEN_TIMEOUT;
    let filter = format!("sport = :{port}");
    while Instant::now() < deadline {
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "ss", "-Hltn", &filter])
            .stderr(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run ss: {e}"))?;
        if !out.stdout.is_empty() {
            return Ok(());
        }
        thread::sleep(Duration::from_millis(20));
    }
    Err(format!("iperf3 did not listen on port {port} in {ns}"))
}

fn sysctl(ns: &str, setting: &str) -> Result<(), String> {
    let ok = Command::new("ip")
        .args(["netns", "exec", ns, "sysctl", "-qw", setting])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(())
        .ok_or_else(|| format!("cannot set {setting} in {ns}"))
}

/// A program on PATH.
fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    })
}

/// `ecnq-shim` next to this program (or one directory up, for test
/// binaries in `deps/`), else on PATH.
pub fn find_shim() -> Result<PathBuf, String> {
    find_program("ecnq-shim", "--shim")
}

/// `program` (built by the package of its name) next to this program (or
/// one directory up, for test binaries in `deps/`), else on PATH; the
/// error names `option`, which gives its path.
pub fn find_program(program: &str, option: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .or_else(|| which(program))
        .ok_or_else(|| {
            format!(
                "cannot find {program}: build it (cargo build --release -p {program}) or pass {option} PATH"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: TestbedArgs,
    }

    fn args(extra: &[&str]) -> TestbedArgs {
        Cli::try_parse_from(std::iter::once("testbed").chain(extra.iter().copied()))
            .unwrap()
            .args
    }

    #[test]
    fn parking_lot_runs_the_long_flow_first_and_a_late_flow_per_bottleneck() {
        let a = args(&["--topology", "parking-lot", "--duration", "9"]);
        let cc = CongestionControl::Ecnq(Scheme::Vcp);
        let p = single_plan(a.topology, &a.run, cc, "vcp");
        assert_eq!(p.paths, [0, 1, 2]);
        let offsets: Vec<f64> = p.flows.iter().map(|f| f.offset).collect();
        assert_eq!(offsets, [0.0, 3.0, 3.0]);
        let d = single_plan(Layout::Dumbbell, &a.run, cc, "vcp");
        assert_eq!(d.paths, [0, 1]);
        // The mixed run alternates the senders' routers; on a parking lot
        // the long flow comes first, then one flow per bottleneck in turn.
        let flows = a.run.mixed().unwrap();
        let mixed = plan(Layout::Dumbbell, "mixed", &flows);
        let alternating: Vec<usize> = (0..flows.len()).map(|i| i % 2).collect();
        assert_eq!(mixed.paths, alternating);
        let mixed = plan(Layout::ParkingLot, "mixed", &flows);
        let lot: Vec<usize> = (0..flows.len())
            .map(|i| if i == 0 { 0 } else { 2 - i % 2 })
            .collect();
        assert_eq!(mixed.paths, lot);
    }

    #[test]
    fn the_kernel_router_takes_the_schemes_it_marks_and_quinn_controllers() {
        let routers = args(&["--router", "shim,bpf"]).router;
        assert_eq!(routers, [Router::Shim, Router::Bpf]);
        let cc = |names: &[&str]| -> Vec<CongestionControl> {
            names.iter().map(|n| n.parse().unwrap()).collect()
        };
        assert!(kernel_marks_all(&cc(&["erc", "vcp", "mcp", "bmcc", "cubic"])).is_ok());
        let refused = kernel_marks_all(&cc(&["erc", "prague"])).unwrap_err();
        assert!(refused.contains("prague"), "{refused}");
    }

    #[test]
    fn tcp_options_are_checked() {
        assert_eq!(args(&[]).tcp, ["reno", "cubic", "bbr"]);
        assert_eq!(args(&["--tcp", "none"]).tcp, ["none"]);
        assert!(named(&args(&[]).versus).is_empty());
        assert_eq!(
            named(&args(&["--versus", "cubic,bbr"]).versus),
            ["cubic", "bbr"]
        );
        for option in ["--tcp", "--versus"] {
            let err = Cli::try_parse_from(["testbed", option, "vegas"])
                .err()
                .unwrap()
                .to_string();
            assert!(err.contains("expected reno, cubic, bbr or none"), "{err}");
        }
    }

    #[test]
    fn versus_runs_put_quic_and_tcp_on_different_pairs_of_one_bottleneck() {
        let flow = Flow {
            cc: CongestionControl::Ecnq(Scheme::Erc),
            offset: 0.0,
            seconds: whole_seconds(4.4),
        };
        for layout in [Layout::Dumbbell, Layout::ParkingLot] {
            let mut quic = plan(layout, "erc-vs-tcp-cubic", &[flow, flow]);
            let tcp = quic.split_off(1);
            assert_eq!((quic.paths, tcp.paths), (vec![0], vec![1]));
            assert_eq!((quic.flows.len(), tcp.flows[0].seconds), (1, 4.0));
        }
    }

    fn pairing(quic_mbit: f64, tcp_mbit: f64, unjoined: Vec<usize>) -> Pairing {
        Pairing::new(RunSummary {
            name: "erc-vs-tcp-cubic".into(),
            goodput_mbit: quic_mbit + tcp_mbit,
            utilization: 0.952,
            capacity_varies: false,
            queue_p50_ms: 1.0,
            queue_p95_ms: 2.0,
            queue_p99_ms: 3.0,
            loss: 0.001,
            jain: 1.0,
            converge_s: None,
            flows: vec![("erc".into(), quic_mbit), ("tcp-cubic".into(), tcp_mbit)],
            unjoined,
            host_steal: None,
        })
    }

    #[test]
    fn pairings_report_each_goodput_and_their_ratio() {
        let p = pairing(23.1, 22.0, vec![]);
        assert!((p.versus.ratio.unwrap() - 1.05).abs() < 1e-9);
        let line = p.line();
        assert!(line.starts_with("erc vs tcp-cubic"), "{line}");
        assert!(
            line.contains("23.1 /  22.0 Mb/s  ratio  1.05  util  95.2%"),
            "{line}"
        );
        let json = serde_json::to_value(Row::Versus(&p)).unwrap();
        assert_eq!(json["name"], "erc-vs-tcp-cubic");
        assert_eq!(json["versus"]["tcp"], "tcp-cubic");
        assert_eq!(json["versus"]["quic_mbit"], 23.1);
        let regular = serde_json::to_value(Row::Run(&p.run)).unwrap();
        assert!(regular.get("versus").is_none());
        let starved = pairing(0.0, 40.0, vec![1]);
        assert_eq!(starved.versus.ratio, Some(0.0));
        assert!(starved.line().ends_with("(the QUIC flow never got in)"));
        let line = pairing(40.0, 0.0, vec![]).line();
        assert!(line.contains("ratio   n/a"), "{line}");
    }

    #[test]
    fn iperf3_reports_become_flow_totals() {
        let flow = Flow {
            cc: CongestionControl::Cubic,
            offset: 2.0,
            seconds: 4.0,
        };
        let json = r#"{"intervals":[{"sum":{"end":0.25,"bits_per_second":8e6}},
            {"sum":{"end":0.5,"bits_per_second":9e6}}],
            "end":{"sum_received":{"bytes":5000000}}}"#;
        let (total, series) = parse_iperf3(json, "cubic", &flow).unwrap();
        assert_eq!(total.label, "tcp-cubic");
        assert_eq!(total.received, 5_000_000);
        assert_eq!(series.samples, [(2.25, 8e6), (2.5, 9e6)]);
        let err = parse_iperf3(r#"{"error":"unable to connect"}"#, "reno", &flow).unwrap_err();
        assert_eq!(err, "iperf3: unable to connect");
        assert!(parse_iperf3("", "reno", &flow).is_err());
    }
}

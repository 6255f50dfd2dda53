//! `ecnq-shim`: the ecnq router shim command line.

use std::fs::File;
use std::io::{self, BufWriter};
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Arg, ArgAction, ArgMatches, Command};
use ecnq::bottleneck::Discipline;
use ecnq::router::{MarkingMode, RouterConfig};
use ecnq::{FlowTableConfig, Scheme};

use ecnq_shim::link::router_config;
use ecnq_shim::link::Direction;
use ecnq_shim::observe::{PcapWriter, SnapshotBoard};
use ecnq_shim::pump::Observers;
use ecnq_shim::relay::{raise_fd_limit, sessions_within, Relay, RelayConfig, RelayReport};
use ecnq_shim::sessions::SessionLimits;
use ecnq_shim::shutdown_signal;
use ecnq_shim::spec::{parse_rate, parse_size, parse_time, LinkSpec};
use ecnq_shim::stats::{LinkSnapshot, StatsSink};
use ecnq_shim::testbed::{self, name_of, Shape, Topology};
use ecnq_shim::tun::{TunConfig, TunShim};

const ABOUT: &str = "ecnq router shim: an emulated bottleneck link that measures its load \
factor every t_p and re-marks ECN for router-assisted congestion control (VCP family).";

const LINK_HELP: &str = "Link in tc/netem words, for both directions unless --link-up/--link-down \
override it: rate RATE (bit, kbit, mbit, gbit; kbps = kbytes/s), delay TIME [JITTER] \
(s, ms, us), loss P%, reorder P%, duplicate P%, limit N (packets) or limit SIZE (b, kb, mb: bytes). \
loss and corrupt (change one of the first 51 UDP payload bytes, checksum kept valid) take P% \
[maxrun N] (at most N packets in a row) or gemodel P [R [1-H [1-K]]] (Gilbert-Elliott, as netem). \
blackhole ON OFF [COUNT]: up for ON, then every packet dropped for OFF, COUNT times (default: forever). \
queue dual|fifo|dualpi2: this link's queue, as --queue says (default: --queue). \
Example: \"rate 20mbit delay 20ms 2ms loss 0.5% limit 100\"; the interop runner's handshakeloss: \
\"rate 10mbit delay 15ms limit 25 loss 30% maxrun 4\". Empty: unlimited.";

fn link_args() -> Vec<Arg> {
    vec![
        Arg::new("link").long("link").value_name("SPEC").default_value("").help(LINK_HELP),
        Arg::new("link-up")
            .long("link-up")
            .value_name("SPEC")
            .help("Link from clients to --to (overrides --link)"),
        Arg::new("link-down")
            .long("link-down")
            .value_name("SPEC")
            .help("Link from --to back to clients (overrides --link)"),
        Arg::new("scheme")
            .long("scheme")
            .value_name("MODE")
            .default_value("auto")
            .help(format!(
                "Marking: auto (by the packet's DSCP scheme tag; untagged ECT gets classic CE \
                 over --classic-threshold), off (meter only), or one scheme forced on every \
                 packet, whatever its tag:\n{}",
                Scheme::help()
            )),
        Arg::new("tp")
            .long("tp")
            .value_name("TIME")
            .help("Load-factor measurement interval t_p [default: 200ms, VCP/BMCC/MCP papers]"),
        Arg::new("queue-sample")
            .long("queue-sample")
            .value_name("TIME")
            .help("Persistent-queue sampling period [default: 10ms, VCP]"),
        Arg::new("capacity")
            .long("capacity")
            .value_name("RATE")
            .help("Capacity the load factor is measured against [default: the link rate; 10gbit if unlimited]"),
        Arg::new("gamma")
            .long("gamma")
            .value_name("X")
            .help("Target utilization γ of VCP's ρ and BMCC's f [default: by capacity, 0.94..0.985]"),
        Arg::new("kappa-q")
            .long("kappa-q")
            .value_name("X")
            .help("VCP persistent-queue weight κ_q [default: 0.5]"),
        Arg::new("k1")
            .long("k1")
            .value_name("X")
            .help("BMCC average-queue weight k_1 [default: 0.5]"),
        Arg::new("queue")
            .long("queue")
            .visible_alias("aqm")
            .value_name("KIND")
            .default_value("dual")
            .help(
                "dual: ecnq-tagged packets in their own queue, metered and marked against their \
                 share of the link; L4S traffic (untagged ECT(1) and CE, and Prague) in a queue \
                 CE-marked beyond 1 ms of the link; everything else in a classic queue under CoDel (CE for \
                 ECT, drop for Not-ECT); capacity split by active flows across the three; \
                 fifo: one drop-tail queue for everyone, as in the papers (forced or off marking \
                 always queues fifo); dualpi2: an L4S DualPI2 bottleneck that knows nothing of \
                 ecnq (RFC 9332: ECT(1) and CE in an L4S queue, the rest under PI2, coupled)",
            ),
        Arg::new("classic-threshold")
            .long("classic-threshold")
            .value_name("SIZE")
            .help("Queue (b, kb, mb) at which untagged ECT packets get CE under --queue fifo [default: half the buffer limit, packets counted as 1500 bytes]"),
        Arg::new("flows")
            .long("flows")
            .value_name("N")
            .help("Per-flow state entries (MPCP), a fixed bound on memory (1 to 16777216) [default: 65536]"),
        Arg::new("flow-idle")
            .long("flow-idle")
            .value_name("TIME")
            .help("Forget a flow's state after this long without packets [default: 10s]"),
        Arg::new("seed")
            .long("seed")
            .value_name("N")
            .help("Seed for loss, corruption, jitter, reordering and duplication [default: from the clock]"),
        Arg::new("stats")
            .long("stats")
            .value_name("FILE")
            .help("Write per-link counters and load as JSON lines to FILE (- for stdout)"),
        Arg::new("stats-interval")
            .long("stats-interval")
            .value_name("TIME")
            .default_value("100ms")
            .help("How often --stats gets a line per link (and --metrics is refreshed)"),
        Arg::new("metrics")
            .long("metrics")
            .value_name("ADDR")
            .help("Serve per-link counters in Prometheus text format on ADDR, e.g. 127.0.0.1:9464"),
        Arg::new("pcap")
            .long("pcap")
            .value_name("FILE")
            .help("Write what leaves the shim to FILE (pcap, raw IP; relay packets get synthesized IP/UDP headers)"),
    ]
}

fn command() -> Command {
    Command::new("ecnq-shim")
        .about(ABOUT)
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(true)
        .arg_required_else_help(true)
        .subcommand(
            Command::new("relay")
                .about(
                    "Unprivileged UDP relay: clients send to --listen, datagrams go to --to and \
                     replies come back, both ways through the emulated link with the TOS byte \
                     read and re-marked. Final counters print as JSON lines on SIGINT/SIGTERM.",
                )
                .arg(
                    Arg::new("listen")
                        .long("listen")
                        .value_name("ADDR")
                        .required(true)
                        .help("Address clients send to, e.g. 127.0.0.1:4433"),
                )
                .arg(
                    Arg::new("to")
                        .long("to")
                        .value_name("ADDR")
                        .required(true)
                        .help("Address datagrams are forwarded to, e.g. 127.0.0.1:4434"),
                )
                .arg(
                    Arg::new("session-idle")
                        .long("session-idle")
                        .value_name("TIME")
                        .default_value("60s")
                        .help("Close a client's session after this long without traffic (1ms to 1h)"),
                )
                .arg(
                    Arg::new("max-sessions")
                        .long("max-sessions")
                        .value_name("N")
                        .default_value("4096")
                        .help(
                            "Most clients served at once (1 to 1048576, and at most the open-file \
                             limit less 64: a socket each); when full, the idlest session is \
                             closed for a new client",
                        ),
                )
                .arg(
                    Arg::new("max-sessions-per-source")
                        .long("max-sessions-per-source")
                        .value_name("N")
                        .default_value("1024")
                        .help(
                            "Most sessions from one IP address (1 to 1048576); datagrams opening \
                             more are dropped and counted",
                        ),
                )
                .arg(
                    Arg::new("verbose")
                        .long("verbose")
                        .short('v')
                        .action(ArgAction::SetTrue)
                        .help("Print the configuration at start"),
                )
                .args(link_args()),
        )
        .subcommand(
            Command::new("testbed")
                .about(
                    "Network-namespace topologies with a shim per router (root). `up` prints the \
                     hosts' addresses and the `ip netns exec` commands to use; `down` removes \
                     every namespace and process of the testbed, also after a crash.",
                )
                .subcommand_required(true)
                .subcommand(
                    Command::new("up")
                        .about("Build a topology and start its shims")
                        .arg(
                            Arg::new("topology")
                                .required(true)
                                .value_name("TOPOLOGY")
                                .help(
                                    "dumbbell[:N] (N sender/receiver pairs, one bottleneck; N=2) \
                                     or parking-lot[:K] (K bottlenecks in a chain, one long flow \
                                     s0→r0 and local flows sj→rj; K=2)",
                                ),
                        )
                        .arg(
                            Arg::new("name")
                                .long("name")
                                .value_name("NAME")
                                .help("Testbed name [default: the topology's, e.g. dumbbell]"),
                        )
                        .arg(
                            Arg::new("shim-args")
                                .num_args(0..)
                                .last(true)
                                .value_name("SHIM ARGS")
                                .help("Passed to every `ecnq-shim tun`, e.g. -- --link \"rate 20mbit delay 10ms\" --scheme auto"),
                        ),
                )
                .subcommand(
                    Command::new("restart")
                        .about(
                            "Kill a router's shim (SIGKILL, like a crash) and start a new one: \
                             addresses and policy rules stay, the routes into its new devices \
                             are added again",
                        )
                        .arg(Arg::new("testbed").required(true).value_name("NAME|TOPOLOGY"))
                        .arg(
                            Arg::new("router")
                                .long("router")
                                .value_name("ROUTER")
                                .default_value("rt")
                                .help("Which router: rt (dumbbell) or rt1..rtK (parking lot)"),
                        )
                        .arg(
                            Arg::new("shim-args")
                                .num_args(0..)
                                .last(true)
                                .value_name("SHIM ARGS")
                                .help("Arguments of the new shim [default: those given to `up`]"),
                        ),
                )
                .subcommand(
                    Command::new("down")
                        .about("Remove a testbed")
                        .arg(Arg::new("testbed").required(true).value_name("NAME|TOPOLOGY")),
                )
                .subcommand(
                    Command::new("status")
                        .about("Show a testbed's namespaces, addresses and processes")
                        .arg(Arg::new("testbed").required(true).value_name("NAME|TOPOLOGY")),
                ),
        )
        .subcommand(
            Command::new("tun")
                .about(
                    "Router hop through two TUN devices (root): packets the kernel routes into the \
                     up device cross the up link and are written into the down device, and the \
                     reverse. Set policy routes yourself or use `testbed`; rp_filter must be 0. \
                     Final counters print as JSON lines on SIGINT/SIGTERM.",
                )
                .arg(
                    Arg::new("up-dev")
                        .long("up-dev")
                        .value_name("NAME")
                        .default_value("ecnq-up")
                        .help("TUN device for left → right traffic"),
                )
                .arg(
                    Arg::new("down-dev")
                        .long("down-dev")
                        .value_name("NAME")
                        .default_value("ecnq-down")
                        .help("TUN device for right → left traffic"),
                )
                .arg(Arg::new("mtu").long("mtu").value_name("BYTES").default_value("1500").help("MTU of both devices (576 to 65535)"))
                .arg(
                    Arg::new("no-offload")
                        .long("no-offload")
                        .action(ArgAction::SetTrue)
                        .help("Plain packets: no virtio-net headers, GSO or GRO"),
                )
                .arg(
                    Arg::new("tx-queue-len")
                        .long("tx-queue-len")
                        .value_name("N")
                        .default_value("10000")
                        .help("Device transmit queue, 1 to 1048576 (the kernel default of 500 drops bursts)"),
                )
                .args(link_args()),
        )
}

fn main() -> ExitCode {
    let matches = command().get_matches();
    let result = match matches.subcommand() {
        Some(("relay", m)) => relay(m),
        Some(("tun", m)) => tun(m),
        Some(("testbed", m)) => testbed(m),
        _ => Err("no such command (try --help)".to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("ecnq-shim: {message}");
            ExitCode::FAILURE
        }
    }
}

fn text<'a>(m: &'a ArgMatches, name: &str) -> Option<&'a str> {
    m.get_one::<String>(name).map(String::as_str)
}

fn parsed<T: std::str::FromStr>(m: &ArgMatches, name: &str) -> Result<Option<T>, String>
where
    T::Err: std::fmt::Display,
{
    text(m, name)
        .map(|v| v.parse::<T>().map_err(|e| format!("--{name} `{v}`: {e}")))
        .transpose()
}

fn with<T>(
    m: &ArgMatches,
    name: &str,
    parse: impl Fn(&str) -> Result<T, ecnq_shim::spec::SpecError>,
) -> Result<Option<T>, String> {
    text(m, name)
        .map(|v| parse(v).map_err(|e| format!("--{name}: {e}")))
        .transpose()
}

/// `--name`, if given, within `min..=max`.
fn in_range<T>(m: &ArgMatches, name: &str, min: T, max: T) -> Result<Option<T>, String>
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

fn factor(m: &ArgMatches, name: &str) -> Result<Option<f64>, String> {
    match parsed::<f64>(m, name)? {
        Some(x) if !(x.is_finite() && x > 0.0) => {
            Err(format!("--{name} must be a positive number, got {x}"))
        }
        other => Ok(other),
    }
}

/// The two directions' links and routers from the shared options.
fn directions(m: &ArgMatches) -> Result<(Direction, Direction), String> {
    let spec = |name: &str| -> Result<Option<LinkSpec>, String> { parsed::<LinkSpec>(m, name) };
    let both = spec("link")?.unwrap_or_default();
    let up = spec("link-up")?.unwrap_or(both);
    let down = spec("link-down")?.unwrap_or(both);
    let mode = parsed::<MarkingMode>(m, "scheme")?.unwrap_or(MarkingMode::Auto);
    let queue = parsed::<Discipline>(m, "queue")?.unwrap_or_default();
    let tp = with(m, "tp", parse_time)?;
    let queue_sample = with(m, "queue-sample", parse_time)?;
    let capacity = with(m, "capacity", parse_rate)?;
    let threshold = with(m, "classic-threshold", parse_size)?;
    let (gamma, kappa_q, k1) = (factor(m, "gamma")?, factor(m, "kappa-q")?, factor(m, "k1")?);
    let flows = in_range::<usize>(m, "flows", 1, FlowTableConfig::MAX_CAPACITY)?;
    let flow_idle = with(m, "flow-idle", parse_time)?;
    if tp.is_some_and(|t| t.is_zero()) {
        return Err("--tp must be longer than zero".to_owned());
    }
    let router = |spec: &LinkSpec| -> RouterConfig {
        let mut cfg = match capacity {
            Some(bps) => RouterConfig {
                meter: ecnq::MeterConfig::new(bps as f64 / 8.0),
                ..router_config(spec)
            },
            None => router_config(spec),
        };
        cfg.mode = mode;
        if let Some(t) = tp {
            cfg.meter.interval = t;
        }
        if let Some(t) = queue_sample {
            cfg.meter.queue_sample = t;
        }
        if let Some(g) = gamma {
            cfg.meter.vcp.gamma = g;
            cfg.meter.bmcc.gamma = g;
        }
        if let Some(k) = kappa_q {
            cfg.meter.vcp.k_q = k;
        }
        if let Some(k) = k1 {
            cfg.meter.bmcc.k1 = k;
        }
        if let Some(bytes) = threshold {
            cfg.classic_threshold = bytes;
        }
        if let Some(n) = flows {
            cfg.flows.capacity = n;
        }
        if let Some(idle) = flow_idle {
            cfg.flows.idle_timeout = idle;
        }
        cfg
    };
    Ok((
        Direction {
            router: router(&up),
            spec: up,
            queue,
        },
        Direction {
            router: router(&down),
            spec: down,
            queue,
        },
    ))
}

/// JSON lines, metrics endpoint and pcap file from the options.
fn observers(m: &ArgMatches) -> Result<Observers, String> {
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

fn seed(m: &ArgMatches) -> Result<u64, String> {
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

fn print_final(up: &LinkSnapshot, down: &LinkSnapshot) {
    println!("{}", up.to_json(true));
    println!("{}", down.to_json(true));
}

fn tun(m: &ArgMatches) -> Result<(), String> {
    let (up, down) = directions(m)?;
    let config = TunConfig {
        up_device: text(m, "up-dev").unwrap_or("ecnq-up").to_owned(),
        down_device: text(m, "down-dev").unwrap_or("ecnq-down").to_owned(),
        mtu: in_range::<u16>(m, "mtu", 576, 65_535)?.unwrap_or(1500),
        offload: !m.get_flag("no-offload"),
        tx_queue_len: in_range::<u32>(m, "tx-queue-len", 1, 1 << 20)?.unwrap_or(10_000),
        up,
        down,
        seed: seed(m)?,
    };
    let observers = observers(m)?;
    let runtime = signal_runtime()?;
    let shim = TunShim::start(&config, observers).map_err(|e| e.to_string())?;
    eprintln!(
        "ecnq-shim tun: {} -> link up -> {}, {} -> link down -> {}; scheme {}; offload {}",
        config.up_device,
        config.down_device,
        config.down_device,
        config.up_device,
        config.up.router.mode,
        if shim.udp_gso() {
            "on (UDP GSO)"
        } else if config.offload {
            "on (no UDP GSO)"
        } else {
            "off"
        },
    );
    runtime.block_on(shutdown_signal());
    let report = shim.stop().map_err(|e| e.to_string())?;
    print_final(&report.up, &report.down);
    Ok(())
}

fn testbed(m: &ArgMatches) -> Result<(), String> {
    match m.subcommand() {
        Some(("up", m)) => {
            let topology = text(m, "topology").unwrap_or_default();
            let shape = topology.parse::<Shape>()?;
            let name = match text(m, "name") {
                Some(name) => name,
                None => name_of(topology)?,
            };
            let layout = Topology::new(name, shape)?;
            let shim = this_program()?;
            let args: Vec<String> = m
                .get_many::<String>("shim-args")
                .map(|v| v.cloned().collect())
                .unwrap_or_default();
            let info = testbed::up(&layout, &shim, &args)?;
            print!("{}", info.summary);
            Ok(())
        }
        Some(("restart", m)) => {
            let name = name_of(text(m, "testbed").unwrap_or_default())?;
            let router = text(m, "router").unwrap_or("rt");
            let args: Option<Vec<String>> = m
                .get_many::<String>("shim-args")
                .map(|v| v.cloned().collect());
            testbed::restart(name, router, &this_program()?, args.as_deref())?;
            println!("testbed {name}: restarted the shim of {router}");
            Ok(())
        }
        Some(("down", m)) => {
            let name = name_of(text(m, "testbed").unwrap_or_default())?;
            let removed = testbed::down(name)?;
            println!("testbed {name}: removed {} namespaces", removed.len());
            Ok(())
        }
        Some(("status", m)) => {
            let name = name_of(text(m, "testbed").unwrap_or_default())?;
            print!("{}", testbed::status(name)?);
            Ok(())
        }
        _ => Err("testbed: expected up, restart, down or status".to_owned()),
    }
}

/// This executable, which the testbed runs as each router's shim.
fn this_program() -> Result<std::path::PathBuf, String> {
    std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))
}

fn signal_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

fn relay(m: &ArgMatches) -> Result<(), String> {
    let listen = parsed::<SocketAddr>(m, "listen")?.ok_or("--listen is required")?;
    let target = parsed::<SocketAddr>(m, "to")?.ok_or("--to is required")?;
    let (up, down) = directions(m)?;
    let defaults = SessionLimits::default();
    let mut sessions = SessionLimits {
        max: parsed(m, "max-sessions")?.unwrap_or(defaults.max),
        per_source: parsed(m, "max-sessions-per-source")?.unwrap_or(defaults.per_source),
        idle: with(m, "session-idle", parse_time)?.unwrap_or(defaults.idle),
    };
    sessions.validate()?;
    // A socket per session: a descriptor limit under --max-sessions would
    // refuse clients instead of evicting idle ones.
    let fd_limit = raise_fd_limit().map_err(|e| format!("cannot read the open-file limit: {e}"))?;
    let fd_room = sessions_within(fd_limit);
    let fd_note = (sessions.max > fd_room).then(|| {
        sessions.max = fd_room.max(1);
        format!(
            "ecnq-shim relay: at most {} sessions (open-file limit {fd_limit})",
            sessions.max
        )
    });
    let config = RelayConfig {
        listen,
        target,
        up,
        down,
        seed: seed(m)?,
        sessions,
    };
    let observers = observers(m)?;
    let runtime = signal_runtime()?;
    let report: RelayReport = runtime.block_on(async {
        let relay = Relay::bind(config.clone(), observers)
            .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        let local = relay.local_addr().map_err(|e| e.to_string())?;
        eprintln!(
            "ecnq-shim relay: listening on {local}, forwarding to {target}; scheme {}",
            config.up.router.mode
        );
        if let Some(note) = &fd_note {
            eprintln!("{note}");
        }
        if m.get_flag("verbose") {
            eprintln!(
                "  up:   {} (capacity {} bit/s)",
                config.up.spec,
                config.up.router.meter.capacity * 8.0
            );
            eprintln!(
                "  down: {} (capacity {} bit/s)",
                config.down.spec,
                config.down.router.meter.capacity * 8.0
            );
        }
        relay
            .run(shutdown_signal())
            .await
            .map_err(|e| format!("relay failed: {e}"))
    })?;
    print_final(&report.up, &report.down);
    println!("{}", report.sessions.to_json(report.time, true));
    Ok(())
}

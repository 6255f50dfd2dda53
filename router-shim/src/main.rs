//! `ecnq-shim`: the ecnq router shim command line.

mod cli;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::ArgMatches;

use cli::command::command;
use cli::options::{directions, in_range, observers, parsed, seed, text, with};
use ecnq_shim::io::relay::{sessions_within_fd_limit, Relay, RelayConfig, RelayReport};
use ecnq_shim::io::sessions::SessionLimits;
use ecnq_shim::io::tun::{TunConfig, TunShim};
use ecnq_shim::link::spec::parse_time;
use ecnq_shim::observe::LinkSnapshot;
use ecnq_shim::shutdown_signal;
use ecnq_shim::testbed::{self, name_of, Shape, Topology};

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
        Some(("up", m)) => testbed_up(m),
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

/// `testbed up`: builds the topology and starts its shims.
fn testbed_up(m: &ArgMatches) -> Result<(), String> {
    let topology = text(m, "topology").unwrap_or_default();
    let shape = topology.parse::<Shape>()?;
    let name = match text(m, "name") {
        Some(name) => name,
        None => name_of(topology)?,
    };
    let layout = Topology::new(name, shape)?;
    let args: Vec<String> = m
        .get_many::<String>("shim-args")
        .map(|v| v.cloned().collect())
        .unwrap_or_default();
    let info = testbed::up(&layout, &this_program()?, &args)?;
    print!("{}", info.summary);
    Ok(())
}

/// This executable, which the testbed runs as each router's shim.
fn this_program() -> Result<PathBuf, String> {
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
    let (sessions, fd_note) = session_limits(m)?;
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
            print_links(&config);
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

/// The relay's session limits, with `--max-sessions` lowered to what the
/// open-file limit allows (a socket per session: a descriptor limit under
/// it would refuse clients instead of evicting idle ones), and a note
/// saying so if it was.
fn session_limits(m: &ArgMatches) -> Result<(SessionLimits, Option<String>), String> {
    let defaults = SessionLimits::default();
    let sessions = SessionLimits {
        max: parsed(m, "max-sessions")?.unwrap_or(defaults.max),
        per_source: parsed(m, "max-sessions-per-source")?.unwrap_or(defaults.per_source),
        idle: with(m, "session-idle", parse_time)?.unwrap_or(defaults.idle),
    };
    sessions.validate()?;
    let (sessions, lowered) = sessions_within_fd_limit(sessions)
        .map_err(|e| format!("cannot read the open-file limit: {e}"))?;
    let fd_note = lowered.map(|fd_limit| {
        format!(
            "ecnq-shim relay: at most {} sessions (open-file limit {fd_limit})",
            sessions.max
        )
    });
    Ok((sessions, fd_note))
}

/// `--verbose`: each direction's link and the capacity its router meters.
fn print_links(config: &RelayConfig) {
    for (name, d) in [("up:  ", &config.up), ("down:", &config.down)] {
        eprintln!(
            "  {name} {} (capacity {} bit/s)",
            d.spec,
            d.router.meter.capacity * 8.0
        );
    }
}

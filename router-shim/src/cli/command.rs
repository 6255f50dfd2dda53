//! The `ecnq-shim` command tree: the `relay`, `tun` and `testbed`
//! subcommands and the options relay and tun share.

use clap::{Arg, ArgAction, Command};
use ecnq::units::UNITS_HELP;
use ecnq::Scheme;

const ABOUT: &str = "ecnq router shim: an emulated bottleneck link (rate, delay, loss, buffer) \
whose router writes its feedback into ECN: erc's max-min fair rate and the papers' load levels \
for ecnq-tagged traffic, in a queue of its own beside an L4S queue and a classic one under \
CoDel (--queue dual, the default), or one FIFO as in the papers, or DualPI2.";

const LINK_HELP: &str = "Link in tc/netem words, for both directions unless --link-up/--link-down \
override it: rate RATE (bit, kbit, mbit, gbit, tbit: bits/s), delay TIME [JITTER] \
(s, ms, us, ns), loss P%, reorder P%, duplicate P%, limit N (packets) or limit SIZE (b, kb, mb, gb: bytes). \
loss and corrupt (change one of the first 51 UDP payload bytes, checksum kept valid) take P% \
[maxrun N] (at most N packets in a row) or gemodel P [R [1-H [1-K]]] (Gilbert-Elliott, as netem). \
blackhole ON OFF [COUNT]: up for ON, then every packet dropped for OFF, COUNT times (default: forever). \
queue dual|fifo|dualpi2: this link's queue, as --queue says (default: --queue). \
ecn N (packets) or ecn SIZE: a classic RFC 3168 ECN AQM, one FIFO that CE-marks every ECT packet, \
whatever its tag, while N packets or SIZE wait: --scheme classic --classic-threshold for this link alone. \
restart T: the router restarts T after the shim starts, as one that reboots (flow table, meters, shares and AQM state lost; queued packets kept). \
Example: \"rate 20mbit delay 20ms 2ms loss 0.5% limit 100\"; the interop runner's handshakeloss: \
\"rate 10mbit delay 15ms limit 25 loss 30% maxrun 4\". Empty: unlimited.";

/// The whole command line.
pub fn command() -> Command {
    Command::new("ecnq-shim")
        .about(ABOUT)
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(true)
        .arg_required_else_help(true)
        .subcommand(relay_command())
        .subcommand(testbed_command())
        .subcommand(tun_command())
}

/// `ecnq-shim relay`.
fn relay_command() -> Command {
    Command::new("relay")
        .after_help(UNITS_HELP)
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
        .args(shared_args())
}

/// `ecnq-shim testbed up|restart|down|status`.
fn testbed_command() -> Command {
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
        )
}

/// `ecnq-shim tun`.
fn tun_command() -> Command {
    Command::new("tun")
        .after_help(UNITS_HELP)
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
        .arg(
            Arg::new("mtu")
                .long("mtu")
                .value_name("BYTES")
                .default_value("1500")
                .help("MTU of both devices (576 to 65535)"),
        )
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
                .help(
                    "Device transmit queue, 1 to 1048576 (the kernel default of 500 drops bursts)",
                ),
        )
        .args(shared_args())
}

/// The options of every shim (relay and tun): links, marking, observers.
fn shared_args() -> Vec<Arg> {
    let mut args = link_args();
    args.extend(marking_args());
    args.extend(observer_args());
    args
}

/// The links of the two directions.
fn link_args() -> Vec<Arg> {
    vec![
        Arg::new("link")
            .long("link")
            .value_name("SPEC")
            .default_value("")
            .help(LINK_HELP),
        Arg::new("link-up")
            .long("link-up")
            .value_name("SPEC")
            .help("Link from clients to --to (overrides --link)"),
        Arg::new("link-down")
            .long("link-down")
            .value_name("SPEC")
            .help("Link from --to back to clients (overrides --link)"),
    ]
}

/// How the routers meter, queue and mark.
fn marking_args() -> Vec<Arg> {
    vec![
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
                 ECT, drop for Not-ECT, on the flow with the most bytes waiting); capacity split by active flows across the three; \
                 fifo: one drop-tail queue for everyone, as in the papers (forced or off marking \
                 always queues fifo); dualpi2: an L4S DualPI2 bottleneck that knows nothing of \
                 ecnq (RFC 9332: ECT(1) and CE in an L4S queue, the rest under PI2, coupled)",
            ),
        Arg::new("classic-threshold")
            .long("classic-threshold")
            .value_name("SIZE")
            .help("Queue (b, kb, mb, gb) at which untagged ECT packets get CE under --queue fifo [default: half the buffer limit, packets counted as 1500 bytes; a link spec's ecn sets its own]"),
        Arg::new("flows")
            .long("flows")
            .value_name("N")
            .help("Per-flow state entries (MPCP), a fixed bound on memory (1 to 16777216) [default: 65536]"),
        Arg::new("flow-idle")
            .long("flow-idle")
            .value_name("TIME")
            .help("Forget a flow's state after this long without packets [default: 10s]"),
    ]
}

/// The seed of the impairments, and where the links report.
fn observer_args() -> Vec<Arg> {
    vec![
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

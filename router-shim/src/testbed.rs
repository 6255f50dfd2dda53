//! `ecnq-shim testbed up|down|status`: named network-namespace topologies
//! with veth pairs, addresses, policy routes and one `ecnq-shim tun` per
//! router (root only).
//!
//! * **dumbbell N**: senders `s1..sN` → router `rt` → receivers `r1..rN`;
//!   the router's shim is the one bottleneck.
//! * **parking-lot K**: routers `rt1..rtK` in a chain, each with a shim (K
//!   bottlenecks). A long flow goes from `s0` (on `rt1`) to `r0` (on `rtK`);
//!   local flow `j` goes from `sj` to `rj`, both on `rtj`, and crosses
//!   bottleneck `j` only.
//!
//! Every namespace is called `ecnq-<testbed>-<node>`, so `down` finds and
//! removes everything a testbed made — processes included (`ip netns pids`)
//! — also after a crash, without any state file.
//!
//! Each router sends traffic from its left interfaces into its shim's up
//! device and from its right interfaces into the down device (policy
//! routes); rp_filter is 0 there, as packets re-enter through the TUN device.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Policy-routing tables of the router namespaces.
const TABLE_UP: &str = "100";
const TABLE_DOWN: &str = "101";
/// TUN device names inside every router namespace.
pub const UP_DEVICE: &str = "ecnq-up";
/// See [`UP_DEVICE`].
pub const DOWN_DEVICE: &str = "ecnq-down";
/// Every host's one interface, towards its router.
pub const HOST_DEVICE: &str = "eth0";
/// How long `up` waits for a shim to create its devices.
const SHIM_START_TIMEOUT: Duration = Duration::from_secs(10);
/// The file in the state directory holding the shims' arguments (NUL
/// separated), for `restart`.
const SHIM_ARGS_FILE: &str = "shim-args";

/// The shapes `testbed` builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// N sender/receiver pairs around one router.
    Dumbbell(u8),
    /// K routers in a chain: one long flow, K local flows.
    ParkingLot(u8),
}

impl std::str::FromStr for Shape {
    type Err = String;

    /// `dumbbell`, `dumbbell:N`, `parking-lot`, `parking-lot:K`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, count) = match s.split_once(':') {
            Some((kind, n)) => {
                let n: u8 = n
                    .parse()
                    .ok()
                    .filter(|n| (1..=50).contains(n))
                    .ok_or_else(|| format!("topology `{s}`: the count must be 1..=50"))?;
                (kind, Some(n))
            }
            None => (s, None),
        };
        match kind {
            "dumbbell" => Ok(Shape::Dumbbell(count.unwrap_or(2))),
            "parking-lot" => Ok(Shape::ParkingLot(count.unwrap_or(2))),
            _ => Err(format!(
                "unknown topology `{s}` (expected dumbbell[:N] or parking-lot[:K])"
            )),
        }
    }
}

/// Which side of a router an interface is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Left,
    Right,
}

/// One veth pair: `a` end in namespace `a.0`, `b` end in `b.0`, on subnet
/// `10.<net_hi>.<net_lo>.0/24`, `a` = .1, `b` = .2.
#[derive(Clone, Debug)]
struct Veth {
    a: String,
    a_if: String,
    b: String,
    b_if: String,
    net: (u8, u8),
    /// Which side of router `a` the link is on.
    side_at_a: Side,
}

impl Veth {
    fn addr(&self, end_b: bool) -> String {
        format!(
            "10.{}.{}.{}",
            self.net.0,
            self.net.1,
            if end_b { 2 } else { 1 }
        )
    }
    fn subnet(&self) -> String {
        format!("10.{}.{}.0/24", self.net.0, self.net.1)
    }
    fn addr6(&self, end_b: bool) -> String {
        format!(
            "fd00:{}:{}::{}",
            self.net.0,
            self.net.1,
            if end_b { 2 } else { 1 }
        )
    }
    fn subnet6(&self) -> String {
        format!("fd00:{}:{}::/64", self.net.0, self.net.1)
    }
}

/// A testbed's namespaces and links.
#[derive(Clone, Debug)]
pub struct Topology {
    name: String,
    routers: Vec<String>,
    hosts: Vec<String>,
    links: Vec<Veth>,
}

/// Testbed names become part of namespace names: 1 to 32 letters, digits or dashes.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 32
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Err(format!(
            "testbed name `{name}`: use 1 to 32 letters, digits or dashes"
        ));
    }
    Ok(())
}

/// The name of a testbed given as a name or a topology (`dumbbell:4` → `dumbbell`).
pub fn name_of(arg: &str) -> Result<&str, String> {
    let name = arg.split(':').next().unwrap_or(arg);
    check_name(name)?;
    Ok(name)
}

/// Namespace name of a testbed node.
pub fn namespace(testbed: &str, node: &str) -> String {
    format!("ecnq-{testbed}-{node}")
}

impl Topology {
    /// The topology of `shape`, named `name` (letters, digits, `-`; ≤ 8 chars
    /// so interface names stay under 15).
    pub fn new(name: &str, shape: Shape) -> Result<Topology, String> {
        if name.is_empty()
            || name.len() > 8
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            return Err(format!(
                "testbed name `{name}`: use 1 to 8 letters, digits or dashes"
            ));
        }
        let mut t = Topology {
            name: name.to_owned(),
            routers: Vec::new(),
            hosts: Vec::new(),
            links: Vec::new(),
        };
        match shape {
            Shape::Dumbbell(n) => {
                t.routers.push("rt".into());
                for i in 1..=n {
                    t.attach("rt", &format!("s{i}"), Side::Left, (1, i));
                    t.attach("rt", &format!("r{i}"), Side::Right, (2, i));
                }
            }
            Shape::ParkingLot(k) => {
                for j in 1..=k {
                    t.routers.push(format!("rt{j}"));
                }
                t.attach("rt1", "s0", Side::Left, (1, 0));
                t.attach(&format!("rt{k}"), "r0", Side::Right, (2, 0));
                for j in 1..=k {
                    let rt = format!("rt{j}");
                    t.attach(&rt, &format!("s{j}"), Side::Left, (1, j));
                    t.attach(&rt, &format!("r{j}"), Side::Right, (2, j));
                    if j < k {
                        t.links.push(Veth {
                            a: rt,
                            a_if: format!("to-rt{}", j + 1),
                            b: format!("rt{}", j + 1),
                            b_if: format!("to-rt{j}"),
                            net: (3, j),
                            side_at_a: Side::Right,
                        });
                    }
                }
            }
        }
        Ok(t)
    }

    fn attach(&mut self, router: &str, host: &str, side: Side, net: (u8, u8)) {
        self.hosts.push(host.to_owned());
        self.links.push(Veth {
            a: router.to_owned(),
            a_if: host.to_owned(),
            b: host.to_owned(),
            b_if: HOST_DEVICE.to_owned(),
            net,
            side_at_a: side,
        });
    }

    fn ns(&self, node: &str) -> String {
        namespace(&self.name, node)
    }

    /// Every namespace of the testbed.
    pub fn namespaces(&self) -> Vec<String> {
        self.routers
            .iter()
            .chain(&self.hosts)
            .map(|n| self.ns(n))
            .collect()
    }

    fn host_link(&self, host: &str) -> Option<&Veth> {
        self.links
            .iter()
            .find(|l| l.b == host && self.hosts.contains(&l.b))
    }

    /// The IPv4 address of a host (its one interface).
    pub fn host_addr(&self, host: &str) -> Option<String> {
        self.host_link(host).map(|l| l.addr(true))
    }

    /// The IPv6 address of a host.
    pub fn host_addr6(&self, host: &str) -> Option<String> {
        self.host_link(host).map(|l| l.addr6(true))
    }

    /// Router interfaces on `side`, and (for links between routers) whether
    /// the router is the `b` end.
    fn router_ifaces(&self, router: &str, side: Side) -> Vec<String> {
        let mut out = Vec::new();
        for l in &self.links {
            if l.a == router && l.side_at_a == side {
                out.push(l.a_if.clone());
            }
            // The b end of a router-router link faces the other way.
            if l.b == router && self.routers.contains(&l.b) && l.side_at_a != side {
                out.push(l.b_if.clone());
            }
        }
        out
    }

    /// Static routes of a router: every subnet it is not on, via the
    /// neighbouring router towards it (the chain is a line), as
    /// (target link, link to the next router, whether that router is its `b` end).
    fn route_plan(&self, router: &str) -> Vec<(&Veth, &Veth, bool)> {
        let index = |r: &str| self.routers.iter().position(|x| x == r);
        let Some(me) = index(router) else {
            return Vec::new();
        };
        let mut plan = Vec::new();
        for l in &self.links {
            if l.a == router || l.b == router {
                continue;
            }
            let Some(owner) = index(&l.a) else { continue };
            let step = if owner > me { me + 1 } else { me - 1 };
            let (mine, next) = (&self.routers[me], &self.routers[step]);
            let hop = self
                .links
                .iter()
                .find(|x| (&x.a == mine && &x.b == next) || (&x.b == mine && &x.a == next));
            if let Some(hop) = hop {
                plan.push((l, hop, &hop.a == mine));
            }
        }
        plan
    }

    /// IPv4 static routes of a router: (subnet, via).
    fn router_routes(&self, router: &str) -> Vec<(String, String)> {
        self.route_plan(router)
            .into_iter()
            .map(|(target, hop, via_b)| (target.subnet(), hop.addr(via_b)))
            .collect()
    }

    /// IPv6 static routes of a router: (subnet, via).
    fn router_routes6(&self, router: &str) -> Vec<(String, String)> {
        self.route_plan(router)
            .into_iter()
            .map(|(target, hop, via_b)| (target.subnet6(), hop.addr6(via_b)))
            .collect()
    }
}

/// Runs `ip` (or any command); errors carry the command and its stderr.
fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn ip_in(ns: &str, args: &[&str]) -> Result<String, String> {
    let mut full = vec!["-n", ns];
    full.extend_from_slice(args);
    run("ip", &full)
}

fn sysctl_in(ns: &str, setting: &str) -> Result<String, String> {
    run("ip", &["netns", "exec", ns, "sysctl", "-qw", setting])
}

/// Where `up` keeps the shims' logs and stats.
pub fn state_dir(testbed: &str) -> PathBuf {
    Path::new("/run/ecnq-testbed").join(testbed)
}

/// What `up` built.
#[derive(Clone, Debug)]
pub struct UpInfo {
    /// A human-readable summary: addresses and commands.
    pub summary: String,
}

/// Builds the topology and starts a shim per router with `shim_args` (after
/// `tun --up-dev .. --down-dev ..`); removes everything again on failure.
pub fn up(topology: &Topology, shim: &Path, shim_args: &[String]) -> Result<UpInfo, String> {
    if !existing(&topology.name)?.is_empty() {
        return Err(format!(
            "testbed `{}` exists already (run `ecnq-shim testbed down {}` first)",
            topology.name, topology.name
        ));
    }
    build(topology, shim, shim_args).inspect_err(|_| {
        let _ = down(&topology.name);
    })
}

fn build(t: &Topology, shim: &Path, shim_args: &[String]) -> Result<UpInfo, String> {
    add_namespaces(t)?;
    for l in &t.links {
        add_link(t, l)?;
    }
    let dir = state_dir(&t.name);
    // Logs of an earlier testbed of this name go; a restarted shim appends.
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for router in &t.routers {
        set_up_router(t, router, shim, shim_args, &dir)?;
    }
    let saved = dir.join(SHIM_ARGS_FILE);
    fs::write(&saved, shim_args.join("\0"))
        .map_err(|e| format!("cannot write {}: {e}", saved.display()))?;
    Ok(UpInfo {
        summary: summary(t),
    })
}

/// A namespace per node, loopback up, no duplicate address detection.
fn add_namespaces(t: &Topology) -> Result<(), String> {
    for ns in t.namespaces() {
        run("ip", &["netns", "add", &ns])?;
        ip_in(&ns, &["link", "set", "lo", "up"])?;
        // No duplicate address detection, link-local addresses included:
        // neighbour discovery works the moment the links are up.
        for setting in [
            "net.ipv6.conf.all.accept_dad=0",
            "net.ipv6.conf.default.accept_dad=0",
        ] {
            sysctl_in(&ns, setting)?;
        }
    }
    Ok(())
}

/// A veth pair between two nodes, addressed (IPv4 and IPv6) and up; a
/// host's default routes point at its router.
fn add_link(t: &Topology, l: &Veth) -> Result<(), String> {
    let (a, b) = (t.ns(&l.a), t.ns(&l.b));
    run(
        "ip",
        &[
            "link", "add", &l.a_if, "netns", &a, "type", "veth", "peer", "name", &l.b_if, "netns",
            &b,
        ],
    )?;
    for (ns, iface, end_b) in [(&a, &l.a_if, false), (&b, &l.b_if, true)] {
        ip_in(
            ns,
            &[
                "addr",
                "add",
                &format!("{}/24", l.addr(end_b)),
                "dev",
                iface,
            ],
        )?;
        // No duplicate address detection: the addresses are usable at once.
        let addr6 = format!("{}/64", l.addr6(end_b));
        ip_in(ns, &["-6", "addr", "add", &addr6, "dev", iface, "nodad"])?;
        ip_in(ns, &["link", "set", iface, "up"])?;
    }
    if t.hosts.contains(&l.b) {
        ip_in(&b, &["route", "add", "default", "via", &l.addr(false)])?;
        ip_in(
            &b,
            &["-6", "route", "add", "default", "via", &l.addr6(false)],
        )?;
    }
    Ok(())
}

/// A router: forwarding on, rp_filter off, routes, and its shim with the
/// policy rules that lead into it.
fn set_up_router(
    t: &Topology,
    router: &str,
    shim: &Path,
    shim_args: &[String],
    dir: &Path,
) -> Result<(), String> {
    let ns = t.ns(router);
    for setting in [
        "net.ipv4.ip_forward=1",
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.default.rp_filter=0",
        "net.ipv6.conf.all.forwarding=1",
    ] {
        sysctl_in(&ns, setting)?;
    }
    for (subnet, via) in t.router_routes(router) {
        ip_in(&ns, &["route", "add", &subnet, "via", &via])?;
    }
    for (subnet, via) in t.router_routes6(router) {
        ip_in(&ns, &["-6", "route", "add", &subnet, "via", &via])?;
    }
    attach_shim(&ns, router, shim, shim_args, dir)?;
    for side in [Side::Left, Side::Right] {
        for iface in t.router_ifaces(router, side) {
            sysctl_in(&ns, &format!("net.ipv4.conf.{iface}.rp_filter=0"))?;
        }
    }
    shim_rules(t, router, "add")
}

/// Starts a router's shim and points the router's policy tables at its
/// devices. The routes go with the devices when the shim exits, so a
/// restarted shim needs them again; the rules (by incoming interface) stay.
fn attach_shim(
    ns: &str,
    router: &str,
    shim: &Path,
    shim_args: &[String],
    dir: &Path,
) -> Result<(), String> {
    start_shim(ns, router, shim, shim_args, dir)?;
    for (table, device) in [(TABLE_UP, UP_DEVICE), (TABLE_DOWN, DOWN_DEVICE)] {
        for family in ["-4", "-6"] {
            let route = [
                family, "route", "add", "default", "dev", device, "table", table,
            ];
            ip_in(ns, &route)?;
        }
        sysctl_in(ns, &format!("net.ipv4.conf.{device}.rp_filter=0"))?;
    }
    Ok(())
}

/// Starts `ecnq-shim tun` in a router's namespace, detached, logging to the
/// state directory (appending: a restarted shim's lines follow the old
/// ones); waits until its devices exist.
fn start_shim(
    ns: &str,
    router: &str,
    shim: &Path,
    shim_args: &[String],
    dir: &Path,
) -> Result<(), String> {
    let log_path = dir.join(format!("{router}.log"));
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
    let err_log = log.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns])
        .arg(shim)
        .args(["tun", "--up-dev", UP_DEVICE, "--down-dev", DOWN_DEVICE])
        .args(shim_args)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err_log);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", shim.display()))?;
    let start = Instant::now();
    loop {
        let devices = ip_in(ns, &["-o", "link", "show"])?;
        if devices.contains(UP_DEVICE) && devices.contains(DOWN_DEVICE) {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            let log = fs::read_to_string(&log_path).unwrap_or_default();
            return Err(format!(
                "the shim in {ns} exited ({status}): {}",
                log.trim()
            ));
        }
        if start.elapsed() > SHIM_START_TIMEOUT {
            return Err(format!(
                "the shim in {ns} did not create its devices in time"
            ));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

fn summary(t: &Topology) -> String {
    let mut s = format!("testbed {}: ", t.name);
    let _ = writeln!(
        s,
        "{} router(s) with a shim, {} hosts",
        t.routers.len(),
        t.hosts.len()
    );
    for host in &t.hosts {
        let _ = writeln!(
            s,
            "  {host:<4} {:<12} {:<14} ip netns exec {} <command>",
            t.host_addr(host).unwrap_or_default(),
            t.host_addr6(host).unwrap_or_default(),
            t.ns(host)
        );
    }
    for router in &t.routers {
        let _ = writeln!(
            s,
            "  {router:<4} shim log and stats in {}/{router}.log; ip netns exec {} <command>",
            state_dir(&t.name).display(),
            t.ns(router)
        );
    }
    s
}

/// The namespaces of a testbed that exist now.
pub fn existing(testbed: &str) -> Result<Vec<String>, String> {
    let prefix = format!("ecnq-{testbed}-");
    Ok(run("ip", &["netns", "list"])?
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|ns| ns.starts_with(&prefix))
        .map(str::to_owned)
        .collect())
}

/// A UDP socket bound to `addr` inside namespace `ns` (the socket stays in
/// that namespace whichever thread uses it).
pub fn udp_socket_in(ns: &str, addr: std::net::SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    let ns = ns.to_owned();
    // setns changes the calling thread only: do it on a throwaway one.
    thread::spawn(move || {
        enter(&ns)?;
        std::net::UdpSocket::bind(addr)
    })
    .join()
    .map_err(|_| std::io::Error::other("setns thread panicked"))?
}

/// Moves the calling thread into network namespace `ns`: sockets it opens
/// from then on (and threads it starts) live there. Other threads stay put.
pub fn enter(ns: &str) -> std::io::Result<()> {
    let path = format!("/run/netns/{ns}");
    let file = fs::File::open(&path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("namespace {ns}: {e}")))?;
    // SAFETY: a valid namespace descriptor; affects this thread only.
    if unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&file), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Sends the routers' transit traffic through their shims (`through`, as
/// `up` leaves it) or not: then each router's kernel forwards directly, for
/// comparisons, and the shims keep running, idle.
pub fn route_through_shims(topology: &Topology, through: bool) -> Result<(), String> {
    let action = if through { "add" } else { "del" };
    for router in &topology.routers {
        shim_rules(topology, router, action)?;
    }
    Ok(())
}

/// Adds or deletes (`action`) the policy rules that send what arrives on a
/// router's left interfaces into the up device's table and what arrives on
/// its right interfaces into the down device's.
fn shim_rules(t: &Topology, router: &str, action: &str) -> Result<(), String> {
    let ns = t.ns(router);
    for (side, table) in [(Side::Left, TABLE_UP), (Side::Right, TABLE_DOWN)] {
        for iface in t.router_ifaces(router, side) {
            for family in ["-4", "-6"] {
                ip_in(
                    &ns,
                    &[family, "rule", action, "iif", &iface, "lookup", table],
                )?;
            }
        }
    }
    Ok(())
}

/// Kills the shim of router `router` of a running testbed with SIGKILL (a
/// crash: no final counters), waits until it is gone and starts a new one
/// with the arguments `up` was given (or `shim_args`, if some). The new shim
/// appends to the same log; policy rules and addresses never went away, the
/// routes into its devices are added again.
pub fn restart(
    testbed: &str,
    router: &str,
    shim: &Path,
    shim_args: Option<&[String]>,
) -> Result<(), String> {
    let ns = namespace(testbed, router);
    if !existing(testbed)?.contains(&ns) {
        return Err(format!("testbed `{testbed}` has no router `{router}`"));
    }
    let dir = state_dir(testbed);
    let args: Vec<String> = match shim_args {
        Some(args) => args.to_vec(),
        None => {
            let saved = dir.join(SHIM_ARGS_FILE);
            let text = fs::read_to_string(&saved)
                .map_err(|e| format!("cannot read {}: {e}", saved.display()))?;
            text.split('\0')
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect()
        }
    };
    let deadline = Instant::now() + SHIM_START_TIMEOUT;
    loop {
        let pids = pids_in(&ns);
        // The devices go when the dead shim's descriptors close.
        let devices = ip_in(&ns, &["-o", "link", "show"])?;
        if pids.is_empty() && !devices.contains(UP_DEVICE) && !devices.contains(DOWN_DEVICE) {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("the shim in {ns} does not exit (pids {pids:?})"));
        }
        for pid in pids {
            // SAFETY: kill(2) with a pid the kernel just listed.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        thread::sleep(Duration::from_millis(10));
    }
    attach_shim(&ns, router, shim, &args, &dir)
}

/// Processes running in a namespace.
pub fn pids_in(ns: &str) -> Vec<i32> {
    run("ip", &["netns", "pids", ns])
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Removes every namespace of the testbed and the processes in them: the
/// shims get SIGTERM (and print their final counters to their logs and
/// stats files), then SIGKILL if they are still there five seconds later:
/// on a busy machine one second was not always enough for the final
/// stats line (`gso_super_packets_are_split_and_marked_per_datagram`).
/// Returns what was removed.
pub fn down(testbed: &str) -> Result<Vec<String>, String> {
    let namespaces = existing(testbed)?;
    for (signal, grace) in [(libc::SIGTERM, 5), (libc::SIGKILL, 1)] {
        let pids: Vec<i32> = namespaces.iter().flat_map(|ns| pids_in(ns)).collect();
        for &pid in &pids {
            // SAFETY: kill(2) with a pid the kernel just listed.
            unsafe { libc::kill(pid, signal) };
        }
        let deadline = Instant::now() + Duration::from_secs(grace);
        while Instant::now() < deadline && namespaces.iter().any(|ns| !pids_in(ns).is_empty()) {
            thread::sleep(Duration::from_millis(20));
        }
    }
    let mut errors = Vec::new();
    for ns in &namespaces {
        if let Err(e) = run("ip", &["netns", "delete", ns]) {
            errors.push(e);
        }
    }
    if errors.is_empty() {
        Ok(namespaces)
    } else {
        Err(errors.join("; "))
    }
}

/// What exists of a testbed: namespaces and the processes in them.
pub fn status(testbed: &str) -> Result<String, String> {
    let namespaces = existing(testbed)?;
    if namespaces.is_empty() {
        return Ok(format!("testbed {testbed}: not up\n"));
    }
    let mut s = format!("testbed {testbed}: {} namespaces\n", namespaces.len());
    for ns in &namespaces {
        let pids = pids_in(ns);
        let addrs = ip_in(ns, &["-o", "-4", "addr", "show"]).unwrap_or_default();
        let addrs: Vec<&str> = addrs
            .lines()
            .filter_map(|l| l.split_whitespace().nth(3))
            .filter(|a| !a.starts_with("127."))
            .collect();
        let _ = writeln!(s, "  {ns:<20} {:<40} pids {pids:?}", addrs.join(" "));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse() {
        assert_eq!("dumbbell".parse(), Ok(Shape::Dumbbell(2)));
        assert_eq!("parking-lot:3".parse(), Ok(Shape::ParkingLot(3)));
        assert!("dumbbell:0"
            .parse::<Shape>()
            .unwrap_err()
            .contains("1..=50"));
        assert!("star"
            .parse::<Shape>()
            .unwrap_err()
            .contains("unknown topology"));
        assert!(Topology::new("no spaces", Shape::Dumbbell(1)).is_err());
        assert_eq!(name_of("parking-lot:3"), Ok("parking-lot"));
    }

    #[test]
    fn dumbbell_layout() {
        let t = Topology::new("t", Shape::Dumbbell(2)).unwrap();
        assert_eq!(t.namespaces().len(), 5);
        assert_eq!(t.host_addr("s2").as_deref(), Some("10.1.2.2"));
        assert_eq!(t.host_addr("r1").as_deref(), Some("10.2.1.2"));
        assert_eq!(t.host_addr6("r1").as_deref(), Some("fd00:2:1::2"));
        assert_eq!(t.router_ifaces("rt", Side::Left), ["s1", "s2"]);
        assert_eq!(t.router_ifaces("rt", Side::Right), ["r1", "r2"]);
        assert!(t.router_routes("rt").is_empty());
    }

    #[test]
    fn parking_lot_routes_along_the_chain() {
        let t = Topology::new("p", Shape::ParkingLot(3)).unwrap();
        assert_eq!(t.routers, ["rt1", "rt2", "rt3"]);
        assert_eq!(t.router_ifaces("rt2", Side::Left), ["to-rt1", "s2"]);
        assert_eq!(t.router_ifaces("rt2", Side::Right), ["r2", "to-rt3"]);
        let routes = t.router_routes("rt2");
        // The long receiver (on rt3) via rt3's end of the rt2–rt3 link.
        assert!(
            routes.contains(&("10.2.0.0/24".into(), "10.3.2.2".into())),
            "{routes:?}"
        );
        // The long sender (on rt1) via rt1's end of the rt1–rt2 link.
        assert!(
            routes.contains(&("10.1.0.0/24".into(), "10.3.1.1".into())),
            "{routes:?}"
        );
        assert!(t
            .router_routes6("rt2")
            .contains(&("fd00:2:0::/64".into(), "fd00:3:2::2".into())));
        // rt1 reaches rt3's subnets through rt2.
        assert!(t
            .router_routes("rt1")
            .contains(&("10.2.3.0/24".into(), "10.3.1.2".into())));
    }
}

//! UDP forwarding between network namespaces, in one run: through the shim
//! (`ecnq-shim tun`, unlimited link), through plain kernel forwarding in
//! the same router namespace, and through kernel forwarding with ecnq's tc
//! program marking erc on the router's egress (`ecnq-bpf`, its control
//! loop running), at 64 B and 1200 B payloads; packets/s and Gbit/s (IP
//! bytes) forwarded, CPU per packet, and each path's ratio to the kernel's
//! (goals: the kernel router ≥ 0.9× plain forwarding, and its own CPU per
//! packet ≤ 0.3 µs).
//!
//! Load: [`SENDERS`] sender threads, each sending its datagrams in UDP GSO
//! batches (one `send` per batch), tagged erc with ECT(0) so that the
//! routers mark them. The sender's device has GSO off (`gso_max_segs 1`),
//! so the batches are cut into packets as they leave the sender and the
//! router forwards and marks single packets, as a router does traffic
//! from a network. What the receiver's device took in over the trial is
//! what the path forwarded; the receiving socket is never read (it drops
//! what it cannot hold, at the same cost on every path).
//!
//! The host is shared with other work, so a single trial can swing by a
//! factor of two. The bench therefore runs several rounds; each round
//! measures every path back to back at each payload, the order turning
//! between rounds, and switches paths by adding or removing the router's
//! policy rules (the shim keeps running) and by attaching or detaching the
//! tc program. It prints each path's median packets/s with the range, and
//! the median and range of the per-round ratios to the kernel's: each
//! comes from trials a second apart, which saw about the same load.
//!
//! It also prints the CPU time each path costs per packet forwarded: the
//! bench's own (sender threads and the tc program's control loop) plus the
//! shim process's, from /proc (tick-sampled; softirq work, where the
//! kernel forwards and the tc program runs, counts for the thread it ran
//! on). The host has two cores: with the senders on both, the path that
//! needs more CPU per packet forwards fewer packets/s. A path's own CPU per
//! packet is its figure less plain forwarding's.
//!
//! In those rounds the kernel forwards inside the senders' system calls,
//! so the senders' own work is most of every packet's cost and the ratio
//! measures the sender as much as the router. The router-bound rounds that
//! follow give the router a core of its own: the router's ingress device
//! takes packets in through NAPI in a kernel thread of its own (GRO on,
//! `threaded`), pinned to [`ROUTER_CPU`], and the senders run on
//! [`SENDER_CPU`]; a packet's forwarding, the tc program, and its delivery
//! to the receiver all run in that thread. The thread and the senders run
//! at the highest nice priority, and the senders offer more than the
//! router forwards: its input ring (veth's, 256 packets) overflows and
//! packets are lost, which shows that the router, not the sender, sets the
//! rate. Plain forwarding and the tc program alternate; the bench prints
//! their packets/s, the router thread's CPU time per packet forwarded
//! (from the scheduler's clock) and the shares of the trial the thread
//! ran and waited for its core, and two ratios per round: of the
//! packets/s measured, and of a core that forwards flat out (plain
//! forwarding's CPU time per packet over the tc path's). On a busy host
//! the thread ran a fifth of each trial and waited for its core 1 % of
//! it: it slept while its ring overflowed, between the senders' bursts,
//! so the packets/s measured are set by how those bursts and its wake-ups
//! meet, and the second ratio is the router's own.
//!
//! Needs root; prints "skipped" otherwise, and runs without the tc path
//! where ecnq-bpf was built without its program.
//! Run: `cargo bench -p ecnq-shim --bench forwarding`.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use ecnq::schemes::registry::Scheme;
use ecnq::wire::ecn::{Ecn, SchemeTag};
use ecnq_bpf::maps::ClassCounters;
use ecnq_shim::testbed::{self, namespace, Shape, Topology};

/// Rounds of trials (odd: the median is one of them).
const ROUNDS: usize = 7;
/// How long the senders send in one trial.
const TRIAL: Duration = Duration::from_secs(1);
/// How long the last packets of a trial take to arrive, at most.
const DRAIN: Duration = Duration::from_millis(300);
const PAYLOADS: [usize; 2] = [64, 1200];
/// IPv4 and UDP headers: the Gbit/s count IP bytes.
const HEADERS: usize = 28;
/// Sender threads: one per core of the host.
const SENDERS: u16 = 2;
/// Datagrams per GSO batch, at most (the kernel's UDP_MAX_SEGMENTS).
const BATCH: usize = 64;
/// A GSO batch is one UDP datagram of at most 64 KiB.
const BATCH_BYTES: usize = 65_000;
/// The router's interface towards the receiver, where the tc program
/// marks (the testbed names a router's interface after the host on it).
const EGRESS: &str = "r1";
/// Each sender's send buffer, bytes: far more than the router's input
/// ring holds (veth's 256 packets).
const SEND_BUFFER: i32 = 1 << 26;
/// The core the senders run on in the router-bound rounds.
const SENDER_CPU: usize = 0;
/// The core the router's thread runs on in the router-bound rounds.
const ROUTER_CPU: usize = 1;
/// The router's interface towards the sender, where it takes packets in.
const INGRESS: &str = "s1";
/// The nice value of the senders and the router's thread in the
/// router-bound rounds: the highest, which takes a core from other work
/// of the normal one. Not real-time: the tc program's control loop, at
/// the lowest real-time priority, must still run on time.
const NICE: i32 = -20;
/// The rate the tc program's control loop meters against: more than the
/// path carries, as the shim's link is unlimited.
const BPF_CAPACITY: f64 = 100e9 / 8.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Shim,
    Kernel,
    Bpf,
}

impl Route {
    fn name(self) -> &'static str {
        match self {
            Route::Shim => "shim",
            Route::Kernel => "kernel",
            Route::Bpf => "bpf",
        }
    }
}

struct Trial {
    path: Route,
    payload: usize,
    round: usize,
    sent: u64,
    received: u64,
    pps: f64,
    /// CPU seconds per packet received: of the bench and the shim, or in
    /// the router-bound rounds of the router's thread.
    cpu_per_packet: f64,
    /// The share of the trial the router's thread waited for its core
    /// (router-bound rounds).
    waiting: f64,
}

/// How the paths share the host's two cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cores {
    /// Senders on both; the kernel forwards in their system calls.
    Shared,
    /// Senders on [`SENDER_CPU`], the router's thread (its pid) on
    /// [`ROUTER_CPU`].
    RouterBound(i32),
}

/// Pins thread `pid` (0: the calling one) to core `cpu` at nice value
/// [`NICE`].
fn pin(pid: i32, cpu: usize) {
    // SAFETY: an all-zero cpu_set_t is the empty set, CPU_SET writes
    // within it; both calls read what they are given.
    let (affinity, nice) = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        (
            libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set),
            libc::setpriority(libc::PRIO_PROCESS, pid as libc::id_t, NICE),
        )
    };
    let error = std::io::Error::last_os_error();
    assert!(affinity == 0 && nice == 0, "pinning {pid}: {error}");
}

/// The kernel threads polling NAPI for a device named `dev`, in any
/// namespace (their names: `napi/DEV-ID`).
fn napi_threads(dev: &str) -> Vec<i32> {
    let prefix = format!("napi/{dev}-");
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.starts_with(&prefix))
        })
        .collect()
}

/// Has the router's ingress device in `router_ns` take packets in through
/// NAPI in a thread of its own, pins the thread to [`ROUTER_CPU`], and
/// returns its pid. veth hands a packet to NAPI where GRO is on at the
/// receiving end and the sending end (`sender_ns`'s) has TSO off.
fn router_thread(router_ns: &str, sender_ns: &str) -> i32 {
    let before = napi_threads(INGRESS);
    let commands = [
        (sender_ns, "ethtool -K eth0 tso off".to_owned()),
        (router_ns, format!("ethtool -K {INGRESS} gro on")),
        (
            router_ns,
            format!("echo 1 > /sys/class/net/{INGRESS}/threaded"),
        ),
    ];
    for (ns, command) in commands {
        // sysfs shows a namespace's devices only to a process that mounted
        // it there, which `ip netns exec` does.
        let status = Command::new("ip")
            .args(["netns", "exec", ns, "sh", "-c", &command])
            .status()
            .expect("ip runs");
        assert!(status.success(), "{command} in {ns} failed");
    }
    let new: Vec<i32> = napi_threads(INGRESS)
        .into_iter()
        .filter(|pid| !before.contains(pid))
        .collect();
    let [pid] = new[..] else {
        panic!("no NAPI thread of its own for {INGRESS}: {new:?}");
    };
    pin(pid, ROUTER_CPU);
    pid
}

/// What thread `pid` has done so far, from the scheduler's clock
/// (/proc/PID/schedstat, nanoseconds): seconds run (softirq work done in
/// its context included) and seconds it waited, runnable, for a core.
fn run_and_wait(pid: i32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap_or_default();
    let mut fields = stat
        .split_whitespace()
        .map(|f| f.parse::<u64>().map_or(0.0, |ns| ns as f64 / 1e9));
    (fields.next().unwrap_or(0.0), fields.next().unwrap_or(0.0))
}

/// CPU time (user + system) a process has used so far, in seconds.
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name, which is in parentheses: state is
    // the first, utime the twelfth, stime the thirteenth.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) as f64 / hz
}

/// CPU seconds used so far by this process and the shims' namespace.
fn cpu_used(router_ns: &str) -> f64 {
    let shims: f64 = testbed::pids_in(router_ns)
        .iter()
        .map(|pid| cpu_seconds(&pid.to_string()))
        .sum();
    cpu_seconds("self") + shims
}

/// Packets `dev` in namespace `ns` has received so far.
fn rx_packets(ns: &str, dev: &str) -> u64 {
    let out = Command::new("ip")
        .args(["-n", ns, "-s", "link", "show", "dev", dev])
        .output()
        .expect("ip runs");
    let text = String::from_utf8_lossy(&out.stdout);
    // The line after "RX: bytes packets ..." holds the figures.
    let mut lines = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("RX:"));
    lines
        .nth(1)
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no RX packets for {dev} in {ns}: {text}"))
}

/// Sets an integer socket option, or panics.
fn set_option(socket: &UdpSocket, level: i32, option: i32, value: i32) {
    // SAFETY: a valid socket and an int option.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            option,
            (&value as *const i32).cast(),
            4,
        )
    };
    assert_eq!(r, 0, "setsockopt: {}", std::io::Error::last_os_error());
}

/// The senders send `payload`-byte datagrams to `to` for [`TRIAL`], in
/// GSO batches; what `rx_dev` took in, from the first send to [`DRAIN`]
/// after the last, is what the path forwarded. Each sender runs on core
/// `pin` where one is given ([`pin`]). Returns (sent, received, packets/s
/// over the sending time).
fn blast(
    senders: &[UdpSocket],
    to: SocketAddr,
    payload: usize,
    rx_ns: &str,
    pin: Option<usize>,
) -> (u64, u64, f64) {
    let segments = BATCH.min(BATCH_BYTES / payload);
    let before = rx_packets(rx_ns, "eth0");
    let start = Instant::now();
    let sent: u64 = thread::scope(|scope| {
        let threads: Vec<_> = senders
            .iter()
            .map(|tx| {
                scope.spawn(move || {
                    if let Some(cpu) = pin {
                        self::pin(0, cpu);
                    }
                    set_option(tx, libc::SOL_UDP, libc::UDP_SEGMENT, payload as i32);
                    // Payloads that differ as ciphertext does, so that
                    // their hashes spread over erc's chain positions.
                    let data: Vec<u8> = (0..payload * segments)
                        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0])
                        .collect();
                    let mut sent = 0u64;
                    while start.elapsed() < TRIAL {
                        if tx.send_to(&data, to).is_ok() {
                            sent += segments as u64;
                        }
                    }
                    sent
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).sum()
    });
    let span = start.elapsed();
    thread::sleep(DRAIN);
    let received = rx_packets(rx_ns, "eth0") - before;
    (sent, received, received as f64 / span.as_secs_f64())
}

/// ecnq's tc program on the router's egress, with its control loop on a
/// thread of this process: attached on `start`, detached on drop.
struct BpfRouter {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<Result<ClassCounters, String>>>,
}

impl BpfRouter {
    fn start(router_ns: &str) -> BpfRouter {
        let stop = Arc::new(AtomicBool::new(false));
        let (ns, flag) = (router_ns.to_owned(), Arc::clone(&stop));
        let thread = thread::spawn(move || {
            testbed::enter(&ns).map_err(|e| e.to_string())?;
            let options = ecnq_bpf::run::Options {
                dev: EGRESS.to_owned(),
                capacity: Some(BPF_CAPACITY),
                stats_every: None,
                ecnq_class: None,
            };
            ecnq_bpf::run::run(&options, &flag)
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while !bpf_attached(router_ns) {
            assert!(
                !thread.is_finished(),
                "ecnq-bpf stopped: {:?}",
                thread.join()
            );
            assert!(Instant::now() < deadline, "ecnq-bpf did not attach");
            thread::sleep(Duration::from_millis(20));
        }
        BpfRouter {
            stop,
            thread: Some(thread),
        }
    }

    /// Detaches; returns the program's counters.
    fn stop(mut self) -> ClassCounters {
        self.stop.store(true, Ordering::Relaxed);
        let counters = self.thread.take().unwrap().join().unwrap();
        counters.expect("the control loop ran")
    }
}

impl Drop for BpfRouter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Whether ecnq's program is on the router's egress (at tcx or as a tc
/// filter), as seen from a thread in the router's namespace.
fn bpf_attached(router_ns: &str) -> bool {
    let ns = router_ns.to_owned();
    thread::spawn(move || {
        testbed::enter(&ns).map_err(|e| e.to_string())?;
        ecnq_bpf::tc::program_id(EGRESS)
    })
    .join()
    .expect("the look at the router's egress")
    .is_ok_and(|id| id.is_some())
}

/// The host's load, its 1-minute average (/proc/loadavg): the figures of
/// a busy host's trials swing more.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Median, minimum and maximum.
fn spread(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    (values[n / 2], values[0], values[n - 1])
}

fn gbps(pps: f64, payload: usize) -> f64 {
    pps * (payload + HEADERS) as f64 * 8.0 / 1e9
}

fn report(trials: &[Trial], paths: &[Route]) {
    println!(
        "{ROUNDS} rounds of {} s per path and payload, {SENDERS} senders; medians [min–max]",
        TRIAL.as_secs_f64()
    );
    println!("path    payload      sent  received   loss            pkt/s                  Gbit/s  CPU µs/pkt");
    let of = |path: Route, payload: usize| {
        trials
            .iter()
            .filter(move |t| t.path == path && t.payload == payload)
    };
    for payload in PAYLOADS {
        for &path in paths {
            let sent: u64 = of(path, payload).map(|t| t.sent).sum();
            let received: u64 = of(path, payload).map(|t| t.received).sum();
            let (pps, lo, hi) = spread(of(path, payload).map(|t| t.pps).collect());
            let (cpu, _, _) = spread(of(path, payload).map(|t| t.cpu_per_packet * 1e6).collect());
            println!(
                "{:<7} {payload:>5} B {sent:>9} {received:>9} {:>5.1} % {pps:>8.0} [{lo:>6.0}–{hi:>6.0}] {:>6.3} [{:.3}–{:.3}] {cpu:>6.2}",
                path.name(),
                100.0 * (1.0 - received as f64 / sent as f64),
                gbps(pps, payload),
                gbps(lo, payload),
                gbps(hi, payload),
            );
        }
    }
    for payload in PAYLOADS {
        let per_round = |path, value: fn(&Trial) -> f64| -> Vec<f64> {
            (0..ROUNDS)
                .map(|r| {
                    of(path, payload)
                        .find(|t| t.round == r)
                        .map_or(f64::NAN, value)
                })
                .collect()
        };
        let kernel_pps = per_round(Route::Kernel, |t| t.pps);
        let kernel_cpu = per_round(Route::Kernel, |t| t.cpu_per_packet);
        for (&path, goal) in paths.iter().zip(["", "", "(goal ≥ 0.9)"]).skip(1) {
            let pps = per_round(path, |t| t.pps);
            let (ratio, lo, hi) = spread(pps.iter().zip(&kernel_pps).map(|(p, k)| p / k).collect());
            let cpu = per_round(path, |t| t.cpu_per_packet);
            let own = cpu
                .iter()
                .zip(&kernel_cpu)
                .map(|(c, k)| (c - k) * 1e6)
                .collect();
            let (own, own_lo, own_hi) = spread(own);
            println!(
                "{payload:>5} B: {0} / kernel = {ratio:.2} [{lo:.2}–{hi:.2}] {goal}; {0}'s own CPU {own:.2} µs/pkt [{own_lo:.2}–{own_hi:.2}]",
                path.name()
            );
        }
    }
}

/// The router-bound rounds' figures: each path's packets/s, loss, the
/// router thread's CPU time per packet and the share of the trial it ran;
/// per round, the tc path's packets/s over plain forwarding's, and the
/// same ratio for a router core that runs flat out (plain forwarding's
/// CPU time per packet over the tc path's).
fn report_bound(trials: &[Trial]) {
    println!(
        "router-bound: senders on core {SENDER_CPU}, the router's thread on core {ROUTER_CPU}; \
         {ROUNDS} rounds, medians [min–max]"
    );
    println!(
        "path    payload      sent  received   loss             pkt/s   router µs/pkt  ran waited"
    );
    let of = |path: Route, payload: usize| {
        trials
            .iter()
            .filter(move |t| t.path == path && t.payload == payload)
    };
    for payload in PAYLOADS {
        for path in [Route::Kernel, Route::Bpf] {
            let sent: u64 = of(path, payload).map(|t| t.sent).sum();
            let received: u64 = of(path, payload).map(|t| t.received).sum();
            let (pps, lo, hi) = spread(of(path, payload).map(|t| t.pps).collect());
            let (cpu, _, _) = spread(of(path, payload).map(|t| t.cpu_per_packet * 1e6).collect());
            let (busy, _, _) = spread(
                of(path, payload)
                    .map(|t| t.cpu_per_packet * t.pps)
                    .collect(),
            );
            let (waiting, _, _) = spread(of(path, payload).map(|t| t.waiting).collect());
            println!(
                "{:<7} {payload:>5} B {sent:>9} {received:>9} {:>5.1} % {pps:>8.0} [{lo:>7.0}–{hi:>7.0}] {cpu:>6.2} {:>4.0} % {:>4.0} %",
                path.name(),
                100.0 * (1.0 - received as f64 / sent as f64),
                100.0 * busy,
                100.0 * waiting,
            );
        }
    }
    for payload in PAYLOADS {
        let rounds: Vec<(&Trial, &Trial)> = (0..ROUNDS)
            .filter_map(|r| {
                let at = |path| of(path, payload).find(|t| t.round == r);
                Some((at(Route::Bpf)?, at(Route::Kernel)?))
            })
            .collect();
        let (ratio, lo, hi) = spread(rounds.iter().map(|(b, k)| b.pps / k.pps).collect());
        let (core, core_lo, core_hi) = spread(
            rounds
                .iter()
                .map(|(b, k)| k.cpu_per_packet / b.cpu_per_packet)
                .collect(),
        );
        let (own, own_lo, own_hi) = spread(
            rounds
                .iter()
                .map(|(b, k)| (b.cpu_per_packet - k.cpu_per_packet) * 1e6)
                .collect(),
        );
        // Saturated: the senders offered at least 5 % more than arrived.
        let saturated = |t: &Trial| t.sent as f64 > 1.05 * t.received as f64;
        let both = rounds.iter().filter(|(b, k)| saturated(b) && saturated(k));
        println!(
            "{payload:>5} B router-bound ({} of {} rounds saturated on both paths): \
             bpf / kernel = {ratio:.2} [{lo:.2}–{hi:.2}] measured, {core:.2} [{core_lo:.2}–{core_hi:.2}] \
             for a core flat out (goal ≥ 0.9); bpf's own CPU {own:.2} µs/pkt [{own_lo:.2}–{own_hi:.2}]",
            both.count(),
            rounds.len()
        );
    }
}

/// The testbed the bench forwards through, and which path transit
/// traffic takes now.
struct Bench<'a> {
    topology: &'a Topology,
    senders: Vec<UdpSocket>,
    to: SocketAddr,
    router_ns: String,
    receiver_ns: String,
    current: Route,
    bpf_counts: ClassCounters,
}

impl Bench<'_> {
    /// [`ROUNDS`] rounds over `paths`, each path at each payload once a
    /// round, the order turning between rounds.
    fn rounds(&mut self, paths: &[Route], cores: Cores) -> Vec<Trial> {
        let mut trials = Vec::new();
        for round in 0..ROUNDS {
            let mut order = paths.to_vec();
            order.rotate_left(round % paths.len());
            for payload in PAYLOADS {
                for &path in &order {
                    trials.push(self.trial(path, payload, round, cores));
                }
            }
        }
        trials
    }

    fn trial(&mut self, path: Route, payload: usize, round: usize, cores: Cores) -> Trial {
        let through_shim = path == Route::Shim;
        if through_shim != (self.current == Route::Shim) {
            testbed::route_through_shims(self.topology, through_shim).unwrap();
        }
        self.current = path;
        let bpf = (path == Route::Bpf).then(|| BpfRouter::start(&self.router_ns));
        // CPU seconds so far, and seconds the router's thread waited.
        let cpu_now = || match cores {
            Cores::Shared => (cpu_used(&self.router_ns), 0.0),
            Cores::RouterBound(thread) => run_and_wait(thread),
        };
        let pin = matches!(cores, Cores::RouterBound(_)).then_some(SENDER_CPU);
        let (cpu, waited) = cpu_now();
        let start = Instant::now();
        let (sent, received, pps) = blast(&self.senders, self.to, payload, &self.receiver_ns, pin);
        let (cpu_after, waited_after) = cpu_now();
        let cpu_per_packet = (cpu_after - cpu) / received as f64;
        let waiting = (waited_after - waited) / start.elapsed().as_secs_f64();
        if let Some(c) = bpf.map(BpfRouter::stop) {
            self.bpf_counts.packets += c.packets;
            self.bpf_counts.marked += c.marked;
            self.bpf_counts.stale += c.stale;
            self.bpf_counts.gso += c.gso;
        }
        Trial {
            path,
            payload,
            round,
            sent,
            received,
            pps,
            cpu_per_packet,
            waiting,
        }
    }
}

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("forwarding bench skipped: needs root (network namespaces)");
        return;
    }
    let paths: &[Route] = match ecnq_bpf::tc::object() {
        Ok(_) => &[Route::Kernel, Route::Shim, Route::Bpf],
        Err(why) => {
            println!("the tc path is left out: {why}");
            &[Route::Kernel, Route::Shim]
        }
    };
    let name = format!("fwd{}", std::process::id());
    let topology = Topology::new(&name, Shape::Dumbbell(1)).unwrap();
    let shim = Path::new(env!("CARGO_BIN_EXE_ecnq-shim"));
    testbed::up(&topology, shim, &[]).unwrap();
    let result = std::panic::catch_unwind(|| {
        let addr = |host: &str, port: u16| -> SocketAddr {
            format!("{}:{port}", topology.host_addr(host).unwrap())
                .parse()
                .unwrap()
        };
        let sender_ns = namespace(&name, "s1");
        // GSO batches leave the sender as single packets.
        let status = Command::new("ip")
            .args([
                "-n",
                &sender_ns,
                "link",
                "set",
                "dev",
                "eth0",
                "gso_max_segs",
                "1",
            ])
            .status()
            .unwrap();
        assert!(status.success());
        let tos = i32::from(SchemeTag::new(Scheme::Erc.wire().id()).tos(Ecn::Ect0));
        let senders: Vec<UdpSocket> = (0..SENDERS)
            .map(|i| {
                let tx = testbed::udp_socket_in(&sender_ns, addr("s1", 4000 + i)).unwrap();
                set_option(&tx, libc::IPPROTO_IP, libc::IP_TOS, tos);
                // Packets waiting in the router's input ring hold the
                // send buffer: a sender that blocked on it waited for the
                // router, and both slept half the time.
                set_option(&tx, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, SEND_BUFFER);
                tx
            })
            .collect();
        let receiver_ns = namespace(&name, "r1");
        let rx = testbed::udp_socket_in(&receiver_ns, addr("r1", 5000)).unwrap();
        let mut bench = Bench {
            topology: &topology,
            senders,
            to: rx.local_addr().unwrap(),
            router_ns: namespace(&name, "rt"),
            receiver_ns,
            // `up` leaves transit traffic going through the shim.
            current: Route::Shim,
            bpf_counts: ClassCounters::default(),
        };
        let load = load_average();
        let trials = bench.rounds(paths, Cores::Shared);
        println!(
            "host load (1-minute average) {load} before, {} after",
            load_average()
        );
        report(&trials, paths);
        if paths.contains(&Route::Bpf) {
            let thread = router_thread(&bench.router_ns, &sender_ns);
            let paths = [Route::Kernel, Route::Bpf];
            let load = load_average();
            let bound = bench.rounds(&paths, Cores::RouterBound(thread));
            println!(
                "host load (1-minute average) {load} before, {} after",
                load_average()
            );
            report_bound(&bound);
            let c = bench.bpf_counts;
            println!(
                "the tc program saw {} packets: {} marked, {} unmarked with a stale index, {} GSO",
                c.packets, c.marked, c.stale, c.gso
            );
            assert!(c.marked > 0, "the tc path forwarded without marking");
        }
    });
    testbed::down(&name).unwrap();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

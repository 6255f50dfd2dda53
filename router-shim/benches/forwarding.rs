//! UDP forwarding between network namespaces, in one run: through the shim
//! (`ecnq-shim tun`, unlimited link) and through plain kernel forwarding in
//! the same router namespace, at 64 B and 1200 B payloads; packets/s and
//! Gbit/s (IP bytes) as received, and the shim/kernel ratio (goal ≥ 0.8).
//!
//! Method: a sender thread blasts datagrams for one second; a receiver thread
//! counts what arrives between its first and last packet. The host is shared
//! with other work, so a single trial can swing by a factor of two. The bench
//! therefore runs several rounds; each round measures both paths back to back
//! at each payload, the path that goes first alternating between rounds, and
//! switches paths by adding or removing the router's policy rules (the shim
//! keeps running). It prints each path's median packets/s with the range, and
//! the median and range of the per-round ratio shim / kernel: each ratio
//! comes from two trials a second apart, which saw about the same load.
//!
//! It also prints the CPU time each path costs per packet received: the
//! bench's own (sender and receiver threads) plus the shim process's, from
//! /proc (tick-sampled; softirq work counts for the thread it ran on). The
//! host has two cores: when the path needs more CPU per packet than the
//! kernel's, it forwards fewer packets/s as soon as the cores are busy.
//!
//! Needs root; prints "skipped" otherwise.
//! Run: `cargo bench -p ecnq-shim --bench forwarding`.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use ecnq_shim::testbed::{self, namespace, Shape, Topology};

/// Rounds of trials (odd: the median is one of them).
const ROUNDS: usize = 7;
/// How long the sender blasts in one trial.
const TRIAL: Duration = Duration::from_secs(1);
/// The receiver's silence that ends a trial.
const DRAIN: Duration = Duration::from_millis(300);
const PAYLOADS: [usize; 2] = [64, 1200];
/// IPv4 and UDP headers: the Gbit/s count IP bytes.
const HEADERS: usize = 28;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Shim,
    Kernel,
}

impl Route {
    fn name(self) -> &'static str {
        match self {
            Route::Shim => "shim",
            Route::Kernel => "kernel",
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
    /// CPU seconds of the bench and the shim per packet received.
    cpu_per_packet: f64,
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

/// One sender blasting `payload`-byte datagrams for [`TRIAL`]; the receiver
/// counts what arrives between its first and last packet. Each datagram
/// starts with the trial's number, so a straggler from an earlier trial is
/// not counted. Returns (sent, received, packets/s).
fn blast(tx: &UdpSocket, rx: &UdpSocket, payload: usize, trial: u32) -> (u64, u64, f64) {
    let to = rx.local_addr().unwrap();
    let rx = rx.try_clone().unwrap();
    rx.set_read_timeout(Some(DRAIN)).unwrap();
    let receiver = thread::spawn(move || {
        let mut buf = vec![0u8; 2048];
        let (mut n, mut first, mut last) = (0u64, None, Instant::now());
        while let Ok(len) = rx.recv(&mut buf) {
            if len != payload || buf[..4] != trial.to_be_bytes() {
                continue;
            }
            n += 1;
            last = Instant::now();
            first.get_or_insert(last);
        }
        (n, first.map(|f| last - f))
    });
    let mut data = vec![0u8; payload];
    data[..4].copy_from_slice(&trial.to_be_bytes());
    let start = Instant::now();
    let mut sent = 0u64;
    while start.elapsed() < TRIAL {
        for _ in 0..64 {
            if tx.send_to(&data, to).is_ok() {
                sent += 1;
            }
        }
    }
    let (received, span) = receiver.join().unwrap();
    let secs = span.map_or(f64::NAN, |s| s.as_secs_f64());
    (sent, received, received.saturating_sub(1) as f64 / secs)
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

fn report(trials: &[Trial]) {
    println!(
        "{ROUNDS} rounds of {} s per path and payload; medians [min–max]",
        TRIAL.as_secs_f64()
    );
    println!("path    payload      sent  received   loss            pkt/s                  Gbit/s  CPU µs/pkt");
    for payload in PAYLOADS {
        for path in [Route::Kernel, Route::Shim] {
            let of = || {
                trials
                    .iter()
                    .filter(|t| t.path == path && t.payload == payload)
            };
            let sent: u64 = of().map(|t| t.sent).sum();
            let received: u64 = of().map(|t| t.received).sum();
            let (pps, lo, hi) = spread(of().map(|t| t.pps).collect());
            let (cpu, _, _) = spread(of().map(|t| t.cpu_per_packet * 1e6).collect());
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
        let pps = |path, round| {
            trials
                .iter()
                .find(|t| t.path == path && t.payload == payload && t.round == round)
                .map_or(f64::NAN, |t| t.pps)
        };
        let ratios = (0..ROUNDS)
            .map(|r| pps(Route::Shim, r) / pps(Route::Kernel, r))
            .collect();
        let (ratio, lo, hi) = spread(ratios);
        println!("{payload:>5} B: shim / kernel = {ratio:.2} [{lo:.2}–{hi:.2}] (goal ≥ 0.8)");
    }
}

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("forwarding bench skipped: needs root (network namespaces)");
        return;
    }
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
        let tx = testbed::udp_socket_in(&namespace(&name, "s1"), addr("s1", 4000)).unwrap();
        let rx = testbed::udp_socket_in(&namespace(&name, "r1"), addr("r1", 5000)).unwrap();
        ecnq::tos_io::set_buffers(&rx, 16 << 20);
        let router_ns = namespace(&name, "rt");
        // `up` leaves transit traffic going through the shim.
        let mut current = Route::Shim;
        let mut trials = Vec::new();
        for round in 0..ROUNDS {
            let order = if round % 2 == 0 {
                [Route::Shim, Route::Kernel]
            } else {
                [Route::Kernel, Route::Shim]
            };
            for payload in PAYLOADS {
                for path in order {
                    if path != current {
                        testbed::route_through_shims(&topology, path == Route::Shim).unwrap();
                        current = path;
                    }
                    let cpu = cpu_used(&router_ns);
                    let (sent, received, pps) = blast(&tx, &rx, payload, trials.len() as u32);
                    trials.push(Trial {
                        path,
                        payload,
                        round,
                        sent,
                        received,
                        pps,
                        cpu_per_packet: (cpu_used(&router_ns) - cpu) / received as f64,
                    });
                }
            }
        }
        report(&trials);
    });
    testbed::down(&name).unwrap();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

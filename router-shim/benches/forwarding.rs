//! UDP forwarding between network namespaces, in one run: through the shim
//! (`ecnq-shim tun`, unlimited link) and through plain kernel forwarding in
//! the same router namespace, at 64 B and 1200 B payloads; packets/s and
//! Gbit/s (IP bytes) as received, and the shim/kernel ratio (goal ≥ 0.8).
//! Needs root; prints "skipped" otherwise.
//! Run: `cargo bench -p ecnq-shim --bench forwarding`.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use ecnq_shim::testbed::{self, namespace, Shape, Topology};

const DURATION: Duration = Duration::from_secs(2);

struct Measured {
    sent: u64,
    received: u64,
    pps: f64,
    gbps: f64,
}

/// One sender blasting `payload`-byte datagrams for `DURATION`; the receiver
/// counts what arrives between its first and last packet.
fn blast(tx: &UdpSocket, rx: &UdpSocket, payload: usize) -> Measured {
    let to = rx.local_addr().unwrap();
    let rx = rx.try_clone().unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let receiver = thread::spawn(move || {
        let mut buf = vec![0u8; 2048];
        let (mut n, mut first, mut last) = (0u64, None, Instant::now());
        while rx.recv(&mut buf).is_ok() {
            n += 1;
            last = Instant::now();
            first.get_or_insert(last);
        }
        (n, first.map(|f| last - f))
    });
    let data = vec![0u8; payload];
    let start = Instant::now();
    let mut sent = 0u64;
    while start.elapsed() < DURATION {
        for _ in 0..64 {
            if tx.send_to(&data, to).is_ok() {
                sent += 1;
            }
        }
    }
    let (received, span) = receiver.join().unwrap();
    let secs = span.map_or(f64::NAN, |s| s.as_secs_f64());
    let pps = received.saturating_sub(1) as f64 / secs;
    Measured {
        sent,
        received,
        pps,
        gbps: pps * (payload + 28) as f64 * 8.0 / 1e9,
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
        ecnq_shim::tos_socket::set_buffers(&rx, 16 << 20);
        let mut rows = Vec::new();
        for payload in [64, 1200] {
            rows.push(("shim", payload, blast(&tx, &rx, payload)));
        }
        testbed::bypass_shims(&topology).unwrap();
        for payload in [64, 1200] {
            rows.push(("kernel", payload, blast(&tx, &rx, payload)));
        }
        println!("path    payload        sent    received      pkt/s   Gbit/s");
        for (path, payload, m) in &rows {
            println!(
                "{path:<7} {payload:>5} B {:>11} {:>11} {:>10.0} {:>8.3}",
                m.sent, m.received, m.pps, m.gbps
            );
        }
        for payload in [64, 1200] {
            let pps = |p: &str| {
                rows.iter()
                    .find(|r| r.0 == p && r.1 == payload)
                    .map_or(f64::NAN, |r| r.2.pps)
            };
            println!(
                "{payload:>5} B: shim / kernel = {:.2} (goal ≥ 0.8)",
                pps("shim") / pps("kernel")
            );
        }
    });
    testbed::down(&name).unwrap();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

//! Kernel UDP traffic through `ecnq-shim tun` in network namespaces (root
//! only; skipped otherwise): packets with known TOS bytes cross a testbed
//! router and arrive re-marked as the scheme says. Every test removes its
//! namespaces, also when it fails.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use ecnq::{Ecn, SchemeTag};
use ecnq_shim::testbed::{self, namespace, Shape, Topology};
use ecnq_shim::tos_socket::{enable_recv_tos, set_buffers};

mod common;
use common::{receive_all, send};

/// Whether this machine can run the namespace tests.
fn can_run() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let ip = Path::new("/usr/sbin/ip").exists() || Path::new("/sbin/ip").exists();
    if !(root && ip) {
        eprintln!("skipped: needs root and iproute2");
    }
    root && ip
}

/// A testbed that is torn down when dropped (even on a failed assertion).
struct Testbed {
    name: String,
    topology: Topology,
}

impl Testbed {
    fn up(kind: &str, shape: Shape, shim_args: &[&str]) -> Testbed {
        let name = format!("{kind}{}", std::process::id());
        let topology = Topology::new(&name, shape).unwrap();
        let args: Vec<String> = shim_args.iter().map(|s| s.to_string()).collect();
        let bin = Path::new(env!("CARGO_BIN_EXE_ecnq-shim"));
        let bed = Testbed { name, topology };
        testbed::up(&bed.topology, bin, &args).unwrap();
        bed
    }

    /// A UDP socket bound in a host's namespace.
    fn socket(&self, host: &str, port: u16) -> UdpSocket {
        let addr: SocketAddr = format!("{}:{port}", self.topology.host_addr(host).unwrap())
            .parse()
            .unwrap();
        let s = testbed::udp_socket_in(&namespace(&self.name, host), addr).unwrap();
        enable_recv_tos(&s, false).unwrap();
        set_buffers(&s, 8 << 20);
        s
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if let Err(e) = testbed::down(&self.name) {
            eprintln!("cleanup of {}: {e}", self.name);
        }
    }
}

#[test]
fn kernel_udp_crosses_the_tun_shim_re_marked() {
    if !can_run() {
        return;
    }
    let bed = Testbed::up(
        "nsm",
        Shape::Dumbbell(1),
        &["--link", "rate 4mbit limit 200kb"],
    );
    let sender = bed.socket("s1", 4000);
    let receiver = bed.socket("r1", 5000);
    let to = receiver.local_addr().unwrap();
    let vcp = SchemeTag::new(1);
    let kinds = [
        (b'v', vcp.tos(Ecn::Ect1)),
        (b'c', SchemeTag::UNTAGGED.tos(Ecn::Ect0)),
        (b'n', SchemeTag::UNTAGGED.tos(Ecn::NotEct)),
    ];
    // 8 Mbit/s offered to 4 Mbit/s for 0.8 s: VCP overload after the first
    // interval; the queue passes the classic threshold (half of 200 kb) at
    // about 0.2 s.
    let start = Instant::now();
    let mut sent = 0u32;
    while start.elapsed() < Duration::from_millis(800) {
        let (kind, tos) = kinds[sent as usize % 3];
        let mut payload = vec![kind; 1000];
        payload[1..5].copy_from_slice(&sent.to_be_bytes());
        send(&sender, to, &payload, tos);
        sent += 1;
        let due = start + Duration::from_micros(1000 * u64::from(sent));
        thread::sleep(due.saturating_duration_since(Instant::now()));
    }
    let got = receive_all(&receiver, Duration::from_millis(1500), usize::MAX);
    assert!(got.len() > 400, "{} of {sent} arrived", got.len());
    assert!(got.iter().all(|r| r.from == sender.local_addr().unwrap()));
    let of = |kind: u8| got.iter().filter(move |r| r.payload[0] == kind);
    assert!(of(b'v').all(|r| SchemeTag::from_tos(r.tos) == vcp));
    assert_eq!(Ecn::from_tos(of(b'v').next().unwrap().tos), Ecn::Ect1);
    assert_eq!(Ecn::from_tos(of(b'v').next_back().unwrap().tos), Ecn::Ce);
    assert_eq!(
        of(b'c').next_back().unwrap().tos,
        SchemeTag::UNTAGGED.tos(Ecn::Ce)
    );
    assert!(of(b'n').all(|r| r.tos == 0));

    // The way back crosses the (idle) down link: low-load code kept.
    for i in 0..3u8 {
        send(
            &receiver,
            sender.local_addr().unwrap(),
            &[i],
            vcp.tos(Ecn::Ect1),
        );
    }
    let replies = receive_all(&sender, Duration::from_millis(1000), 3);
    assert_eq!(replies.len(), 3);
    assert!(replies.iter().all(|r| r.tos == vcp.tos(Ecn::Ect1)));
}

#[test]
fn parking_lot_long_flow_and_cleanup_after_a_crash() {
    if !can_run() {
        return;
    }
    let bed = Testbed::up("nsp", Shape::ParkingLot(2), &["--link", "delay 1ms"]);
    // The long flow crosses both shims; a local flow crosses one.
    let long_tx = bed.socket("s0", 4000);
    let long_rx = bed.socket("r0", 5000);
    let local_tx = bed.socket("s2", 4000);
    let local_rx = bed.socket("r2", 5000);
    for i in 0..20u8 {
        send(&long_tx, long_rx.local_addr().unwrap(), &[i], 0x06);
        send(&local_tx, local_rx.local_addr().unwrap(), &[i], 0x06);
    }
    assert_eq!(
        receive_all(&long_rx, Duration::from_millis(1000), 20).len(),
        20
    );
    assert_eq!(
        receive_all(&local_rx, Duration::from_millis(1000), 20).len(),
        20
    );

    // A crashed shim leaves its namespace behind; `down` still removes all.
    let router = namespace(&bed.name, "rt1");
    let pids = String::from_utf8(
        std::process::Command::new("ip")
            .args(["netns", "pids", &router])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    for pid in pids
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
    {
        // SAFETY: kill(2) on a pid of this test's own shim.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let removed = testbed::down(&bed.name).unwrap();
    assert_eq!(removed.len(), 2 + 6, "{removed:?}");
    assert!(testbed::existing(&bed.name).unwrap().is_empty());
}

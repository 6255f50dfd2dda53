//! Kernel UDP traffic through `ecnq-shim tun` in network namespaces (root
//! only; skipped otherwise): packets with known TOS bytes cross a testbed
//! router and arrive re-marked as the scheme says. Every test removes its
//! namespaces, also when it fails.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use ecnq::tos_io::{enable_recv_tos, set_buffers};
use ecnq::{Ecn, SchemeTag};
use ecnq_shim::testbed::{self, namespace, Shape, Topology};

mod common;
use common::{assert_overload_marks, one_way_delays_ms, receive_all, send, steady_rate};

/// Whether this machine can run the namespace tests: root, iproute2, a TUN
/// device node, and the right to create network namespaces (containers may
/// lack it).
fn can_run() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    // Tests run in parallel: one probe name each.
    static PROBES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = format!("ecnq-probe-{}-{n}", std::process::id());
    let ip = |args: &[&str]| {
        std::process::Command::new("ip")
            .args(args)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let ok = root && Path::new("/dev/net/tun").exists() && ip(&["netns", "add", &probe]);
    if ok {
        ip(&["netns", "delete", &probe]);
    } else {
        eprintln!("skipped: needs root, /dev/net/tun, iproute2 and network namespaces");
    }
    ok
}

/// The namespace tests measure timing and forwarding: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
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

impl Testbed {
    /// An IPv6 UDP socket bound in a host's namespace.
    fn socket6(&self, host: &str, port: u16) -> UdpSocket {
        let addr: SocketAddr = format!("[{}]:{port}", self.topology.host_addr6(host).unwrap())
            .parse()
            .unwrap();
        let s = testbed::udp_socket_in(&namespace(&self.name, host), addr).unwrap();
        enable_recv_tos(&s, true).unwrap();
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
    let _serial = serial();
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
    // interval (its queue's share is half the link); the classic queue
    // holds packets long enough for CoDel.
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
    assert_overload_marks(&got, vcp);

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
    let _serial = serial();
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

/// Saturates the testbed's bottleneck with 1200-byte payloads at 120 % of
/// `rate` for one second; returns the rate the receiver sees (IP bytes).
fn tun_rate(bed: &Testbed, rate: f64) -> f64 {
    let sender = bed.socket("s1", 4100);
    let receiver = bed.socket("r1", 5100);
    let to = receiver.local_addr().unwrap();
    let wire = 1200.0 + 28.0;
    let per_ms = (rate * 1.2 / 8.0 / wire / 1000.0).ceil() as u64;
    let rx = thread::spawn(move || receive_all(&receiver, Duration::from_millis(1000), usize::MAX));
    let payload = [0u8; 1200];
    // A 50 ms head start keeps the link busy through short sender stalls.
    for _ in 0..(rate * 0.05 / 8.0 / wire) as u64 {
        send(&sender, to, &payload, 0x02);
    }
    let start = Instant::now();
    let mut batch = 0u64;
    while start.elapsed() < Duration::from_secs(1) {
        for _ in 0..per_ms {
            send(&sender, to, &payload, 0x02);
        }
        batch += 1;
        thread::sleep(
            (start + Duration::from_millis(batch)).saturating_duration_since(Instant::now()),
        );
    }
    let got = rx.join().unwrap();
    steady_rate(&got, wire, rate)
}

#[test]
fn tun_link_rate_and_delay_are_accurate() {
    let _serial = serial();
    if !can_run() {
        return;
    }
    for (spec, rate) in [
        ("rate 10mbit limit 20000", 10e6),
        ("rate 100mbit limit 20000", 100e6),
    ] {
        let bed = Testbed::up("nsr", Shape::Dumbbell(1), &["--link", spec]);
        let measured = tun_rate(&bed, rate);
        eprintln!("tun {spec}: measured {:.4} Mbit/s", measured / 1e6);
        assert!(
            (measured / rate - 1.0).abs() < 0.02,
            "{spec}: {measured:.0} bit/s"
        );
    }

    let bed = Testbed::up("nsd", Shape::Dumbbell(1), &["--link", "delay 20ms"]);
    let sender = bed.socket("s1", 4200);
    let receiver = bed.socket("r1", 5200);
    let to = receiver.local_addr().unwrap();
    let delays = one_way_delays_ms(&sender, to, receiver);
    let median = delays[delays.len() / 2];
    // Scheduling noise on a shared host only ever adds delay (to the shim
    // and to this receiver), so the lower decile measures what the link
    // adds; no packet may arrive early.
    let p10 = delays[delays.len() / 10];
    eprintln!(
        "tun delay 20ms: min {:.3} ms, p10 {p10:.3} ms, median {median:.3} ms",
        delays[0]
    );
    assert!(
        delays[0] >= 20.0 && p10 - 20.0 < 1.0,
        "min {:.3} ms, p10 {p10:.3} ms",
        delays[0]
    );
}

/// UDP_SEGMENT (linux/udp.h): the GSO segment size of a UDP socket.
const UDP_SEGMENT: libc::c_int = 103;

#[test]
fn gso_super_packets_are_split_and_marked_per_datagram() {
    let _serial = serial();
    if !can_run() {
        return;
    }
    let stats = std::env::temp_dir().join(format!("ecnq-shim-gso-{}.jsonl", std::process::id()));
    let stats_arg = stats.to_str().unwrap().to_owned();
    let bed = Testbed::up(
        "nsg",
        Shape::Dumbbell(1),
        &[
            "--link",
            "delay 1ms",
            "--stats",
            &stats_arg,
            "--stats-interval",
            "10s",
        ],
    );
    let sender = bed.socket("s1", 4300);
    let receiver = bed.socket("r1", 5300);
    let segment: libc::c_int = 1000;
    // SAFETY: setsockopt with a valid int on our socket.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&sender),
            libc::SOL_UDP,
            UDP_SEGMENT,
            (&segment as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        eprintln!("skipped: no UDP GSO here");
        return;
    }
    // Four sends of ten 1000-byte segments each, with a VCP tag.
    let tos = SchemeTag::new(1).tos(Ecn::Ect1);
    let to = receiver.local_addr().unwrap();
    let mut super_packet = vec![0u8; 10 * 1000];
    for (i, chunk) in super_packet.chunks_mut(1000).enumerate() {
        chunk.fill(i as u8);
    }
    for _ in 0..4 {
        send(&sender, to, &super_packet, tos);
    }
    let got = receive_all(&receiver, Duration::from_millis(1000), 40);
    assert_eq!(got.len(), 40, "every segment arrives as its own datagram");
    assert!(got.iter().all(|r| r.len == 1000 && r.tos == tos));
    testbed::down(&bed.name).unwrap();
    let text = std::fs::read_to_string(&stats).unwrap();
    let _ = std::fs::remove_file(&stats);
    let up = text
        .lines()
        .rev()
        .find(|l| l.contains("\"dir\":\"up\"") && l.contains("\"final\":true"))
        .unwrap_or_else(|| panic!("no final line in {text}"));
    // The shim saw (at least) the 40 datagrams, each metered and marked on
    // its own: 40 VCP packets left with ECT(1).
    assert!(up.contains("\"vcp\":[0,40,0,0]"), "{up}");
}

#[test]
fn ipv6_traffic_class_is_re_marked() {
    let _serial = serial();
    if !can_run() {
        return;
    }
    // Classic marking with a zero threshold: every ECT packet leaves with CE.
    let bed = Testbed::up(
        "ns6",
        Shape::Dumbbell(1),
        &["--scheme", "classic", "--classic-threshold", "0"],
    );
    let sender = bed.socket6("s1", 4400);
    let receiver = bed.socket6("r1", 5400);
    let vcp = SchemeTag::new(1);
    let to = receiver.local_addr().unwrap();
    for tc in [vcp.tos(Ecn::Ect1), vcp.tos(Ecn::NotEct)] {
        ecnq::tos_io::send_with_tos(&sender, &[tc; 20], Some(to), tc, true).unwrap();
    }
    let got = receive_all(&receiver, Duration::from_millis(1000), 2);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].tos, vcp.tos(Ecn::Ce), "ECT re-marked, tag kept");
    assert_eq!(got[1].tos, vcp.tos(Ecn::NotEct), "Not-ECT untouched");
}

#[test]
fn plain_tun_without_offload_forwards_and_marks() {
    let _serial = serial();
    if !can_run() {
        return;
    }
    let bed = Testbed::up(
        "nsn",
        Shape::Dumbbell(1),
        &[
            "--no-offload",
            "--scheme",
            "classic",
            "--classic-threshold",
            "0",
        ],
    );
    let sender = bed.socket("s1", 4500);
    let receiver = bed.socket("r1", 5500);
    let to = receiver.local_addr().unwrap();
    for i in 0..10u8 {
        send(&sender, to, &[i; 300], SchemeTag::UNTAGGED.tos(Ecn::Ect0));
    }
    let got = receive_all(&receiver, Duration::from_millis(1000), 10);
    assert_eq!(got.len(), 10);
    assert!(got
        .iter()
        .all(|r| r.tos == SchemeTag::UNTAGGED.tos(Ecn::Ce) && r.len == 300));
}

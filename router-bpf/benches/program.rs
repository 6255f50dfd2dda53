//! The tc program's own cost per packet, in the kernel and in isolation
//! (BPF_PROG_TEST_RUN, a million runs per packet kind): counting an
//! untagged packet, writing erc's digit into IPv4 and IPv6 packets of 64
//! and 1200 bytes of payload, with the control loop's index set, and
//! marking an IPv4 packet of each other scheme the program marks, its
//! load at 90 %.
//! The figure excludes forwarding; `cargo bench -p ecnq-shim --bench
//! forwarding` measures the whole path.
//!
//! Needs root (a network namespace for the device the program is loaded
//! on); prints "skipped" otherwise, or where the program was not built.
//! Run: `cargo bench -p ecnq-bpf --bench program`.

use std::process::Command;

use ecnq::router::meter::LinkLoad;
use ecnq::schemes::registry::{Scheme, FORMULAS};
use ecnq::signal::load::LoadFactor;
use ecnq::wire::ecn::{Ecn, SchemeTag, WireScheme};
use ecnq_bpf::codes::Codes;
use ecnq_bpf::maps::{Control, FlowReader, Maps};
use ecnq_bpf::run::monotonic_ns;
use ecnq_bpf::{sys, tc};

const RUNS: u32 = 1_000_000;
/// An index that rewrites about half of an ECT(0) sender's digits.
const INDEX: u16 = 400;

/// An Ethernet frame with an IPv4 or IPv6 UDP packet of `payload` bytes.
fn frame(v6: bool, tos: u8, payload: usize) -> Vec<u8> {
    let mut f = vec![0xff; 12];
    let udp_len = (8 + payload) as u16;
    if v6 {
        f.extend_from_slice(&[0x86, 0xdd, 0x60 | tos >> 4, (tos & 0xf) << 4, 0, 0]);
        f.extend_from_slice(&udp_len.to_be_bytes());
        f.extend_from_slice(&[17, 64]);
        f.extend_from_slice(&[0xfd; 32]);
    } else {
        f.extend_from_slice(&[0x08, 0x00, 0x45, tos]);
        f.extend_from_slice(&(20 + udp_len).to_be_bytes());
        f.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    }
    f.extend_from_slice(&[0x9c, 0x40, 0x01, 0xbb]);
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend((0..payload).map(|i| (i * 7) as u8));
    f
}

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("program bench skipped: needs root");
        return;
    }
    if let Err(why) = tc::object() {
        println!("program bench skipped: {why}");
        return;
    }
    let ns = format!("ecnq-bpf-bench-{}", std::process::id());
    let ip = |args: &[&str]| assert!(Command::new("ip").args(args).status().unwrap().success());
    ip(&["netns", "add", &ns]);
    let result = std::panic::catch_unwind(|| {
        ip(&[
            "-n", &ns, "link", "add", "va", "type", "veth", "peer", "name", "vb",
        ]);
        let file = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
        // SAFETY: a valid namespace descriptor; affects this thread only.
        let r = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&file), libc::CLONE_NEWNET) };
        assert_eq!(r, 0);
        let prog = tc::attach("va").unwrap();
        let maps = Maps::open(prog).unwrap();
        let mut load = LinkLoad::default();
        for entry in &FORMULAS {
            load[entry.formula] = LoadFactor::new(0.9);
        }
        let control = Control {
            expires_ns: monotonic_ns() + 3_600_000_000_000,
            index: INDEX,
            l3: 14,
            ready: true,
            ecnq_class: 0,
            codes: Codes::of(&load),
            starts: Default::default(),
        };
        maps.set_control(control).unwrap();
        let tos = |wire: WireScheme| SchemeTag::new(wire.id()).tos(wire.base_ecn());
        let erc = tos(Scheme::Erc.wire());
        let untagged = Ecn::Ect0.bits();
        let mut kinds = vec![
            ("untagged, counted".to_owned(), false, untagged),
            ("erc IPv4, marked".to_owned(), false, erc),
            ("erc IPv6, marked".to_owned(), true, erc),
        ];
        let mut others: Vec<WireScheme> = ecnq_bpf::SCHEMES.iter().map(|s| s.wire()).collect();
        others.dedup();
        for wire in others.into_iter().filter(|&w| w != Scheme::Erc.wire()) {
            kinds.push((format!("{wire} IPv4, marked"), false, tos(wire)));
        }
        println!("ns per packet, mean of {RUNS} runs (BPF_PROG_TEST_RUN):");
        for (what, v6, tos) in kinds {
            for payload in [64, 1200] {
                let (verdict, ns, _) = sys::test_run(prog, &frame(v6, tos, payload), RUNS).unwrap();
                assert_eq!(verdict, 0, "TC_ACT_OK");
                println!("{what:<18} {payload:>5} B {ns:>6}");
            }
        }
        let classes = maps.all_classes().unwrap();
        println!("packets {} marked {}", classes.packets, classes.marked);
        // What the control loop pays every period to read the table: a
        // walk over it, or a lookup per flow it knows.
        let start = std::time::Instant::now();
        for _ in 0..100 {
            assert_eq!(maps.flows().unwrap().len(), 2);
        }
        println!(
            "walking the flow table (2 flows): {:?}",
            start.elapsed() / 100
        );
        let mut reader = FlowReader::default();
        let start = std::time::Instant::now();
        for _ in 0..100 {
            assert_eq!(reader.read(&maps).unwrap().len(), 2);
        }
        println!(
            "reading the flows the loop knows (2 flows): {:?}",
            start.elapsed() / 100
        );
    });
    let _ = Command::new("ip").args(["netns", "del", &ns]).status();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

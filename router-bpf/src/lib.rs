//! ecnq's router in the kernel's data path. A tc (clsact) egress program
//! (`bpf/ecnq.bpf.c`, compiled by `build.rs` where clang and libbpf's
//! headers are installed) parses IPv4 / IPv6 with UDP or TCP, reads the
//! DSCP scheme tag, counts bytes and packets per flow (an LRU table keyed
//! by the 5-tuple) and per class (per CPU), computes the packet hash,
//! writes erc's digit into erc packets and the other schemes' marks
//! ([`SCHEMES`]) from values per interval ([`codes::Codes`]). A
//! userspace control loop ([`control`]) runs erc's sans-IO router and the
//! load factor meter, the code the TUN shim runs, every period from those
//! counters and from the kernel queue's backlog ([`qdisc`], over
//! rtnetlink), and leaves the index and the codes in a map with a lease.
//!
//! The program never drops a packet: taken off the device, or left by a
//! control loop that died (its lease runs out within erc's shortest
//! interval), the device forwards as before, unmarked.
//!
//! * [`tc`]: load and attach the program with iproute2's `tc`, detach it.
//! * [`sys`], [`maps`]: the program's maps through `bpf(2)`.
//! * [`writer`]: the per-packet decision the program makes, in Rust.
//! * [`run`]: the control loop's I/O around [`control::ControlLoop`].

use ecnq::schemes::registry::Scheme;

/// The schemes the program marks; packets of the others pass unmarked:
/// Prague's marks come from a packet's sojourn in the queue, which a tc
/// egress program runs before (docs/design.md, the router in the kernel).
pub const SCHEMES: [Scheme; 7] = [
    Scheme::Erc,
    Scheme::Vcp,
    Scheme::Evcp,
    Scheme::Dpcp,
    Scheme::Tpcp,
    Scheme::Bmcc,
    Scheme::Mcp,
];

pub mod codes;
pub mod control;
pub mod maps;
pub mod qdisc;
pub mod run;
pub mod sys;
pub mod tc;
pub mod writer;

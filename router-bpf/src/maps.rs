//! The program's maps as the control loop sees them: the layouts of
//! `bpf/ecnq.bpf.c` (`struct control`, `flow_key`, `flow_value`,
//! `class_counters`), read and written in host byte order.

use std::collections::HashSet;
use std::io;
use std::net::IpAddr;

use crate::codes::Codes;
use crate::sys::{self, Map};

/// The map names in `bpf/ecnq.bpf.c`.
const CONTROL: &str = "ecnq_ctl";
const FLOWS: &str = "ecnq_flows";
const CLASSES: &str = "ecnq_class";
const NEW_FLOWS: &str = "ecnq_new_flows";
const FLIGHTS: &str = "ecnq_flights";
/// Per-class counters, one per DSCP pool tag (`CLASSES` in the C source).
pub const CLASS_COUNT: u32 = 16;

/// What the control loop leaves for the program (`struct control`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Control {
    /// `bpf_ktime_get_ns()` (CLOCK_MONOTONIC) past which the program
    /// writes no marks: the index and VCP's code are stale.
    pub expires_ns: u64,
    /// erc's index; 0 writes nothing.
    pub index: u16,
    /// The device's link header length: where the IP header starts.
    pub l3: u8,
    /// Whether the program is configured: until then, and once the
    /// control loop withdrew, it passes every packet uncounted.
    pub ready: bool,
    /// The class (an htb leaf's classid) the program puts ecnq-tagged
    /// packets in, through their priority, apart from classic traffic;
    /// 0: one queue for all.
    pub ecnq_class: u32,
    /// What the routers of the schemes other than erc write, from the
    /// loop's load factors.
    pub codes: Codes,
    /// The start codes of the next new erc flights.
    pub starts: StartCodes,
}

/// The start codes erc's router would write into the next new flows'
/// flights, one after the other (`ErcMarker::next_start_codes`): the
/// program gives the flight it counts as the `base`th the first, the next
/// the second, and every later one the last.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StartCodes {
    pub codes: [u8; START_CODES],
    /// The program's count of flights ([`Maps::flights`]) when the codes
    /// were computed.
    pub base: u64,
}

/// How many start codes the loop leaves ahead (`START_CODES` in the C
/// source): more flights than a period of the loop sees in a flash crowd
/// of a thousand flows a second.
pub const START_CODES: usize = 8;

impl StartCodes {
    /// The code of the flight the program counts as the `turn`th.
    pub fn of(&self, turn: u64) -> u8 {
        let at = turn.wrapping_sub(self.base).min(START_CODES as u64 - 1);
        self.codes[at as usize]
    }
}

impl Control {
    const SIZE: usize = 64;

    fn bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0; Self::SIZE];
        b[..8].copy_from_slice(&self.expires_ns.to_ne_bytes());
        b[8..10].copy_from_slice(&self.index.to_ne_bytes());
        b[10] = self.l3;
        b[11] = u8::from(self.ready);
        b[12..16].copy_from_slice(&coarse_lag_ns().to_ne_bytes());
        b[16..20].copy_from_slice(&self.ecnq_class.to_ne_bytes());
        let c = &self.codes;
        b[20] = c.vcp;
        b[21] = c.mcp;
        b[22] = u8::from(c.bmcc_ce);
        b[24..32].copy_from_slice(&c.epoch.to_ne_bytes());
        b[32..36].copy_from_slice(&c.bmcc_below.to_ne_bytes());
        b[36..38].copy_from_slice(&c.dpcp);
        b[39..42].copy_from_slice(&c.tpcp);
        b[48..56].copy_from_slice(&self.starts.codes);
        b[56..64].copy_from_slice(&self.starts.base.to_ne_bytes());
        b
    }
}

/// How far the kernel's coarse monotonic clock may trail the exact one,
/// for the program's lease check (`coarse_lag_ns` in `struct control`):
/// twice its resolution, one tick (clock_getres(2)), so that a tick that
/// comes late still finds the exact clock read. 0 (the program reads the
/// exact clock for every packet) where the resolution is unknown.
fn coarse_lag_ns() -> u32 {
    let mut res = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a timespec to write to.
    let r = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut res) };
    if r != 0 || res.tv_sec != 0 {
        return 0;
    }
    u32::try_from(2 * res.tv_nsec).unwrap_or(0)
}

/// A flow's key, the 5-tuple (`struct flow_key`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowKey(pub [u8; FlowKey::SIZE]);

impl FlowKey {
    /// Its size, bytes.
    pub const SIZE: usize = 40;

    /// The source and destination addresses and ports, and the IP protocol.
    pub fn parts(&self) -> (IpAddr, u16, IpAddr, u16, u8) {
        let b = &self.0;
        let addr = |at: usize| -> IpAddr {
            if b[37] == 4 {
                IpAddr::from(<[u8; 4]>::try_from(&b[at..at + 4]).expect("4 bytes"))
            } else {
                IpAddr::from(<[u8; 16]>::try_from(&b[at..at + 16]).expect("16 bytes"))
            }
        };
        let port = |at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
        (addr(0), port(32), addr(16), port(34), b[36])
    }

    /// A 64-bit key for the router's per-flow state (FNV-1a over the key).
    pub fn flow_id(&self) -> u64 {
        ecnq_fnv64(&self.0)
    }
}

fn ecnq_fnv64(bytes: &[u8]) -> u64 {
    // FNV-1a, 64 bits (the offset basis and prime of its specification).
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// What the program counts per flow (`struct flow_value`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowValue {
    /// Bytes (IP) and packets since the flow was first seen.
    pub bytes: u64,
    pub packets: u64,
    /// The DSCP pool tag of its last packet (0: untagged).
    pub tag: u8,
    /// When its last erc datagram came, on the coarse clock (erc's
    /// flights; `bpf_ktime_get_coarse_ns`).
    pub last_ns: u64,
}

impl FlowValue {
    const SIZE: usize = 48;

    fn parse(b: &[u8]) -> FlowValue {
        let u64_at = |at: usize| u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        FlowValue {
            bytes: u64_at(0),
            packets: u64_at(8),
            tag: b[20],
            last_ns: u64_at(32),
        }
    }
}

/// Per-class counters, summed over the CPUs (`struct class_counters`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassCounters {
    pub bytes: u64,
    pub packets: u64,
    /// Packets whose TOS byte (ECN, MCP's flags) the program rewrote.
    pub marked: u64,
    /// Packets of the schemes it marks left unmarked because the state
    /// was stale.
    pub stale: u64,
    /// GSO packets counted and left unmarked.
    pub gso: u64,
}

impl ClassCounters {
    const SIZE: usize = 40;
}

/// The maps of one attached program.
#[derive(Debug)]
pub struct Maps {
    control: Map,
    flows: Map,
    classes: Map,
    new_flows: Map,
    flights: Map,
    cpus: usize,
}

impl Maps {
    /// Opens the maps of the loaded program `prog_id`, checking their
    /// layouts against this crate's.
    pub fn open(prog_id: u32) -> io::Result<Maps> {
        let mut maps = sys::maps_of_program(prog_id)?;
        let mut take = |name: &str, key: usize, value: usize| {
            let at = maps.iter().position(|m| m.name == name).ok_or_else(|| {
                io::Error::other(format!("program {prog_id} has no map `{name}`"))
            })?;
            let map = maps.swap_remove(at);
            if (map.key_size, map.value_size) != (key, value) {
                return Err(io::Error::other(format!(
                    "map `{name}` has {}-byte keys and {}-byte values, not {key} and {value}: \
                     the program is of another version",
                    map.key_size, map.value_size
                )));
            }
            Ok(map)
        };
        Ok(Maps {
            control: take(CONTROL, 4, Control::SIZE)?,
            flows: take(FLOWS, FlowKey::SIZE, FlowValue::SIZE)?,
            classes: take(CLASSES, 4, ClassCounters::SIZE)?,
            new_flows: take(NEW_FLOWS, 0, FlowKey::SIZE)?,
            flights: take(FLIGHTS, 4, 8)?,
            cpus: sys::possible_cpus()?,
        })
    }

    /// The new erc flights the program has seen.
    pub fn flights(&self) -> io::Result<u64> {
        let mut value = [0u8; 8];
        self.flights.lookup(&0u32.to_ne_bytes(), &mut value)?;
        Ok(u64::from_ne_bytes(value))
    }

    /// Leaves `control` for the program.
    pub fn set_control(&self, control: Control) -> io::Result<()> {
        self.control.update(&0u32.to_ne_bytes(), &control.bytes())
    }

    /// The counters of one flow, if the table still holds it.
    fn flow(&self, key: &FlowKey) -> io::Result<Option<FlowValue>> {
        let mut value = [0u8; FlowValue::SIZE];
        Ok(self
            .flows
            .lookup(&key.0, &mut value)?
            .then(|| FlowValue::parse(&value)))
    }

    /// Every flow the program counts, by a walk over the whole table
    /// (its every bucket: about as long with two flows as with many).
    pub fn flows(&self) -> io::Result<Vec<(FlowKey, FlowValue)>> {
        let mut out = Vec::new();
        let mut key = [0u8; FlowKey::SIZE];
        let mut value = [0u8; FlowValue::SIZE];
        let mut has = self.flows.next_key(None, &mut key)?;
        while has {
            // An LRU table may have dropped the entry since.
            if self.flows.lookup(&key, &mut value)? {
                out.push((FlowKey(key), FlowValue::parse(&value)));
            }
            let current = key;
            has = self.flows.next_key(Some(&current), &mut key)?;
        }
        Ok(out)
    }

    /// The counters of the class with DSCP pool tag `tag`, over all CPUs.
    pub fn class(&self, tag: u32) -> io::Result<ClassCounters> {
        let mut values = vec![0u8; ClassCounters::SIZE * self.cpus];
        self.classes.lookup(&tag.to_ne_bytes(), &mut values)?;
        let mut sum = ClassCounters::default();
        for cpu in values.chunks_exact(ClassCounters::SIZE) {
            let at = |i: usize| u64::from_ne_bytes(cpu[i * 8..i * 8 + 8].try_into().expect("8"));
            sum.bytes += at(0);
            sum.packets += at(1);
            sum.marked += at(2);
            sum.stale += at(3);
            sum.gso += at(4);
        }
        Ok(sum)
    }

    /// The counters of every class, summed.
    pub fn all_classes(&self) -> io::Result<ClassCounters> {
        (0..CLASS_COUNT).try_fold(ClassCounters::default(), |sum, tag| {
            let c = self.class(tag)?;
            Ok(ClassCounters {
                bytes: sum.bytes + c.bytes,
                packets: sum.packets + c.packets,
                marked: sum.marked + c.marked,
                stale: sum.stale + c.stale,
                gso: sum.gso + c.gso,
            })
        })
    }
}

/// Reads the program's flow counters every period: the flows it knows,
/// one lookup each, and the new ones the program queued for it; a walk
/// over the whole table every [`FlowReader::WALK_EVERY`] reads finds the
/// flows that joined while the queue was full.
#[derive(Debug, Default)]
pub struct FlowReader {
    known: Vec<FlowKey>,
    reads: u32,
}

impl FlowReader {
    /// Reads between two walks over the whole table: one a second at the
    /// control loop's period (`control::period`).
    pub const WALK_EVERY: u32 = 200;

    /// Every flow the program counts.
    pub fn read(&mut self, maps: &Maps) -> io::Result<Vec<(FlowKey, FlowValue)>> {
        let mut new = [0u8; FlowKey::SIZE];
        while maps.new_flows.pop(&mut new)? {
            self.known.push(FlowKey(new));
        }
        self.reads = (self.reads + 1) % Self::WALK_EVERY;
        if self.reads == 0 {
            let all = maps.flows()?;
            self.known = all.iter().map(|(key, _)| *key).collect();
            return Ok(all);
        }
        let mut out = Vec::with_capacity(self.known.len());
        let mut read = HashSet::with_capacity(self.known.len());
        // A flow the table forgot is dropped; one queued twice (forgotten
        // and back) is read once.
        for key in std::mem::take(&mut self.known) {
            if read.insert(key) {
                if let Some(value) = maps.flow(&key)? {
                    out.push((key, value));
                }
            }
        }
        self.known = out.iter().map(|(key, _)| *key).collect();
        Ok(out)
    }
}

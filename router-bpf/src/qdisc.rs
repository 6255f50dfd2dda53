//! The kernel's queue, read over rtnetlink (RTM_GETQDISC): the root
//! qdisc's backlog in bytes, what it sent and dropped, and, for tbf, the
//! rate it shapes to. The
//! queue is the kernel's (tbf or htb on a device); the router only reads
//! it.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

// rtnetlink: include/uapi/linux/{netlink,rtnetlink,pkt_sched,gen_stats}.h.
const RTM_NEWQDISC: u16 = 36;
const RTM_GETQDISC: u16 = 38;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TCA_STATS2: u16 = 7;
const TCA_STATS_BASIC: u16 = 1;
const TCA_STATS_QUEUE: u16 = 3;
const TCA_STATS_PKT64: u16 = 8;
const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_RATE64: u16 = 4;
/// The parent of a device's root qdisc.
const TC_H_ROOT: u32 = 0xffff_ffff;
const NLMSG_HDR: usize = 16;
const TCMSG: usize = 20;

/// What the root qdisc of a device reports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QdiscState {
    /// The qdisc's kind (`tbf`, `htb`, `pfifo_fast`, …).
    pub kind: String,
    /// Bytes waiting in it.
    pub backlog: u64,
    /// Bytes it has sent since it was made.
    pub bytes: u64,
    /// Packets it has sent (a GSO packet counts its segments).
    pub packets: u64,
    /// Packets it has dropped.
    pub drops: u64,
    /// The rate a tbf shapes to, bytes per second.
    pub rate: Option<f64>,
}

/// Reads the root qdisc of one device, over a netlink socket it keeps
/// (the control loop reads it every period).
#[derive(Debug)]
pub struct QdiscReader {
    socket: OwnedFd,
    ifindex: i32,
    dev: String,
    buf: Vec<u8>,
}

impl QdiscReader {
    /// A reader of `dev` (in the calling thread's network namespace).
    pub fn new(dev: &str) -> io::Result<QdiscReader> {
        let ifindex = crate::sys::ifindex(dev)?;
        // SAFETY: plain socket(2); the descriptor is owned at once.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(QdiscReader {
            // SAFETY: a new descriptor nothing else owns.
            socket: unsafe { OwnedFd::from_raw_fd(fd) },
            ifindex: ifindex as i32,
            dev: dev.to_owned(),
            buf: vec![0u8; 32 * 1024],
        })
    }

    /// The device's root qdisc now.
    pub fn read(&mut self) -> io::Result<QdiscState> {
        let mut found = None;
        let ifindex = self.ifindex;
        self.dump(|msg| {
            if let Some(state) = parse_qdisc(msg, ifindex, TC_H_ROOT) {
                found = Some(state);
            }
        })?;
        found.ok_or_else(|| io::Error::other(format!("{} has no root qdisc", self.dev)))
    }

    /// The device's root qdisc and the qdisc of its leaf class `class`
    /// (a classid, `1:10` as 0x10010), from one dump.
    pub fn read_with_leaf(&mut self, class: u32) -> io::Result<(QdiscState, QdiscState)> {
        let (mut root, mut leaf) = (None, None);
        let ifindex = self.ifindex;
        self.dump(|msg| {
            root = root.take().or_else(|| parse_qdisc(msg, ifindex, TC_H_ROOT));
            leaf = leaf.take().or_else(|| parse_qdisc(msg, ifindex, class));
        })?;
        let dev = &self.dev;
        let root = root.ok_or_else(|| io::Error::other(format!("{dev} has no root qdisc")))?;
        let leaf = leaf.ok_or_else(|| {
            io::Error::other(format!(
                "{dev} has no qdisc under class {:x}:{:x}",
                class >> 16,
                class & 0xffff
            ))
        })?;
        Ok((root, leaf))
    }

    /// Sends an RTM_GETQDISC dump request and hands each RTM_NEWQDISC
    /// message of the reply to `each`.
    fn dump(&mut self, mut each: impl FnMut(&[u8])) -> io::Result<()> {
        let raw = self.socket.as_raw_fd();
        let mut req = Vec::with_capacity(NLMSG_HDR + TCMSG);
        req.extend_from_slice(&((NLMSG_HDR + TCMSG) as u32).to_ne_bytes());
        req.extend_from_slice(&RTM_GETQDISC.to_ne_bytes());
        req.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
        req.extend_from_slice(&1u32.to_ne_bytes()); // sequence
        req.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
        req.extend_from_slice(&[libc::AF_UNSPEC as u8, 0, 0, 0]);
        req.extend_from_slice(&self.ifindex.to_ne_bytes());
        req.extend_from_slice(&[0; 12]); // handle, parent, info
                                         // SAFETY: sends `req`, a live buffer of its length.
        if unsafe { libc::send(raw, req.as_ptr().cast(), req.len(), 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        loop {
            let buf = &mut self.buf;
            // SAFETY: receives into `buf`, a live buffer of its length.
            let n = unsafe { libc::recv(raw, buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let mut rest = &buf[..n as usize];
            while rest.len() >= NLMSG_HDR {
                let len = u32::from_ne_bytes(rest[..4].try_into().expect("4")) as usize;
                let kind = u16::from_ne_bytes(rest[4..6].try_into().expect("2"));
                if len < NLMSG_HDR || len > rest.len() {
                    return Err(io::Error::other("truncated netlink message"));
                }
                match kind {
                    NLMSG_DONE => return Ok(()),
                    NLMSG_ERROR => {
                        let errno = i32::from_ne_bytes(rest[16..20].try_into().expect("4"));
                        return Err(io::Error::from_raw_os_error(-errno));
                    }
                    RTM_NEWQDISC => each(&rest[NLMSG_HDR..len]),
                    _ => {}
                }
                rest = &rest[align(len).min(rest.len())..];
            }
        }
    }
}

const fn align(len: usize) -> usize {
    (len + 3) & !3
}

/// The attributes in `bytes`: (type, payload).
fn attributes(mut bytes: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if bytes.len() < 4 {
            return None;
        }
        let len = u16::from_ne_bytes([bytes[0], bytes[1]]) as usize;
        let kind = u16::from_ne_bytes([bytes[2], bytes[3]]) & 0x3fff;
        if len < 4 || len > bytes.len() {
            return None;
        }
        let payload = &bytes[4..len];
        bytes = &bytes[align(len).min(bytes.len())..];
        Some((kind, payload))
    })
}

/// The qdisc of `ifindex` under `parent` (the root's: [`TC_H_ROOT`])
/// described by one RTM_NEWQDISC payload.
fn parse_qdisc(msg: &[u8], ifindex: i32, parent: u32) -> Option<QdiscState> {
    if msg.len() < TCMSG {
        return None;
    }
    let index = i32::from_ne_bytes(msg[4..8].try_into().ok()?);
    let its_parent = u32::from_ne_bytes(msg[12..16].try_into().ok()?);
    if index != ifindex || its_parent != parent {
        return None;
    }
    let mut state = QdiscState::default();
    let mut options = None;
    for (kind, payload) in attributes(&msg[TCMSG..]) {
        match kind {
            TCA_KIND => {
                let end = payload
                    .iter()
                    .position(|&b| b == 0)
                    .unwrap_or(payload.len());
                state.kind = String::from_utf8_lossy(&payload[..end]).into_owned();
            }
            TCA_OPTIONS => options = Some(payload),
            TCA_STATS2 => {
                let word = |b: &[u8], at: usize| -> Option<u64> {
                    Some(u64::from(u32::from_ne_bytes(
                        b.get(at..at + 4)?.try_into().ok()?,
                    )))
                };
                for (kind, stats) in attributes(payload) {
                    match kind {
                        // struct gnet_stats_basic: bytes (u64), packets (u32).
                        TCA_STATS_BASIC if stats.len() >= 12 => {
                            state.bytes = u64::from_ne_bytes(stats[..8].try_into().ok()?);
                            state.packets = state.packets.max(word(stats, 8)?);
                        }
                        TCA_STATS_PKT64 if stats.len() >= 8 => {
                            state.packets = u64::from_ne_bytes(stats[..8].try_into().ok()?);
                        }
                        // struct gnet_stats_queue: qlen, backlog, drops, … (u32).
                        TCA_STATS_QUEUE if stats.len() >= 12 => {
                            state.backlog = word(stats, 4)?;
                            state.drops = word(stats, 8)?;
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    if state.kind == "tbf" {
        state.rate = options.and_then(tbf_rate);
    }
    Some(state)
}

/// A tbf's rate, bytes per second: TCA_TBF_RATE64 where the rate needs
/// it, else the 32-bit rate of `struct tc_tbf_qopt` (its `tc_ratespec`'s
/// last field, at offset 8).
fn tbf_rate(options: &[u8]) -> Option<f64> {
    let mut rate = None;
    for (kind, payload) in attributes(options) {
        match kind {
            TCA_TBF_RATE64 if payload.len() >= size_of::<u64>() => {
                return Some(u64::from_ne_bytes(payload[..8].try_into().ok()?) as f64);
            }
            TCA_TBF_PARMS if payload.len() >= 12 => {
                rate = Some(f64::from(u32::from_ne_bytes(
                    payload[8..12].try_into().ok()?,
                )));
            }
            _ => {}
        }
    }
    rate
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_walked_with_their_padding() {
        // A 5-byte attribute padded to 8, then a 8-byte one.
        let bytes = [5, 0, 1, 0, b'x', 0, 0, 0, 8, 0, 2, 0, 1, 2, 3, 4];
        let got: Vec<_> = attributes(&bytes).collect();
        assert_eq!(got, vec![(1, &b"x"[..]), (2, &[1, 2, 3, 4][..])]);
    }

    #[test]
    fn the_loopback_devices_root_qdisc_is_read() {
        // Every namespace has `lo`; its root qdisc is `noqueue`, empty.
        let mut reader = QdiscReader::new("lo").expect("lo");
        for _ in 0..3 {
            let state = reader.read().expect("lo's qdisc");
            assert_eq!(state.backlog, 0);
            assert!(!state.kind.is_empty());
        }
        assert!(QdiscReader::new("no-such-device").is_err());
    }
}

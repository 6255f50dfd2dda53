//! What the kernel-path tests share: a network namespace with a veth pair
//! that the test deletes when it ends, raw packet sockets on its two ends,
//! and IPv4 / IPv6 packets built and read byte by byte.

#![allow(dead_code)] // each test file uses part of it

use std::io;
use std::net::IpAddr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Whether the kernel path can be tested here: root, and the program
/// built. Without root the test is skipped with a message; without the
/// program too, unless CI is set, where that is a failure.
pub fn can_test(name: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("{name}: skipped (needs root for network namespaces and tc)");
        return false;
    }
    if let Err(why) = ecnq_bpf::tc::object() {
        assert!(std::env::var_os("CI").is_none(), "CI is set, but {why}");
        eprintln!("{name}: skipped ({why})");
        return false;
    }
    true
}

fn ip(args: &[&str]) {
    let status = Command::new("ip")
        .args(args)
        .status()
        .expect("ip (iproute2) runs");
    assert!(status.success(), "ip {}", args.join(" "));
}

/// A namespace `ecnq-bpf-test-<pid>-<n>` holding a veth pair `va` / `vb`,
/// both up; deleted on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new() -> Netns {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "ecnq-bpf-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        ip(&["netns", "add", &name]);
        let ns = Netns { name };
        ip(&[
            "-n", &ns.name, "link", "add", "va", "type", "veth", "peer", "name", "vb",
        ]);
        for dev in ["va", "vb", "lo"] {
            ip(&["-n", &ns.name, "link", "set", dev, "up"]);
        }
        ns
    }

    /// A new namespace that the calling thread has entered, where the
    /// kernel path can be tested ([`can_test`]).
    pub fn for_test(name: &str) -> Option<Netns> {
        can_test(name).then(|| {
            let ns = Netns::new();
            ns.enter();
            ns
        })
    }

    /// Moves the calling thread into the namespace (setns changes the
    /// calling thread only).
    pub fn enter(&self) {
        let file = std::fs::File::open(format!("/run/netns/{}", self.name)).expect("namespace");
        let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        // SAFETY: a valid namespace descriptor; affects this thread only.
        let r = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns: {}", io::Error::last_os_error());
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// A packet socket on one device of the calling thread's namespace,
/// carrying IP packets without their link header.
pub struct PacketSocket {
    fd: std::os::fd::OwnedFd,
    ifindex: i32,
}

impl PacketSocket {
    pub fn open(dev: &str) -> PacketSocket {
        use std::os::fd::FromRawFd;
        let name = std::ffi::CString::new(dev).unwrap();
        // SAFETY: plain libc calls; the descriptor is owned at once.
        let (fd, ifindex) = unsafe {
            let ifindex = libc::if_nametoindex(name.as_ptr()) as i32;
            assert!(ifindex > 0, "no device {dev}");
            let proto = (libc::ETH_P_ALL as u16).to_be();
            let fd = libc::socket(libc::AF_PACKET, libc::SOCK_DGRAM, i32::from(proto));
            assert!(fd >= 0, "packet socket: {}", io::Error::last_os_error());
            let fd = std::os::fd::OwnedFd::from_raw_fd(fd);
            let mut addr: libc::sockaddr_ll = std::mem::zeroed();
            addr.sll_family = libc::AF_PACKET as u16;
            addr.sll_protocol = proto;
            addr.sll_ifindex = ifindex;
            let r = libc::bind(
                std::os::fd::AsRawFd::as_raw_fd(&fd),
                &addr as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            );
            assert_eq!(r, 0, "bind: {}", io::Error::last_os_error());
            (fd, ifindex)
        };
        let socket = PacketSocket { fd, ifindex };
        socket.set_option(libc::SO_RCVBUF, 8 << 20);
        socket
    }

    fn raw(&self) -> i32 {
        std::os::fd::AsRawFd::as_raw_fd(&self.fd)
    }

    fn set_option(&self, option: i32, value: i32) {
        // SAFETY: a valid socket and an int option.
        unsafe {
            libc::setsockopt(
                self.raw(),
                libc::SOL_SOCKET,
                option,
                &value as *const i32 as *const libc::c_void,
                4,
            );
        }
    }

    /// Sends one IP packet out of the device (to the broadcast address).
    pub fn send(&self, packet: &[u8]) {
        let proto = if packet[0] >> 4 == 4 {
            libc::ETH_P_IP
        } else {
            libc::ETH_P_IPV6
        };
        // SAFETY: a valid socket, a live buffer and address.
        let sent = unsafe {
            let mut addr: libc::sockaddr_ll = std::mem::zeroed();
            addr.sll_family = libc::AF_PACKET as u16;
            addr.sll_protocol = (proto as u16).to_be();
            addr.sll_ifindex = self.ifindex;
            addr.sll_halen = 6;
            addr.sll_addr[..6].copy_from_slice(&[0xff; 6]);
            libc::sendto(
                self.raw(),
                packet.as_ptr().cast(),
                packet.len(),
                0,
                &addr as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(
            sent,
            packet.len() as isize,
            "send: {}",
            io::Error::last_os_error()
        );
    }

    /// The next packet the device received, waiting at most `timeout`.
    pub fn recv(&self, timeout: Duration) -> Option<Vec<u8>> {
        let mut pfd = libc::pollfd {
            fd: self.raw(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd.
        if unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as i32) } <= 0 {
            return None;
        }
        let mut buf = vec![0u8; 2048];
        // SAFETY: a live buffer of its length.
        let n = unsafe { libc::recv(self.raw(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        (n > 0).then(|| {
            buf.truncate(n as usize);
            buf
        })
    }
}

/// One packet of a test: addresses, ports, protocol, TOS byte, payload.
#[derive(Clone, Debug)]
pub struct Spec {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
    pub tcp: bool,
    pub tos: u8,
    pub payload: Vec<u8>,
}

const UDP: u8 = 17;
const TCP: u8 = 6;

/// The Internet checksum of `bytes` (RFC 1071).
pub fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl Spec {
    /// The packet on the wire (IPv4 with a valid header checksum).
    pub fn build(&self) -> Vec<u8> {
        let mut l4 = Vec::new();
        l4.extend_from_slice(&self.sport.to_be_bytes());
        l4.extend_from_slice(&self.dport.to_be_bytes());
        if self.tcp {
            l4.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        } else {
            l4.extend_from_slice(&((8 + self.payload.len()) as u16).to_be_bytes());
            l4.extend_from_slice(&[0, 0]);
        }
        l4.extend_from_slice(&self.payload);
        let proto = if self.tcp { TCP } else { UDP };
        let mut p = Vec::new();
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                p.extend_from_slice(&[0x45, self.tos]);
                p.extend_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
                p.extend_from_slice(&[0, 0, 0x40, 0, 64, proto, 0, 0]);
                p.extend_from_slice(&s.octets());
                p.extend_from_slice(&d.octets());
                let c = checksum(&p);
                p[10..12].copy_from_slice(&c.to_be_bytes());
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                p.extend_from_slice(&[0x60 | self.tos >> 4, (self.tos & 0xf) << 4, 0, 0]);
                p.extend_from_slice(&(l4.len() as u16).to_be_bytes());
                p.extend_from_slice(&[proto, 64]);
                p.extend_from_slice(&s.octets());
                p.extend_from_slice(&d.octets());
            }
            _ => panic!("mixed address families"),
        }
        p.extend_from_slice(&l4);
        p
    }
}

/// What a received packet of a test says: its TOS byte, its ports, its
/// payload, and whether an IPv4 header checksum verifies.
#[derive(Clone, Debug)]
pub struct Seen {
    pub tos: u8,
    pub sport: u16,
    pub dport: u16,
    pub payload: Vec<u8>,
    pub checksum_ok: bool,
}

/// Reads a received IP packet; `None` for anything not UDP or TCP.
pub fn read(p: &[u8]) -> Option<Seen> {
    let (tos, l4, proto, checksum_ok) = match p.first()? >> 4 {
        4 => {
            let ihl = usize::from(p[0] & 0xf) * 4;
            (p[1], p.get(ihl..)?, p[9], checksum(&p[..ihl]) == 0)
        }
        6 => (p[0] << 4 | p[1] >> 4, p.get(40..)?, p[6], true),
        _ => return None,
    };
    let header = match proto {
        UDP => 8,
        TCP => 20,
        _ => return None,
    };
    Some(Seen {
        tos,
        sport: u16::from_be_bytes([l4[0], l4[1]]),
        dport: u16::from_be_bytes([l4[2], l4[3]]),
        payload: l4.get(header..)?.to_vec(),
        checksum_ok,
    })
}

/// A small deterministic generator (64-bit LCG, Knuth's MMIX constants).
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as u32
    }

    pub fn below(&mut self, n: u32) -> u32 {
        self.next() % n
    }
}

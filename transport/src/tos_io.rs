//! UDP I/O that writes and reads the whole TOS / IPv6 traffic-class byte of
//! every datagram (ECN codepoint + DSCP scheme tag) through control
//! messages (Linux): an `IP_TOS` / `IPV6_TCLASS` message on each send,
//! `IP_RECVTOS` / `IPV6_RECVTCLASS` reports on receive. The QUIC socket,
//! the router shim's relay and the test relays all use this one module.
//!
//! Functions take the raw descriptor, so one socket can be read by tokio
//! and written from another thread. [`send_with_tos`] and
//! [`recv_with_tos`] never block, whatever the socket's mode.

use std::io;
use std::mem;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Control space of one message: a receive time, a GRO segment size, a
/// PKTINFO and the TOS byte need about 120 bytes; 256 leaves room for what
/// a kernel adds.
pub const CONTROL_LEN: usize = 256;

/// A control-message buffer, aligned as `cmsghdr` needs.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct ControlBuffer(pub [u8; CONTROL_LEN]);

impl Default for ControlBuffer {
    fn default() -> Self {
        ControlBuffer([0; CONTROL_LEN])
    }
}

fn setsockopt_int(fd: RawFd, level: i32, name: i32, value: libc::c_int) -> io::Result<()> {
    // SAFETY: `value` outlives the call and its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Asks the kernel to report the TOS / traffic-class byte of received
/// datagrams (both options on IPv6 sockets, which may see IPv4-mapped peers).
pub fn enable_recv_tos(socket: &impl AsRawFd, ipv6: bool) -> io::Result<()> {
    let fd = socket.as_raw_fd();
    if ipv6 {
        setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS, 1)?;
        // Dual-stack sockets: best effort, a v6-only socket refuses it.
        let _ = setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1);
        Ok(())
    } else {
        setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1)
    }
}

/// Asks the kernel to stamp received datagrams with their arrival time
/// (`SO_TIMESTAMPNS`), so a reader that ran late knows how long each one
/// waited ([`RecvMeta::waited`]). Best effort: without it, `waited` is None.
pub fn enable_recv_time(socket: &impl AsRawFd) {
    let _ = setsockopt_int(
        socket.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_TIMESTAMPNS,
        1,
    );
}

/// Sets a socket's send and receive buffers. Best effort: beyond
/// `net.core.{r,w}mem_max` only with CAP_NET_ADMIN (the `FORCE` options),
/// else the kernel caps them.
pub fn set_buffers(socket: &impl AsRawFd, bytes: i32) {
    let fd = socket.as_raw_fd();
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        if setsockopt_int(fd, libc::SOL_SOCKET, force, bytes).is_err() {
            let _ = setsockopt_int(fd, libc::SOL_SOCKET, plain, bytes);
        }
    }
}

/// Whether a datagram to `destination` leaves in an IPv6 header, which
/// decides the control message that sets its TOS byte: IPv4 and
/// IPv4-mapped addresses (a dual-stack socket sends those as IPv4) take
/// `IP_TOS`, the rest `IPV6_TCLASS`.
pub fn sent_as_ipv6(destination: SocketAddr) -> bool {
    match destination.ip() {
        IpAddr::V4(_) => false,
        IpAddr::V6(ip) => ip.to_ipv4_mapped().is_none(),
    }
}

/// Appends control messages to a `msghdr`'s control buffer.
pub struct CmsgWriter<'a> {
    hdr: &'a mut libc::msghdr,
    cmsg: *mut libc::cmsghdr,
    used: usize,
}

impl<'a> CmsgWriter<'a> {
    /// Writes into `control`, which `hdr` then points at.
    pub fn new(hdr: &'a mut libc::msghdr, control: &'a mut ControlBuffer) -> CmsgWriter<'a> {
        hdr.msg_control = control.0.as_mut_ptr().cast();
        hdr.msg_controllen = CONTROL_LEN as _;
        // SAFETY: msg_control / msg_controllen describe a live, aligned buffer.
        let cmsg = unsafe { libc::CMSG_FIRSTHDR(hdr) };
        CmsgWriter { hdr, cmsg, used: 0 }
    }

    /// Appends one message carrying `value`.
    pub fn push<T: Copy>(&mut self, level: libc::c_int, kind: libc::c_int, value: T) {
        assert!(!self.cmsg.is_null(), "control buffer too small");
        // SAFETY: cmsg points inside the control buffer, and the assert
        // below keeps CMSG_SPACE(size_of::<T>()) more bytes inside it.
        unsafe {
            let space = libc::CMSG_SPACE(mem::size_of::<T>() as _) as usize;
            assert!(self.used + space <= CONTROL_LEN);
            (*self.cmsg).cmsg_level = level;
            (*self.cmsg).cmsg_type = kind;
            (*self.cmsg).cmsg_len = libc::CMSG_LEN(mem::size_of::<T>() as _) as _;
            libc::CMSG_DATA(self.cmsg)
                .cast::<T>()
                .write_unaligned(value);
            self.used += space;
            self.cmsg = libc::CMSG_NXTHDR(self.hdr, self.cmsg);
        }
    }

    /// Appends the TOS byte: `IPV6_TCLASS` if the datagram leaves in an
    /// IPv6 header ([`sent_as_ipv6`]), else `IP_TOS`.
    pub fn push_tos(&mut self, ipv6: bool, tos: u8) {
        let (level, kind) = if ipv6 {
            (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
        } else {
            (libc::IPPROTO_IP, libc::IP_TOS)
        };
        self.push(level, kind, libc::c_int::from(tos));
    }

    /// Appends the source address to send from (`IP_PKTINFO` /
    /// `IPV6_PKTINFO`).
    pub fn push_source(&mut self, ip: IpAddr) {
        match ip {
            IpAddr::V4(ip) => {
                let info = libc::in_pktinfo {
                    ipi_ifindex: 0,
                    ipi_spec_dst: libc::in_addr {
                        s_addr: u32::from_ne_bytes(ip.octets()),
                    },
                    ipi_addr: libc::in_addr { s_addr: 0 },
                };
                self.push(libc::IPPROTO_IP, libc::IP_PKTINFO, info);
            }
            IpAddr::V6(ip) => {
                let info = libc::in6_pktinfo {
                    ipi6_ifindex: 0,
                    ipi6_addr: libc::in6_addr {
                        s6_addr: ip.octets(),
                    },
                };
                self.push(libc::IPPROTO_IPV6, libc::IPV6_PKTINFO, info);
            }
        }
    }

    /// Sets `msg_controllen` to what was written (no control data at all
    /// if nothing was).
    pub fn finish(self) {
        self.hdr.msg_controllen = self.used as _;
        if self.used == 0 {
            self.hdr.msg_control = std::ptr::null_mut();
        }
    }
}

/// What the control messages of one receive said.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReceivedControl {
    /// The TOS / traffic-class byte, if the kernel reported one.
    pub tos: Option<u8>,
    /// The segment size of a GRO-merged receive.
    pub gro_segment: Option<usize>,
    /// The address the datagram was sent to (PKTINFO).
    pub dst_ip: Option<IpAddr>,
    /// When the kernel received it (`SO_TIMESTAMPNS`).
    pub received: Option<SystemTime>,
}

/// Reads the control messages the kernel wrote for the receive `hdr`
/// describes.
pub fn parse_control(hdr: &libc::msghdr) -> ReceivedControl {
    let mut out = ReceivedControl::default();
    // SAFETY: the kernel filled msg_control with msg_controllen bytes of
    // well-formed cmsgs; CMSG_FIRSTHDR / CMSG_NXTHDR stay inside them.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(hdr);
        while !cmsg.is_null() {
            let c = &*cmsg;
            let data = libc::CMSG_DATA(cmsg);
            let data_len = c.cmsg_len as usize - (data as usize - cmsg as usize);
            let int = || data.cast::<libc::c_int>().read_unaligned();
            match (c.cmsg_level, c.cmsg_type) {
                // IPv4 TOS arrives as one byte, IPv6 traffic class as an int.
                (libc::IPPROTO_IP, libc::IP_TOS) if data_len >= 1 => out.tos = Some(*data),
                (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) if data_len >= 4 => {
                    out.tos = Some(int() as u8)
                }
                (libc::SOL_UDP, libc::UDP_GRO) if data_len >= 4 => {
                    out.gro_segment = Some(int() as usize)
                }
                (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                    let info = data.cast::<libc::in_pktinfo>().read_unaligned();
                    out.dst_ip = Some(IpAddr::from(info.ipi_addr.s_addr.to_ne_bytes()));
                }
                (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                    let info = data.cast::<libc::in6_pktinfo>().read_unaligned();
                    out.dst_ip = Some(IpAddr::from(info.ipi6_addr.s6_addr));
                }
                (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => {
                    let ts = data.cast::<libc::timespec>().read_unaligned();
                    out.received = wall_clock(ts);
                }
                _ => {}
            }
            cmsg = libc::CMSG_NXTHDR(hdr, cmsg);
        }
    }
    out
}

/// A kernel timestamp as a wall-clock time.
fn wall_clock(ts: libc::timespec) -> Option<SystemTime> {
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u32::try_from(ts.tv_nsec).ok()?;
    Some(UNIX_EPOCH + Duration::new(secs, nanos))
}

/// A received datagram's metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvMeta {
    /// Bytes received.
    pub len: usize,
    /// The sender.
    pub from: SocketAddr,
    /// The TOS / traffic-class byte (None if the kernel did not report
    /// one: [`enable_recv_tos`] was not called).
    pub tos: Option<u8>,
    /// How long the datagram waited in the socket before this read, from
    /// the kernel's receive time ([`enable_recv_time`]; None without it, or
    /// if the clock was set back).
    pub waited: Option<Duration>,
}

/// One non-blocking `recvmsg`: payload into `buf`, sender, TOS byte and
/// waiting time.
pub fn recv_with_tos(socket: &impl AsRawFd, buf: &mut [u8]) -> io::Result<RecvMeta> {
    // SAFETY: all-zero is valid for these plain C structs.
    let mut from: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let mut control = ControlBuffer::default();
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: as above.
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    msg.msg_name = (&mut from as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = CONTROL_LEN as _;
    // SAFETY: every pointer in `msg` is valid for the lengths given, for the call.
    let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel wrote a socket address of msg_namelen bytes.
    let from = unsafe { socket2::SockAddr::new(from, msg.msg_namelen) }
        .as_socket()
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "datagram from an unknown address family",
            )
        })?;
    let control = parse_control(&msg);
    Ok(RecvMeta {
        len: n as usize,
        from,
        tos: control.tos,
        waited: control
            .received
            .and_then(|at| SystemTime::now().duration_since(at).ok()),
    })
}

/// One non-blocking `sendmsg` of `payload` with the TOS byte `tos`, to `to`
/// (`None` on a connected socket). `ipv6` says the datagram leaves in an
/// IPv6 header ([`sent_as_ipv6`] of its destination).
pub fn send_with_tos(
    socket: &impl AsRawFd,
    payload: &[u8],
    to: Option<SocketAddr>,
    tos: u8,
    ipv6: bool,
) -> io::Result<usize> {
    let mut control = ControlBuffer::default();
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut libc::c_void,
        iov_len: payload.len(),
    };
    let name = to.map(socket2::SockAddr::from);
    // SAFETY: all-zero is valid for msghdr.
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    if let Some(name) = &name {
        msg.msg_name = name.as_ptr() as *mut libc::c_void;
        msg.msg_namelen = name.len();
    }
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    let mut cmsgs = CmsgWriter::new(&mut msg, &mut control);
    cmsgs.push_tos(ipv6, tos);
    cmsgs.finish();
    // SAFETY: every pointer in `msg` is valid for the lengths given, for the call.
    let n = unsafe { libc::sendmsg(socket.as_raw_fd(), &msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    fn round_trip(bind: &str, ipv6: bool) {
        let Ok(rx) = UdpSocket::bind(bind) else {
            return; // no such loopback here (IPv6 disabled): nothing to test
        };
        let tx = UdpSocket::bind(bind).unwrap();
        enable_recv_tos(&rx, ipv6).unwrap();
        let to = rx.local_addr().unwrap();
        assert_eq!(sent_as_ipv6(to), ipv6);
        for tos in [0x00, 0x01, 0x06, 0x27, 0xfe, 0xff] {
            let payload = [tos; 33];
            assert_eq!(
                send_with_tos(&tx, &payload, Some(to), tos, ipv6).unwrap(),
                33
            );
            let mut buf = [0u8; 64];
            // recv_with_tos does not block: wait for the datagram first.
            rx.peek(&mut [0u8; 1]).unwrap();
            let meta = recv_with_tos(&rx, &mut buf).unwrap();
            assert_eq!(meta.len, 33);
            assert_eq!(meta.from, tx.local_addr().unwrap());
            assert_eq!(meta.tos, Some(tos), "TOS byte {tos:#04x} via {bind}");
            assert_eq!(&buf[..33], &payload);
        }
    }

    #[test]
    fn tos_byte_round_trips_ipv4() {
        round_trip("127.0.0.1:0", false);
    }

    #[test]
    fn tos_byte_round_trips_ipv6() {
        round_trip("[::1]:0", true);
    }

    #[test]
    fn ipv4_mapped_destinations_take_ip_tos() {
        assert!(!sent_as_ipv6("[::ffff:10.0.0.1]:1".parse().unwrap()));
        assert!(sent_as_ipv6("[2001:db8::1]:1".parse().unwrap()));
    }

    /// A datagram read 50 ms after it arrived says it waited that long.
    #[test]
    fn a_late_read_knows_how_long_the_datagram_waited() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut buf = [0u8; 8];
        tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
        rx.peek(&mut buf).unwrap();
        let meta = recv_with_tos(&rx, &mut buf).unwrap();
        assert_eq!((meta.waited, meta.tos), (None, None));
        enable_recv_time(&rx);
        tx.send_to(b"y", rx.local_addr().unwrap()).unwrap();
        rx.peek(&mut buf).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let waited = recv_with_tos(&rx, &mut buf).unwrap().waited.unwrap();
        assert!(waited >= Duration::from_millis(50), "{waited:?}");
    }

    #[test]
    fn an_empty_socket_would_block_whatever_its_mode() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let err = recv_with_tos(&rx, &mut [0; 8]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    }
}

//! UDP sockets that read and write the whole TOS / traffic-class byte of
//! every datagram: `IP_RECVTOS` / `IPV6_RECVTCLASS` on receive, an `IP_TOS` /
//! `IPV6_TCLASS` control message on each `sendmsg` (Linux).
//!
//! The functions take the raw descriptor, so the same socket can be read by
//! tokio and written from a link thread.

use std::io;
use std::mem;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Control-message space: an int-sized TOS/TCLASS message and a timespec
/// receive time, plus headroom.
const CMSG_SPACE: usize = 128;

fn setsockopt_int(fd: RawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: `value` outlives the call and its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const i32).cast(),
            mem::size_of::<i32>() as libc::socklen_t,
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

fn to_sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut storage: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in and suitably aligned.
            unsafe {
                (&mut storage as *mut libc::sockaddr_storage)
                    .cast::<libc::sockaddr_in>()
                    .write(sin)
            };
            mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe {
                (&mut storage as *mut libc::sockaddr_storage)
                    .cast::<libc::sockaddr_in6>()
                    .write(sin6)
            };
            mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

fn from_sockaddr(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(storage.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let sin =
                unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let sin6 = unsafe {
                &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// A received datagram's metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvMeta {
    /// Bytes received.
    pub len: usize,
    /// The sender.
    pub from: SocketAddr,
    /// The TOS / traffic-class byte (0 if the kernel did not report one).
    pub tos: u8,
    /// How long the datagram waited in the socket before this read, from
    /// the kernel's receive time ([`enable_recv_time`]; None without it).
    pub waited: Option<Duration>,
}

/// One non-blocking `recvmsg`: payload into `buf`, sender and TOS byte.
pub fn recv_with_tos(socket: &impl AsRawFd, buf: &mut [u8]) -> io::Result<RecvMeta> {
    // SAFETY: all-zero is valid for these plain C structs.
    let mut from: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let mut control = [0u64; CMSG_SPACE / 8];
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
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = mem::size_of_val(&control) as _;
    // SAFETY: every pointer in `msg` is valid for the lengths given, for the call.
    let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let from = from_sockaddr(&from).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "datagram from an unknown address family",
        )
    })?;
    let (mut tos, mut received) = (0, None);
    // SAFETY: the kernel filled `msg_control` up to `msg_controllen`; the
    // CMSG macros stay inside it.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            let (level, kind) = ((*cmsg).cmsg_level, (*cmsg).cmsg_type);
            let data = libc::CMSG_DATA(cmsg);
            if level == libc::IPPROTO_IP && kind == libc::IP_TOS {
                tos = *data;
            } else if level == libc::IPPROTO_IPV6 && kind == libc::IPV6_TCLASS {
                tos = data.cast::<i32>().read_unaligned() as u8;
            } else if level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPNS {
                received = Some(data.cast::<libc::timespec>().read_unaligned());
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok(RecvMeta {
        len: n as usize,
        from,
        tos,
        waited: received.and_then(waited_since),
    })
}

/// How long ago the kernel's receive time `ts` (wall clock) was; None if
/// it lies in the future (the clock was set back).
fn waited_since(ts: libc::timespec) -> Option<Duration> {
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u32::try_from(ts.tv_nsec).ok()?;
    let received = UNIX_EPOCH + Duration::new(secs, nanos);
    SystemTime::now().duration_since(received).ok()
}

/// One non-blocking `sendmsg` of `payload` with the TOS byte `tos`, to `to`
/// (`None` on a connected socket). `ipv6` selects `IPV6_TCLASS` over `IP_TOS`.
pub fn send_with_tos(
    socket: &impl AsRawFd,
    payload: &[u8],
    to: Option<SocketAddr>,
    tos: u8,
    ipv6: bool,
) -> io::Result<usize> {
    let mut control = [0u64; CMSG_SPACE / 8];
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut libc::c_void,
        iov_len: payload.len(),
    };
    let mut name = to.map(to_sockaddr);
    // SAFETY: all-zero is valid for msghdr.
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    if let Some((storage, len)) = name.as_mut() {
        msg.msg_name = (storage as *mut libc::sockaddr_storage).cast();
        msg.msg_namelen = *len;
    }
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is a pure size computation.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(mem::size_of::<i32>() as u32) } as _;
    let (level, kind) = if ipv6 {
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
    } else {
        (libc::IPPROTO_IP, libc::IP_TOS)
    };
    // SAFETY: `control` holds CMSG_SPACE(int) bytes (checked by the assert),
    // so the first header and its int payload fit.
    unsafe {
        assert!(msg.msg_controllen as usize <= mem::size_of_val(&control));
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = level;
        (*cmsg).cmsg_type = kind;
        (*cmsg).cmsg_len = libc::CMSG_LEN(mem::size_of::<i32>() as u32) as _;
        libc::CMSG_DATA(cmsg)
            .cast::<i32>()
            .write_unaligned(i32::from(tos));
    }
    // SAFETY: every pointer in `msg` is valid for the lengths given, for the call.
    let n = unsafe { libc::sendmsg(socket.as_raw_fd(), &msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Waits up to `timeout_ms` for a socket to become writable (for a link
/// thread whose non-blocking send hit a full buffer).
pub fn wait_writable(socket: &impl AsRawFd, timeout_ms: i32) {
    let mut pfd = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
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
        for tos in [0x00, 0x01, 0x06, 0x27, 0xfe, 0xff] {
            let payload = [tos; 33];
            assert_eq!(
                send_with_tos(&tx, &payload, Some(to), tos, ipv6).unwrap(),
                33
            );
            rx.set_nonblocking(false).unwrap();
            let mut buf = [0u8; 64];
            // recv_with_tos is non-blocking: wait for the datagram first.
            let mut peek = [0u8; 1];
            rx.peek(&mut peek).unwrap();
            let meta = recv_with_tos(&rx, &mut buf).unwrap();
            assert_eq!(meta.len, 33);
            assert_eq!(meta.from, tx.local_addr().unwrap());
            assert_eq!(meta.tos, tos, "TOS byte {tos:#04x} via {bind}");
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

    /// A datagram read 50 ms after it arrived says it waited that long.
    #[test]
    fn a_late_read_knows_how_long_the_datagram_waited() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut buf = [0u8; 8];
        tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
        rx.peek(&mut buf).unwrap();
        assert_eq!(recv_with_tos(&rx, &mut buf).unwrap().waited, None);
        enable_recv_time(&rx);
        tx.send_to(b"y", rx.local_addr().unwrap()).unwrap();
        rx.peek(&mut buf).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let waited = recv_with_tos(&rx, &mut buf).unwrap().waited.unwrap();
        assert!(waited >= Duration::from_millis(50), "{waited:?}");
    }

    #[test]
    fn empty_socket_would_block() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let err = recv_with_tos(&rx, &mut [0; 8]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    }
}

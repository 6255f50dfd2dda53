//! The relay's UDP sockets: non-blocking, registered with tokio, reporting
//! the TOS byte and arrival time of what they receive (through
//! [`ecnq::tos_io`]), with buffers large enough for bursts; and the wait
//! of a link thread that found one full.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;

use ecnq::tos_io::{enable_recv_time, enable_recv_tos, set_buffers};
use tokio::net::UdpSocket;

/// Socket buffers requested (the kernel may cap them).
const SOCKET_BUFFER: i32 = 4 << 20;

/// A UDP socket bound to `addr`, non-blocking, registered with tokio,
/// reporting the TOS byte of what it receives.
pub fn bind_tos_socket(addr: SocketAddr) -> io::Result<UdpSocket> {
    tos_socket(std::net::UdpSocket::bind(addr)?, addr.is_ipv6())
}

/// A socket connected to `target` from an ephemeral port, set up like the
/// listener.
pub fn upstream_socket(target: SocketAddr) -> io::Result<UdpSocket> {
    let any: SocketAddr = if target.is_ipv6() {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    };
    let socket = std::net::UdpSocket::bind(any)?;
    socket.connect(target)?;
    tos_socket(socket, target.is_ipv6())
}

fn tos_socket(socket: std::net::UdpSocket, ipv6: bool) -> io::Result<UdpSocket> {
    socket.set_nonblocking(true)?;
    enable_recv_tos(&socket, ipv6)?;
    enable_recv_time(&socket);
    set_buffers(&socket, SOCKET_BUFFER);
    UdpSocket::from_std(socket)
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

//! [`EcnSocket`]: a `quinn::AsyncUdpSocket` that writes the whole TOS /
//! traffic-class byte of every packet (ECN codepoint + DSCP scheme tag) and
//! reads it back on every receive, GRO-merged or not (docs/design.md §3).
//!
//! quinn-udp writes the TOS byte from the ECN bits alone and its control
//! buffer is too small for a GRO receive, so this socket does its own
//! `sendmsg` (TOS + `UDP_SEGMENT` GSO + PKTINFO) and `recvmmsg` (256 bytes of
//! control space per message, `MSG_CTRUNC` checked). quinn-udp's
//! `UdpSocketState` is reused only to set the socket options up.

use std::fmt;
use std::future::Future;
use std::io::{self, IoSliceMut};
use std::mem::{self, MaybeUninit};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use quinn::udp::{EcnCodepoint, RecvMeta, Transmit, UdpSocketState};
use quinn::{AsyncUdpSocket, UdpPoller};
use tokio::io::Interest;

use super::congestion::CongestionControl;
use super::demux::Routes;
use crate::tos_io::{parse_control, sent_as_ipv6, CmsgWriter, ControlBuffer, CONTROL_LEN};

/// Messages per `recvmmsg` call at most.
const RECV_BATCH: usize = 32;

/// Counters of what the socket saw.
#[derive(Debug, Default)]
struct Counters {
    truncated_control: AtomicU64,
    send_errors: AtomicU64,
    missing_tos: AtomicU64,
    gro_receives: AtomicU64,
    discarded: AtomicU64,
}

/// A snapshot of an [`EcnSocket`]'s counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SocketStats {
    /// Receives whose control data the kernel truncated (`MSG_CTRUNC`).
    pub truncated_control: u64,
    /// Receives that carried no TOS / traffic-class byte.
    pub missing_tos: u64,
    /// `sendmsg` failures other than "would block" (the packets are lost).
    pub send_errors: u64,
    /// Receives that carried several GRO-merged datagrams.
    pub gro_receives: u64,
    /// Datagrams discarded before quinn saw them: they held a packet it
    /// cannot process (a long header whose type reads Retry, on a
    /// connection this endpoint did not open).
    pub discarded: u64,
}

/// Send and receive buffer the socket asks for: 8 MiB, about 0.7 s at
/// 100 Mbit/s, so a receiver that is late by a scheduling hiccup does not
/// drop a window's worth of packets (the kernel's default, about 200 KB, is
/// 16 ms at that rate). The kernel caps the request at
/// `net.core.{r,w}mem_max`.
pub const SOCKET_BUFFER: usize = 8 << 20;

/// The ecnq UDP socket. Build it with [`EcnSocket::bind`], hand it to
/// `quinn::Endpoint::new_with_abstract_socket` with
/// [`EcnSocket::endpoint_config`] (or use [`super::Endpoint`], which does
/// both), and register each connection with [`EcnSocket::prepare`].
pub struct EcnSocket {
    io: tokio::net::UdpSocket,
    state: UdpSocketState,
    ipv6: bool,
    pub(crate) routes: Arc<Routes>,
    counters: Counters,
}

impl fmt::Debug for EcnSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EcnSocket")
            .field("local", &self.io.local_addr().ok())
            .field("cc", &self.routes.default_cc())
            .finish_non_exhaustive()
    }
}

impl EcnSocket {
    /// Binds a UDP socket. An unspecified IPv6 address (`[::]:port`) gives a
    /// dual-stack socket. Connections the peer opens towards this socket
    /// run `default_cc`. Must be called inside a tokio runtime.
    pub fn bind(addr: SocketAddr, default_cc: CongestionControl) -> io::Result<Arc<EcnSocket>> {
        EcnSocket::open(addr, Arc::new(Routes::new(default_cc)))
    }

    /// A new socket on `addr` that serves this one's connections, for
    /// `quinn::Endpoint::rebind_abstract`: their decoder state and feedback
    /// carry over.
    pub fn rebound(&self, addr: SocketAddr) -> io::Result<Arc<EcnSocket>> {
        EcnSocket::open(addr, self.routes.clone())
    }

    /// quinn's default endpoint configuration with ecnq's connection ID
    /// generator, which lets this socket tell connections apart by their
    /// IDs. Without it, connections are told apart by remote address only.
    pub fn endpoint_config(&self) -> quinn::EndpointConfig {
        let routes = self.routes.clone();
        let mut config = quinn::EndpointConfig::default();
        config.cid_generator(move || Box::new(routes.cid_generator()));
        config
    }

    /// A quinn endpoint on this socket, with [`Self::endpoint_config`] and
    /// tokio's runtime; `server` lets it accept connections.
    pub fn quinn_endpoint(
        self: &Arc<Self>,
        server: Option<quinn::ServerConfig>,
    ) -> io::Result<quinn::Endpoint> {
        quinn::Endpoint::new_with_abstract_socket(
            self.endpoint_config(),
            server,
            self.clone(),
            Arc::new(quinn::TokioRuntime),
        )
    }

    fn open(addr: SocketAddr, routes: Arc<Routes>) -> io::Result<Arc<EcnSocket>> {
        use socket2::{Domain, Protocol, Socket, Type};
        let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
        if let IpAddr::V6(ip) = addr.ip() {
            socket.set_only_v6(ip != Ipv6Addr::UNSPECIFIED)?;
        }
        socket.set_nonblocking(true)?;
        // Best effort: a smaller buffer than asked is still a working socket.
        let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
        let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
        socket.bind(&addr.into())?;
        let state = UdpSocketState::new((&socket).into())?;
        let io = tokio::net::UdpSocket::from_std(socket.into())?;
        Ok(Arc::new(EcnSocket {
            io,
            state,
            ipv6: addr.is_ipv6(),
            routes,
            counters: Counters::default(),
        }))
    }

    /// The socket's counters.
    pub fn stats(&self) -> SocketStats {
        let c = &self.counters;
        SocketStats {
            truncated_control: c.truncated_control.load(Ordering::Relaxed),
            missing_tos: c.missing_tos.load(Ordering::Relaxed),
            send_errors: c.send_errors.load(Ordering::Relaxed),
            gro_receives: c.gro_receives.load(Ordering::Relaxed),
            discarded: c.discarded.load(Ordering::Relaxed),
        }
    }

    /// The TOS byte of a transmit: what its connection's peer sends (ECN
    /// codepoint and scheme tag), or quinn's ECN alone for an unknown one.
    fn tos_of(&self, transmit: &Transmit) -> u8 {
        match self
            .routes
            .route_sent(transmit.destination, transmit.contents)
        {
            Some(peer) => {
                let packets = transmit
                    .segment_size
                    .map_or(1, |size| transmit.contents.len().div_ceil(size.max(1)));
                peer.send_tos(transmit.ecn, packets as u64)
            }
            None => transmit.ecn.map_or(0, |e| e as u8),
        }
    }

    fn send(&self, transmit: &Transmit) -> io::Result<()> {
        let tos = self.tos_of(transmit);
        let destination = match transmit.destination {
            SocketAddr::V4(v4) if self.ipv6 => {
                SocketAddr::new(v4.ip().to_ipv6_mapped().into(), v4.port())
            }
            other => other,
        };
        let name = socket2::SockAddr::from(destination);
        let mut iov = libc::iovec {
            iov_base: transmit.contents.as_ptr() as *mut libc::c_void,
            iov_len: transmit.contents.len(),
        };
        let mut control = ControlBuffer::default();
        // SAFETY: msghdr is plain old data; every pointer set below outlives sendmsg.
        let mut hdr: libc::msghdr = unsafe { mem::zeroed() };
        hdr.msg_name = name.as_ptr() as *mut libc::c_void;
        hdr.msg_namelen = name.len();
        hdr.msg_iov = &mut iov;
        hdr.msg_iovlen = 1;
        let mut cmsgs = CmsgWriter::new(&mut hdr, &mut control);
        cmsgs.push_tos(sent_as_ipv6(destination), tos);
        if let Some(segment) = transmit.segment_size {
            if segment < transmit.contents.len() {
                cmsgs.push(libc::SOL_UDP, libc::UDP_SEGMENT, segment as u16);
            }
        }
        if let Some(ip) = transmit.src_ip {
            cmsgs.push_source(ip);
        }
        cmsgs.finish();
        loop {
            // SAFETY: hdr points at live buffers (see above).
            let n = unsafe { libc::sendmsg(self.io.as_raw_fd(), &hdr, 0) };
            if n >= 0 {
                return Ok(());
            }
            let error = io::Error::last_os_error();
            match error.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Err(error),
                // Anything else is a lost packet, as quinn-udp treats it:
                // quinn's loss recovery deals with it.
                _ => {
                    self.counters.send_errors.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(%error, dst = %destination, "sendmsg failed");
                    return Ok(());
                }
            }
        }
    }

    fn recv(&self, bufs: &mut [IoSliceMut<'_>], meta: &mut [RecvMeta]) -> io::Result<usize> {
        let count = bufs.len().min(meta.len()).min(RECV_BATCH);
        // Names are zeroed (read back whole); control data is read only as
        // far as the kernel wrote it.
        let mut names = [MaybeUninit::<libc::sockaddr_storage>::zeroed(); RECV_BATCH];
        let mut controls = [MaybeUninit::<ControlBuffer>::uninit(); RECV_BATCH];
        // SAFETY: mmsghdr is plain old data.
        let mut hdrs: [libc::mmsghdr; RECV_BATCH] = unsafe { mem::zeroed() };
        for i in 0..count {
            let hdr = &mut hdrs[i].msg_hdr;
            hdr.msg_name = names[i].as_mut_ptr().cast();
            hdr.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as _;
            // IoSliceMut is guaranteed ABI-compatible with iovec on Unix.
            hdr.msg_iov = (&mut bufs[i] as *mut IoSliceMut<'_>).cast();
            hdr.msg_iovlen = 1;
            hdr.msg_control = controls[i].as_mut_ptr().cast();
            hdr.msg_controllen = CONTROL_LEN as _;
        }
        let received = loop {
            // SAFETY: every header points at live buffers of the stated sizes.
            let n = unsafe {
                libc::recvmmsg(
                    self.io.as_raw_fd(),
                    hdrs.as_mut_ptr(),
                    count as _,
                    0,
                    std::ptr::null_mut(),
                )
            };
            if n >= 0 {
                break n as usize;
            }
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::Interrupted {
                return Err(error);
            }
        };
        let at = Instant::now();
        for i in 0..received {
            // SAFETY: the names were zeroed, which is a valid sockaddr_storage.
            let name = unsafe { names[i].assume_init() };
            self.take_received(at, &hdrs[i], name, &mut bufs[i], &mut meta[i])?;
        }
        Ok(received)
    }

    /// Reads one message of a `recvmmsg` into quinn's `meta`: sender, size,
    /// GRO stride, and the ECN the connection's decoder makes of the TOS
    /// byte (which it also feeds with the message).
    fn take_received(
        &self,
        at: Instant,
        msg: &libc::mmsghdr,
        name: libc::sockaddr_storage,
        buf: &mut [u8],
        meta: &mut RecvMeta,
    ) -> io::Result<()> {
        let hdr = &msg.msg_hdr;
        let len = msg.msg_len as usize;
        // SAFETY: the kernel wrote a socket address of msg_namelen bytes.
        let addr = unsafe { socket2::SockAddr::new(name, hdr.msg_namelen) }
            .as_socket()
            .ok_or_else(|| io::Error::other("recvmmsg returned a non-IP address"))?;
        if hdr.msg_flags & libc::MSG_CTRUNC != 0 {
            self.counters
                .truncated_control
                .fetch_add(1, Ordering::Relaxed);
            tracing::warn!("control data truncated (MSG_CTRUNC): ECN of this receive is lost");
        }
        let control = parse_control(hdr);
        let stride = control.gro_segment.unwrap_or(len).max(1);
        if stride < len {
            self.counters.gro_receives.fetch_add(1, Ordering::Relaxed);
        }
        let kept = keep_segments(&mut buf[..len], stride, |d| self.routes.takes(addr, d));
        if kept < len {
            let discarded = len.div_ceil(stride) - kept.div_ceil(stride);
            self.counters
                .discarded
                .fetch_add(discarded as u64, Ordering::Relaxed);
        }
        let len = kept;
        let ecn = match control.tos {
            Some(tos) => {
                let ecn = self.routes.on_receive(at, addr, tos, &buf[..len], stride);
                EcnCodepoint::from_bits(ecn.bits())
            }
            None => {
                self.counters.missing_tos.fetch_add(1, Ordering::Relaxed);
                None
            }
        };
        meta.addr = addr;
        meta.len = len;
        meta.stride = stride;
        meta.ecn = ecn;
        meta.dst_ip = control.dst_ip;
        Ok(())
    }
}

impl AsyncUdpSocket for EcnSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Box::pin(Poller {
            socket: self,
            writable: None,
        })
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        self.io.try_io(Interest::WRITABLE, || self.send(transmit))
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        loop {
            std::task::ready!(self.io.poll_recv_ready(cx))?;
            match self.io.try_io(Interest::READABLE, || self.recv(bufs, meta)) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                result => return Poll::Ready(result),
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.state.gro_segments()
    }

    fn may_fragment(&self) -> bool {
        self.state.may_fragment()
    }
}

/// Keeps the datagrams of a receive (`stride`-sized GRO segments, the
/// last one maybe shorter) that `keep` takes, moved together in their
/// order; returns their length. Segments stay `stride` apart, so quinn
/// splits the rest as before.
fn keep_segments(buf: &mut [u8], stride: usize, keep: impl Fn(&[u8]) -> bool) -> usize {
    let mut kept = 0;
    let mut start = 0;
    while start < buf.len() {
        let end = (start + stride).min(buf.len());
        if keep(&buf[start..end]) {
            buf.copy_within(start..end, kept);
            kept += end - start;
        }
        start = end;
    }
    kept
}

type Writable = Pin<Box<dyn Future<Output = io::Result<()>> + Send + Sync>>;

/// Waits for write readiness; one per quinn task that sends.
struct Poller {
    socket: Arc<EcnSocket>,
    writable: Option<Writable>,
}

impl fmt::Debug for Poller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Poller").finish_non_exhaustive()
    }
}

impl UdpPoller for Poller {
    fn poll_writable(self: Pin<&mut Self>, cx: &mut Context) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let socket = &this.socket;
        let writable = this.writable.get_or_insert_with(|| {
            let socket = socket.clone();
            Box::pin(async move { socket.io.writable().await })
        });
        let result = writable.as_mut().poll(cx);
        if result.is_ready() {
            this.writable = None;
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discarded_segments_leave_the_rest_a_stride_apart_in_order() {
        // Four segments of 3 bytes and a last one of 2, named by their first byte.
        let mut buf = *b"aa1bb2cc3dd4e5";
        let kept = keep_segments(&mut buf, 3, |d| !matches!(d[0], b'b' | b'd'));
        assert_eq!(&buf[..kept], b"aa1cc3e5");
        let mut one = *b"xyz";
        assert_eq!(keep_segments(&mut one, 3, |_| false), 0);
        assert_eq!(keep_segments(&mut one, 3, |_| true), 3);
    }
}

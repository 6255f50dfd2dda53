//! `ecnq-shim relay`: an unprivileged UDP forwarder with the shim's link
//! model and marking, for loopback use.
//!
//! Clients send to `--listen`; each client gets a session with its own
//! upstream socket connected to `--to`, so replies find their way back and
//! many clients work at once. Sessions are bounded in number, per source
//! address and in memory ([`super::sessions`]): a session holds a socket, a
//! reader task and no buffer of its own (readers share one per thread). A
//! session that cannot get a socket (descriptor limit) is refused and
//! counted; the relay keeps serving the others. Both directions cross an emulated [`Link`]
//! shared by all sessions (one bottleneck per direction). The TOS byte is
//! read on every receive and the marked one written on every send.
//!
//! Sockets are read by tokio tasks; each link runs on its own thread
//! ([`super::pump`]), which sends what the link releases.

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ecnq::PacketMarks;
use tokio::io::Interest;
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

use ecnq::tos_io::{recv_with_tos, send_with_tos, sent_as_ipv6, RecvMeta};

use super::pump::{Egress, LinkMsg, LinkThread};
use super::sessions::{Activity, Admission, SessionLimits, SessionTable};
use super::udp::{bind_tos_socket, upstream_socket, wait_writable};
use crate::link::classify::{marks_of, remarked_tos, PassReason};
use crate::link::{Corruption, Direction, Link, LinkPacket};
use crate::observe::{LinkSnapshot, Observers, SessionCounters};
use crate::wire::{Ipv4Repr, Ipv6Repr, UdpRepr, PROTO_UDP};

/// Largest datagram relayed.
const MAX_DATAGRAM: usize = 65_535;
/// How often idle sessions are swept.
const SWEEP_PERIOD: Duration = Duration::from_secs(1);
/// Descriptors kept for everything but sessions: stdio, the listener, the
/// runtime, link threads, stats, pcap and metrics connections.
pub const FD_RESERVE: u64 = 64;

/// Relay configuration.
#[derive(Clone, Debug)]
pub struct RelayConfig {
    /// Where clients send.
    pub listen: SocketAddr,
    /// Where their datagrams go.
    pub target: SocketAddr,
    /// Client → target.
    pub up: Direction,
    /// Target → client.
    pub down: Direction,
    /// Seed of the links' random loss, jitter, reordering and duplication.
    pub seed: u64,
    /// How many sessions, per source, and for how long.
    pub sessions: SessionLimits,
}

/// A datagram crossing the relay.
#[derive(Clone, Debug)]
struct Datagram {
    payload: Vec<u8>,
    /// The TOS byte as received.
    tos: u8,
    marks: PacketMarks,
    /// Payload + UDP + IP header: what a router would queue.
    wire_len: u32,
    out: Arc<UdpSocket>,
    to: Option<SocketAddr>,
    /// Whether it leaves in an IPv6 header.
    ipv6: bool,
}

impl Datagram {
    /// A datagram received with `meta`, on its way to `dst` through `out`
    /// (`to`: None on a socket connected to `dst`).
    fn received(
        meta: &RecvMeta,
        payload: Vec<u8>,
        dst: SocketAddr,
        out: Arc<UdpSocket>,
        to: Option<SocketAddr>,
    ) -> Datagram {
        // A byte the kernel did not report counts as 0: Not-ECT, untagged.
        let tos = meta.tos.unwrap_or(0);
        Datagram {
            marks: marks_of(tos, meta.from, dst, &payload),
            wire_len: wire_len(meta.len, meta.from),
            payload,
            tos,
            out,
            to,
            ipv6: sent_as_ipv6(dst),
        }
    }
}

impl LinkPacket for Datagram {
    fn wire_len(&self) -> u32 {
        self.wire_len
    }
    fn marks(&self) -> Result<PacketMarks, PassReason> {
        Ok(self.marks)
    }
    fn set_marks(&mut self, marks: &PacketMarks) {
        self.marks = *marks;
    }
    fn corrupt(&mut self, hit: Corruption) -> bool {
        hit.apply(&mut self.payload).is_some()
    }
}

/// Final figures of a relay run.
#[derive(Clone, Debug)]
pub struct RelayReport {
    /// Client → target link.
    pub up: LinkSnapshot,
    /// Target → client link.
    pub down: LinkSnapshot,
    /// What the session table did.
    pub sessions: SessionCounters,
    /// Time since the relay started.
    pub time: Duration,
}

/// A bound relay, ready to run.
#[derive(Debug)]
pub struct Relay {
    config: RelayConfig,
    listener: Arc<UdpSocket>,
    observers: Observers,
}

impl Relay {
    /// Binds the listening socket (call inside a tokio runtime).
    pub fn bind(config: RelayConfig, observers: Observers) -> io::Result<Relay> {
        let listener = bind_tos_socket(config.listen)?;
        Ok(Relay {
            config,
            listener: Arc::new(listener),
            observers,
        })
    }

    /// The address clients send to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Relays until `shutdown` completes or the listening socket fails;
    /// returns the final counters.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> io::Result<RelayReport> {
        let epoch = Instant::now();
        let Relay {
            config,
            listener,
            observers,
        } = self;
        let link = |d: &Direction, seed| {
            Link::new(
                d.spec.clone(),
                d.router.clone(),
                d.queue,
                seed,
                epoch.elapsed(),
            )
        };
        let reporter = observers.clone();
        let up = LinkThread::spawn(
            "up",
            link(&config.up, config.seed),
            DatagramEgress,
            epoch,
            observers.clone(),
        )?;
        let down_seed = config.seed.wrapping_add(1);
        let down = LinkThread::spawn(
            "down",
            link(&config.down, down_seed),
            DatagramEgress,
            epoch,
            observers,
        )?;
        let (up_tx, down_tx) = (up.sender(), down.sender());
        let mut sessions = SessionTable::new(config.sessions);
        let io = RelayIo {
            config: &config,
            listener: &listener,
            epoch,
            up_tx: &up_tx,
            down_tx: &down_tx,
        };
        let outcome = tokio::select! {
            result = io.serve(&mut sessions, &reporter) => result,
            () = shutdown => Ok(()),
        };
        let counters = sessions.counters();
        drop(sessions.drain());
        let time = epoch.elapsed();
        reporter.report_sessions(&counters, time, true);
        drop((up_tx, down_tx));
        // Stopping blocks until the link thread takes the message.
        let (up, down) = tokio::task::spawn_blocking(move || -> io::Result<_> {
            Ok((up.stop()?, down.stop()?))
        })
        .await
        .map_err(io::Error::other)??;
        outcome?;
        Ok(RelayReport {
            up,
            down,
            sessions: counters,
            time,
        })
    }
}

/// Raises the soft limit on open descriptors to the hard limit (each
/// session holds a socket); returns the limit now in force.
pub fn raise_fd_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid rlimit struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return Err(io::Error::last_os_error());
        }
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(limit.rlim_cur)
}

/// `limits` with at most as many sessions as the open-file limit leaves
/// sockets for, once raised ([`raise_fd_limit`]); with that limit where it
/// lowered them.
pub fn sessions_within_fd_limit(
    mut limits: SessionLimits,
) -> io::Result<(SessionLimits, Option<u64>)> {
    let fd_limit = raise_fd_limit()?;
    let room = usize::try_from(fd_limit.saturating_sub(FD_RESERVE)).unwrap_or(usize::MAX);
    let lowered = limits.max > room;
    if lowered {
        limits.max = room.max(1);
    }
    Ok((limits, lowered.then_some(fd_limit)))
}

/// What the relay keeps per client.
struct Session {
    upstream: Arc<UdpSocket>,
    reader: JoinHandle<()>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

thread_local! {
    /// One receive buffer per thread, shared by the listener and every
    /// session's reader: a read copies out what it got before yielding.
    static RECEIVE_BUFFER: RefCell<Vec<u8>> = RefCell::new(vec![0; MAX_DATAGRAM]);
}

/// One non-blocking receive, with the payload copied out of the thread's
/// buffer.
fn receive(socket: &UdpSocket) -> io::Result<(RecvMeta, Vec<u8>)> {
    RECEIVE_BUFFER.with_borrow_mut(|buf| {
        let meta = recv_with_tos(socket, buf)?;
        Ok((meta, buf[..meta.len].to_vec()))
    })
}

/// Waits for and receives one datagram.
async fn receive_next(socket: &UdpSocket) -> io::Result<(RecvMeta, Vec<u8>)> {
    socket
        .async_io(Interest::READABLE, || receive(socket))
        .await
}

/// When a datagram reached the socket: now, less the time the kernel says
/// it waited there. The link thread disregards the measurement of a time
/// whose packets were read late (`pump::STALL`).
fn arrival(epoch: Instant, meta: &RecvMeta) -> Duration {
    epoch
        .elapsed()
        .saturating_sub(meta.waited.unwrap_or_default())
}

fn millis(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// What the client side of the relay works with.
struct RelayIo<'a> {
    config: &'a RelayConfig,
    listener: &'a Arc<UdpSocket>,
    epoch: Instant,
    up_tx: &'a SyncSender<LinkMsg<Datagram>>,
    down_tx: &'a SyncSender<LinkMsg<Datagram>>,
}

impl RelayIo<'_> {
    /// Reads clients, opens sessions, feeds the up link; sweeps idle
    /// sessions and reports the session counters when they change.
    async fn serve(
        &self,
        sessions: &mut SessionTable<Session>,
        observers: &Observers,
    ) -> io::Result<()> {
        let mut sweep = tokio::time::interval(SWEEP_PERIOD);
        let mut reported = SessionCounters::default();
        loop {
            let (meta, payload) = tokio::select! {
                received = receive_next(self.listener) => received?,
                _ = sweep.tick() => {
                    let now = self.epoch.elapsed();
                    drop(sessions.expire(millis(now)));
                    if sessions.counters() != reported {
                        reported = sessions.counters();
                        observers.report_sessions(&reported, now, false);
                    }
                    continue;
                }
            };
            let arrived = arrival(self.epoch, &meta);
            let upstream = match sessions.get(&meta.from) {
                Some((session, last_active)) => {
                    last_active.store(millis(arrived), Ordering::Relaxed);
                    session.upstream.clone()
                }
                None => match self.open_session(sessions, meta.from, arrived).await {
                    Some(upstream) => upstream,
                    None => continue,
                },
            };
            let datagram = Datagram::received(&meta, payload, self.config.target, upstream, None);
            if self.up_tx.send(LinkMsg::Packet(arrived, datagram)).is_err() {
                return Err(io::Error::other("the up link stopped"));
            }
        }
    }

    /// Admits `client` to the table (evicting the idlest session if it is
    /// full), opens its upstream socket and starts reading its replies.
    /// None if the client is refused: too many sessions from its address,
    /// or no socket to be had (descriptor limit).
    async fn open_session(
        &self,
        sessions: &mut SessionTable<Session>,
        client: SocketAddr,
        now: Duration,
    ) -> Option<Arc<UdpSocket>> {
        match sessions.admit(client) {
            Admission::Refuse => return None,
            Admission::OpenAfterEvicting(idlest) => {
                drop(idlest);
                // Let the aborted reader go, and the socket with it, before
                // opening another: under a flood the listener is always
                // readable and would otherwise keep this task running.
                tokio::task::yield_now().await;
            }
            Admission::Open => {}
        }
        let Ok(upstream) = upstream_socket(self.config.target) else {
            sessions.refuse_for_sockets();
            return None;
        };
        let upstream = Arc::new(upstream);
        let last_active: Activity = Arc::new(AtomicU64::new(millis(now)));
        let reader = tokio::spawn(read_replies(
            upstream.clone(),
            self.listener.clone(),
            client,
            self.epoch,
            last_active.clone(),
            self.down_tx.clone(),
        ));
        let session = Session {
            upstream: upstream.clone(),
            reader,
        };
        sessions.insert(client, last_active, session);
        Some(upstream)
    }
}

/// Feeds a session's replies into the down link, addressed to its client.
async fn read_replies(
    upstream: Arc<UdpSocket>,
    listener: Arc<UdpSocket>,
    client: SocketAddr,
    epoch: Instant,
    last_active: Activity,
    down_tx: SyncSender<LinkMsg<Datagram>>,
) {
    loop {
        let Ok((meta, payload)) = receive_next(&upstream).await else {
            // ICMP errors (target not listening yet) surface as read errors:
            // keep the session, the client may retry.
            tokio::task::yield_now().await;
            continue;
        };
        let arrived = arrival(epoch, &meta);
        last_active.store(millis(arrived), Ordering::Relaxed);
        let datagram = Datagram::received(&meta, payload, client, listener.clone(), Some(client));
        if down_tx.send(LinkMsg::Packet(arrived, datagram)).is_err() {
            return;
        }
    }
}

/// The size of the IP packet that carried `payload_len` bytes of UDP payload.
fn wire_len(payload_len: usize, from: SocketAddr) -> u32 {
    let ip = if from.is_ipv6() { 40 } else { 20 };
    (payload_len + 8 + ip) as u32
}

/// Sends released datagrams with their (re-marked) TOS byte.
struct DatagramEgress;

impl Egress<Datagram> for DatagramEgress {
    fn send_batch(&mut self, batch: &mut Vec<Datagram>) -> u64 {
        batch.iter().filter(|d| !send(d)).count() as u64
    }

    fn ip_image(&self, d: &Datagram, out: &mut Vec<u8>) -> bool {
        let (Ok(src), Some(dst)) = (d.out.local_addr(), d.to.or_else(|| d.out.peer_addr().ok()))
        else {
            return false;
        };
        ip_image(src, dst, remarked_tos(d.tos, &d.marks), &d.payload, out)
    }
}

/// A UDP datagram as the IP packet it would be on the wire (for pcap).
fn ip_image(src: SocketAddr, dst: SocketAddr, tos: u8, payload: &[u8], out: &mut Vec<u8>) -> bool {
    let udp_len = UdpRepr::HEADER_LEN + payload.len();
    let header = match (src, dst) {
        (SocketAddr::V4(s), SocketAddr::V4(d)) if udp_len + 20 <= 65_535 => {
            out.resize(20, 0);
            let repr = Ipv4Repr {
                src: *s.ip(),
                dst: *d.ip(),
                protocol: PROTO_UDP,
                tos,
                ttl: 64,
                payload_len: udp_len,
            };
            repr.emit(out);
            20
        }
        (SocketAddr::V6(s), SocketAddr::V6(d)) if udp_len <= 65_535 => {
            out.resize(40, 0);
            let repr = Ipv6Repr {
                src: *s.ip(),
                dst: *d.ip(),
                next_header: PROTO_UDP,
                traffic_class: tos,
                hop_limit: 64,
                payload_len: udp_len,
            };
            repr.emit(out);
            40
        }
        _ => return false,
    };
    out.resize(header + udp_len, 0);
    UdpRepr {
        src_port: src.port(),
        dst_port: dst.port(),
    }
    .emit(&mut out[header..], payload.len());
    out[header + UdpRepr::HEADER_LEN..].copy_from_slice(payload);
    true
}

/// One `sendmsg`; one retry after waiting for buffer space.
fn send(d: &Datagram) -> bool {
    let tos = remarked_tos(d.tos, &d.marks);
    for attempt in 0..2 {
        match send_with_tos(&*d.out, &d.payload, d.to, tos, d.ipv6) {
            Ok(_) => return true,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && attempt == 0 => {
                wait_writable(&*d.out, 10);
            }
            Err(_) => return false,
        }
    }
    false
}

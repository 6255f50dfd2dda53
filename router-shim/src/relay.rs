//! `ecnq-shim relay`: an unprivileged UDP forwarder with the shim's link
//! model and marking, for loopback use.
//!
//! Clients send to `--listen`; each client gets a session with its own
//! upstream socket connected to `--to`, so replies find their way back and
//! many clients work at once. Both directions cross an emulated [`Link`]
//! shared by all sessions (one bottleneck per direction). The TOS byte is
//! read on every receive and the marked one written on every send.
//!
//! Sockets are read by tokio tasks; each link runs on its own thread
//! ([`crate::pump`]), which sends what the link releases.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ecnq::PacketMarks;
use tokio::io::Interest;
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

use crate::classify::{marks_of, remarked_tos, PassReason};
use crate::link::{Corruption, Direction, Link, LinkPacket};
use crate::pump::{Egress, LinkMsg, LinkThread, Observers};
use crate::stats::LinkSnapshot;
use crate::tos_socket::{
    enable_recv_time, enable_recv_tos, recv_with_tos, send_with_tos, set_buffers, wait_writable,
    RecvMeta,
};
use crate::wire::{Ipv4Repr, Ipv6Repr, UdpRepr, PROTO_UDP};

/// Largest datagram relayed.
const MAX_DATAGRAM: usize = 65_535;
/// Socket buffers requested (the kernel may cap them).
const SOCKET_BUFFER: i32 = 4 << 20;
/// How often idle sessions are swept.
const SWEEP_PERIOD: Duration = Duration::from_secs(1);

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
    /// Sessions idle this long are closed.
    pub session_idle: Duration,
    /// At most this many sessions at once; datagrams from further clients are dropped.
    pub max_sessions: usize,
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
    ipv6: bool,
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
    /// Sessions opened.
    pub sessions: u64,
    /// Datagrams dropped because the session table was full.
    pub refused: u64,
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
        let link = |d: &Direction, seed| Link::new(d.spec, d.router.clone(), seed, epoch.elapsed());
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
        let mut sessions = Sessions {
            table: HashMap::new(),
            opened: 0,
            refused: 0,
        };
        let outcome = tokio::select! {
            result = serve(&config, &listener, epoch, &up_tx, &down_tx, &mut sessions) => result,
            () = shutdown => Ok(()),
        };
        for (_, session) in sessions.table.drain() {
            session.reader.abort();
        }
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
            sessions: sessions.opened,
            refused: sessions.refused,
        })
    }
}

/// A UDP socket bound to `addr`, non-blocking, registered with tokio,
/// reporting the TOS byte of what it receives.
fn bind_tos_socket(addr: SocketAddr) -> io::Result<UdpSocket> {
    let socket = std::net::UdpSocket::bind(addr)?;
    socket.set_nonblocking(true)?;
    enable_recv_tos(&socket, addr.is_ipv6())?;
    enable_recv_time(&socket);
    set_buffers(&socket, SOCKET_BUFFER);
    UdpSocket::from_std(socket)
}

struct Session {
    upstream: Arc<UdpSocket>,
    /// Milliseconds since the epoch of the last datagram either way.
    last_active: Arc<AtomicU64>,
    reader: JoinHandle<()>,
}

struct Sessions {
    table: HashMap<SocketAddr, Session>,
    opened: u64,
    refused: u64,
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

/// Reads clients, opens sessions, feeds the up link; sweeps idle sessions.
async fn serve(
    config: &RelayConfig,
    listener: &Arc<UdpSocket>,
    epoch: Instant,
    up_tx: &SyncSender<LinkMsg<Datagram>>,
    down_tx: &SyncSender<LinkMsg<Datagram>>,
    sessions: &mut Sessions,
) -> io::Result<()> {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut sweep = tokio::time::interval(SWEEP_PERIOD);
    loop {
        let meta = tokio::select! {
            meta = listener.async_io(Interest::READABLE, || recv_with_tos(&**listener, &mut buf)) => meta?,
            _ = sweep.tick() => {
                let idle = millis(config.session_idle);
                let now = millis(epoch.elapsed());
                sessions.table.retain(|_, s| {
                    let keep = now.saturating_sub(s.last_active.load(Ordering::Relaxed)) < idle;
                    if !keep {
                        s.reader.abort();
                    }
                    keep
                });
                continue;
            }
        };
        let arrived = arrival(epoch, &meta);
        if !sessions.table.contains_key(&meta.from) {
            if sessions.table.len() >= config.max_sessions {
                sessions.refused += 1;
                continue;
            }
            let session = open_session(config, listener, meta.from, epoch, down_tx)?;
            sessions.opened += 1;
            sessions.table.insert(meta.from, session);
        }
        let Some(session) = sessions.table.get(&meta.from) else {
            continue;
        };
        session
            .last_active
            .store(millis(arrived), Ordering::Relaxed);
        let payload = buf[..meta.len].to_vec();
        let datagram = Datagram {
            marks: marks_of(meta.tos, meta.from, config.target, &payload),
            wire_len: wire_len(meta.len, meta.from),
            payload,
            tos: meta.tos,
            out: session.upstream.clone(),
            to: None,
            ipv6: config.target.is_ipv6(),
        };
        if up_tx.send(LinkMsg::Packet(arrived, datagram)).is_err() {
            return Err(io::Error::other("the up link stopped"));
        }
    }
}

/// Opens a client's upstream socket and starts reading its replies.
fn open_session(
    config: &RelayConfig,
    listener: &Arc<UdpSocket>,
    client: SocketAddr,
    epoch: Instant,
    down_tx: &SyncSender<LinkMsg<Datagram>>,
) -> io::Result<Session> {
    let any: SocketAddr = if config.target.is_ipv6() {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    };
    let std_socket = std::net::UdpSocket::bind(any)?;
    std_socket.connect(config.target)?;
    std_socket.set_nonblocking(true)?;
    enable_recv_tos(&std_socket, config.target.is_ipv6())?;
    enable_recv_time(&std_socket);
    set_buffers(&std_socket, SOCKET_BUFFER);
    let upstream = Arc::new(UdpSocket::from_std(std_socket)?);
    let last_active = Arc::new(AtomicU64::new(millis(epoch.elapsed())));
    let reader = tokio::spawn(read_replies(
        upstream.clone(),
        listener.clone(),
        client,
        epoch,
        last_active.clone(),
        down_tx.clone(),
    ));
    Ok(Session {
        upstream,
        last_active,
        reader,
    })
}

/// Feeds a session's replies into the down link, addressed to its client.
async fn read_replies(
    upstream: Arc<UdpSocket>,
    listener: Arc<UdpSocket>,
    client: SocketAddr,
    epoch: Instant,
    last_active: Arc<AtomicU64>,
    down_tx: SyncSender<LinkMsg<Datagram>>,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let ipv6 = client.is_ipv6();
    loop {
        let Ok(meta) = upstream
            .async_io(Interest::READABLE, || recv_with_tos(&*upstream, &mut buf))
            .await
        else {
            // ICMP errors (target not listening yet) surface as read errors:
            // keep the session, the client may retry.
            tokio::task::yield_now().await;
            continue;
        };
        let arrived = arrival(epoch, &meta);
        last_active.store(millis(arrived), Ordering::Relaxed);
        let payload = buf[..meta.len].to_vec();
        let datagram = Datagram {
            marks: marks_of(meta.tos, meta.from, client, &payload),
            wire_len: wire_len(meta.len, meta.from),
            payload,
            tos: meta.tos,
            out: listener.clone(),
            to: Some(client),
            ipv6,
        };
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

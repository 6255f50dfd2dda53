//! Per-connection state shared by the socket, the congestion controller
//! inside quinn, and the feedback tasks: the connection's sans-IO
//! [`Session`] behind a lock, its [`Published`] view that the socket's send
//! path reads without one, and the feedback task's wake-up.
//!
//! The socket finds it by connection ID (`demux.rs`); [`PeerTable`] is the
//! by-address fallback.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::congestion::CongestionControl;
use super::header::starts_long;
pub(crate) use crate::session::quinn_view;
use crate::session::{Event, Next, PeerEvent, Progress, Published, Session};
use crate::signal::LawConfig;
use crate::wire::ecn::Ecn;
use crate::wire::hash::packet_hash;

/// One connection's shared state.
pub(crate) struct Peer {
    epoch: Instant,
    pub cc: CongestionControl,
    session: Mutex<Session>,
    published: Arc<Published>,
    pub notify: Notify,
    /// Notified whenever the session is left under its rate
    /// ([`Session::under_rate`]).
    pub under_rate: Notify,
    attached: AtomicBool,
    /// How often quinn read its window ([`Peer::quinn_window`]): the
    /// under-rate task asks again only once quinn has read it since.
    window_reads: AtomicU64,
    /// Where the session's events go besides the logs, if asked.
    #[cfg(feature = "qlog")]
    qlog: std::sync::OnceLock<Arc<super::qlog::QlogFile>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not take the connection down with a poisoned lock.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The locked session; when the lock is released, what happened inside it
/// is logged, and the under-rate task is woken if the session is left
/// under its rate. Every call that can change that goes through here.
pub(crate) struct Locked<'a> {
    session: MutexGuard<'a, Session>,
    cc: CongestionControl,
    under_rate: &'a Notify,
    #[cfg(feature = "qlog")]
    qlog: Option<&'a super::qlog::QlogFile>,
}

impl Deref for Locked<'_> {
    type Target = Session;

    fn deref(&self) -> &Session {
        &self.session
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Session {
        &mut self.session
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        while let Some(event) = self.session.poll_event() {
            log(self.cc, event);
            #[cfg(feature = "qlog")]
            if let Some(qlog) = self.qlog {
                qlog.log(Instant::now(), &event);
            }
        }
        if self.session.under_rate() {
            self.under_rate.notify_one();
        }
    }
}

fn log(cc: CongestionControl, event: Event) {
    match event {
        Event::ModeChanged { from, to } if to.is_fallback() => {
            tracing::info!(cc = %cc, from = from.name(), to = to.name(), "ecnq fallback to classic congestion control")
        }
        Event::ModeChanged { from, to } => {
            tracing::info!(cc = %cc, from = from.name(), to = to.name(), "ecnq mode change")
        }
        Event::LawReplaced { window, mode } => {
            tracing::info!(window, mode = mode.name(), "law replaced by Cubic")
        }
        Event::SchemeResumed { scheme, window } => {
            tracing::info!(window, scheme = %scheme, "router feedback resumed: the scheme's law is back")
        }
        Event::LawModeChanged {
            from,
            to,
            window,
            cause,
        } => {
            tracing::debug!(from = %from, to = %to, window, cause = cause.name(), "law mode change")
        }
        Event::Decrease {
            mode,
            from,
            to,
            cause,
        } => {
            tracing::info!(mode = %mode, from, to, cause = cause.name(), "multiplicative decrease")
        }
        Event::ReportRejected(error) => tracing::debug!(%error, "bad feedback report ignored"),
        Event::ReportIgnored => {
            tracing::debug!("report ignored: this connection runs no ecnq scheme")
        }
    }
}

impl Peer {
    /// The state of the connection with `remote`.
    pub fn new(cc: CongestionControl, mss: u64, remote: SocketAddr) -> Peer {
        let scheme = match cc {
            CongestionControl::Ecnq(scheme) => Some(scheme),
            _ => None,
        };
        let session = Session::new(scheme, LawConfig::with_mss(mss), header_bytes(remote));
        Peer {
            epoch: Instant::now(),
            cc,
            published: session.published().clone(),
            session: Mutex::new(session),
            notify: Notify::new(),
            under_rate: Notify::new(),
            attached: AtomicBool::new(false),
            window_reads: AtomicU64::new(0),
            #[cfg(feature = "qlog")]
            qlog: std::sync::OnceLock::new(),
        }
    }

    /// Time since this connection's epoch: the `now` of the sans-IO core.
    pub fn since_epoch(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.epoch)
    }

    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    pub fn published(&self) -> &Published {
        &self.published
    }

    /// Claims the state for one connection; false if one already has it.
    pub fn attach(&self) -> bool {
        !self.attached.swap(true, Ordering::AcqRel)
    }

    pub fn is_attached(&self) -> bool {
        self.attached.load(Ordering::Acquire)
    }

    pub fn session(&self) -> Locked<'_> {
        Locked {
            session: lock(&self.session),
            cc: self.cc,
            under_rate: &self.under_rate,
            #[cfg(feature = "qlog")]
            qlog: self.qlog.get().map(|q| &**q),
        }
    }

    /// Logs the session's events into `qlog` too, from now on.
    #[cfg(feature = "qlog")]
    pub fn log_to(&self, qlog: Arc<super::qlog::QlogFile>) {
        let _ = self.qlog.set(qlog);
    }

    /// The window quinn may use at `at`: the published one, or, for a rate
    /// law, its gate's.
    pub fn quinn_window(&self, at: Instant) -> u64 {
        self.window_reads.fetch_add(1, Ordering::Relaxed);
        let published = self.published.window();
        if !self.published.rate_gated() {
            return published;
        }
        // The law may have changed since the flag was read.
        self.session()
            .window(self.since_epoch(at))
            .unwrap_or(published)
    }

    /// How often quinn has read its window.
    pub fn window_reads(&self) -> u64 {
        self.window_reads.load(Ordering::Relaxed)
    }

    /// The whole TOS byte for a datagram of `packets` packets (a GSO batch)
    /// quinn wants sent with `quinn_ecn`. No lock: this is the send path.
    pub fn send_tos(&self, quinn_ecn: Option<quinn::udp::EcnCodepoint>, packets: u64) -> u8 {
        let quinn_ecn = Ecn::from_bits(quinn_ecn.map_or(0, |e| e as u8));
        self.published.send_tos(quinn_ecn, packets)
    }

    /// One received datagram, or a GRO batch of `stride`-sized segments, all
    /// with TOS byte `tos`. Returns the codepoint to hand quinn. A datagram
    /// that starts with a long header (the handshake's) is counted but not
    /// decoded: routers wrote its marks a round trip before the data's, and
    /// a chain mixing the two spells neither (docs/design.md §2, Arrivals).
    pub fn on_receive(&self, at: Instant, tos: u8, payload: &[u8], stride: usize) -> Ecn {
        let now = self.since_epoch(at);
        let hashes = payload
            .chunks(stride.max(1))
            .map(|datagram| (!starts_long(datagram)).then(|| packet_hash(datagram)));
        let arrival = self.session().on_receive(now, tos, hashes);
        if arrival.wake_reporter {
            self.notify.notify_one();
        }
        arrival.quinn_ecn
    }

    /// Asks the report policy; with [`Next::Send`], also builds the report.
    pub fn poll_report(
        &self,
        at: Instant,
        srtt: Duration,
        progress: Progress,
    ) -> (Next, Option<Vec<u8>>) {
        self.session()
            .poll_report(self.since_epoch(at), srtt, progress)
    }

    /// What the peer said at `at`, whichever layer saw it: a report
    /// datagram (the connection), an ACK frame (the packet keys), or
    /// quinn's acknowledgements and congestion events (the controller).
    pub fn on_peer(&self, at: Instant, event: PeerEvent<'_>) {
        self.session().on_peer(self.since_epoch(at), event);
    }
}

/// Per-connection state by remote address, bounded.
#[derive(Default)]
pub(crate) struct PeerTable {
    map: Mutex<HashMap<SocketAddr, Arc<Peer>>>,
}

/// The table never holds more peers than this; states that no connection
/// claimed are dropped first when it is full (a flood of spoofed Initials
/// must not grow memory without bound).
const MAX_PEERS: usize = 16_384;

/// The IP and UDP header bytes of a packet to `remote`: 20 + 8 for IPv4
/// (also when a dual-stack socket names it IPv4-mapped), 40 + 8 for IPv6.
pub(crate) fn header_bytes(remote: SocketAddr) -> u64 {
    match canonical(remote) {
        SocketAddr::V4(_) => 28,
        SocketAddr::V6(_) => 48,
    }
}

/// Addresses are keyed in canonical form: a dual-stack socket sees IPv4
/// peers as IPv4-mapped IPv6 addresses.
pub(crate) fn canonical(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}

impl PeerTable {
    pub fn get(&self, addr: SocketAddr) -> Option<Arc<Peer>> {
        lock(&self.map).get(&canonical(addr)).cloned()
    }

    /// The state for `addr`, created with `cc` if there is none.
    pub fn get_or_insert(&self, addr: SocketAddr, cc: CongestionControl) -> Arc<Peer> {
        let mut map = lock(&self.map);
        if map.len() >= MAX_PEERS {
            map.retain(|_, peer| peer.is_attached());
        }
        map.entry(canonical(addr))
            .or_insert_with(|| Arc::new(Peer::new(cc, MSS, addr)))
            .clone()
    }

    /// A fresh state for `addr`, replacing any unattached one.
    pub fn insert(&self, addr: SocketAddr, peer: Arc<Peer>) {
        lock(&self.map).insert(canonical(addr), peer);
    }

    /// Removes `peer` if it is still the state for `addr`.
    pub fn remove(&self, addr: SocketAddr, peer: &Arc<Peer>) {
        let mut map = lock(&self.map);
        if map
            .get(&canonical(addr))
            .is_some_and(|p| Arc::ptr_eq(p, peer))
        {
            map.remove(&canonical(addr));
        }
    }
}

/// quinn's initial MTU (1200 bytes, RFC 9000 §14) is the laws' packet unit.
pub(crate) const MSS: u64 = 1200;

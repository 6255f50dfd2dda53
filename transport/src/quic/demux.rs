//! Which connection a packet belongs to, by connection ID (docs/design.md §3).
//!
//! * Received packets: the destination CID is one this endpoint issued
//!   ([`super::cid`]). A CID sealed with a connection's key finds it at
//!   once; a CID issued later (key [`UNBOUND`]) is bound, on its first
//!   packets, to the one connection whose path now ends at the packet's
//!   source address (quinn's view, so a migrated connection is found).
//! * Sent packets: a long header's source CID is ours; a short header's
//!   destination CID is the peer's, learnt from the source CIDs of its long
//!   headers.
//! * Handshakes not yet accepted, peers whose CIDs are not ecnq's, and peer
//!   CIDs never seen: by remote address, as before connection IDs.
//!
//! One table serves every socket of an endpoint, so a rebound endpoint
//! keeps its connections' state.

use std::collections::HashMap;
use std::fmt;
use std::hash::RandomState;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::cid::{CidCodec, CidGenerator, CID_LEN, UNBOUND};
use super::congestion::CongestionControl;
use super::header::{retry_in, starts_long, Header, Packet, MAX_CID_LEN};
use super::peer::{canonical, quinn_view, Peer, PeerTable, MSS};
use crate::wire::ecn::{Ecn, SchemeTag};

/// CIDs issued after the handshake that one connection keeps bound; the
/// oldest is forgotten beyond (a peer can make an endpoint issue many).
const LATE_CIDS_PER_CONNECTION: usize = 8;
/// Peer CIDs and remote addresses one connection keeps.
const REMOTES_PER_CONNECTION: usize = 4;
/// After a search for an unbound CID's connection found none, or several,
/// the next search waits this long (each one asks every connection).
const SEARCH_PAUSE: Duration = Duration::from_millis(1);

/// A connection ID as a map key.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Cid {
    len: u8,
    bytes: [u8; MAX_CID_LEN],
}

impl Cid {
    /// `None` if `cid` is longer than [`MAX_CID_LEN`].
    pub fn new(cid: &[u8]) -> Option<Cid> {
        let mut bytes = [0; MAX_CID_LEN];
        bytes.get_mut(..cid.len())?.copy_from_slice(cid);
        Some(Cid {
            len: cid.len() as u8,
            bytes,
        })
    }
}

/// One connection's entry.
struct Route {
    peer: Arc<Peer>,
    /// The remote address the connection was prepared for.
    remote: SocketAddr,
    /// The established connection, for its current remote address.
    quinn: Option<quinn::Connection>,
    /// Our CIDs bound to it after the handshake.
    late: Vec<Cid>,
    /// The peer's CIDs seen in long headers.
    remote_cids: Vec<Cid>,
    /// Addresses it holds in the address table.
    addrs: Vec<SocketAddr>,
    /// This endpoint opened it (is its client), so it may get a Retry.
    opened_here: bool,
}

#[derive(Default)]
struct Tables {
    routes: HashMap<u32, Route>,
    late: HashMap<Cid, u32>,
    remote_cids: HashMap<Cid, u32>,
    /// Bit `n` set: some peer CID is `n` bytes long.
    remote_cid_lens: u32,
    last_key: u32,
    failed_search: Option<Instant>,
}

/// The route tables of one endpoint.
pub(crate) struct Routes {
    codec: Arc<CidCodec>,
    default_cc: CongestionControl,
    by_addr: PeerTable,
    tables: Mutex<Tables>,
}

impl fmt::Debug for Routes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Routes")
            .field("default_cc", &self.default_cc)
            .field("connections", &self.lock().routes.len())
            .finish_non_exhaustive()
    }
}

/// Where a destination CID of ours leads.
enum Lookup {
    /// Its key, its state, and whether the packet's source address is new
    /// to it.
    Found(u32, Arc<Peer>, bool),
    /// Issued after a handshake, not bound yet.
    Unbound(Cid),
    /// Not one of ours, or of a connection that is gone.
    Unknown,
}

impl Routes {
    /// Tables for an endpoint whose incoming connections run `default_cc`.
    pub fn new(default_cc: CongestionControl) -> Routes {
        Routes {
            codec: Arc::new(CidCodec::new(RandomState::new())),
            default_cc,
            by_addr: PeerTable::default(),
            tables: Mutex::new(Tables::default()),
        }
    }

    pub fn default_cc(&self) -> CongestionControl {
        self.default_cc
    }

    /// A CID generator for the quinn endpoint these tables serve.
    pub fn cid_generator(&self) -> CidGenerator {
        CidGenerator::new(self.codec.clone())
    }

    fn lock(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a connection with `remote`. It adopts the state its
    /// handshake packets were counted under if that state runs `cc`.
    pub fn prepare(&self, remote: SocketAddr, cc: CongestionControl) -> (u32, Arc<Peer>) {
        let remote = canonical(remote);
        let peer = match self.by_addr.get(remote) {
            Some(peer) if peer.cc == cc && peer.attach() => peer,
            _ => {
                let peer = Arc::new(Peer::new(cc, MSS, remote));
                peer.attach();
                peer
            }
        };
        self.by_addr.insert(remote, peer.clone());
        let mut tables = self.lock();
        let key = loop {
            tables.last_key = tables.last_key.wrapping_add(1);
            if tables.last_key != UNBOUND && !tables.routes.contains_key(&tables.last_key) {
                break tables.last_key;
            }
        };
        let route = Route {
            peer: peer.clone(),
            remote,
            quinn: None,
            late: Vec::new(),
            remote_cids: Vec::new(),
            addrs: vec![remote],
            opened_here: false,
        };
        tables.routes.insert(key, route);
        (key, peer)
    }

    /// The connection `key` was prepared for is established.
    pub fn attach(&self, key: u32, connection: quinn::Connection) {
        if let Some(route) = self.lock().routes.get_mut(&key) {
            route.quinn = Some(connection);
        }
    }

    /// This endpoint opens connection `key`: its server may send a Retry.
    pub fn opened_here(&self, key: u32) {
        if let Some(route) = self.lock().routes.get_mut(&key) {
            route.opened_here = true;
        }
    }

    /// Whether quinn is to see `datagram` from `from`: not if it holds a
    /// packet whose long header reads Retry, unless the packet is for a
    /// connection this endpoint opened to `from`. Only a server sends a
    /// Retry (RFC 9000 §17.2.5), so on any other packet the type bits were
    /// corrupted; quinn-proto closes a server connection that reads one
    /// with PROTOCOL_VIOLATION, where a corrupted packet is to be discarded
    /// (`a_client_initial_corrupted_to_retry_is_discarded`). A connection
    /// whose first ID quinn made outside `Prepared::connect` (an
    /// application's own quinn endpoint) is found by its server's address
    /// (the interop matrix's retry cells).
    pub fn takes(&self, from: SocketAddr, datagram: &[u8]) -> bool {
        let Some(dcid) = retry_in(datagram) else {
            return true;
        };
        let key = self.codec.open(dcid);
        let from = canonical(from);
        let tables = self.lock();
        match key.and_then(|key| tables.routes.get(&key)) {
            Some(route) => route.opened_here,
            None => (tables.routes.values()).any(|r| r.opened_here && r.remote == from),
        }
    }

    /// Forgets connection `key` and everything bound to it.
    pub fn remove(&self, key: u32) {
        let mut guard = self.lock();
        let tables = &mut *guard;
        let Some(route) = tables.routes.remove(&key) else {
            return;
        };
        for (map, cids) in [
            (&mut tables.late, &route.late),
            (&mut tables.remote_cids, &route.remote_cids),
        ] {
            for cid in cids {
                if map.get(cid) == Some(&key) {
                    map.remove(cid);
                }
            }
        }
        drop(guard);
        for addr in route.addrs {
            self.by_addr.remove(addr, &route.peer);
        }
    }

    /// One received datagram, or a GRO batch of `stride`-sized segments,
    /// all with TOS byte `tos`, from `from`: each run of segments for one
    /// connection goes to its decoder. Returns the codepoint to hand quinn.
    pub fn on_receive(
        &self,
        at: Instant,
        from: SocketAddr,
        tos: u8,
        payload: &[u8],
        stride: usize,
    ) -> Ecn {
        let stride = stride.max(1);
        // Segments of one batch share an address, not always a connection:
        // each run of segments with one destination CID is looked up once.
        let mut run: Option<Run> = None;
        for (i, segment) in payload.chunks(stride).enumerate() {
            let dcid = dst_cid(segment).unwrap_or_default();
            if run.as_ref().is_some_and(|run| run.dcid == dcid) {
                continue;
            }
            if let Some(run) = run.take() {
                run.deliver(at, tos, &payload[run.start * stride..i * stride], stride);
            }
            run = Some(Run {
                dcid,
                peer: self.route_received(at, from, segment),
                start: i,
            });
        }
        if let Some(run) = run {
            run.deliver(at, tos, &payload[run.start * stride..], stride);
        }
        // quinn takes one codepoint per batch: a batch that starts with a
        // handshake datagram is taken as the handshake's.
        let handshake = starts_long(payload);
        quinn_view(Ecn::from_tos(tos), SchemeTag::from_tos(tos), handshake)
    }

    /// The state a received packet counts under, if any.
    fn route_received(&self, at: Instant, from: SocketAddr, packet: &[u8]) -> Option<Arc<Peer>> {
        let from = canonical(from);
        let header = Header::parse(packet, CID_LEN).ok()?;
        let (key, peer) = match (self.lookup(header.dst_cid(), from), header) {
            (Lookup::Found(key, peer, new_addr), _) => {
                if new_addr {
                    self.note_address(key, &peer, from);
                }
                (key, peer)
            }
            (Lookup::Unbound(cid), Header::Short { .. }) => return self.bind(at, from, cid),
            // Not an ecnq CID (a peer endpoint with its own generator): by
            // address.
            (_, Header::Short { .. }) => return self.by_addr.get(from),
            // A handshake not accepted yet: its state waits by address for
            // `prepare`, unless a connection holds the address.
            (_, Header::Long { .. }) => {
                return Some(self.by_addr.get_or_insert(from, self.default_cc))
                    .filter(|peer| !peer.is_attached())
            }
        };
        if let Header::Long { src_cid, .. } = header {
            self.learn_remote_cid(key, src_cid);
        }
        Some(peer)
    }

    /// Where `dst_cid` leads; `from` is the packet's source, canonical.
    fn lookup(&self, dst_cid: &[u8], from: SocketAddr) -> Lookup {
        let Some(key) = self.codec.open(dst_cid) else {
            return Lookup::Unknown;
        };
        let tables = self.lock();
        let key = match key {
            UNBOUND => {
                let Some(cid) = Cid::new(dst_cid) else {
                    return Lookup::Unknown;
                };
                match tables.late.get(&cid) {
                    Some(key) => *key,
                    None => return Lookup::Unbound(cid),
                }
            }
            key => key,
        };
        match tables.routes.get(&key) {
            Some(route) => Lookup::Found(key, route.peer.clone(), !route.addrs.contains(&from)),
            None => Lookup::Unknown,
        }
    }

    /// Binds `cid` to the one connection whose path ends at `from`
    /// (canonical) now.
    fn bind(&self, at: Instant, from: SocketAddr, cid: Cid) -> Option<Arc<Peer>> {
        let candidates: Vec<_> = {
            let tables = self.lock();
            if tables
                .failed_search
                .is_some_and(|failed| at.saturating_duration_since(failed) < SEARCH_PAUSE)
            {
                return None;
            }
            let routes = tables.routes.iter();
            routes
                .map(|(key, route)| (*key, route.remote, route.quinn.clone()))
                .collect()
        };
        // Asked without the table lock: quinn holds a connection's lock
        // while it sends through this table.
        let mut found = candidates.into_iter().filter(|(_, remote, quinn)| {
            canonical(quinn.as_ref().map_or(*remote, |q| q.remote_address())) == from
        });
        let only = match (found.next(), found.next()) {
            (Some((key, _, _)), None) => Some(key),
            _ => None,
        };
        // Our clones of quinn connections go before the lock is taken again.
        drop(found);
        let Some(peer) = only.and_then(|key| self.bind_to(key, cid)) else {
            self.lock().failed_search = Some(at);
            return None;
        };
        tracing::debug!(%from, "connection ID bound by address");
        Some(peer)
    }

    /// Connection `key` decrypted a packet sent to `dst_cid`: if that is
    /// one of ours not bound yet, it is the connection's.
    pub fn claim(&self, key: u32, dst_cid: &[u8]) {
        if self.codec.open(dst_cid) != Some(UNBOUND) {
            return;
        }
        let Some(cid) = Cid::new(dst_cid) else {
            return;
        };
        // The keys are sure; the search by address may have guessed.
        if self.lock().late.get(&cid) != Some(&key) {
            self.bind_to(key, cid);
        }
    }

    fn bind_to(&self, key: u32, cid: Cid) -> Option<Arc<Peer>> {
        let mut guard = self.lock();
        let tables = &mut *guard;
        let route = tables.routes.get_mut(&key)?;
        if let Some(old) = push_bounded(&mut route.late, cid, LATE_CIDS_PER_CONNECTION) {
            if tables.late.get(&old) == Some(&key) {
                tables.late.remove(&old);
            }
        }
        tables.late.insert(cid, key);
        Some(route.peer.clone())
    }

    /// Records a CID of the peer of connection `key`.
    pub fn learn_remote_cid(&self, key: u32, cid: &[u8]) {
        let Some(cid) = Cid::new(cid) else {
            return;
        };
        // Peers with empty CIDs are told apart by address only.
        if cid.len == 0 {
            return;
        }
        let mut guard = self.lock();
        let tables = &mut *guard;
        if tables.remote_cids.get(&cid) == Some(&key) {
            return;
        }
        let Some(route) = tables.routes.get_mut(&key) else {
            return;
        };
        if let Some(old) = push_bounded(&mut route.remote_cids, cid, REMOTES_PER_CONNECTION) {
            if tables.remote_cids.get(&old) == Some(&key) {
                tables.remote_cids.remove(&old);
            }
        }
        tables.remote_cids.insert(cid, key);
        tables.remote_cid_lens |= 1 << cid.len;
    }

    /// Keeps the address table pointing at the connection a packet from
    /// `from` (canonical) belongs to.
    fn note_address(&self, key: u32, peer: &Arc<Peer>, from: SocketAddr) {
        let forgotten = {
            let mut tables = self.lock();
            let Some(route) = tables.routes.get_mut(&key) else {
                return;
            };
            if route.addrs.contains(&from) {
                return;
            }
            push_bounded(&mut route.addrs, from, REMOTES_PER_CONNECTION)
        };
        if let Some(old) = forgotten {
            self.by_addr.remove(old, peer);
        }
        self.by_addr.insert(from, peer.clone());
    }

    /// The state whose TOS byte a packet to `destination` carries.
    pub fn route_sent(&self, destination: SocketAddr, packet: &[u8]) -> Option<Arc<Peer>> {
        let Ok(view) = Packet::new_checked(packet, 0) else {
            return None;
        };
        let found = if view.is_long() {
            match self.lookup(view.src_cid(), canonical(destination)) {
                Lookup::Found(_, peer, _) => Some(peer),
                _ => None,
            }
        } else {
            self.by_remote_cid(packet)
        };
        found.or_else(|| self.by_addr.get(destination))
    }

    /// A short header's destination: the peer CID it starts with.
    fn by_remote_cid(&self, packet: &[u8]) -> Option<Arc<Peer>> {
        let tables = self.lock();
        let lens = tables.remote_cid_lens;
        (0..=MAX_CID_LEN)
            .filter(|len| lens & (1 << len) != 0)
            .filter_map(|len| Cid::new(packet.get(1..1 + len)?))
            .find_map(|cid| tables.remote_cids.get(&cid))
            .and_then(|key| tables.routes.get(key))
            .map(|route| route.peer.clone())
    }
}

/// The destination CID of a received packet, as far as it can be read.
fn dst_cid(packet: &[u8]) -> Option<&[u8]> {
    Header::parse(packet, CID_LEN).ok().map(|h| h.dst_cid())
}

/// Consecutive segments of a receive with one destination CID.
struct Run<'a> {
    dcid: &'a [u8],
    peer: Option<Arc<Peer>>,
    /// The index of its first segment.
    start: usize,
}

impl Run<'_> {
    /// Counts the run's segments under its connection's decoder, if any.
    fn deliver(&self, at: Instant, tos: u8, segments: &[u8], stride: usize) {
        if let Some(peer) = &self.peer {
            peer.on_receive(at, tos, segments, stride);
        }
    }
}

/// Appends `item`; returns the oldest one if that made `items` too long.
fn push_bounded<T>(items: &mut Vec<T>, item: T, max: usize) -> Option<T> {
    items.push(item);
    (items.len() > max).then(|| items.remove(0))
}

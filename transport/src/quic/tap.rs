//! A wrapper around quinn's crypto that tells the routes which connection
//! IDs one connection uses: every packet it decrypts names one of its own
//! CIDs, every packet it encrypts names one of the peer's.
//!
//! quinn issues most CIDs from its endpoint task, with no word of the
//! connection they are for (`cid.rs`), and a quinn server switches to the
//! client's second CID as soon as it has one. The packet keys are the one
//! place that sees both a connection and its CIDs, so this is where a CID
//! is bound for certain; the socket's search by address only covers the
//! first packets.
//!
//! The keys also see every 1-RTT packet's number as it is sealed and every
//! ACK frame as it is opened, before quinn acts on it: where the session
//! reads its peer's ACK-ECN counts ([`Published::reads_counts`](crate::session::Published::reads_counts)), the tap
//! hands it each packet's number and hash, and each ACK frame. Everything
//! else is passed through unchanged.

use std::any::Any;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::BytesMut;
use quinn_proto::crypto::{
    self, CryptoError, ExportKeyingMaterialError, HeaderKey, KeyPair, Keys, PacketKey,
    UnsupportedVersion,
};
use quinn_proto::transport_parameters::TransportParameters;
use quinn_proto::{ConnectError, ConnectionId, Side, TransportError};

use super::cid::CID_LEN;
use super::demux::{Cid, Routes};
use super::header::{Header, Packet};
use super::peer::Peer;
use crate::session::PeerEvent;
use crate::wire::ack::ack_frames;
use crate::wire::hash::packet_hash;

/// One connection's view of its packets' CIDs.
pub(crate) struct Tap {
    routes: Arc<Routes>,
    key: u32,
    peer: Arc<Peer>,
    state: Mutex<TapState>,
}

#[derive(Default)]
struct TapState {
    /// The length of the peer's CIDs, from its long headers.
    peer_cid_len: Option<usize>,
    last_received: Option<Cid>,
    last_sent: Option<Cid>,
}

impl Tap {
    pub fn new(routes: Arc<Routes>, key: u32, peer: Arc<Peer>) -> Arc<Tap> {
        Arc::new(Tap {
            routes,
            key,
            peer,
            state: Mutex::default(),
        })
    }

    /// A 1-RTT packet was sealed: `packet` is the whole of it, header,
    /// ciphertext and tag, the tail of its datagram (a short header packet
    /// is always last), so its hash is the datagram's.
    fn on_sealed(&self, number: u64, packet: &[u8]) {
        if is_short(packet) && self.peer.published().reads_counts() {
            let now = self.peer.since_epoch(Instant::now());
            self.peer
                .session()
                .on_packet_sent(now, number, packet_hash(packet));
        }
    }

    /// A 1-RTT packet was opened: its ACK frames go to the session before
    /// quinn reads them. A frame type the reader does not know ends the
    /// walk; the ACK frames before it are read (quinn and the stacks seen
    /// so far put ACK frames first).
    fn on_opened(&self, header: &[u8], payload: &[u8]) {
        if !is_short(header) || !self.peer.published().reads_counts() {
            return;
        }
        let now = Instant::now();
        for frame in ack_frames(payload).map_while(Result::ok) {
            self.peer.on_peer(now, PeerEvent::AckFrame(frame));
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, TapState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A packet of this connection was decrypted: its header is genuine.
    fn on_received(&self, header: &[u8]) {
        let Ok(header) = Header::parse(header, CID_LEN) else {
            return;
        };
        let mut state = self.state();
        if let Header::Long { src_cid, .. } = header {
            state.peer_cid_len = Some(src_cid.len());
            return;
        }
        let cid = Cid::new(header.dst_cid());
        if cid.is_some() && cid != state.last_received {
            state.last_received = cid;
            drop(state);
            self.routes.claim(self.key, header.dst_cid());
        }
    }

    /// A packet of this connection is being sent.
    fn on_sent(&self, header: &[u8]) {
        let mut state = self.state();
        let Some(len) = state.peer_cid_len else {
            return;
        };
        let Ok(packet) = Packet::new_checked(header, len) else {
            return;
        };
        if packet.is_long() {
            return;
        }
        let cid = Cid::new(packet.short_dst_cid(len));
        if cid.is_some() && cid != state.last_sent {
            state.last_sent = cid;
            drop(state);
            self.routes
                .learn_remote_cid(self.key, packet.short_dst_cid(len));
        }
    }

    fn keys(self: &Arc<Self>, keys: Keys) -> Keys {
        Keys {
            header: keys.header,
            packet: self.key_pair(keys.packet),
        }
    }

    fn key_pair(
        self: &Arc<Self>,
        pair: KeyPair<Box<dyn PacketKey>>,
    ) -> KeyPair<Box<dyn PacketKey>> {
        KeyPair {
            local: self.packet_key(pair.local),
            remote: self.packet_key(pair.remote),
        }
    }

    fn packet_key(self: &Arc<Self>, inner: Box<dyn PacketKey>) -> Box<dyn PacketKey> {
        Box::new(TappedKey {
            inner,
            tap: self.clone(),
        })
    }
}

/// A client crypto configuration whose sessions report to `tap`.
pub(crate) struct TappedClient {
    pub inner: Arc<dyn crypto::ClientConfig>,
    pub tap: Arc<Tap>,
}

impl crypto::ClientConfig for TappedClient {
    fn start_session(
        self: Arc<Self>,
        version: u32,
        server_name: &str,
        params: &TransportParameters,
    ) -> Result<Box<dyn crypto::Session>, ConnectError> {
        let inner = self
            .inner
            .clone()
            .start_session(version, server_name, params)?;
        Ok(Box::new(TappedSession {
            inner,
            tap: self.tap.clone(),
        }))
    }
}

/// A server crypto configuration whose sessions report to `tap`.
pub(crate) struct TappedServer {
    pub inner: Arc<dyn crypto::ServerConfig>,
    pub tap: Arc<Tap>,
}

impl crypto::ServerConfig for TappedServer {
    fn initial_keys(
        &self,
        version: u32,
        dst_cid: &ConnectionId,
    ) -> Result<Keys, UnsupportedVersion> {
        self.inner.initial_keys(version, dst_cid)
    }

    fn retry_tag(&self, version: u32, orig_dst_cid: &ConnectionId, packet: &[u8]) -> [u8; 16] {
        self.inner.retry_tag(version, orig_dst_cid, packet)
    }

    fn start_session(
        self: Arc<Self>,
        version: u32,
        params: &TransportParameters,
    ) -> Box<dyn crypto::Session> {
        Box::new(TappedSession {
            inner: self.inner.clone().start_session(version, params),
            tap: self.tap.clone(),
        })
    }
}

struct TappedSession {
    inner: Box<dyn crypto::Session>,
    tap: Arc<Tap>,
}

impl crypto::Session for TappedSession {
    fn initial_keys(&self, dst_cid: &ConnectionId, side: Side) -> Keys {
        self.tap.keys(self.inner.initial_keys(dst_cid, side))
    }

    fn handshake_data(&self) -> Option<Box<dyn Any>> {
        self.inner.handshake_data()
    }

    fn peer_identity(&self) -> Option<Box<dyn Any>> {
        self.inner.peer_identity()
    }

    fn early_crypto(&self) -> Option<(Box<dyn HeaderKey>, Box<dyn PacketKey>)> {
        let (header, packet) = self.inner.early_crypto()?;
        Some((header, self.tap.packet_key(packet)))
    }

    fn early_data_accepted(&self) -> Option<bool> {
        self.inner.early_data_accepted()
    }

    fn is_handshaking(&self) -> bool {
        self.inner.is_handshaking()
    }

    fn read_handshake(&mut self, buf: &[u8]) -> Result<bool, TransportError> {
        self.inner.read_handshake(buf)
    }

    fn transport_parameters(&self) -> Result<Option<TransportParameters>, TransportError> {
        self.inner.transport_parameters()
    }

    fn write_handshake(&mut self, buf: &mut Vec<u8>) -> Option<Keys> {
        let keys = self.inner.write_handshake(buf)?;
        Some(self.tap.keys(keys))
    }

    fn next_1rtt_keys(&mut self) -> Option<KeyPair<Box<dyn PacketKey>>> {
        let pair = self.inner.next_1rtt_keys()?;
        Some(self.tap.key_pair(pair))
    }

    fn is_valid_retry(&self, orig_dst_cid: &ConnectionId, header: &[u8], payload: &[u8]) -> bool {
        self.inner.is_valid_retry(orig_dst_cid, header, payload)
    }

    fn export_keying_material(
        &self,
        output: &mut [u8],
        label: &[u8],
        context: &[u8],
    ) -> Result<(), ExportKeyingMaterialError> {
        self.inner.export_keying_material(output, label, context)
    }
}

struct TappedKey {
    inner: Box<dyn PacketKey>,
    tap: Arc<Tap>,
}

impl PacketKey for TappedKey {
    fn encrypt(&self, packet: u64, buf: &mut [u8], header_len: usize) {
        if let Some(header) = buf.get(..header_len) {
            self.tap.on_sent(header);
        }
        self.inner.encrypt(packet, buf, header_len);
        self.tap.on_sealed(packet, buf);
    }

    fn decrypt(
        &self,
        packet: u64,
        header: &[u8],
        payload: &mut BytesMut,
    ) -> Result<(), CryptoError> {
        self.inner.decrypt(packet, header, payload)?;
        self.tap.on_received(header);
        self.tap.on_opened(header, payload);
        Ok(())
    }

    fn tag_len(&self) -> usize {
        self.inner.tag_len()
    }

    fn confidentiality_limit(&self) -> u64 {
        self.inner.confidentiality_limit()
    }

    fn integrity_limit(&self) -> u64 {
        self.inner.integrity_limit()
    }
}

/// Whether a packet has a short header (RFC 9000 §17.3: the header form
/// bit, which header protection leaves alone, is 0): a 1-RTT packet.
fn is_short(packet: &[u8]) -> bool {
    packet.first().is_some_and(|b| b & 0x80 == 0)
}

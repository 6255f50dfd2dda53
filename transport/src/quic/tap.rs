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
//! hands it each packet's number and hash, and each ACK frame. The
//! handshake's ACK frames go to the session whatever it reads (their ECN
//! counts carry erc's start code), and the peer's first 1-RTT packet tells
//! it the handshake is done. Everything else is passed through unchanged
//! but the handshake's ECN counts, whose start code quinn must not take
//! for a bleaching path ([`Tap::on_handshake_acks`]).

use std::any::Any;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use quinn_proto::crypto::{
    self, CryptoError, ExportKeyingMaterialError, HeaderKey, KeyPair, Keys, PacketKey,
    UnsupportedVersion,
};
use quinn_proto::transport_parameters::TransportParameters;
use quinn_proto::{ConnectError, ConnectionId, Side, TransportError};

use super::cid::CID_LEN;
use super::demux::Routes;
use super::header::{Header, Packet, MAX_CID_LEN};
use super::peer::Peer;
use crate::session::{HandshakeSpace, PeerEvent};
use crate::wire::ack::{ack_frames, AckFrame, AckRepr, EcnCounts};
use crate::wire::hash::packet_hash;

/// One connection's view of its packets' CIDs.
pub(crate) struct Tap {
    routes: Arc<Routes>,
    key: u32,
    peer: Arc<Peer>,
    /// The length of the peer's CIDs, from its long headers, plus one; 0
    /// before the first.
    peer_cid_len: AtomicU8,
    last_received: LastCid,
    last_sent: LastCid,
    /// Whether the peer's first 1-RTT packet came.
    handshake_done: AtomicBool,
}

/// The CID the last packet one way named, so that the routes' lock is
/// taken only when it changes. Plain atomics, no lock, since every packet
/// passes here: quinn seals and opens one connection's packets one at a
/// time (under its connection lock), so the words are never written by
/// two at once (`a_last_cid_changes_only_with_the_cid`).
#[derive(Default)]
struct LastCid([AtomicU64; 3]);

impl LastCid {
    /// Records `cid`; whether it differs from the last one recorded. A CID
    /// longer than any QUIC version 1 allows is never recorded.
    fn replace(&self, cid: &[u8]) -> bool {
        if cid.len() > MAX_CID_LEN {
            return false;
        }
        // The length plus one (0 is "none yet"), then the bytes.
        let mut bytes = [0; 24];
        bytes[0] = cid.len() as u8 + 1;
        bytes[1..=cid.len()].copy_from_slice(cid);
        let words = bytes
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")));
        let mut changed = false;
        for (word, new) in self.0.iter().zip(words) {
            if word.load(Ordering::Relaxed) != new {
                word.store(new, Ordering::Relaxed);
                changed = true;
            }
        }
        changed
    }
}

impl Tap {
    pub fn new(routes: Arc<Routes>, key: u32, peer: Arc<Peer>) -> Arc<Tap> {
        Arc::new(Tap {
            routes,
            key,
            peer,
            peer_cid_len: AtomicU8::new(0),
            last_received: LastCid::default(),
            last_sent: LastCid::default(),
            handshake_done: AtomicBool::new(false),
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

    /// A packet was opened: a 1-RTT packet's ACK frames go to the session
    /// before quinn reads them, where the session reads counts. A frame
    /// type the reader does not know ends the walk; the ACK frames before
    /// it are read (quinn and the stacks seen so far put ACK frames first).
    /// The peer's first 1-RTT packet ends the handshake for the session;
    /// an Initial or Handshake packet's ACK frames carry erc's start code
    /// ([`Tap::on_handshake_acks`]).
    fn on_opened(&self, header: &[u8], payload: &mut BytesMut) {
        if !is_short(header) {
            let packet = Packet::new_checked(header, CID_LEN).ok();
            if let Some(space) = packet.and_then(|p| p.handshake_space()) {
                self.on_handshake_acks(Instant::now(), space, payload);
            }
            return;
        }
        if !self.handshake_done.load(Ordering::Relaxed)
            && !self.handshake_done.swap(true, Ordering::Relaxed)
        {
            self.peer.on_peer(Instant::now(), PeerEvent::HandshakeDone);
        }
        if !self.peer.published().reads_counts() {
            return;
        }
        let now = Instant::now();
        for frame in ack_frames(payload).map_while(Result::ok) {
            self.peer.on_peer(now, PeerEvent::AckFrame(frame));
        }
    }

    /// The ACK frames of an Initial or Handshake packet go to the session,
    /// which reads erc's start code from their ECN counts; then quinn gets
    /// them with every acknowledged packet not counted ECT(1) or CE
    /// counted ECT(0), as ACK_ECN frames. quinn stops sending ECN when it
    /// sees an acknowledged ECT(0) packet counted Not-ECT (a bleaching
    /// path) or an ACK with no counts, which a client sends until an
    /// ECT(0) packet has come: a router's code alone did either. A path
    /// that bleaches, or a client that does not count, still fails
    /// quinn's check in the 1-RTT space, which no code touches
    /// (`handshake_acks_reach_quinn_with_the_code_counted_ect0`,
    /// `a_start_code_leaves_quinn_sending_ecn`).
    fn on_handshake_acks(&self, now: Instant, space: HandshakeSpace, payload: &mut BytesMut) {
        let mut repairs = Vec::new();
        for frame in ack_frames(payload).map_while(Result::ok) {
            self.peer
                .on_peer(now, PeerEvent::HandshakeAck { space, frame });
            repairs.extend(ect0_repair(payload, &frame));
        }
        if repairs.is_empty() {
            return;
        }
        let mut repaired = Vec::with_capacity(payload.len() + 3 * repairs.len());
        let mut at = 0;
        for (range, frame) in repairs {
            repaired.extend_from_slice(&payload[at..range.start]);
            repaired.extend_from_slice(&frame);
            at = range.end;
        }
        repaired.extend_from_slice(&payload[at..]);
        payload.clear();
        payload.extend_from_slice(&repaired);
    }

    /// A packet of this connection was decrypted: its header is genuine.
    fn on_received(&self, header: &[u8]) {
        let Ok(header) = Header::parse(header, CID_LEN) else {
            return;
        };
        if let Header::Long { src_cid, .. } = header {
            // QUIC version 1 CIDs are at most 20 bytes (RFC 9000 §17.2).
            if let Ok(len) = u8::try_from(src_cid.len() + 1) {
                self.peer_cid_len.store(len, Ordering::Relaxed);
            }
            return;
        }
        if self.last_received.replace(header.dst_cid()) {
            self.routes.claim(self.key, header.dst_cid());
        }
    }

    /// A packet of this connection is being sent.
    fn on_sent(&self, header: &[u8]) {
        let Some(len) = usize::from(self.peer_cid_len.load(Ordering::Relaxed)).checked_sub(1)
        else {
            return;
        };
        let Ok(packet) = Packet::new_checked(header, len) else {
            return;
        };
        if packet.is_long() {
            return;
        }
        if self.last_sent.replace(packet.short_dst_cid(len)) {
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

/// Where `frame` lies in `payload`, and the ACK_ECN frame that takes every
/// packet it acknowledges that was not counted ECT(1) or CE for ECT(0);
/// `None` where its counts already do.
fn ect0_repair(payload: &[u8], frame: &AckFrame<'_>) -> Option<(Range<usize>, Vec<u8>)> {
    let mut repr = AckRepr::parse(frame);
    let counts = repr.ecn.unwrap_or_default();
    let ect0 = frame
        .acknowledged()
        .saturating_sub(counts.ect1.saturating_add(counts.ce));
    if repr.ecn.is_some() && ect0 <= counts.ect0 {
        return None;
    }
    repr.ecn = Some(EcnCounts { ect0, ..counts });
    let at = (frame.as_bytes().as_ptr() as usize).checked_sub(payload.as_ptr() as usize)?;
    let mut bytes = Vec::new();
    repr.emit(&mut bytes);
    Some((at..at + frame.as_bytes().len(), bytes))
}

/// Whether a packet has a short header (RFC 9000 §17.3: the header form
/// bit, which header protection leaves alone, is 0): a 1-RTT packet.
fn is_short(packet: &[u8]) -> bool {
    packet.first().is_some_and(|b| b & 0x80 == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A payload of a PING, an ACK frame of packets 0 to 3 with `ecn`
    /// counts, and a PADDING byte.
    fn payload(ecn: Option<(u64, u64)>) -> Vec<u8> {
        let repr = AckRepr {
            largest: 3,
            delay: 0,
            ranges: vec![0..=3],
            ecn: ecn.map(|(ect0, ce)| EcnCounts { ect0, ect1: 0, ce }),
        };
        let mut bytes = vec![0x01];
        repr.emit(&mut bytes);
        bytes.push(0x00);
        bytes
    }

    /// A CID is new when it differs from the last in length or in any
    /// byte, including the last of a 20-byte one; an empty CID is a CID.
    #[test]
    fn a_last_cid_changes_only_with_the_cid() {
        let last = LastCid::default();
        assert!(last.replace(&[]), "the first, though empty");
        assert!(!last.replace(&[]));
        assert!(last.replace(&[0]), "longer by a zero byte");
        let mut long = [7; MAX_CID_LEN];
        assert!(last.replace(&long));
        assert!(!last.replace(&long));
        long[MAX_CID_LEN - 1] = 8;
        assert!(last.replace(&long), "the last byte");
        assert!(last.replace(&long[..8]), "shorter");
        assert!(
            !last.replace(&[1; MAX_CID_LEN + 1]),
            "too long: not recorded"
        );
        assert!(!last.replace(&long[..8]), "still the last recorded");
    }

    /// The handshake's packets a router cleared reach quinn counted ECT(0),
    /// an ACK without counts becomes an ACK_ECN frame, the rest of the
    /// payload is untouched, and counts that take every packet already
    /// are left as they are.
    #[test]
    fn handshake_acks_reach_quinn_with_the_code_counted_ect0() {
        for (ecn, repaired) in [(Some((1, 1)), (3, 1)), (None, (4, 0))] {
            let bytes = payload(ecn);
            let frame = ack_frames(&bytes).next().unwrap().unwrap();
            assert_eq!(frame.acknowledged(), 4);
            let (range, frame) = ect0_repair(&bytes, &frame).expect("a repair");
            let mut out = bytes[..range.start].to_vec();
            out.extend_from_slice(&frame);
            out.extend_from_slice(&bytes[range.end..]);
            assert_eq!(out, payload(Some(repaired)), "{ecn:?}");
            let frame = ack_frames(&out).next().unwrap().unwrap();
            assert!(ect0_repair(&out, &frame).is_none());
        }
    }
}

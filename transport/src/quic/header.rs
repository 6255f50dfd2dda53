//! The version-independent part of a QUIC packet header (RFC 8999): the
//! form bit and the connection IDs, which is all the socket layer reads to
//! find a packet's connection.
//!
//! A zero-copy view in the style of smoltcp's `wire` module: [`Packet`]
//! wraps a buffer, [`Packet::new_checked`] checks its length once, and
//! [`Header::parse`] gives the parsed meaning. Nothing here panics on any
//! input: every length is checked before it is used.
//!
//! ```
//! use ecnq::quic::header::Header;
//!
//! // A short header: form bit clear, then the 8-byte destination CID.
//! let packet = [0x40, 1, 2, 3, 4, 5, 6, 7, 8, 0xaa, 0xbb];
//! let header = Header::parse(&packet, 8).unwrap();
//! assert_eq!(header.dst_cid(), &[1, 2, 3, 4, 5, 6, 7, 8]);
//! ```

use std::fmt;
use std::ops::Range;

use crate::session::HandshakeSpace;
use crate::wire::ack::Reader;

/// The longest connection ID this layer reads. QUIC v1 allows 20 bytes;
/// the invariants allow 255 in other versions, which ecnq does not route.
pub const MAX_CID_LEN: usize = 20;

/// Why a buffer is not a QUIC header this layer can read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The buffer ends inside the header.
    Truncated,
    /// A connection ID is longer than [`MAX_CID_LEN`].
    CidTooLong,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated => f.write_str("packet ends inside its QUIC header"),
            Error::CidTooLong => write!(f, "connection ID longer than {MAX_CID_LEN} bytes"),
        }
    }
}

impl std::error::Error for Error {}

/// Byte positions of the header fields (RFC 8999 §5).
mod field {
    use std::ops::Range;

    /// Form bit (0x80) and version-specific bits.
    pub const FIRST: usize = 0;
    /// Long header: the version.
    pub const VERSION: Range<usize> = 1..5;
    /// Long header: the destination CID length byte.
    pub const DCID_LEN: usize = 5;
    /// Long header: where the destination CID starts.
    pub const DCID: usize = 6;
    /// Short header: where the destination CID starts.
    pub const SHORT_DCID: usize = 1;
    /// The form bit: set in long headers.
    pub const LONG_FORM: u8 = 0x80;
    /// Long header: the packet type bits (RFC 9000 §17.2).
    pub const LONG_TYPE: u8 = 0x30;
}

/// Whether a datagram starts with a long-header packet (an Initial,
/// Handshake, 0-RTT or Retry one: RFC 8999 §5.1's form bit), which a
/// handshake sends before the connection's 1-RTT packets.
pub fn starts_long(datagram: &[u8]) -> bool {
    datagram
        .first()
        .is_some_and(|first| first & field::LONG_FORM != 0)
}

/// The long header packet types of QUIC v1 (RFC 9000 §17.2, table 5),
/// as the type bits read (shifted down).
mod long_type {
    pub const INITIAL: u8 = 0;
    pub const HANDSHAKE: u8 = 2;
    pub const RETRY: u8 = 3;
}

/// QUIC v2 (RFC 9369 §3.2) numbers its long header types differently;
/// every other version quinn speaks (v1 and its drafts) as v1 does.
const QUIC_V2: u32 = 0x6b33_43cf;

/// A read-only view of a QUIC packet's header.
#[derive(Clone, Copy, Debug)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it; the accessors may then panic.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after [`Packet::check_len`].
    pub fn new_checked(buffer: T, short_dcid_len: usize) -> Result<Packet<T>, Error> {
        let packet = Packet::new_unchecked(buffer);
        packet.check_len(short_dcid_len)?;
        Ok(packet)
    }

    /// Checks that every field the accessors read is inside the buffer. A
    /// short header does not carry its CID length: the reader knows it
    /// (`short_dcid_len`, the length of the CIDs it issued).
    pub fn check_len(&self, short_dcid_len: usize) -> Result<(), Error> {
        let data = self.buffer.as_ref();
        let first = *data.get(field::FIRST).ok_or(Error::Truncated)?;
        if first & field::LONG_FORM == 0 {
            if short_dcid_len > MAX_CID_LEN {
                return Err(Error::CidTooLong);
            }
            return match data.len() >= field::SHORT_DCID + short_dcid_len {
                true => Ok(()),
                false => Err(Error::Truncated),
            };
        }
        let dcid_len = usize::from(*data.get(field::DCID_LEN).ok_or(Error::Truncated)?);
        let scid_len_at = field::DCID + dcid_len;
        let scid_len = usize::from(*data.get(scid_len_at).ok_or(Error::Truncated)?);
        if dcid_len > MAX_CID_LEN || scid_len > MAX_CID_LEN {
            return Err(Error::CidTooLong);
        }
        match data.len() > scid_len_at + scid_len {
            true => Ok(()),
            false => Err(Error::Truncated),
        }
    }

    /// Whether the header is a long one (handshake, 0-RTT, retry, version
    /// negotiation).
    pub fn is_long(&self) -> bool {
        self.buffer.as_ref()[field::FIRST] & field::LONG_FORM != 0
    }

    /// Whether a long header's type bits read Retry (RFC 9000 §17.2.5;
    /// RFC 9369 §3.2 for v2). Only a server sends one: a server that reads
    /// it on a client's packet has a corrupted packet.
    pub fn is_retry(&self) -> bool {
        let bits = (self.buffer.as_ref()[field::FIRST] & field::LONG_TYPE) >> 4;
        let retry = match self.version() {
            QUIC_V2 => 0,
            _ => long_type::RETRY,
        };
        self.is_long() && self.version() != 0 && bits == retry
    }

    /// The handshake space a long header's type bits name: Initial or
    /// Handshake (RFC 9000 §17.2; RFC 9369 §3.2 for v2, whose types are
    /// one above v1's), `None` for 0-RTT, Retry or a short header.
    pub fn handshake_space(&self) -> Option<HandshakeSpace> {
        if !self.is_long() {
            return None;
        }
        let bits = (self.buffer.as_ref()[field::FIRST] & field::LONG_TYPE) >> 4;
        let v1_bits = match self.version() {
            0 => return None,
            QUIC_V2 => bits.wrapping_sub(1) & 3,
            _ => bits,
        };
        match v1_bits {
            long_type::INITIAL => Some(HandshakeSpace::Initial),
            long_type::HANDSHAKE => Some(HandshakeSpace::Handshake),
            _ => None,
        }
    }

    /// A long header's version (0 for version negotiation).
    pub fn version(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::VERSION];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Where a long header's destination CID is.
    fn long_dst_cid_range(&self) -> Range<usize> {
        let len = usize::from(self.buffer.as_ref()[field::DCID_LEN]);
        field::DCID..field::DCID + len
    }

    /// Where a long header's source CID is.
    fn src_cid_range(&self) -> Range<usize> {
        let at = self.long_dst_cid_range().end;
        let len = usize::from(self.buffer.as_ref()[at]);
        at + 1..at + 1 + len
    }
}

impl<'a> Packet<&'a [u8]> {
    /// A long header's destination CID.
    pub fn long_dst_cid(&self) -> &'a [u8] {
        &self.buffer[self.long_dst_cid_range()]
    }

    /// A long header's source CID: the sender's own.
    pub fn src_cid(&self) -> &'a [u8] {
        &self.buffer[self.src_cid_range()]
    }

    /// A short header's destination CID, `len` bytes long.
    pub fn short_dst_cid(&self, len: usize) -> &'a [u8] {
        &self.buffer[field::SHORT_DCID..field::SHORT_DCID + len]
    }
}

/// What a QUIC header says about where the packet goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Header<'a> {
    /// A long header.
    Long {
        /// The version; 0 is version negotiation.
        version: u32,
        /// The destination CID.
        dst_cid: &'a [u8],
        /// The source CID: the sender's own.
        src_cid: &'a [u8],
    },
    /// A short header (1-RTT).
    Short {
        /// The destination CID.
        dst_cid: &'a [u8],
    },
}

impl<'a> Header<'a> {
    /// Parses the header of one QUIC packet (the first one, in a coalesced
    /// datagram). `short_dcid_len` is the CID length a short header carries.
    pub fn parse(packet: &'a [u8], short_dcid_len: usize) -> Result<Header<'a>, Error> {
        let packet = Packet::new_checked(packet, short_dcid_len)?;
        Ok(match packet.is_long() {
            true => Header::Long {
                version: packet.version(),
                dst_cid: packet.long_dst_cid(),
                src_cid: packet.src_cid(),
            },
            false => Header::Short {
                dst_cid: packet.short_dst_cid(short_dcid_len),
            },
        })
    }

    /// The destination CID.
    pub fn dst_cid(&self) -> &'a [u8] {
        match *self {
            Header::Long { dst_cid, .. } | Header::Short { dst_cid } => dst_cid,
        }
    }
}

/// The destination CID of the first packet in `datagram` whose long header
/// reads Retry, walking its coalesced packets (RFC 9000 §12.2) as far as
/// their Length fields can be read. A Retry packet, a short header or a
/// version this layer does not know ends the datagram.
pub fn retry_in(datagram: &[u8]) -> Option<&[u8]> {
    let mut rest = datagram;
    loop {
        let packet = Packet::new_checked(rest, 0).ok()?;
        if !packet.is_long() || packet.version() == 0 {
            return None;
        }
        if packet.is_retry() {
            return Some(packet.long_dst_cid());
        }
        if packet.version() == QUIC_V2 {
            return None;
        }
        rest = after_long_packet(rest, packet.src_cid_range().end)?;
    }
}

/// What follows a v1 Initial, 0-RTT or Handshake packet whose source CID
/// ends at `header_end`: its token (Initial only), then its Length field
/// and that many bytes (RFC 9000 §17.2).
fn after_long_packet(packet: &[u8], header_end: usize) -> Option<&[u8]> {
    let mut reader = Reader::new(&packet[header_end..]);
    if (packet[field::FIRST] & field::LONG_TYPE) >> 4 == long_type::INITIAL {
        reader.length_prefixed().ok()?;
    }
    reader.length_prefixed().ok()?;
    Some(reader.rest())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long header: first byte, version, DCID, SCID, then `rest`.
    fn long(dcid: &[u8], scid: &[u8], rest: &[u8]) -> Vec<u8> {
        let mut p = vec![0xc0, 0, 0, 0, 1, dcid.len() as u8];
        p.extend_from_slice(dcid);
        p.push(scid.len() as u8);
        p.extend_from_slice(scid);
        p.extend_from_slice(rest);
        p
    }

    #[test]
    fn long_header_gives_both_cids_and_version() {
        let p = long(&[1; 8], &[2; 5], &[0; 30]);
        let header = Header::parse(&p, 8).unwrap();
        assert_eq!(
            header,
            Header::Long {
                version: 1,
                dst_cid: &[1; 8],
                src_cid: &[2; 5]
            }
        );
    }

    #[test]
    fn short_header_cid_length_is_the_readers() {
        let p = [0x41, 9, 8, 7, 6, 5, 4, 3, 2, 1];
        assert_eq!(Header::parse(&p, 4).unwrap().dst_cid(), &[9, 8, 7, 6]);
        assert_eq!(Header::parse(&p, 0).unwrap().dst_cid(), &[] as &[u8]);
        assert_eq!(Header::parse(&p, 9).unwrap().dst_cid().len(), 9);
        assert_eq!(Header::parse(&p, 10), Err(Error::Truncated));
    }

    /// A v1 Initial with `token`, then a payload of `len` bytes.
    fn initial(dcid: &[u8], token: &[u8], len: u8) -> Vec<u8> {
        let mut p = long(dcid, &[2; 8], &[token.len() as u8]);
        p.extend_from_slice(token);
        p.push(len);
        p.extend(vec![0; usize::from(len)]);
        p
    }

    /// Flips the type bits of the long header at `at` to read Retry.
    fn as_retry(mut p: Vec<u8>, at: usize) -> Vec<u8> {
        p[at] |= field::LONG_TYPE;
        p
    }

    #[test]
    fn a_retry_is_found_first_or_coalesced_behind_other_packets() {
        let first = initial(&[1; 8], &[7; 3], 20);
        // A Handshake packet: its Length, then as many bytes.
        let mut second = long(&[3; 8], &[2; 8], &[5, 0, 0, 0, 0, 0]);
        second[0] = 0xe0;
        assert_eq!(retry_in(&first), None);
        assert_eq!(retry_in(&as_retry(first.clone(), 0)), Some(&[1; 8][..]));
        let coalesced = [first.clone(), as_retry(second.clone(), 0)].concat();
        assert_eq!(retry_in(&coalesced), Some(&[3; 8][..]));
        assert_eq!(retry_in(&[first.clone(), second].concat()), None);
        // Version negotiation and short headers are no Retry, and a
        // Length field that runs past the datagram ends the walk.
        let mut negotiation = as_retry(first.clone(), 0);
        negotiation[1..5].copy_from_slice(&[0; 4]);
        assert_eq!(retry_in(&negotiation), None);
        assert_eq!(retry_in(&[0x4f; 30]), None);
        assert_eq!(retry_in(&first[..first.len() - 1]), None);
    }

    /// Initial and Handshake packets name their space in v1 and v2;
    /// 0-RTT, Retry and short headers name none.
    #[test]
    fn long_headers_name_their_handshake_space() {
        let space = |first: u8, version: u32| {
            let mut p = long(&[1; 8], &[2; 8], &[0; 4]);
            p[0] = first;
            p[1..5].copy_from_slice(&version.to_be_bytes());
            Packet::new_checked(&p[..], 8).unwrap().handshake_space()
        };
        use HandshakeSpace::{Handshake, Initial};
        let v1: Vec<_> = (0..4).map(|t| space(0xc0 | t << 4, 1)).collect();
        assert_eq!(v1, [Some(Initial), None, Some(Handshake), None]);
        let v2: Vec<_> = (0..4).map(|t| space(0xc0 | t << 4, QUIC_V2)).collect();
        assert_eq!(v2, [None, Some(Initial), None, Some(Handshake)]);
        let short = [0x40; 12];
        assert_eq!(
            Packet::new_checked(&short[..], 8)
                .unwrap()
                .handshake_space(),
            None
        );
    }

    #[test]
    fn empty_cids_are_fine() {
        let p = long(&[], &[], &[]);
        let header = Header::parse(&p, 8).unwrap();
        assert_eq!(header.dst_cid(), &[] as &[u8]);
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let p = long(&[1; 20], &[2; 20], &[]);
        assert!(Header::parse(&p, 8).is_ok());
        for len in 0..p.len() {
            assert_eq!(Header::parse(&p[..len], 8), Err(Error::Truncated), "{len}");
        }
    }

    #[test]
    fn cids_over_twenty_bytes_are_refused() {
        let p = long(&[1; 21], &[], &[0; 4]);
        assert_eq!(Header::parse(&p, 8), Err(Error::CidTooLong));
        let p = long(&[], &[1; 21], &[0; 4]);
        assert_eq!(Header::parse(&p, 8), Err(Error::CidTooLong));
        assert_eq!(Header::parse(&[0x40; 40], 21), Err(Error::CidTooLong));
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            short_len in 0usize..24,
        ) {
            if let Ok(header) = Header::parse(&bytes, short_len) {
                proptest::prop_assert!(header.dst_cid().len() <= MAX_CID_LEN);
            }
        }
    }
}

//! The ACK frames in a decrypted QUIC 1-RTT packet payload (RFC 9000
//! §19.3), read so that a sender learns its peer's ECN counts (RFC 9000
//! §13.4) from every packet it decrypts: quinn does not hand them to
//! congestion controllers.
//!
//! [`ack_frames`] walks the frames of a payload (RFC 9000 §12.4) and
//! yields each ACK frame as an [`AckFrame`], a zero-copy view checked
//! once when it is found; [`AckRepr`] is its owned meaning and writes
//! frames for tests. Sans-IO, no allocation while walking, and no panic
//! on any input: every length is checked before it is used.
//!
//! ```
//! use ecnq::wire::ack::{ack_frames, EcnCounts};
//!
//! // PING, then ACK_ECN: largest 7, delay 0, no gaps, 7..=7, counts 5, 0, 1.
//! let payload = [0x01, 0x03, 7, 0, 0, 0, 5, 0, 1];
//! let ack = ack_frames(&payload).next().unwrap().unwrap();
//! assert_eq!(ack.ranges().collect::<Vec<_>>(), [7..=7]);
//! assert_eq!(ack.ecn(), Some(EcnCounts { ect0: 5, ect1: 0, ce: 1 }));
//! ```

use std::fmt;
use std::iter::FusedIterator;
use std::ops::RangeInclusive;

/// The largest value a variable-length integer holds (RFC 9000 §16).
const MAX_VARINT: u64 = (1 << 62) - 1;

/// Frame types (RFC 9000 §12.4 and §19, RFC 9221 §4,
/// draft-ietf-quic-ack-frequency for ACK_FREQUENCY and IMMEDIATE_ACK).
mod frame_type {
    pub const PADDING: u64 = 0x00;
    pub const PING: u64 = 0x01;
    pub const ACK: u64 = 0x02;
    pub const ACK_ECN: u64 = 0x03;
    pub const RESET_STREAM: u64 = 0x04;
    pub const STOP_SENDING: u64 = 0x05;
    pub const CRYPTO: u64 = 0x06;
    pub const NEW_TOKEN: u64 = 0x07;
    pub const STREAM: u64 = 0x08;
    /// The STREAM type bits (RFC 9000 §19.8).
    pub const STREAM_FIN: u64 = 0x01;
    pub const STREAM_LEN: u64 = 0x02;
    pub const STREAM_OFF: u64 = 0x04;
    pub const MAX_DATA: u64 = 0x10;
    pub const MAX_STREAM_DATA: u64 = 0x11;
    pub const MAX_STREAMS_BIDI: u64 = 0x12;
    pub const MAX_STREAMS_UNI: u64 = 0x13;
    pub const DATA_BLOCKED: u64 = 0x14;
    pub const STREAM_DATA_BLOCKED: u64 = 0x15;
    pub const STREAMS_BLOCKED_BIDI: u64 = 0x16;
    pub const STREAMS_BLOCKED_UNI: u64 = 0x17;
    pub const NEW_CONNECTION_ID: u64 = 0x18;
    pub const RETIRE_CONNECTION_ID: u64 = 0x19;
    pub const PATH_CHALLENGE: u64 = 0x1a;
    pub const PATH_RESPONSE: u64 = 0x1b;
    pub const CONNECTION_CLOSE: u64 = 0x1c;
    pub const APPLICATION_CLOSE: u64 = 0x1d;
    pub const HANDSHAKE_DONE: u64 = 0x1e;
    pub const IMMEDIATE_ACK: u64 = 0x1f;
    pub const DATAGRAM: u64 = 0x30;
    pub const DATAGRAM_LEN: u64 = 0x31;
    pub const ACK_FREQUENCY: u64 = 0xaf;
}

/// The length of a PATH_CHALLENGE or PATH_RESPONSE's data (RFC 9000 §19.17).
const PATH_DATA_LEN: usize = 8;
/// The length of a NEW_CONNECTION_ID's stateless reset token (RFC 9000 §19.15).
const RESET_TOKEN_LEN: usize = 16;
/// The connection ID lengths a NEW_CONNECTION_ID may carry (RFC 9000 §19.15).
const CID_LEN: RangeInclusive<usize> = 1..=20;

/// Why a payload's frames could not be read further.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The payload ends inside a frame.
    Truncated,
    /// A frame type whose layout this reader does not know.
    UnknownFrameType(u64),
    /// An ACK range reaches below packet number 0 (RFC 9000 §19.3.1).
    RangeBelowZero,
    /// A frame type not in its shortest encoding (RFC 9000 §12.4), or a
    /// connection ID length outside 1..=20 (RFC 9000 §19.15).
    Malformed,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated => f.write_str("payload ends inside a QUIC frame"),
            Error::UnknownFrameType(ty) => write!(f, "unknown QUIC frame type {ty:#x}"),
            Error::RangeBelowZero => f.write_str("ACK range below packet number 0"),
            Error::Malformed => f.write_str("malformed QUIC frame"),
        }
    }
}

impl std::error::Error for Error {}

/// The peer's cumulative counts of packets received per ECN codepoint, in
/// this packet number space (RFC 9000 §19.3.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EcnCounts {
    /// Packets received with ECT(0).
    pub ect0: u64,
    /// Packets received with ECT(1).
    pub ect1: u64,
    /// Packets received with CE.
    pub ce: u64,
}

/// The unread rest of a payload or a packet header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { rest: bytes }
    }

    /// What is left to read (the QUIC glue's header walk).
    #[cfg(feature = "quic")]
    pub(crate) fn rest(&self) -> &'a [u8] {
        self.rest
    }

    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    pub(crate) fn take(&mut self, len: usize) -> Result<&'a [u8], Error> {
        if len > self.rest.len() {
            return Err(Error::Truncated);
        }
        let (taken, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(taken)
    }

    /// A variable-length integer (RFC 9000 §16): the two high bits of the
    /// first byte give its length, 1, 2, 4 or 8 bytes.
    pub(crate) fn varint(&mut self) -> Result<u64, Error> {
        let first = *self.rest.first().ok_or(Error::Truncated)?;
        let bytes = self.take(1 << (first >> 6))?;
        let value = bytes[1..]
            .iter()
            .fold(u64::from(first & 0x3f), |v, &b| (v << 8) | u64::from(b));
        Ok(value)
    }

    /// A varint length, then that many bytes.
    pub(crate) fn length_prefixed(&mut self) -> Result<&'a [u8], Error> {
        let len = self.varint()?;
        self.take(usize::try_from(len).map_err(|_| Error::Truncated)?)
    }

    /// A frame type, which must be in its shortest encoding (RFC 9000 §12.4).
    fn frame_type(&mut self) -> Result<u64, Error> {
        let before = self.rest.len();
        let ty = self.varint()?;
        match before - self.rest.len() == varint_len(ty) {
            true => Ok(ty),
            false => Err(Error::Malformed),
        }
    }
}

/// How many bytes the shortest encoding of `value` takes (RFC 9000 §16).
fn varint_len(value: u64) -> usize {
    match value {
        0..=0x3f => 1,
        0x40..=0x3fff => 2,
        0x4000..=0x3fff_ffff => 4,
        _ => 8,
    }
}

/// Appends `value` in its shortest encoding (RFC 9000 §16).
///
/// # Panics
///
/// If `value` is above 2^62 − 1.
fn write_varint(buf: &mut Vec<u8>, value: u64) {
    assert!(value <= MAX_VARINT, "{value} does not fit a QUIC varint");
    let len = varint_len(value);
    let mut bytes = value.to_be_bytes();
    let first = bytes.len() - len;
    bytes[first] |= (len.trailing_zeros() as u8) << 6;
    buf.extend_from_slice(&bytes[first..]);
}

/// One field of a frame after its type, as far as its length goes.
#[derive(Clone, Copy, Debug)]
enum Field {
    /// A variable-length integer.
    Varint,
    /// A fixed number of bytes.
    Fixed(usize),
    /// A varint length, then that many bytes.
    LengthPrefixed,
    /// A one-byte connection ID length, then the connection ID.
    ConnectionId,
    /// Everything to the end of the payload.
    Rest,
}

/// The fields after the type of every frame but ACK, or `None` for a
/// type this reader does not know.
fn layout(ty: u64) -> Option<&'static [Field]> {
    use frame_type::*;
    use Field::*;
    Some(match ty {
        PADDING | PING | HANDSHAKE_DONE | IMMEDIATE_ACK => &[],
        // Stream ID, application error code, final size.
        RESET_STREAM => &[Varint, Varint, Varint],
        // Stream ID, application error code.
        STOP_SENDING => &[Varint, Varint],
        // Offset, then the length-prefixed data.
        CRYPTO => &[Varint, LengthPrefixed],
        NEW_TOKEN => &[LengthPrefixed],
        // Stream ID, the offset if OFF is set, then the data: with LEN
        // length-prefixed, without it to the end of the packet.
        _ if ty & !(STREAM_OFF | STREAM_LEN | STREAM_FIN) == STREAM => {
            match (ty & STREAM_OFF != 0, ty & STREAM_LEN != 0) {
                (false, false) => &[Varint, Rest],
                (false, true) => &[Varint, LengthPrefixed],
                (true, false) => &[Varint, Varint, Rest],
                (true, true) => &[Varint, Varint, LengthPrefixed],
            }
        }
        MAX_DATA | MAX_STREAMS_BIDI | MAX_STREAMS_UNI | DATA_BLOCKED | STREAMS_BLOCKED_BIDI
        | STREAMS_BLOCKED_UNI | RETIRE_CONNECTION_ID => &[Varint],
        // Stream ID, then the limit.
        MAX_STREAM_DATA | STREAM_DATA_BLOCKED => &[Varint, Varint],
        // Sequence number, retire prior to, connection ID, reset token.
        NEW_CONNECTION_ID => &[Varint, Varint, ConnectionId, Fixed(RESET_TOKEN_LEN)],
        PATH_CHALLENGE | PATH_RESPONSE => &[Fixed(PATH_DATA_LEN)],
        // Error code, the type of the frame that caused it, reason phrase.
        CONNECTION_CLOSE => &[Varint, Varint, LengthPrefixed],
        // Error code, reason phrase.
        APPLICATION_CLOSE => &[Varint, LengthPrefixed],
        DATAGRAM => &[Rest],
        DATAGRAM_LEN => &[LengthPrefixed],
        // Sequence number, ack-eliciting threshold, requested max ack
        // delay, reordering threshold.
        ACK_FREQUENCY => &[Varint, Varint, Varint, Varint],
        _ => return None,
    })
}

/// Reads past one field.
fn skip(reader: &mut Reader<'_>, field: Field) -> Result<(), Error> {
    match field {
        Field::Varint => reader.varint().map(drop),
        Field::Fixed(len) => reader.take(len).map(drop),
        Field::LengthPrefixed => reader.length_prefixed().map(drop),
        Field::ConnectionId => {
            let len = usize::from(reader.take(1)?[0]);
            match CID_LEN.contains(&len) {
                true => reader.take(len).map(drop),
                false => Err(Error::Malformed),
            }
        }
        Field::Rest => reader.take(reader.rest.len()).map(drop),
    }
}

/// The ACK frames of a decrypted packet payload, in order.
///
/// The first frame that cannot be read (an unknown type, a truncated or
/// malformed frame) is yielded as an error and ends the walk: the
/// frames after it cannot be found.
pub fn ack_frames(payload: &[u8]) -> AckFrames<'_> {
    AckFrames {
        reader: Reader::new(payload),
        failed: false,
    }
}

/// The iterator [`ack_frames`] returns.
#[derive(Clone, Debug)]
pub struct AckFrames<'a> {
    reader: Reader<'a>,
    failed: bool,
}

impl<'a> AckFrames<'a> {
    /// Reads one frame: the ACK frame it is, or `None` for another type.
    fn next_frame(&mut self) -> Result<Option<AckFrame<'a>>, Error> {
        let start = self.reader.rest;
        let ty = self.reader.frame_type()?;
        if ty == frame_type::ACK || ty == frame_type::ACK_ECN {
            return AckFrame::read(start, ty == frame_type::ACK_ECN, &mut self.reader).map(Some);
        }
        let fields = layout(ty).ok_or(Error::UnknownFrameType(ty))?;
        for &field in fields {
            skip(&mut self.reader, field)?;
        }
        Ok(None)
    }
}

impl<'a> Iterator for AckFrames<'a> {
    type Item = Result<AckFrame<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.failed && !self.reader.is_empty() {
            match self.next_frame() {
                Ok(Some(ack)) => return Some(Ok(ack)),
                Ok(None) => {}
                Err(err) => {
                    self.failed = true;
                    return Some(Err(err));
                }
            }
        }
        None
    }
}

impl FusedIterator for AckFrames<'_> {}

/// An ACK frame, checked: its ranges stay at or above packet number 0 and
/// it ends inside the payload. The fixed fields are decoded; the ranges
/// are read from the payload as they are iterated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckFrame<'a> {
    bytes: &'a [u8],
    largest: u64,
    delay: u64,
    first_range: u64,
    /// The Gap and ACK Range Length pairs after the first range.
    pairs: &'a [u8],
    ecn: Option<EcnCounts>,
}

impl<'a> AckFrame<'a> {
    /// Reads the frame after its type from `reader`; `start` is the payload
    /// from the frame's type on.
    fn read(start: &'a [u8], with_ecn: bool, reader: &mut Reader<'a>) -> Result<Self, Error> {
        let largest = reader.varint()?;
        let delay = reader.varint()?;
        let pair_count = reader.varint()?;
        let first_range = reader.varint()?;
        let mut smallest = range_below(largest, first_range)?;
        let pairs_start = reader.rest;
        // Each pair takes two bytes or more, so a count beyond the payload
        // ends in `Truncated` after at most half its length.
        for _ in 0..pair_count {
            smallest = *next_range(reader, smallest)?.start();
        }
        let pairs = &pairs_start[..pairs_start.len() - reader.rest.len()];
        let ecn = match with_ecn {
            true => Some(EcnCounts {
                ect0: reader.varint()?,
                ect1: reader.varint()?,
                ce: reader.varint()?,
            }),
            false => None,
        };
        Ok(AckFrame {
            bytes: &start[..start.len() - reader.rest.len()],
            largest,
            delay,
            first_range,
            pairs,
            ecn,
        })
    }

    /// The frame's bytes, from its type on.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The largest packet number acknowledged.
    pub fn largest(&self) -> u64 {
        self.largest
    }

    /// The ACK Delay field as sent: microseconds scaled down by the peer's
    /// `ack_delay_exponent` (RFC 9000 §19.3, §18.2).
    pub fn delay(&self) -> u64 {
        self.delay
    }

    /// The acknowledged packet numbers, one inclusive range at a time, from
    /// the highest down.
    pub fn ranges(&self) -> AckRanges<'a> {
        AckRanges {
            next: Some(self.largest - self.first_range..=self.largest),
            pairs: Reader::new(self.pairs),
        }
    }

    /// How many packets the frame acknowledges.
    pub fn acknowledged(&self) -> u64 {
        self.ranges()
            .map(|r| r.end().saturating_sub(*r.start()).saturating_add(1))
            .fold(0, u64::saturating_add)
    }

    /// The ECN counts of an ACK_ECN frame (type 0x03), `None` for type 0x02.
    pub fn ecn(&self) -> Option<EcnCounts> {
        self.ecn
    }
}

/// The smallest packet number of a range `length` below `largest`
/// (RFC 9000 §19.3.1).
fn range_below(largest: u64, length: u64) -> Result<u64, Error> {
    largest.checked_sub(length).ok_or(Error::RangeBelowZero)
}

/// Reads one Gap and ACK Range Length pair: the range whose largest is
/// `gap + 2` below the previous range's `smallest` (RFC 9000 §19.3.1).
fn next_range(reader: &mut Reader<'_>, smallest: u64) -> Result<RangeInclusive<u64>, Error> {
    let gap = reader.varint()?;
    let length = reader.varint()?;
    let largest = smallest
        .checked_sub(gap)
        .and_then(|pn| pn.checked_sub(2))
        .ok_or(Error::RangeBelowZero)?;
    Ok(range_below(largest, length)?..=largest)
}

/// The iterator [`AckFrame::ranges`] returns.
#[derive(Clone, Debug)]
pub struct AckRanges<'a> {
    next: Option<RangeInclusive<u64>>,
    /// The pairs not read yet, checked when the frame was found.
    pairs: Reader<'a>,
}

impl Iterator for AckRanges<'_> {
    type Item = RangeInclusive<u64>;

    fn next(&mut self) -> Option<RangeInclusive<u64>> {
        let current = self.next.take()?;
        if !self.pairs.is_empty() {
            self.next = next_range(&mut self.pairs, *current.start()).ok();
        }
        Some(current)
    }
}

impl FusedIterator for AckRanges<'_> {}

/// The meaning of an ACK frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AckRepr {
    /// The largest packet number acknowledged: the end of `ranges[0]`.
    pub largest: u64,
    /// The ACK Delay field as sent (see [`AckFrame::delay`]).
    pub delay: u64,
    /// The acknowledged packet numbers, from the highest down; at least
    /// one range, each at least two below the one before it.
    pub ranges: Vec<RangeInclusive<u64>>,
    /// The ECN counts: `Some` makes an ACK_ECN frame (type 0x03).
    pub ecn: Option<EcnCounts>,
}

impl AckRepr {
    /// The meaning of a checked frame.
    pub fn parse(frame: &AckFrame<'_>) -> AckRepr {
        AckRepr {
            largest: frame.largest(),
            delay: frame.delay(),
            ranges: frame.ranges().collect(),
            ecn: frame.ecn(),
        }
    }

    /// Appends the frame to `buf`, every varint in its shortest encoding.
    ///
    /// # Panics
    ///
    /// If `ranges` is empty, does not start at `largest`, holds an empty
    /// range or ranges not descending with a gap, or a field is above
    /// 2^62 − 1.
    pub fn emit(&self, buf: &mut Vec<u8>) {
        let (first, rest) = self
            .ranges
            .split_first()
            .expect("an ACK frame acknowledges at least one range");
        assert_eq!(
            *first.end(),
            self.largest,
            "the first range ends at largest"
        );
        let ty = match self.ecn {
            Some(_) => frame_type::ACK_ECN,
            None => frame_type::ACK,
        };
        write_varint(buf, ty);
        write_varint(buf, self.largest);
        write_varint(buf, self.delay);
        write_varint(buf, rest.len() as u64);
        write_varint(buf, range_length(first));
        let mut smallest = *first.start();
        for range in rest {
            let gap = smallest
                .checked_sub(*range.end())
                .and_then(|d| d.checked_sub(2))
                .expect("ACK ranges descend with a gap between them");
            write_varint(buf, gap);
            write_varint(buf, range_length(range));
            smallest = *range.start();
        }
        if let Some(ecn) = self.ecn {
            for count in [ecn.ect0, ecn.ect1, ecn.ce] {
                write_varint(buf, count);
            }
        }
    }
}

/// The ACK Range Length of `range`: one less than the packets in it.
fn range_length(range: &RangeInclusive<u64>) -> u64 {
    range
        .end()
        .checked_sub(*range.start())
        .expect("an ACK range is not empty")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic xorshift64 generator: random inputs with no
    /// new dependency.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, bound: u64) -> u64 {
            self.next() % bound
        }
    }

    fn varint(value: u64) -> Vec<u8> {
        let mut buf = Vec::new();
        write_varint(&mut buf, value);
        buf
    }

    fn emitted(repr: &AckRepr) -> Vec<u8> {
        let mut buf = Vec::new();
        repr.emit(&mut buf);
        buf
    }

    /// Every item the walk yields, each ACK frame as its meaning.
    fn walk(payload: &[u8]) -> Vec<Result<AckRepr, Error>> {
        ack_frames(payload)
            .map(|ack| ack.map(|frame| AckRepr::parse(&frame)))
            .collect()
    }

    /// An ACK frame of one range, without delay or ECN counts.
    fn one_range(range: RangeInclusive<u64>) -> AckRepr {
        AckRepr {
            largest: *range.end(),
            delay: 0,
            ranges: vec![range],
            ecn: None,
        }
    }

    fn sample_ack() -> AckRepr {
        AckRepr {
            largest: 1000,
            delay: 25,
            ranges: vec![990..=1000, 900..=950, 3..=3],
            ecn: Some(EcnCounts {
                ect0: 0,
                ect1: 812,
                ce: 17,
            }),
        }
    }

    /// One frame of every other type the walk knows, with its name.
    fn other_frames() -> Vec<(&'static str, Vec<u8>)> {
        let with = |ty: u64, rest: &[u8]| [varint(ty), rest.to_vec()].concat();
        vec![
            ("PADDING", vec![0; 40]),
            ("PING", vec![0x01]),
            ("RESET_STREAM", vec![0x04, 0x04, 0x40, 0x10, 0x44, 0x00]),
            ("STOP_SENDING", vec![0x05, 0x08, 0x11]),
            ("CRYPTO", vec![0x06, 0x40, 0x80, 0x03, 0x16, 0x03, 0x03]),
            ("NEW_TOKEN", vec![0x07, 0x02, 0xaa, 0xbb]),
            ("STREAM LEN", vec![0x0a, 0x04, 0x03, 0x02, 0x03, 0x01]),
            (
                "STREAM OFF LEN FIN",
                vec![0x0f, 0x01, 0x41, 0x00, 0x01, 0x02],
            ),
            ("MAX_DATA", vec![0x10, 0x80, 0x01, 0x00, 0x00]),
            ("MAX_STREAM_DATA", vec![0x11, 0x00, 0x44, 0x00]),
            ("MAX_STREAMS", vec![0x12, 0x24]),
            ("MAX_STREAMS uni", vec![0x13, 0x24]),
            ("DATA_BLOCKED", vec![0x14, 0x40, 0x64]),
            ("STREAM_DATA_BLOCKED", vec![0x15, 0x04, 0x40, 0x64]),
            ("STREAMS_BLOCKED", vec![0x16, 0x01]),
            ("STREAMS_BLOCKED uni", vec![0x17, 0x01]),
            (
                "NEW_CONNECTION_ID",
                [&[0x18, 0x05, 0x02, 0x08][..], &[0x5c; 8], &[0x7e; 16]].concat(),
            ),
            ("RETIRE_CONNECTION_ID", vec![0x19, 0x02]),
            ("PATH_CHALLENGE", [&[0x1a][..], &[0x33; 8]].concat()),
            ("PATH_RESPONSE", [&[0x1b][..], &[0x33; 8]].concat()),
            ("CONNECTION_CLOSE", vec![0x1c, 0x0a, 0x08, 0x02, b'n', b'o']),
            ("APPLICATION_CLOSE", vec![0x1d, 0x00, 0x00]),
            ("HANDSHAKE_DONE", vec![0x1e]),
            ("IMMEDIATE_ACK", vec![0x1f]),
            ("DATAGRAM LEN", vec![0x31, 0x03, 0xec, 0x0e, 0xc9]),
            ("ACK_FREQUENCY", with(0xaf, &[0x07, 0x01, 0x44, 0x00, 0x03])),
        ]
    }

    #[test]
    fn varints_decode_as_in_rfc9000_appendix_a1() {
        let examples: [(&[u8], u64); 5] = [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
            (&[0x40, 0x25], 37),
        ];
        for (bytes, value) in examples {
            let mut reader = Reader::new(bytes);
            assert_eq!(reader.varint(), Ok(value), "{bytes:02x?}");
            assert!(reader.is_empty(), "{bytes:02x?}");
            for cut in 0..bytes.len() {
                assert_eq!(Reader::new(&bytes[..cut]).varint(), Err(Error::Truncated));
            }
        }
    }

    #[test]
    fn varints_encode_in_their_shortest_form() {
        assert_eq!(
            varint(151_288_809_941_952_652),
            [0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c]
        );
        assert_eq!(varint(494_878_333), [0x9d, 0x7f, 0x3e, 0x7d]);
        assert_eq!(varint(15_293), [0x7b, 0xbd]);
        assert_eq!(varint(37), [0x25]);
        for (value, len) in [
            (0, 1),
            (63, 1),
            (64, 2),
            (16_383, 2),
            (16_384, 4),
            ((1 << 30) - 1, 4),
            (1 << 30, 8),
            (MAX_VARINT, 8),
        ] {
            let bytes = varint(value);
            assert_eq!(bytes.len(), len, "{value}");
            assert_eq!(Reader::new(&bytes).varint(), Ok(value));
        }
    }

    #[test]
    #[should_panic(expected = "does not fit a QUIC varint")]
    fn varints_above_2_62_are_refused() {
        varint(MAX_VARINT + 1);
    }

    #[test]
    fn ranges_run_from_the_highest_down() {
        // RFC 9000 §19.3.1: each range's largest is the previous range's
        // smallest minus the gap minus 2.
        let payload = [0x02, 20, 0x05, 2, 7, 2, 4, 0, 2];
        let ack = ack_frames(&payload).next().unwrap().unwrap();
        assert_eq!((ack.largest(), ack.delay(), ack.ecn()), (20, 5, None));
        assert_eq!(ack.ranges().collect::<Vec<_>>(), [13..=20, 5..=9, 1..=3]);
        assert_eq!(ack.as_bytes(), payload);
        let repr = AckRepr::parse(&ack);
        assert_eq!(emitted(&repr), payload);
    }

    #[test]
    fn an_ack_is_found_after_every_other_frame_type() {
        let ack = sample_ack();
        for (name, frame) in other_frames() {
            let payload = [frame.clone(), emitted(&ack)].concat();
            assert_eq!(walk(&payload), [Ok(ack.clone())], "after {name}");
            let payload = [emitted(&ack), frame].concat();
            assert_eq!(walk(&payload), [Ok(ack.clone())], "before {name}");
        }
    }

    #[test]
    fn every_other_frame_cut_short_is_truncated() {
        for (name, frame) in other_frames() {
            if name == "PADDING" {
                continue;
            }
            for cut in 1..frame.len() {
                assert_eq!(
                    walk(&frame[..cut]),
                    [Err(Error::Truncated)],
                    "{name} at {cut}"
                );
            }
        }
    }

    #[test]
    fn stream_and_datagram_without_length_run_to_the_end() {
        let ack = sample_ack();
        let hidden = emitted(&one_range(5..=5));
        // STREAM with OFF and no LEN, STREAM with neither, DATAGRAM without
        // length: their data holds what looks like an ACK frame.
        for header in [&[0x0c, 0x04, 0x40, 0x80][..], &[0x08, 0x00], &[0x30]] {
            let payload = [emitted(&ack), header.to_vec(), hidden.clone()].concat();
            assert_eq!(walk(&payload), [Ok(ack.clone())], "{header:02x?}");
        }
    }

    #[test]
    fn two_acks_in_one_payload_are_both_yielded() {
        let first = sample_ack();
        let second = one_range(0..=7);
        let payload = [emitted(&first), vec![0x01], emitted(&second)].concat();
        assert_eq!(walk(&payload), [Ok(first), Ok(second)]);
    }

    #[test]
    fn an_ack_without_ecn_counts_has_none() {
        let payload = [0x02, 0x40, 0x64, 0x00, 0x00, 0x0a];
        let ack = ack_frames(&payload).next().unwrap().unwrap();
        assert_eq!(ack.ecn(), None);
        assert_eq!(ack.ranges().collect::<Vec<_>>(), [90..=100]);
        // The same acknowledgement with counts is type 0x03.
        let with_ecn = [&[0x03][..], &payload[1..], &[0x01, 0x02, 0x03]].concat();
        let ack = ack_frames(&with_ecn).next().unwrap().unwrap();
        let counts = EcnCounts {
            ect0: 1,
            ect1: 2,
            ce: 3,
        };
        assert_eq!(ack.ecn(), Some(counts));
    }

    #[test]
    fn a_payload_cut_inside_an_ack_yields_only_the_error() {
        let ack = emitted(&sample_ack());
        let before = emitted(&one_range(1..=1));
        for cut in 1..ack.len() {
            assert_eq!(walk(&ack[..cut]), [Err(Error::Truncated)], "at {cut}");
            let payload = [&before[..], &ack[..cut]].concat();
            let items = walk(&payload);
            assert_eq!(items.len(), 2, "at {cut}");
            assert_eq!(items[1], Err(Error::Truncated), "at {cut}");
        }
    }

    #[test]
    fn an_unknown_frame_type_ends_the_walk() {
        let ack = emitted(&sample_ack());
        // Neither 0x20 nor 0x3fff is a frame type this reader knows.
        for (unknown, ty) in [(&[0x20][..], 0x20), (&[0x7f, 0xff], 0x3fff)] {
            let payload = [&ack[..], unknown, &ack[..]].concat();
            let mut frames = ack_frames(&payload);
            assert!(frames.next().unwrap().is_ok());
            assert_eq!(frames.next(), Some(Err(Error::UnknownFrameType(ty))));
            assert_eq!(frames.next(), None);
            assert_eq!(frames.next(), None);
        }
    }

    #[test]
    fn frame_types_must_take_their_shortest_form() {
        // ACK as a two-byte varint (RFC 9000 §12.4).
        assert_eq!(walk(&[0x40, 0x02, 5, 0, 0, 0]), [Err(Error::Malformed)]);
        // ACK_FREQUENCY's 0xaf needs two bytes.
        assert!(walk(&[0x40, 0xaf, 0, 0, 0, 0]).is_empty());
    }

    #[test]
    fn connection_id_lengths_outside_1_to_20_are_malformed() {
        for len in [0u8, 21, 255] {
            let payload = [&[0x18, 0x01, 0x00, len][..], &[0; 255 + 16]].concat();
            assert_eq!(walk(&payload), [Err(Error::Malformed)], "{len}");
        }
    }

    #[test]
    fn a_range_below_packet_number_zero_is_malformed() {
        // First ACK Range above Largest Acknowledged.
        assert_eq!(walk(&[0x02, 5, 0, 0, 6]), [Err(Error::RangeBelowZero)]);
        // A gap past 0: 3..=5, then a largest of 3 - 2 - 2.
        assert_eq!(
            walk(&[0x02, 5, 0, 1, 2, 2, 0]),
            [Err(Error::RangeBelowZero)]
        );
        // A range length past 0: 10..=10, then 0 - 1..=8.
        assert_eq!(
            walk(&[0x02, 10, 0, 1, 0, 0, 9]),
            [Err(Error::RangeBelowZero)]
        );
        // Down to 0 exactly is fine.
        let ack = ack_frames(&[0x02, 10, 0, 1, 0, 0, 8])
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(ack.ranges().collect::<Vec<_>>(), [10..=10, 0..=8]);
    }

    #[test]
    fn emit_then_parse_gives_the_same_repr() {
        let max = AckRepr {
            largest: MAX_VARINT,
            delay: MAX_VARINT,
            ranges: vec![MAX_VARINT..=MAX_VARINT, 1 << 40..=MAX_VARINT - 2, 0..=0],
            ecn: Some(EcnCounts {
                ect0: MAX_VARINT,
                ect1: MAX_VARINT,
                ce: MAX_VARINT,
            }),
        };
        for repr in [sample_ack(), max, one_range(0..=MAX_VARINT)] {
            let bytes = emitted(&repr);
            let ack = ack_frames(&bytes).next().unwrap().unwrap();
            assert_eq!(ack.as_bytes(), bytes);
            assert_eq!(AckRepr::parse(&ack), repr);
        }
    }

    #[test]
    fn random_reprs_round_trip() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2_000 {
            let mut end = rng.below(MAX_VARINT) >> rng.below(62);
            let mut ranges = Vec::new();
            loop {
                let start = end - (rng.below(end + 1) >> rng.below(62));
                ranges.push(start..=end);
                if start < 2 || rng.below(4) == 0 {
                    break;
                }
                end = start - 2 - (rng.below(start - 1) >> rng.below(62));
            }
            let ecn = (rng.below(2) == 0).then(|| EcnCounts {
                ect0: rng.below(MAX_VARINT + 1),
                ect1: rng.below(1 << 14),
                ce: rng.below(64),
            });
            let repr = AckRepr {
                largest: *ranges[0].end(),
                delay: rng.below(1 << 20),
                ranges,
                ecn,
            };
            assert_eq!(walk(&emitted(&repr)), [Ok(repr.clone())], "{repr:?}");
        }
    }

    #[test]
    fn random_and_damaged_payloads_never_panic() {
        let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
        let valid: Vec<u8> = other_frames()
            .into_iter()
            .flat_map(|(_, frame)| [frame, emitted(&sample_ack())].concat())
            .collect();
        for round in 0..20_000 {
            let payload: Vec<u8> = match round % 3 {
                // Random bytes, mostly small so that they parse a while.
                0 => (0..rng.below(64))
                    .map(|_| (rng.next() as u8) & [0xff, 0x3f, 0x07][rng.below(3) as usize])
                    .collect(),
                // A valid payload cut anywhere.
                1 => valid[..rng.below(valid.len() as u64 + 1) as usize].to_vec(),
                // A valid payload with a few bytes changed.
                _ => {
                    let mut damaged = valid.clone();
                    for _ in 0..1 + rng.below(4) {
                        let at = rng.below(damaged.len() as u64) as usize;
                        damaged[at] = rng.next() as u8;
                    }
                    damaged
                }
            };
            let mut errors = 0;
            for item in ack_frames(&payload) {
                match item {
                    Ok(ack) => {
                        let repr = AckRepr::parse(&ack);
                        assert_eq!(repr.ranges.first().map(|r| *r.end()), Some(ack.largest()));
                        assert!(emitted(&repr).len() <= ack.as_bytes().len());
                    }
                    Err(_) => errors += 1,
                }
            }
            assert!(errors <= 1, "{payload:02x?}");
        }
    }
}

//! Zero-copy views of the headers the shim reads and rewrites: IPv4, IPv6
//! (with its extension-header chain) and UDP, in smoltcp's `wire` style — a
//! `Packet<T: AsRef<[u8]>>` over a buffer with named field ranges and
//! `check_len`, and a separate `Repr` for the parsed meaning (docs/design.md §6).
//!
//! The only rewrite is of the TOS / traffic-class byte (ECN + DSCP), which
//! updates the IPv4 header checksum incrementally (RFC 1624, eqn. 3). IPv6
//! has no header checksum, and the UDP checksum does not cover the TOS byte.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Why a buffer is not a packet of the expected kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The buffer is shorter than the headers or lengths it claims.
    Truncated,
    /// A field holds a value no valid packet has (wrong version, bad lengths).
    Malformed,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Truncated => "truncated packet",
            Error::Malformed => "malformed packet",
        })
    }
}

impl std::error::Error for Error {}

/// Parse results.
pub type Result<T> = std::result::Result<T, Error>;

/// IANA protocol number of UDP.
pub const PROTO_UDP: u8 = 17;

/// The Internet checksum (RFC 1071) helpers.
pub mod checksum {
    /// Ones'-complement sum of `data` as big-endian 16-bit words, folded.
    pub fn sum(data: &[u8]) -> u16 {
        let mut acc: u32 = 0;
        let mut words = data.chunks_exact(2);
        for w in &mut words {
            acc += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        if let [last] = words.remainder() {
            acc += u32::from(*last) << 8;
        }
        fold(acc)
    }

    /// Folds carries back in: a 32-bit accumulator to a 16-bit ones'-complement sum.
    pub fn fold(mut acc: u32) -> u16 {
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    /// The checksum to store over `data` (whose checksum field is zero).
    pub fn compute(data: &[u8]) -> u16 {
        !sum(data)
    }

    /// RFC 1624 eqn. 3: the new checksum after one 16-bit word of the
    /// covered data changes from `old` to `new`: HC' = ~(~HC + ~m + m').
    pub fn update(hc: u16, old: u16, new: u16) -> u16 {
        !fold(u32::from(!hc) + u32::from(!old) + u32::from(new))
    }
}

mod ipv4_field {
    use std::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;
    pub const MIN_HEADER: usize = 20;
}

/// A read/write view of an IPv4 packet.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps a buffer without checking it; accessors may panic until
    /// [`Ipv4Packet::check_len`] has passed.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps a buffer after [`Ipv4Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the version is 4, that the header and the total length
    /// fit in the buffer and that the header length is at least 20 bytes.
    /// The buffer may be longer than the total length (link padding).
    pub fn check_len(&self) -> Result<()> {
        let data = self.buffer.as_ref();
        if data.len() < ipv4_field::MIN_HEADER {
            return Err(Error::Truncated);
        }
        if self.version() != 4 {
            return Err(Error::Malformed);
        }
        let header = self.header_len();
        let total = usize::from(self.total_len());
        if header < ipv4_field::MIN_HEADER || total < header {
            return Err(Error::Malformed);
        }
        if data.len() < total {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The IP version nibble.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[ipv4_field::VER_IHL] >> 4
    }

    /// Header length in bytes.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[ipv4_field::VER_IHL] & 0x0f) * 4
    }

    /// The TOS byte: DSCP (6 bits) and ECN (2 bits).
    pub fn tos(&self) -> u8 {
        self.buffer.as_ref()[ipv4_field::TOS]
    }

    /// Total length (header and payload) in bytes.
    pub fn total_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), ipv4_field::LENGTH)
    }

    /// Whether this is a fragment: more fragments follow, or the offset is not zero.
    pub fn is_fragment(&self) -> bool {
        read_u16(self.buffer.as_ref(), ipv4_field::FLG_OFF) & 0x3fff != 0
    }

    /// The payload protocol number.
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[ipv4_field::PROTOCOL]
    }

    /// The header checksum field.
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), ipv4_field::CHECKSUM)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(read_array(self.buffer.as_ref(), ipv4_field::SRC))
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(read_array(self.buffer.as_ref(), ipv4_field::DST))
    }

    /// Whether the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::sum(&self.buffer.as_ref()[..self.header_len()]) == 0xffff
    }

    /// The payload, up to the total length.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }

    /// The first 16-bit header word: version, IHL and TOS (what a TOS
    /// rewrite changes in the checksummed data).
    fn first_word(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 0..2)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Rewrites the TOS byte and updates the header checksum incrementally
    /// (RFC 1624), so a packet with a correct checksum keeps a correct one
    /// and a packet with a wrong one stays exactly as wrong.
    pub fn set_tos(&mut self, tos: u8) {
        let old = self.first_word();
        self.buffer.as_mut()[ipv4_field::TOS] = tos;
        let new = self.first_word();
        let hc = checksum::update(self.checksum(), old, new);
        self.buffer.as_mut()[ipv4_field::CHECKSUM].copy_from_slice(&hc.to_be_bytes());
    }

    /// Recomputes the header checksum from scratch.
    pub fn fill_checksum(&mut self) {
        let header = self.header_len();
        let data = self.buffer.as_mut();
        data[ipv4_field::CHECKSUM].fill(0);
        let hc = checksum::compute(&data[..header]);
        data[ipv4_field::CHECKSUM].copy_from_slice(&hc.to_be_bytes());
    }
}

/// The meaning of a 20-byte IPv4 header (no options).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Payload protocol.
    pub protocol: u8,
    /// TOS byte.
    pub tos: u8,
    /// Time to live.
    pub ttl: u8,
    /// Payload length in bytes.
    pub payload_len: usize,
}

impl Ipv4Repr {
    /// Reads a checked packet.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>) -> Result<Ipv4Repr> {
        packet.check_len()?;
        Ok(Ipv4Repr {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            protocol: packet.protocol(),
            tos: packet.tos(),
            ttl: packet.buffer.as_ref()[8],
            payload_len: packet.payload().len(),
        })
    }

    /// Length of the header [`Ipv4Repr::emit`] writes.
    pub const fn header_len(&self) -> usize {
        ipv4_field::MIN_HEADER
    }

    /// Writes the header (with a correct checksum) into the first 20 bytes of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than 20 bytes or the total length exceeds 65 535.
    pub fn emit(&self, buf: &mut [u8]) {
        let total = u16::try_from(ipv4_field::MIN_HEADER + self.payload_len)
            .expect("IPv4 total length fits 16 bits");
        let header = &mut buf[..ipv4_field::MIN_HEADER];
        header.fill(0);
        header[ipv4_field::VER_IHL] = 0x45;
        header[ipv4_field::TOS] = self.tos;
        header[ipv4_field::LENGTH].copy_from_slice(&total.to_be_bytes());
        header[8] = self.ttl;
        header[ipv4_field::PROTOCOL] = self.protocol;
        header[ipv4_field::SRC].copy_from_slice(&self.src.octets());
        header[ipv4_field::DST].copy_from_slice(&self.dst.octets());
        Ipv4Packet::new_unchecked(header).fill_checksum();
    }
}

mod ipv6_field {
    use std::ops::Range;
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Range<usize> = 8..24;
    pub const DST: Range<usize> = 24..40;
    pub const HEADER: usize = 40;
}

/// IPv6 extension headers the walk steps over (RFC 8200 §4, RFC 4302, RFC
/// 6275, RFC 7401, RFC 5533): hop-by-hop, routing, destination options,
/// mobility, HIP, shim6 — all "next header, length in 8-octet units − 1".
const IPV6_EXT_GENERIC: [u8; 6] = [0, 43, 60, 135, 139, 140];
/// Fragment header: fixed 8 bytes.
const IPV6_EXT_FRAGMENT: u8 = 44;
/// Authentication header: length in 4-octet units − 2 (RFC 4302 §2.2).
const IPV6_EXT_AH: u8 = 51;

/// Where an IPv6 extension-header walk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv6Upper {
    /// The upper-layer protocol number (or 50 for ESP, 59 for no next header).
    pub protocol: u8,
    /// Offset of the upper-layer header from the start of the IPv6 packet.
    pub offset: usize,
    /// Whether a fragment header was crossed.
    pub fragment: bool,
}

/// A read/write view of an IPv6 packet.
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wraps a buffer after [`Ipv6Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks the version and that the fixed header and the payload length fit.
    pub fn check_len(&self) -> Result<()> {
        let data = self.buffer.as_ref();
        if data.len() < ipv6_field::HEADER {
            return Err(Error::Truncated);
        }
        if self.version() != 6 {
            return Err(Error::Malformed);
        }
        if data.len() < ipv6_field::HEADER + usize::from(self.payload_len()) {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    fn first_word(&self) -> u32 {
        u32::from_be_bytes(read_array(self.buffer.as_ref(), ipv6_field::VER_TC_FLOW))
    }

    /// The IP version nibble.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// The traffic-class byte: DSCP (6 bits) and ECN (2 bits).
    pub fn traffic_class(&self) -> u8 {
        (self.first_word() >> 20) as u8
    }

    /// The 20-bit flow label.
    pub fn flow_label(&self) -> u32 {
        self.first_word() & 0x000f_ffff
    }

    /// Payload length (extension headers included).
    pub fn payload_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), ipv6_field::LENGTH)
    }

    /// The first next-header value.
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[ipv6_field::NEXT_HEADER]
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[ipv6_field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(read_array(self.buffer.as_ref(), ipv6_field::SRC))
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(read_array(self.buffer.as_ref(), ipv6_field::DST))
    }

    /// The packet up to its payload length (drops link padding).
    pub fn packet_bytes(&self) -> &[u8] {
        &self.buffer.as_ref()[..ipv6_field::HEADER + usize::from(self.payload_len())]
    }

    /// Walks the extension-header chain to the upper-layer header. Stops at
    /// the first header it does not know as an extension (the upper layer,
    /// ESP or "no next header"); errors if a header runs past the payload.
    pub fn upper_layer(&self) -> Result<Ipv6Upper> {
        let data = self.packet_bytes();
        let mut protocol = self.next_header();
        let mut offset = ipv6_field::HEADER;
        let mut fragment = false;
        loop {
            let len = if IPV6_EXT_GENERIC.contains(&protocol) {
                let length_byte = *data.get(offset + 1).ok_or(Error::Truncated)?;
                (usize::from(length_byte) + 1) * 8
            } else if protocol == IPV6_EXT_FRAGMENT {
                fragment = true;
                8
            } else if protocol == IPV6_EXT_AH {
                let length_byte = *data.get(offset + 1).ok_or(Error::Truncated)?;
                (usize::from(length_byte) + 2) * 4
            } else {
                return Ok(Ipv6Upper {
                    protocol,
                    offset,
                    fragment,
                });
            };
            let next = *data.get(offset).ok_or(Error::Truncated)?;
            if offset + len > data.len() {
                return Err(Error::Truncated);
            }
            protocol = next;
            offset += len;
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Rewrites the traffic-class byte (no checksum to update in IPv6).
    pub fn set_traffic_class(&mut self, tc: u8) {
        let word = (self.first_word() & 0xf00f_ffff) | u32::from(tc) << 20;
        self.buffer.as_mut()[ipv6_field::VER_TC_FLOW].copy_from_slice(&word.to_be_bytes());
    }
}

/// The meaning of a fixed IPv6 header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv6Repr {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// The first next-header value.
    pub next_header: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Payload length, extension headers included.
    pub payload_len: usize,
}

impl Ipv6Repr {
    /// Reads a checked packet.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<Ipv6Repr> {
        packet.check_len()?;
        Ok(Ipv6Repr {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            next_header: packet.next_header(),
            traffic_class: packet.traffic_class(),
            hop_limit: packet.hop_limit(),
            payload_len: usize::from(packet.payload_len()),
        })
    }

    /// Length of the header [`Ipv6Repr::emit`] writes.
    pub const fn header_len(&self) -> usize {
        ipv6_field::HEADER
    }

    /// Writes the fixed header (flow label 0) into the first 40 bytes of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than 40 bytes or the payload exceeds 65 535 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let len = u16::try_from(self.payload_len).expect("IPv6 payload length fits 16 bits");
        let header = &mut buf[..ipv6_field::HEADER];
        let word = 6u32 << 28 | u32::from(self.traffic_class) << 20;
        header[ipv6_field::VER_TC_FLOW].copy_from_slice(&word.to_be_bytes());
        header[ipv6_field::LENGTH].copy_from_slice(&len.to_be_bytes());
        header[ipv6_field::NEXT_HEADER] = self.next_header;
        header[ipv6_field::HOP_LIMIT] = self.hop_limit;
        header[ipv6_field::SRC].copy_from_slice(&self.src.octets());
        header[ipv6_field::DST].copy_from_slice(&self.dst.octets());
    }
}

mod udp_field {
    use std::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
    pub const HEADER: usize = 8;
}

/// A read view of a UDP datagram.
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wraps a buffer after [`UdpPacket::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the header fits and the length field lies between the
    /// header size and the buffer size.
    pub fn check_len(&self) -> Result<()> {
        let data = self.buffer.as_ref();
        if data.len() < udp_field::HEADER {
            return Err(Error::Truncated);
        }
        let len = usize::from(self.len());
        if len < udp_field::HEADER {
            return Err(Error::Malformed);
        }
        if len > data.len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), udp_field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), udp_field::DST_PORT)
    }

    /// Length field (header and payload).
    pub fn len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), udp_field::LENGTH)
    }

    /// Whether the datagram has no payload.
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= udp_field::HEADER
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), udp_field::CHECKSUM)
    }

    /// The payload, up to the length field.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[udp_field::HEADER..usize::from(self.len())]
    }
}

/// The meaning of a UDP header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
}

impl UdpRepr {
    /// Header length.
    pub const HEADER_LEN: usize = udp_field::HEADER;

    /// Writes the header for `payload_len` bytes of payload, checksum 0
    /// ("none": allowed for IPv4; used for hand-built and captured packets).
    ///
    /// # Panics
    /// If `buf` is shorter than 8 bytes or the length exceeds 65 535.
    pub fn emit(&self, buf: &mut [u8], payload_len: usize) {
        let len = u16::try_from(udp_field::HEADER + payload_len).expect("UDP length fits 16 bits");
        buf[udp_field::SRC_PORT].copy_from_slice(&self.src_port.to_be_bytes());
        buf[udp_field::DST_PORT].copy_from_slice(&self.dst_port.to_be_bytes());
        buf[udp_field::LENGTH].copy_from_slice(&len.to_be_bytes());
        buf[udp_field::CHECKSUM].fill(0);
    }
}

fn read_u16(data: &[u8], range: std::ops::Range<usize>) -> u16 {
    u16::from_be_bytes(read_array(data, range))
}

fn read_array<const N: usize>(data: &[u8], range: std::ops::Range<usize>) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(&data[range]);
    out
}

#[cfg(test)]
pub(crate) mod build {
    //! Hand-built packets for tests.
    use super::*;

    /// An IPv4/UDP packet.
    pub fn udp4(src: [u8; 4], dst: [u8; 4], ports: (u16, u16), tos: u8, payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0; 28 + payload.len()];
        Ipv4Repr {
            src: src.into(),
            dst: dst.into(),
            protocol: PROTO_UDP,
            tos,
            ttl: 64,
            payload_len: 8 + payload.len(),
        }
        .emit(&mut buf);
        UdpRepr {
            src_port: ports.0,
            dst_port: ports.1,
        }
        .emit(&mut buf[20..], payload.len());
        buf[28..].copy_from_slice(payload);
        buf
    }

    /// An IPv6 packet with the given extension headers (raw, each already
    /// carrying its own next-header byte) before a UDP datagram.
    pub fn udp6(tc: u8, first_next: u8, ext: &[u8], ports: (u16, u16), payload: &[u8]) -> Vec<u8> {
        let udp_len = 8 + payload.len();
        let mut buf = vec![0; 40 + ext.len() + udp_len];
        Ipv6Repr {
            src: Ipv6Addr::LOCALHOST,
            dst: "fd00::2".parse().expect("literal address"),
            next_header: first_next,
            traffic_class: tc,
            hop_limit: 64,
            payload_len: ext.len() + udp_len,
        }
        .emit(&mut buf);
        buf[40..40 + ext.len()].copy_from_slice(ext);
        let udp = &mut buf[40 + ext.len()..];
        UdpRepr {
            src_port: ports.0,
            dst_port: ports.1,
        }
        .emit(udp, payload.len());
        udp[8..].copy_from_slice(payload);
        buf
    }
}

#[cfg(test)]
mod tests {
    use super::build::*;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ipv4_udp_round_trip() {
        let pkt = udp4([10, 0, 0, 1], [10, 0, 0, 2], (1234, 443), 0x05, b"hello");
        let ip = Ipv4Packet::new_checked(&pkt[..]).unwrap();
        assert!(ip.verify_checksum());
        let repr = Ipv4Repr::parse(&ip).unwrap();
        assert_eq!(repr.src, Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(repr.tos, 0x05);
        assert_eq!(repr.protocol, PROTO_UDP);
        assert!(!ip.is_fragment());
        let udp = UdpPacket::new_checked(ip.payload()).unwrap();
        assert_eq!((udp.src_port(), udp.dst_port()), (1234, 443));
        assert_eq!(udp.payload(), b"hello");
    }

    #[test]
    fn known_checksum() {
        // The header from RFC 1071-style worked examples (Wikipedia "IPv4
        // header checksum"): checksum 0xb861.
        let hdr: [u8; 20] = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum::compute(&hdr), 0xb861);
    }

    #[test]
    fn set_tos_keeps_checksum_valid() {
        let mut pkt = udp4([192, 168, 1, 1], [192, 168, 1, 2], (1, 2), 0x04, b"x");
        let mut ip = Ipv4Packet::new_checked(&mut pkt[..]).unwrap();
        ip.set_tos(0x07);
        assert_eq!(ip.tos(), 0x07);
        assert!(ip.verify_checksum());
        // A wrong checksum stays exactly as wrong (the rewrite must not "fix" it).
        let mut broken = udp4([1, 2, 3, 4], [5, 6, 7, 8], (1, 2), 0x00, b"y");
        broken[10] ^= 0x10;
        let mut ip = Ipv4Packet::new_checked(&mut broken[..]).unwrap();
        let diff_before = checksum::sum(&ip.buffer[..20]);
        ip.set_tos(0x03);
        assert_eq!(checksum::sum(&ip.buffer[..20]), diff_before);
    }

    proptest! {
        #[test]
        fn incremental_checksum_equals_full_recompute(
            mut header in proptest::collection::vec(any::<u8>(), 20..=60),
            tos in any::<u8>(),
        ) {
            // Any header with a valid version/IHL; random options and fields.
            let ihl = header.len() / 4;
            header.truncate(ihl * 4);
            header[0] = 0x40 | ihl as u8;
            let total = header.len() as u16;
            header[2..4].copy_from_slice(&total.to_be_bytes());
            let mut ip = Ipv4Packet::new_unchecked(&mut header[..]);
            ip.fill_checksum();
            ip.set_tos(tos);
            let incremental = ip.checksum();
            ip.fill_checksum();
            prop_assert_eq!(incremental, ip.checksum());
            prop_assert!(ip.verify_checksum());
        }

        #[test]
        fn views_never_panic_on_garbage(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(ip) = Ipv4Packet::new_checked(&data[..]) {
                let _ = UdpPacket::new_checked(ip.payload()).map(|u| u.payload().len());
            }
            if let Ok(ip) = Ipv6Packet::new_checked(&data[..]) {
                if let Ok(upper) = ip.upper_layer() {
                    prop_assert!(upper.offset <= ip.packet_bytes().len());
                }
            }
        }
    }

    #[test]
    fn ipv4_rejects_bad_lengths() {
        let pkt = udp4([1, 1, 1, 1], [2, 2, 2, 2], (1, 2), 0, b"abc");
        assert_eq!(
            Ipv4Packet::new_checked(&pkt[..10]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Ipv4Packet::new_checked(&pkt[..30]).unwrap_err(),
            Error::Truncated
        );
        let mut bad = pkt.clone();
        bad[0] = 0x44; // IHL 16 bytes
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            Error::Malformed
        );
        let mut bad = pkt.clone();
        bad[0] = 0x65; // version 6
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            Error::Malformed
        );
        let mut bad = pkt;
        bad[2..4].copy_from_slice(&10u16.to_be_bytes()); // total < header
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            Error::Malformed
        );
    }

    #[test]
    fn ipv4_fragments_are_recognised() {
        let mut pkt = udp4([1, 1, 1, 1], [2, 2, 2, 2], (1, 2), 0, b"abc");
        pkt[6] = 0x20; // MF
        assert!(Ipv4Packet::new_unchecked(&pkt[..]).is_fragment());
        pkt[6] = 0x00;
        pkt[7] = 0x01; // offset 8 bytes
        assert!(Ipv4Packet::new_unchecked(&pkt[..]).is_fragment());
        pkt[6] = 0x40; // DF only
        pkt[7] = 0x00;
        assert!(!Ipv4Packet::new_unchecked(&pkt[..]).is_fragment());
    }

    #[test]
    fn ipv6_traffic_class_and_flow_label() {
        let mut pkt = udp6(0xa6, PROTO_UDP, &[], (5, 6), b"data");
        pkt[1] |= 0x0a; // flow label bits next to the traffic class
        pkt[3] = 0x42;
        let mut ip = Ipv6Packet::new_checked(&mut pkt[..]).unwrap();
        assert_eq!(ip.traffic_class(), 0xa6);
        let label = ip.flow_label();
        ip.set_traffic_class(0x5b);
        assert_eq!(ip.traffic_class(), 0x5b);
        assert_eq!(ip.flow_label(), label, "flow label untouched");
        assert_eq!(ip.version(), 6);
    }

    #[test]
    fn ipv6_extension_walk() {
        // Hop-by-hop (8 bytes) → destination options (16 bytes) → AH (12 bytes) → UDP.
        let mut ext = vec![60, 0, 1, 4, 0, 0, 0, 0];
        ext.extend_from_slice(&[51, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        ext.extend_from_slice(&[PROTO_UDP, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let pkt = udp6(0, 0, &ext, (7, 8), b"payload");
        let ip = Ipv6Packet::new_checked(&pkt[..]).unwrap();
        let upper = ip.upper_layer().unwrap();
        assert_eq!(
            upper,
            Ipv6Upper {
                protocol: PROTO_UDP,
                offset: 40 + 36,
                fragment: false
            }
        );
        let udp = UdpPacket::new_checked(&ip.packet_bytes()[upper.offset..]).unwrap();
        assert_eq!(udp.payload(), b"payload");

        // A fragment header is seen.
        let frag = [PROTO_UDP, 0, 0, 1, 0, 0, 0, 9];
        let pkt = udp6(0, IPV6_EXT_FRAGMENT, &frag, (7, 8), b"p");
        let upper = Ipv6Packet::new_checked(&pkt[..])
            .unwrap()
            .upper_layer()
            .unwrap();
        assert!(upper.fragment);

        // A header whose length runs past the packet is an error, not a panic.
        let pkt = udp6(0, 0, &[PROTO_UDP, 200, 0, 0, 0, 0, 0, 0], (7, 8), b"p");
        assert_eq!(
            Ipv6Packet::new_checked(&pkt[..])
                .unwrap()
                .upper_layer()
                .unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn udp_length_checks() {
        let mut d = [0u8, 1, 0, 2, 0, 7, 0, 0];
        assert_eq!(
            UdpPacket::new_checked(&d[..]).unwrap_err(),
            Error::Malformed
        );
        d[5] = 9;
        assert_eq!(
            UdpPacket::new_checked(&d[..]).unwrap_err(),
            Error::Truncated
        );
        d[5] = 8;
        let udp = UdpPacket::new_checked(&d[..]).unwrap();
        assert!(udp.is_empty());
        assert_eq!(udp.checksum(), 0);
    }
}

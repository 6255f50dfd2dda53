//! Classification: from a raw IP packet to the [`PacketMarks`] a marker
//! rewrites, and back (docs/design.md §4: parse → classify → mark).
//!
//! Unfragmented UDP and TCP over IPv4 / IPv6 are classified: UDP carries
//! ecnq's QUIC, TCP gets the classic CE marking of untagged ECT traffic
//! (kernel TCP with ECN on, the testbed's baselines). Fragments, other
//! protocols and malformed packets pass untouched: they are queued like any
//! packet but never re-marked, and [`PassCounters`] counts them.

use std::net::{IpAddr, SocketAddr};

use ecnq::{packet_hash, Ecn, PacketMarks, SchemeTag};

use super::impair::Corruption;
use crate::wire::{self, checksum, Ipv4Packet, Ipv6Packet, UdpPacket, PROTO_UDP};

/// IANA protocol number of TCP.
const PROTO_TCP: u8 = 6;
/// The shortest TCP header (RFC 9293 §3.1).
const TCP_HEADER_MIN: usize = 20;

/// Why a packet is passed without marking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PassReason {
    /// An IPv4 fragment, or an IPv6 packet with a fragment header.
    Fragment,
    /// Neither UDP nor TCP (ICMP, ESP, ...).
    NotUdp,
    /// Not a well-formed IPv4 / IPv6 / UDP packet.
    Malformed,
}

/// Where the TOS / traffic-class byte lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpVersion {
    /// IPv4: TOS byte, header checksum to update.
    V4,
    /// IPv6: traffic class, no checksum.
    V6,
}

/// A classified UDP or TCP packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Classified {
    /// Which header holds the marks.
    pub version: IpVersion,
    /// The TOS / traffic-class byte as it arrived.
    pub tos: u8,
    /// The marks as they arrived.
    pub marks: PacketMarks,
}

/// What classification made of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A UDP packet the marker may rewrite.
    Udp(Classified),
    /// A TCP segment the marker may rewrite (its ECN field).
    Tcp(Classified),
    /// A packet to forward untouched.
    Pass(PassReason),
}

/// Counts of packets passed untouched, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassCounters {
    /// Fragments.
    pub fragment: u64,
    /// Packets neither UDP nor TCP.
    pub not_udp: u64,
    /// Malformed packets.
    pub malformed: u64,
}

impl PassCounters {
    /// Counts one passed packet.
    pub fn count(&mut self, reason: PassReason) {
        match reason {
            PassReason::Fragment => self.fragment += 1,
            PassReason::NotUdp => self.not_udp += 1,
            PassReason::Malformed => self.malformed += 1,
        }
    }
}

/// The marks of a UDP datagram: ECN and tag from the TOS byte, the ecnq
/// packet hash of the payload, and the flow key of its 4-tuple.
pub fn marks_of(tos: u8, src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> PacketMarks {
    PacketMarks {
        ecn: Ecn::from_tos(tos),
        tag: SchemeTag::from_tos(tos),
        hash: packet_hash(payload),
        flow: flow_key(src, dst),
    }
}

/// The TOS byte to send for a packet that arrived with `original` and the
/// marks `marked`: the original byte when the marker changed nothing (so
/// traffic the shim does not mark keeps every bit); the original DSCP with
/// the new ECN when only the codepoint changed (an untagged packet keeps its
/// class, AF41 or EF, when it is CE-marked); else the tag and ECN of `marked`.
pub fn remarked_tos(original: u8, marked: &PacketMarks) -> u8 {
    if SchemeTag::from_tos(original) == marked.tag {
        original & !0b11 | marked.ecn.bits()
    } else {
        marked.tag.tos(marked.ecn)
    }
}

/// A 64-bit FNV-1a hash of the 4-tuple: the key of a flow's per-flow state.
pub fn flow_key(src: SocketAddr, dst: SocketAddr) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(PRIME);
        }
    };
    for addr in [src, dst] {
        match addr.ip() {
            IpAddr::V4(a) => eat(&a.octets()),
            IpAddr::V6(a) => eat(&a.octets()),
        }
        eat(&addr.port().to_be_bytes());
    }
    h
}

/// Parses and classifies a raw IP packet (never panics, whatever the bytes).
pub fn classify(packet: &[u8]) -> Verdict {
    match packet.first().map(|b| b >> 4) {
        Some(4) => classify_v4(packet),
        Some(6) => classify_v6(packet),
        _ => Verdict::Pass(PassReason::Malformed),
    }
}

fn classify_v4(packet: &[u8]) -> Verdict {
    let Ok(ip) = Ipv4Packet::new_checked(packet) else {
        return Verdict::Pass(PassReason::Malformed);
    };
    if ip.is_fragment() {
        return Verdict::Pass(PassReason::Fragment);
    }
    let (src, dst) = (IpAddr::V4(ip.src_addr()), IpAddr::V4(ip.dst_addr()));
    transport_verdict(
        IpVersion::V4,
        ip.protocol(),
        ip.tos(),
        src,
        dst,
        ip.payload(),
    )
}

fn classify_v6(packet: &[u8]) -> Verdict {
    let Ok(ip) = Ipv6Packet::new_checked(packet) else {
        return Verdict::Pass(PassReason::Malformed);
    };
    let upper = match ip.upper_layer() {
        Ok(upper) => upper,
        Err(_) => return Verdict::Pass(PassReason::Malformed),
    };
    if upper.fragment {
        return Verdict::Pass(PassReason::Fragment);
    }
    let (src, dst) = (IpAddr::V6(ip.src_addr()), IpAddr::V6(ip.dst_addr()));
    let upper_bytes = &ip.packet_bytes()[upper.offset..];
    let version = IpVersion::V6;
    transport_verdict(
        version,
        upper.protocol,
        ip.traffic_class(),
        src,
        dst,
        upper_bytes,
    )
}

/// Classifies the UDP datagram or TCP segment `upper` of an IP packet.
fn transport_verdict(
    version: IpVersion,
    protocol: u8,
    tos: u8,
    src: IpAddr,
    dst: IpAddr,
    upper: &[u8],
) -> Verdict {
    let classified = |src_port, dst_port, payload| Classified {
        version,
        tos,
        marks: marks_of(
            tos,
            SocketAddr::new(src, src_port),
            SocketAddr::new(dst, dst_port),
            payload,
        ),
    };
    match protocol {
        PROTO_UDP => match UdpPacket::new_checked(upper) {
            Ok(udp) => Verdict::Udp(classified(udp.src_port(), udp.dst_port(), udp.payload())),
            Err(_) => Verdict::Pass(PassReason::Malformed),
        },
        // The ports lead the TCP header; the hash covers the whole segment.
        PROTO_TCP if upper.len() >= TCP_HEADER_MIN => {
            let port = |at: usize| u16::from_be_bytes([upper[at], upper[at + 1]]);
            Verdict::Tcp(classified(port(0), port(2), upper))
        }
        PROTO_TCP => Verdict::Pass(PassReason::Malformed),
        _ => Verdict::Pass(PassReason::NotUdp),
    }
}

/// Writes `marks` back into a packet [`classify`] accepted. Leaves the bytes
/// alone when the TOS byte does not change.
pub fn rewrite(packet: &mut [u8], classified: &Classified, marks: &PacketMarks) {
    let tos = remarked_tos(classified.tos, marks);
    if tos == classified.tos {
        return;
    }
    match classified.version {
        IpVersion::V4 => wire::Ipv4Packet::new_unchecked(packet).set_tos(tos),
        IpVersion::V6 => wire::Ipv6Packet::new_unchecked(packet).set_traffic_class(tos),
    }
}

/// Offset of the UDP checksum field in the UDP header.
const UDP_CHECKSUM: usize = 6;
/// Length of the UDP header.
const UDP_HEADER: usize = 8;

/// Applies `hit` to the UDP payload of a packet [`classify`] accepted and
/// updates the UDP checksum (RFC 1624), so the packet is still delivered
/// and only the transport above notices. Returns whether a byte changed.
pub fn corrupt_udp(packet: &mut [u8], classified: &Classified, hit: Corruption) -> bool {
    let offset = match classified.version {
        IpVersion::V4 => Ipv4Packet::new_unchecked(&*packet).header_len(),
        IpVersion::V6 => match Ipv6Packet::new_unchecked(&*packet).upper_layer() {
            Ok(upper) => upper.offset,
            Err(_) => return false,
        },
    };
    let Some(datagram) = packet.get_mut(offset..) else {
        return false;
    };
    let Ok(len) = UdpPacket::new_checked(&*datagram).map(|u| usize::from(u.len())) else {
        return false;
    };
    let Some((i, old)) = hit.apply(&mut datagram[UDP_HEADER..len]) else {
        return false;
    };
    let sum = u16::from_be_bytes([datagram[UDP_CHECKSUM], datagram[UDP_CHECKSUM + 1]]);
    if sum != 0 || classified.version == IpVersion::V6 {
        // The header is 8 bytes: payload byte i is the high half of a
        // 16-bit word when i is even.
        let shift = if i % 2 == 0 { 8 } else { 0 };
        let new = datagram[UDP_HEADER + i];
        let sum = checksum::update(sum, u16::from(old) << shift, u16::from(new) << shift);
        // RFC 768: a computed zero is sent as all ones.
        let sum = if sum == 0 { 0xffff } else { sum };
        datagram[UDP_CHECKSUM..UDP_CHECKSUM + 2].copy_from_slice(&sum.to_be_bytes());
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::build::{udp4, udp6};
    use proptest::prelude::*;

    #[test]
    fn classifies_ipv4_udp() {
        let tos = SchemeTag::new(1).tos(Ecn::Ect1);
        let pkt = udp4([10, 0, 0, 1], [10, 0, 0, 2], (4000, 443), tos, b"quic!");
        let Verdict::Udp(c) = classify(&pkt) else {
            panic!("not classified: {:?}", classify(&pkt));
        };
        assert_eq!(c.version, IpVersion::V4);
        assert_eq!(c.marks.ecn, Ecn::Ect1);
        assert_eq!(c.marks.tag, SchemeTag::new(1));
        assert_eq!(c.marks.hash, packet_hash(b"quic!"));
        let src: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        let dst: SocketAddr = "10.0.0.2:443".parse().unwrap();
        assert_eq!(c.marks.flow, flow_key(src, dst));
        assert_ne!(c.marks.flow, flow_key(dst, src), "direction matters");
    }

    #[test]
    fn rewrite_ipv4_keeps_checksum() {
        let mut pkt = udp4([10, 0, 0, 1], [10, 0, 0, 2], (1, 2), 0b0000_0101, b"x");
        let Verdict::Udp(c) = classify(&pkt) else {
            panic!()
        };
        let mut marks = c.marks;
        marks.ecn = Ecn::Ce;
        rewrite(&mut pkt, &c, &marks);
        let ip = Ipv4Packet::new_checked(&pkt[..]).unwrap();
        assert_eq!(ip.tos(), 0b0000_0111);
        assert!(ip.verify_checksum());
    }

    #[test]
    fn rewrite_ipv6_behind_extension_headers() {
        let ext = [PROTO_UDP, 0, 1, 4, 0, 0, 0, 0];
        let tos = SchemeTag::new(4).tos(Ecn::Ect0);
        let mut pkt = udp6(tos, 0, &ext, (9, 10), b"bmcc");
        let Verdict::Udp(c) = classify(&pkt) else {
            panic!()
        };
        assert_eq!(c.marks.hash, packet_hash(b"bmcc"));
        let mut marks = c.marks;
        marks.ecn = Ecn::Ect1;
        rewrite(&mut pkt, &c, &marks);
        let ip = Ipv6Packet::new_checked(&pkt[..]).unwrap();
        assert_eq!(ip.traffic_class(), SchemeTag::new(4).tos(Ecn::Ect1));
    }

    #[test]
    fn remarking_keeps_other_peoples_dscp_and_unmarked_bytes() {
        // AF41 (DSCP 34), ECT(0): untagged, marked CE, keeps its class.
        let af41 = 34 << 2 | Ecn::Ect0.bits();
        let Verdict::Udp(c) = classify(&udp4([1; 4], [2; 4], (1, 2), af41, b"x")) else {
            panic!()
        };
        assert!(c.marks.tag.is_untagged());
        assert_eq!(remarked_tos(af41, &c.marks), af41, "nothing changed");
        let mut ce = c.marks;
        ce.ecn = Ecn::Ce;
        assert_eq!(remarked_tos(af41, &ce), 34 << 2 | Ecn::Ce.bits());
        // MCP requesting fairing (tag 9, DSCP 39): a router clears the bit.
        let fairing = 39 << 2 | Ecn::NotEct.bits();
        let Verdict::Udp(c) = classify(&udp4([1; 4], [2; 4], (1, 2), fairing, b"x")) else {
            panic!()
        };
        assert!(c.marks.tag.fairing);
        let mut unfair = c.marks;
        unfair.tag.fairing = false;
        assert_eq!(remarked_tos(fairing, &unfair), 35 << 2);
    }

    /// Ones'-complement sum over the UDP pseudo-header (RFC 768 / RFC 8200
    /// §8.1) and the datagram: 0xffff when the checksum is right.
    fn udp_sum(packet: &[u8]) -> u16 {
        let (pseudo, datagram) = match packet[0] >> 4 {
            4 => {
                let mut p = packet[12..20].to_vec(); // addresses
                p.extend_from_slice(&[0, PROTO_UDP]);
                p.extend_from_slice(&packet[24..26]); // UDP length
                (p, &packet[20..])
            }
            _ => {
                let mut p = packet[8..40].to_vec();
                p.extend_from_slice(&[0, 0]);
                p.extend_from_slice(&packet[44..46]);
                p.extend_from_slice(&[0, 0, 0, PROTO_UDP]);
                (p, &packet[40..])
            }
        };
        checksum::fold(u32::from(checksum::sum(&pseudo)) + u32::from(checksum::sum(datagram)))
    }

    fn with_checksum(mut packet: Vec<u8>, at: usize) -> Vec<u8> {
        packet[at..at + 2].fill(0);
        let sum = !udp_sum(&packet);
        packet[at..at + 2].copy_from_slice(&sum.to_be_bytes());
        assert_eq!(udp_sum(&packet), 0xffff);
        packet
    }

    #[test]
    fn corruption_keeps_the_udp_checksum_valid() {
        // A 1-RTT-like payload of 81 bytes (odd: the last word is padded).
        let payload: Vec<u8> = (0..81u8).map(|b| b.wrapping_mul(37) | 0x40).collect();
        let v4 = with_checksum(
            udp4([10, 0, 0, 1], [10, 0, 0, 2], (4000, 443), 2, &payload),
            26,
        );
        let v6 = with_checksum(udp6(2, PROTO_UDP, &[], (4000, 443), &payload), 46);
        for (original, udp) in [(v4, 20), (v6, 40)] {
            let Verdict::Udp(c) = classify(&original) else {
                panic!("not UDP")
            };
            let mut hit_positions = std::collections::BTreeSet::new();
            for pick in 0..120u64 {
                for mask in [1u8, 0x80, 0xff, 0x5a] {
                    let mut pkt = original.clone();
                    let hit = Corruption::new(pick, std::num::NonZeroU8::new(mask).unwrap());
                    assert!(corrupt_udp(&mut pkt, &c, hit));
                    assert_eq!(udp_sum(&pkt), 0xffff, "pick {pick} mask {mask:#x}");
                    let changed: Vec<usize> =
                        (0..pkt.len()).filter(|&i| pkt[i] != original[i]).collect();
                    // One byte of the UDP payload (past the 8-byte header), never
                    // beyond the first CORRUPT_SPAN, plus the checksum field.
                    let body: Vec<usize> =
                        changed.iter().copied().filter(|&i| i >= udp + 8).collect();
                    assert_eq!(body.len(), 1, "{changed:?}");
                    assert!(body[0] - udp - 8 < crate::link::CORRUPT_SPAN);
                    assert!(changed
                        .iter()
                        .all(|&i| i >= udp + 8 || i == udp + 6 || i == udp + 7));
                    hit_positions.insert(body[0] - udp - 8);
                }
            }
            assert_eq!(
                hit_positions.len(),
                crate::link::CORRUPT_SPAN,
                "every position reachable"
            );
        }
    }

    #[test]
    fn corruption_spares_what_it_must() {
        let one = Corruption::new(3, std::num::NonZeroU8::MIN);
        // IPv4 without a UDP checksum: corrupted, and the zero stays.
        let mut pkt = udp4([10, 0, 0, 1], [10, 0, 0, 2], (1, 443), 0, b"0123456789");
        let Verdict::Udp(c) = classify(&pkt) else {
            panic!("not UDP")
        };
        assert!(corrupt_udp(&mut pkt, &c, one));
        assert_eq!(&pkt[26..28], &[0, 0]);
        assert_eq!(&pkt[28..], b"0122456789");
        // A Version Negotiation packet (long header, version 0) and an empty datagram.
        let mut vn = udp4(
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            (443, 1),
            0,
            &[0x80, 0, 0, 0, 0, 8, 1],
        );
        let before = vn.clone();
        assert!(!corrupt_udp(&mut vn, &c, one));
        assert_eq!(vn, before);
        let mut empty = udp4([10, 0, 0, 1], [10, 0, 0, 2], (443, 1), 0, b"");
        assert!(!corrupt_udp(&mut empty, &c, one));
    }

    #[test]
    fn classifies_tcp_for_classic_marking() {
        // A UDP packet turned TCP: its 8-byte header and 12 bytes make a
        // 20-byte TCP header whose ports are the UDP ports.
        let mut pkt = udp4([10, 0, 0, 1], [10, 0, 0, 2], (4000, 80), 0b10, &[7; 12]);
        pkt[9] = PROTO_TCP;
        let Verdict::Tcp(c) = classify(&pkt) else {
            panic!("not classified: {:?}", classify(&pkt));
        };
        assert_eq!(c.marks.ecn, Ecn::Ect0);
        assert_eq!(c.marks.tag, SchemeTag::UNTAGGED);
        assert_eq!(c.marks.hash, packet_hash(&pkt[20..]));
        let src: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        assert_eq!(c.marks.flow, flow_key(src, "10.0.0.2:80".parse().unwrap()));
        let mut ce = c.marks;
        ce.ecn = Ecn::Ce;
        rewrite(&mut pkt, &c, &ce);
        assert_eq!(Ipv4Packet::new_checked(&pkt[..]).unwrap().tos(), 0b11);
        // Shorter than a TCP header.
        let mut short = udp4([1, 1, 1, 1], [2, 2, 2, 2], (1, 2), 1, b"abc");
        short[9] = PROTO_TCP;
        assert_eq!(classify(&short), Verdict::Pass(PassReason::Malformed));
    }

    #[test]
    fn passes_fragments_non_udp_and_garbage() {
        let mut frag = udp4([1, 1, 1, 1], [2, 2, 2, 2], (1, 2), 1, b"abc");
        frag[6] = 0x20;
        let mut esp = udp4([1, 1, 1, 1], [2, 2, 2, 2], (1, 2), 1, b"abc");
        esp[9] = 50;
        let frag6 = udp6(1, 44, &[PROTO_UDP, 0, 0, 1, 0, 0, 0, 1], (1, 2), b"z");
        let icmp6 = udp6(1, 58, &[], (1, 2), b"z");
        let mut counters = PassCounters::default();
        for (pkt, want) in [
            (&frag[..], PassReason::Fragment),
            (&esp[..], PassReason::NotUdp),
            (&frag6[..], PassReason::Fragment),
            (&icmp6[..], PassReason::NotUdp),
            (&[][..], PassReason::Malformed),
            (&[0x45, 0][..], PassReason::Malformed),
            (&[0x15; 60][..], PassReason::Malformed),
        ] {
            assert_eq!(classify(pkt), Verdict::Pass(want), "{pkt:?}");
            counters.count(want);
        }
        assert_eq!(
            counters,
            PassCounters {
                fragment: 2,
                not_udp: 2,
                malformed: 3
            }
        );
    }

    proptest! {
        #[test]
        fn classify_and_rewrite_never_panic(
            mut data in proptest::collection::vec(any::<u8>(), 0..120),
            version in prop_oneof![Just(0x45u8), Just(0x60u8), any::<u8>()],
            ecn in 0u8..4,
        ) {
            if let Some(first) = data.first_mut() {
                *first = version;
            }
            if let Verdict::Udp(c) | Verdict::Tcp(c) = classify(&data) {
                let mut marks = c.marks;
                marks.ecn = Ecn::from_bits(ecn);
                rewrite(&mut data, &c, &marks);
                let (Verdict::Udp(again) | Verdict::Tcp(again)) = classify(&data) else {
                    panic!("a rewrite must keep the packet classifiable");
                };
                prop_assert_eq!(again.marks, marks);
            }
        }
    }
}

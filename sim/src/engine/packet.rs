//! A packet on the wire: data, ACK or report, with the marks routers read and
//! rewrite and, on ACKs, what the receiver echoes.

use ecnq::router::bottleneck::Queued;
use ecnq::signal::{Feedback, PacketMarks};
use ecnq::Ecn;

use super::clock::Nanos;
use crate::explicit::Header;

/// Size of an ACK packet in bytes (a 40-byte TCP/IP header, as in ns-2).
pub const ACK_LEN: u32 = 40;

/// What a packet carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketKind {
    /// Data, on the flow's path.
    Data,
    /// An acknowledgement, on the flow's ACK path.
    Ack,
    /// A session feedback report, on the flow's ACK path.
    Report,
    /// A fake newcomer's packet, on its flood's path: delivered, never
    /// acknowledged.
    Fake,
    /// The client's handshake packet (its Initial, or its Finished with the
    /// request), on the flow's ACK path.
    ClientHandshake,
    /// A datagram of the server's handshake flight, on the flow's path.
    ServerHandshake,
}

/// A receiver's cumulative counts of the data packets it got, as a QUIC
/// receiver keeps them for its ACK-ECN frames (RFC 9000 §13.4.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EcnTally {
    /// Data packets received.
    pub received: u64,
    /// Of them, ECT(0).
    pub ect0: u64,
    /// Of them, CE.
    pub ce: u64,
}

impl EcnTally {
    /// Counts one data packet that arrived with `ecn`.
    pub fn count(&mut self, ecn: Ecn) {
        self.received += 1;
        self.ect0 += u64::from(ecn == Ecn::Ect0);
        self.ce += u64::from(ecn == Ecn::Ce);
    }
}

/// A packet on the wire.
#[derive(Clone, Copy, Debug)]
pub struct Packet {
    /// Unique id in injection order.
    pub id: u64,
    /// Flow index.
    pub flow: u32,
    /// Index of the link it is on within its path.
    pub hop: u16,
    /// Data, ACK or report (ACKs and reports travel the ACK path).
    pub kind: PacketKind,
    /// Size in bytes.
    pub len: u32,
    /// ECN, DSCP tag, hash.
    pub marks: PacketMarks,
    /// Data: packet number. ACK: the packet number acknowledged. Report:
    /// the report's number.
    pub pn: u64,
    /// Data: send time. ACK: the acknowledged packet's send time.
    pub sent: Nanos,
    /// ACK: the receiver's estimate.
    pub feedback: Feedback,
    /// ACK: the acknowledged packet arrived with CE.
    pub ce: bool,
    /// ACK: how many of the acknowledged packets were presence probes no
    /// ecnq router raised.
    pub unraised: u8,
    /// ACK: an earlier packet number this (delayed) ACK also acknowledges.
    pub also: Option<u64>,
    /// ACK: the receiver's cumulative ECN counts.
    pub counts: EcnTally,
    /// RCP's or XCP's header (data: as the routers left it; ACK: echoed).
    pub explicit: Header,
}

impl Packet {
    /// Packet `pn` of flow `f`, `len` bytes of `kind`, sent at `sent` with
    /// `marks`, and none of an ACK's fields: a handshake packet, or a fake
    /// newcomer's.
    pub(super) fn bare(
        f: usize,
        kind: PacketKind,
        len: u32,
        marks: PacketMarks,
        pn: u64,
        sent: Nanos,
    ) -> Packet {
        Packet {
            id: 0,
            flow: f as u32,
            hop: 0,
            kind,
            len,
            marks,
            pn,
            sent,
            feedback: Feedback::default(),
            ce: false,
            unraised: 0,
            also: None,
            counts: EcnTally::default(),
            explicit: Header::None,
        }
    }
}

impl Queued for Packet {
    fn wire_len(&self) -> u32 {
        self.len
    }
    fn marks(&self) -> Option<PacketMarks> {
        Some(self.marks)
    }
    fn set_marks(&mut self, marks: &PacketMarks) {
        self.marks = *marks;
    }
}

//! erc's start code as a server reads it (docs/design.md §2, Arrivals):
//! the flight datagrams a router cleared to Not-ECT, told by the client's
//! ACK-ECN counts of the Initial and Handshake packet-number spaces
//! (RFC 9000 §13.4.1: Not-ECT is not counted, each packet of a coalesced
//! datagram is).
//!
//! In a space, the packets acknowledged less those counted ECT(0), ECT(1)
//! or CE came Not-ECT. The router clears a prefix of the flight, whole
//! datagrams, and quinn puts at most one packet of each space in a
//! datagram: its first holds the Initial and the first Handshake packet,
//! the others Handshake packets. So the cleared datagrams are the most
//! cleared packets of one space, and the flight is the most packets
//! acknowledged in one space (`a_coalesced_flight_counts_each_datagram_once`);
//! a flight sent again adds its packets, which carry no code
//! ([`first_window_pace`] reads that). A flight of single
//! packets a router cleared in both spaces reads low, never high.

#[cfg(doc)]
use crate::schemes::erc::first_window_pace;
use crate::wire::ack::AckFrame;

/// A packet-number space of the handshake (RFC 9000 §12.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandshakeSpace {
    /// Initial packets.
    Initial,
    /// Handshake packets.
    Handshake,
}

/// What the client's counts of one space said, from the frame that
/// acknowledged the most.
#[derive(Clone, Copy, Debug, Default)]
struct SpaceCounts {
    acked: u64,
    counted: u64,
}

/// The handshake's ACK-ECN counts, until the handshake completes.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct StartCode {
    /// Per [`HandshakeSpace`]; `None` until a frame with counts came.
    spaces: [Option<SpaceCounts>; 2],
}

impl StartCode {
    /// A handshake ACK frame from the peer; one without ECN counts tells
    /// nothing (a client that does not count leaves the start alone).
    pub fn on_ack(&mut self, space: HandshakeSpace, frame: &AckFrame<'_>) {
        let Some(ecn) = frame.ecn() else {
            return;
        };
        let acked = frame.acknowledged();
        let counted = ecn.ect0.saturating_add(ecn.ect1).saturating_add(ecn.ce);
        let slot = &mut self.spaces[space as usize];
        if slot.is_none_or(|s| acked >= s.acked) {
            *slot = Some(SpaceCounts { acked, counted });
        }
    }

    /// The code read: (cleared datagrams, flight datagrams), or `None`
    /// where no counts came.
    pub fn read(&self) -> Option<(u8, u8)> {
        let spaces = self.spaces.iter().flatten();
        let cleared = spaces.clone().map(|s| s.acked.saturating_sub(s.counted));
        let cleared = cleared.max()?;
        let flight = spaces.map(|s| s.acked).max()?;
        let most = u64::from(u8::MAX);
        Some((cleared.min(most) as u8, flight.min(most) as u8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schemes::erc::first_window_pace;
    use crate::wire::ack::{ack_frames, AckRepr, EcnCounts};

    /// An ACK frame acknowledging packets 0 to `acked` − 1, with `ect0`
    /// of them counted ECT(0), or no counts.
    fn frame(acked: u64, ect0: Option<u64>) -> Vec<u8> {
        let repr = AckRepr {
            largest: acked - 1,
            delay: 0,
            ranges: vec![0..=acked - 1],
            ecn: ect0.map(|ect0| EcnCounts {
                ect0,
                ect1: 0,
                ce: 0,
            }),
        };
        let mut bytes = Vec::new();
        repr.emit(&mut bytes);
        bytes
    }

    fn read(acks: &[(HandshakeSpace, u64, Option<u64>)]) -> Option<(u8, u8)> {
        let mut code = StartCode::default();
        for &(space, acked, ect0) in acks {
            let bytes = frame(acked, ect0);
            let frame = ack_frames(&bytes).next().unwrap().unwrap();
            code.on_ack(space, &frame);
        }
        code.read()
    }

    use HandshakeSpace::{Handshake, Initial};

    /// quinn's flight: an Initial and a Handshake packet coalesced in the
    /// first datagram, Handshake packets in the other two. A router that
    /// clears the first two datagrams leaves one Initial and two Handshake
    /// packets Not-ECT: two datagrams, not three.
    #[test]
    fn a_coalesced_flight_counts_each_datagram_once() {
        for cleared in 0..=2 {
            let acks = [
                (Initial, 1, Some(1 - cleared.min(1))),
                (Handshake, 3, Some(3 - cleared)),
            ];
            assert_eq!(read(&acks), Some((cleared as u8, 3)), "{cleared}");
        }
    }

    /// The last frame of a space is the one that acknowledged the most: an
    /// early frame of the Handshake space does not shrink the flight.
    #[test]
    fn the_frame_that_acknowledged_most_counts() {
        let acks = [
            (Handshake, 3, Some(2)),
            (Handshake, 1, Some(1)),
            (Initial, 1, Some(0)),
        ];
        assert_eq!(read(&acks), Some((1, 3)));
    }

    /// A client that sends no counts, or a path with no erc router, leaves
    /// the start as it is; a path that bleaches ECN clears the whole flight,
    /// which asks nothing either.
    #[test]
    fn no_counts_no_router_or_a_bleaching_path_ask_nothing() {
        assert_eq!(read(&[(Initial, 1, None), (Handshake, 3, None)]), None);
        assert_eq!(read(&[]), None);
        let no_router = read(&[(Initial, 1, Some(1)), (Handshake, 3, Some(3))]);
        assert_eq!(no_router, Some((0, 3)));
        let bleached = read(&[(Initial, 1, Some(0)), (Handshake, 3, Some(0))]);
        assert_eq!(bleached, Some((3, 3)));
        for (cleared, flight) in [no_router, bleached].into_iter().flatten() {
            assert_eq!(first_window_pace(cleared, flight, 1e6), None);
        }
    }
}

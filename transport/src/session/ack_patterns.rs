//! The counts mode under the ACK patterns real peers send: frames of one
//! packet to a thousand, lost, reordered, with and without counts. Each
//! connection drives a real [`Session`] (its count reader, its verdict on
//! the peer's counts, erc's law) as the QUIC glue does: every packet sent,
//! every ACK frame read, then every packet it acknowledges.

use std::ops::RangeInclusive;
use std::time::Duration;

use super::ack_counts::frame_bytes;
use super::{PeerEvent, PeerMode, Session};
use crate::schemes::erc::{digit, ecn_of, index_of, position};
use crate::schemes::registry::Scheme;
use crate::signal::{LawConfig, RttSample};
use crate::wire::ack::{ack_frames, EcnCounts};
use crate::wire::ecn::{Ecn, SchemeTag};
use crate::wire::hash::fmix32;

const MS: Duration = Duration::from_millis(1);

/// Deterministic draws: the packet hash's mixer over a counter.
struct Draws(u32);

impl Draws {
    fn below(&mut self, max: u64) -> u64 {
        self.0 = self.0.wrapping_add(1);
        u64::from(fmix32(self.0)) % max
    }
}

/// A peer that runs no ecnq: its cumulative counts of the packets it
/// received, sent in its ACK frames once one was ECN-marked (quinn's
/// rule), unless `counts` is off.
struct Peer {
    counts: EcnCounts,
    largest: Option<u64>,
}

impl Peer {
    fn receive(&mut self, number: u64, ecn: Ecn) {
        match ecn {
            Ecn::NotEct => {}
            Ecn::Ect0 => self.counts.ect0 += 1,
            Ecn::Ect1 => self.counts.ect1 += 1,
            Ecn::Ce => self.counts.ce += 1,
        }
        self.largest = Some(number);
    }

    /// The frame acknowledging everything received, with counts if `counts`.
    fn frame(&self, counts: bool) -> Vec<u8> {
        let largest = self.largest.expect("a packet received");
        let marked = self.counts != EcnCounts::default();
        let ranges: [RangeInclusive<u64>; 1] = [0..=largest];
        frame_bytes(&ranges, (counts && marked).then_some(self.counts))
    }
}

/// One connection: `packets` erc packets marked with a router's index (one
/// in 50 CE), acknowledged by frames of 1 to `max_frame` packets, a tenth
/// of them lost and a tenth swapped with the next; the index changes once.
/// `counts(frame)` says whether frame number `frame` carries counts.
/// Returns the sender's modes.
fn connection(
    seed: u32,
    packets: u64,
    max_frame: u64,
    counts: impl Fn(u64) -> bool,
) -> Vec<PeerMode> {
    let mut draws = Draws(seed.wrapping_mul(0x9e37_79b9));
    let mut session = Session::new(Some(Scheme::Erc), LawConfig::with_mss(1200), 28);
    let untagged = SchemeTag::UNTAGGED.tos(Ecn::Ect0);
    session.on_receive(Duration::ZERO, untagged, std::iter::once(0));
    let rate = |d: &mut Draws| 1e5 * (1 + d.below(1000)) as f64;
    let (first, second) = (index_of(rate(&mut draws)), index_of(rate(&mut draws)));
    let change = draws.below(packets);
    let mut peer = Peer {
        counts: EcnCounts::default(),
        largest: None,
    };
    let rtt = RttSample::uniform(40 * MS);
    let mut modes = vec![session.mode()];
    let (mut sent, mut acked, mut frames) = (0, 0, 0);
    let mut held: Option<Vec<u8>> = None;
    while sent < packets {
        let frame_size = 1 + draws.below(max_frame);
        for _ in 0..frame_size.min(packets - sent) {
            let now = MS * sent as u32;
            let hash = fmix32(seed ^ sent as u32);
            session.on_sent(now, 1200);
            session.on_packet_sent(now, sent, hash);
            let index = if sent < change { first } else { second };
            let ecn = match draws.below(50) {
                0 => Ecn::Ce,
                _ => ecn_of(digit(index, position(hash))),
            };
            peer.receive(sent, ecn);
            sent += 1;
        }
        let frame = peer.frame(counts(frames));
        frames += 1;
        let now = MS * sent as u32;
        let mut deliver = |bytes: &[u8], session: &mut Session| {
            let frame = ack_frames(bytes).next().expect("a frame").expect("valid");
            session.on_peer(now, PeerEvent::AckFrame(frame));
            let bytes = 1200;
            while acked <= frame.largest() {
                let app_limited = false;
                let event = PeerEvent::Acked {
                    bytes,
                    app_limited,
                    rtt,
                };
                session.on_peer(now, event);
                acked += 1;
            }
        };
        match draws.below(10) {
            0 => {}
            1 if held.is_none() => held = Some(frame),
            _ => {
                deliver(&frame, &mut session);
                if let Some(late) = held.take() {
                    deliver(&late, &mut session);
                }
            }
        }
        if modes.last() != Some(&session.mode()) {
            modes.push(session.mode());
        }
    }
    modes
}

/// No valid count stream falls back to Cubic, whatever the size of its
/// frames (a loaded client once sent a frame of 144 packets, and the
/// verdict per packet acknowledged fell back inside it).
#[test]
fn no_valid_count_stream_falls_back_with_frames_of_up_to_a_thousand_packets() {
    let fallbacks: Vec<(u32, Vec<PeerMode>)> = (0..1000)
        .map(|seed| (seed, connection(seed, 3000, 1000, |_| true)))
        .filter(|(_, modes)| modes != &[PeerMode::EcnqAckCounts])
        .collect();
    assert!(
        fallbacks.is_empty(),
        "{} fell back: {:?}",
        fallbacks.len(),
        &fallbacks[..1]
    );
}

/// A peer that stops sending counts for a while falls back, and its
/// counts coming back bring the counts mode back; one that never sends
/// any falls back once.
#[test]
fn counts_that_stop_and_restart_fall_back_and_come_back() {
    let pause = |frame| !(10..20).contains(&frame);
    let modes = connection(7, 6000, 100, pause);
    use PeerMode::*;
    assert_eq!(modes, [EcnqAckCounts, ClassicNoEcnCounts, EcnqAckCounts]);
    let modes = connection(7, 3000, 100, |_| false);
    assert_eq!(modes, [EcnqAckCounts, ClassicNoEcnCounts]);
}

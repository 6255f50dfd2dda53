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
    session.on_receive(Duration::ZERO, untagged, std::iter::once(Some(0)));
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

mod pair {
    //! The same patterns through the simulated pair: a bottleneck whose
    //! router writes erc's marks, and a vanilla peer's ACK frames.

    use std::time::Duration;

    use crate::schemes::registry::Scheme;
    use crate::session::pair::{Pair, VanillaPeer, LINK_RATE};
    use crate::session::PeerMode;

    const SECOND: Duration = Duration::from_secs(1);
    const MS: Duration = Duration::from_millis(1);

    /// An erc sender behind a vanilla peer that acknowledges every
    /// `every` packets with its counts.
    fn behind(every: u64) -> Pair {
        let mut pair = Pair::new(Scheme::Erc);
        pair.receiver = None;
        pair.vanilla = Some(VanillaPeer::new(every, true));
        pair
    }

    /// Bytes per second acknowledged over the next `span`.
    fn goodput(pair: &mut Pair, span: Duration) -> f64 {
        let before = pair.acked_bytes;
        pair.run_until(pair.now + span);
        (pair.acked_bytes - before) as f64 / span.as_secs_f64()
    }

    fn modes(pair: &Pair) -> Vec<PeerMode> {
        pair.mode_changes().iter().map(|c| c.1).collect()
    }

    /// An ACK every packet, every two, every ten (a fifth of the frames
    /// lost, the rest reordered by up to 5 ms), or every 25 ms (the
    /// delay timer alone, as a receiver acknowledging by time): the
    /// counts mode holds from the first packet to the last, and the link
    /// stays mostly full.
    #[test]
    fn every_ack_pattern_keeps_the_counts_mode_and_the_link() {
        for (every, loss) in [(1, 0.0), (2, 0.0), (10, 0.2), (1_000, 0.0)] {
            let mut pair = behind(every);
            let leg = pair.ack_frame_leg();
            leg.loss = loss;
            leg.jitter = 5 * MS;
            pair.run_until(3 * SECOND);
            let full = goodput(&mut pair, 3 * SECOND);
            assert_eq!(modes(&pair), [PeerMode::EcnqAckCounts], "every {every}");
            let link = LINK_RATE as f64 / 8.0;
            assert!(full > 0.7 * link, "every {every}: {full} B/s");
        }
    }

    /// A peer that stops sending counts for two seconds gets Cubic, and
    /// erc back when its counts return.
    #[test]
    fn a_peer_that_stops_and_restarts_its_counts_gets_erc_back() {
        let mut pair = behind(2);
        pair.run_until(2 * SECOND);
        pair.vanilla.as_mut().expect("a vanilla peer").ecn_counts = false;
        pair.run_until(4 * SECOND);
        pair.vanilla.as_mut().expect("a vanilla peer").ecn_counts = true;
        pair.run_until(6 * SECOND);
        use PeerMode::*;
        assert_eq!(
            modes(&pair),
            [EcnqAckCounts, ClassicNoEcnCounts, EcnqAckCounts]
        );
        let fell = pair.entered(ClassicNoEcnCounts, SECOND).expect("fell back");
        assert!(fell > 2 * SECOND && fell < 2500 * MS, "{fell:?}");
        let back = pair.entered(EcnqAckCounts, fell).expect("came back");
        assert!(back > 4 * SECOND && back < 4200 * MS, "{back:?}");
        let stats = pair.stats();
        assert!(stats.pacing_rate.is_some(), "erc's rate again: {stats:?}");
    }

    /// A path that starts bleaching ECN mid-connection: the counts stop
    /// rising, which reads as no router, and the flow keeps the link
    /// under erc's own Cubic rather than starving.
    #[test]
    fn a_path_that_bleaches_ecn_mid_connection_does_not_starve_the_flow() {
        let mut pair = behind(2);
        pair.run_until(2 * SECOND);
        pair.bleach_ecn = true;
        pair.run_until(4 * SECOND);
        let after = goodput(&mut pair, 2 * SECOND);
        assert!(after > 0.5 * LINK_RATE as f64 / 8.0, "{after} B/s");
        let stats = pair.stats();
        assert!(stats.pacing_rate.is_none(), "no router read: {stats:?}");
    }
}

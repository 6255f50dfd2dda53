//! A sender's reading of its peer's ACK-ECN counts (RFC 9000 §13.4,
//! §19.3.2), for a scheme whose marks they carry (erc's digits are ECT(0)
//! and Not-ECT), when the peer runs no ecnq decoder (docs/design.md §3,
//! "Feedback from ACK-ECN counts").
//!
//! Each 1-RTT packet sent is kept by number with its packet hash. Each ACK
//! frame the peer sends in a 1-RTT packet is matched against them: the
//! packets it newly acknowledges, and how much its cumulative counts rose
//! since the last frame read, go to the scheme's [`CountReader`]. The
//! counts are cumulative and the packets are the sender's own, so a lost
//! ACK frame costs nothing (the next one covers its packets and its rises)
//! and ACK decimation only makes frames larger. A frame whose largest
//! acknowledged packet is not above the last one read is reordered or
//! repeated, and is skipped: its counts are older than those already read
//! (RFC 9000 §13.4.2.1 processes counts only on such frames too).

use std::collections::{BTreeMap, VecDeque};
use std::ops::RangeInclusive;
use std::time::Duration;

use crate::signal::{CountReader, Feedback};
use crate::wire::ack::{AckFrame, EcnCounts};

/// With this many of its packets newly acknowledged by ACK frames without
/// ECN counts since the last frame with counts (or since the start), the
/// peer reports none: it does not support ECN, or the path bleaches it, or
/// it stopped (RFC 9000 §13.4.2.1 fails ECN validation at the first frame
/// that newly acknowledges ECT packets without counts). Judged at the end
/// of each frame, so a frame that carries counts never counts towards it,
/// however many packets it covers
/// (`one_large_frame_with_counts_keeps_the_counts_mode`). Not at the first
/// such frame: a receiver sends counts only once it has received an
/// ECN-marked packet, and erc's digit 0 is Not-ECT. At the index with a
/// single digit 1, the chance that 128 packets all arrive Not-ECT is
/// 0.9^128, about 10^-6.
pub const NO_COUNTS_AFTER: u64 = 128;

/// At most this many packets are kept above the largest acknowledged:
/// 78 MB in flight of 1200-byte packets, more than a Gbit/s over 600 ms.
const MAX_IN_FLIGHT: usize = 1 << 16;

/// Packets sent and not acknowledged are kept until this many packets
/// below the largest acknowledged: far beyond quinn's loss detection
/// (3 packets, RFC 9002 §6.1.1), so only a packet declared lost long ago
/// is forgotten. A frame that acknowledges one then counts marks the
/// reader cannot place, which its check of marks against packets
/// ([`CountReader::on_ack`]) mostly refuses.
const KEPT_BELOW_LARGEST: u64 = 4096;

/// A packet sent, not yet acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sent {
    number: u64,
    hash: u32,
    at: Duration,
}

/// What a frame told the sender.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Reading {
    /// Nothing new: a reordered or repeated frame.
    Nothing,
    /// A frame without ECN counts. `stopped`: with it, the peer has left
    /// [`NO_COUNTS_AFTER`] packets without counts: it sends none.
    NoCounts { stopped: bool },
    /// The reader read the frame: its estimate now, and, if the peer's CE
    /// count rose, when the newest packet it acknowledges was sent (a CE
    /// mark is congestion, as a loss is).
    Read {
        feedback: Feedback,
        ce_sent: Option<Duration>,
    },
    /// The frame carries counts, but the marks they rose by cannot be
    /// placed: on packets the sender did not keep, of a codepoint the
    /// scheme never writes, or after frames without counts (whose packets'
    /// marks the rise also holds).
    Unplaced,
    /// Counts no valid peer sends, which fail ECN validation (RFC 9000
    /// §13.4.2.1): a count fell, or they count more packets than were
    /// sent in the packet number space.
    Invalid,
}

/// The sender's side of ACK-ECN count feedback (see the module docs).
#[derive(Debug)]
pub(super) struct AckCounts {
    reader: Box<dyn CountReader>,
    /// Packets above the largest acknowledged, in number order.
    in_flight: VecDeque<Sent>,
    /// Packets below the largest acknowledged that no frame acknowledged
    /// yet: lost, or their ACK ranges still to come.
    holes: BTreeMap<u64, Sent>,
    /// The largest packet number acknowledged by a frame read.
    largest: Option<u64>,
    /// The peer's counts in the last frame read; `None` after frames
    /// without counts that followed counts, until counts come again.
    counts: Option<EcnCounts>,
    /// Packets newly acknowledged by frames without counts since the last
    /// frame with counts ([`NO_COUNTS_AFTER`]).
    without_counts: u64,
    /// The number of the last packet kept.
    last_sent: Option<u64>,
    /// Frames read, and frames whose marks could not be placed.
    pub frames_read: u64,
    pub frames_skipped: u64,
}

impl AckCounts {
    pub fn new(reader: Box<dyn CountReader>) -> AckCounts {
        AckCounts {
            reader,
            in_flight: VecDeque::new(),
            holes: BTreeMap::new(),
            largest: None,
            counts: Some(EcnCounts::default()),
            without_counts: 0,
            last_sent: None,
            frames_read: 0,
            frames_skipped: 0,
        }
    }

    /// The reader's estimate.
    pub fn estimate(&self) -> Feedback {
        self.reader.estimate()
    }

    /// Packet `number`, with packet hash `hash`, was sent at `at`.
    /// Numbers rise (RFC 9000 §12.3); one that does not is ignored.
    pub fn on_sent(&mut self, number: u64, hash: u32, at: Duration) {
        if self.last_sent.is_some_and(|last| number <= last) {
            return;
        }
        self.last_sent = Some(number);
        if self.in_flight.len() == MAX_IN_FLIGHT {
            self.in_flight.pop_front();
        }
        self.in_flight.push_back(Sent { number, hash, at });
    }

    /// One ACK frame from the peer, from a 1-RTT packet.
    pub fn on_frame(&mut self, frame: &AckFrame<'_>) -> Reading {
        let largest = frame.largest();
        if self.largest.is_some_and(|l| largest <= l) {
            return Reading::Nothing;
        }
        let previous = self.largest.replace(largest);
        // The ranges, lowest first, for walking the packets in order.
        let mut ranges: Vec<RangeInclusive<u64>> = frame.ranges().collect();
        ranges.reverse();
        let acked = self.newly_acked(&ranges, largest);
        let unplaced = acked_above(&ranges, previous) - placed_above(&acked, previous);
        let Some(counts) = frame.ecn() else {
            return self.on_no_counts(acked.len() as u64 + unplaced);
        };
        self.without_counts = 0;
        let before = self.counts.replace(counts);
        let fell = before.is_some_and(|b| rises(b, counts).is_none());
        if fell || self.more_than_sent(counts) {
            return Reading::Invalid;
        }
        let Some(rises) = before.and_then(|b| rises(b, counts)) else {
            // The first counts after frames without: a new baseline.
            self.frames_skipped += 1;
            return Reading::Unplaced;
        };
        // Marks on packets the sender cannot place (not kept, or of a
        // codepoint the scheme never writes) say nothing about the digits.
        if unplaced > 0 || rises.ect1 > 0 || acked.is_empty() {
            self.frames_skipped += 1;
            return Reading::Unplaced;
        }
        let hashes: Vec<u32> = acked.iter().map(|s| s.hash).collect();
        self.reader.on_ack(&hashes, rises);
        self.frames_read += 1;
        let newest = acked.iter().map(|s| s.at).max();
        Reading::Read {
            feedback: self.reader.estimate(),
            ce_sent: newest.filter(|_| rises.ce > 0),
        }
    }

    /// Whether `counts` count more packets than the space has numbers
    /// for: packet numbers rise by one or more per packet sent, 0-RTT
    /// included, so no valid count exceeds the next one.
    fn more_than_sent(&self, counts: EcnCounts) -> bool {
        let total = counts
            .ect0
            .saturating_add(counts.ect1)
            .saturating_add(counts.ce);
        self.last_sent.is_some_and(|last| total > last + 1)
    }

    /// A frame without counts that newly acknowledges `acked` packets.
    /// Once the peer has sent counts, its next counts also hold the marks
    /// of these packets, so they cannot be read against the last ones.
    fn on_no_counts(&mut self, acked: u64) -> Reading {
        if acked > 0 && self.counts.is_some_and(|c| c != EcnCounts::default()) {
            self.counts = None;
        }
        self.without_counts += acked;
        Reading::NoCounts {
            stopped: self.without_counts >= NO_COUNTS_AFTER,
        }
    }

    /// Takes the packets the ranges (lowest first) acknowledge out of
    /// those kept; those at or below `largest` that they leave become
    /// holes, and holes too far below `largest` are forgotten.
    fn newly_acked(&mut self, ranges: &[RangeInclusive<u64>], largest: u64) -> Vec<Sent> {
        let mut acked = Vec::new();
        for range in ranges {
            let keys: Vec<u64> = self.holes.range(range.clone()).map(|(&n, _)| n).collect();
            acked.extend(keys.iter().filter_map(|n| self.holes.remove(n)));
        }
        let mut next = ranges.iter().peekable();
        while let Some(sent) = self.in_flight.front().copied() {
            if sent.number > largest {
                break;
            }
            self.in_flight.pop_front();
            while next.next_if(|r| *r.end() < sent.number).is_some() {}
            match next.peek().is_some_and(|r| r.contains(&sent.number)) {
                true => acked.push(sent),
                false => {
                    self.holes.insert(sent.number, sent);
                }
            }
        }
        let floor = largest.saturating_sub(KEPT_BELOW_LARGEST);
        self.holes = self.holes.split_off(&floor);
        acked
    }
}

/// How many of `acked` lie above `previous`.
fn placed_above(acked: &[Sent], previous: Option<u64>) -> u64 {
    acked
        .iter()
        .filter(|s| previous.is_none_or(|p| s.number > p))
        .count() as u64
}

/// How many packet numbers the ranges acknowledge above `previous`: every
/// one of them is newly acknowledged.
fn acked_above(ranges: &[RangeInclusive<u64>], previous: Option<u64>) -> u64 {
    ranges
        .iter()
        .map(|r| {
            let start = previous.map_or(*r.start(), |p| (*r.start()).max(p + 1));
            (r.end() + 1).saturating_sub(start)
        })
        .sum()
}

/// The rise of each count from `before` to `now`; `None` if one fell,
/// which cumulative counts never do (RFC 9000 §13.4.2.1).
fn rises(before: EcnCounts, now: EcnCounts) -> Option<EcnCounts> {
    Some(EcnCounts {
        ect0: now.ect0.checked_sub(before.ect0)?,
        ect1: now.ect1.checked_sub(before.ect1)?,
        ce: now.ce.checked_sub(before.ce)?,
    })
}

/// An ACK frame's bytes: `ranges` highest first, with `ecn` counts.
#[cfg(test)]
pub(super) fn frame_bytes(ranges: &[RangeInclusive<u64>], ecn: Option<EcnCounts>) -> Vec<u8> {
    let repr = crate::wire::ack::AckRepr {
        largest: *ranges[0].end(),
        delay: 0,
        ranges: ranges.to_vec(),
        ecn,
    };
    let mut bytes = Vec::new();
    repr.emit(&mut bytes);
    bytes
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::wire::ack::ack_frames;

    /// What a reader was handed: each frame's hashes and rises.
    type Calls = Arc<Mutex<Vec<(Vec<u32>, EcnCounts)>>>;

    /// A reader that records its calls.
    #[derive(Debug, Default)]
    struct Recorder(Calls);

    impl CountReader for Recorder {
        fn on_ack(&mut self, acked: &[u32], rises: EcnCounts) -> bool {
            self.0.lock().unwrap().push((acked.to_vec(), rises));
            true
        }

        fn estimate(&self) -> Feedback {
            Feedback::default()
        }
    }

    const MS: Duration = Duration::from_millis(1);

    /// Packets `numbers` sent, packet `n` with hash `100 + n`, at `n` ms.
    fn sent(numbers: impl IntoIterator<Item = u64>) -> (AckCounts, Calls) {
        let calls = Calls::default();
        let mut counts = AckCounts::new(Box::new(Recorder(calls.clone())));
        for n in numbers {
            counts.on_sent(n, 100 + n as u32, MS * n as u32);
        }
        (counts, calls)
    }

    fn ecn(ect0: u64, ect1: u64, ce: u64) -> Option<EcnCounts> {
        Some(EcnCounts { ect0, ect1, ce })
    }

    /// Reads an ACK frame of `ranges` (highest first) and counts `ecn`.
    fn ack(
        counts: &mut AckCounts,
        ranges: &[RangeInclusive<u64>],
        ecn: Option<EcnCounts>,
    ) -> Reading {
        let bytes = frame_bytes(ranges, ecn);
        let frame = ack_frames(&bytes).next().unwrap().unwrap();
        counts.on_frame(&frame)
    }

    fn hashes(numbers: impl IntoIterator<Item = u64>) -> Vec<u32> {
        numbers.into_iter().map(|n| 100 + n as u32).collect()
    }

    #[test]
    fn a_lost_ack_frame_is_covered_by_the_next() {
        let (mut counts, calls) = sent(0..10);
        ack(&mut counts, &[0..=1], ecn(1, 0, 0));
        // The frame for 2..=3 is lost; the next covers them, and its
        // counts rose by their marks too.
        ack(&mut counts, &[0..=5], ecn(3, 0, 0));
        let calls = calls.lock().unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1].0, hashes(2..=5));
        assert_eq!(calls[1].1, ecn(2, 0, 0).unwrap());
    }

    #[test]
    fn reordered_and_repeated_frames_are_skipped() {
        let (mut counts, calls) = sent(0..10);
        assert!(matches!(
            ack(&mut counts, &[0..=5], ecn(4, 0, 0)),
            Reading::Read { .. }
        ));
        assert_eq!(ack(&mut counts, &[0..=3], ecn(2, 0, 0)), Reading::Nothing);
        assert_eq!(ack(&mut counts, &[0..=5], ecn(4, 0, 0)), Reading::Nothing);
        // The next frame's rise is from the newest counts read.
        ack(&mut counts, &[0..=7], ecn(5, 0, 0));
        let calls = calls.lock().unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1], (hashes(6..=7), ecn(1, 0, 0).unwrap()));
    }

    #[test]
    fn packets_in_a_gap_are_read_when_a_later_frame_fills_it() {
        let (mut counts, calls) = sent(0..12);
        // 3 and 4 not received yet: two ranges.
        ack(&mut counts, &[5..=6, 0..=2], ecn(4, 0, 0));
        assert_eq!(calls.lock().unwrap()[0].0, hashes([0, 1, 2, 5, 6]));
        // They arrive late, with 7 and 8.
        ack(&mut counts, &[0..=8], ecn(6, 0, 1));
        let last = calls.lock().unwrap().last().cloned().unwrap();
        let mut got = last.0.clone();
        got.sort_unstable();
        assert_eq!(got, hashes([3, 4, 7, 8]));
        assert_eq!(last.1, ecn(2, 0, 1).unwrap());
    }

    #[test]
    fn a_ce_rise_names_the_newest_packet_acknowledged() {
        let (mut counts, _) = sent(0..10);
        ack(&mut counts, &[0..=3], ecn(4, 0, 0));
        let reading = ack(&mut counts, &[0..=7], ecn(6, 0, 2));
        let Reading::Read { ce_sent, .. } = reading else {
            panic!("{reading:?}");
        };
        assert_eq!(ce_sent, Some(7 * MS));
    }

    #[test]
    fn marks_that_cannot_be_placed_are_not_read() {
        // Packets 0..=2 never kept: the first frame's counts cover them.
        let (mut counts, calls) = sent(3..10);
        assert_eq!(ack(&mut counts, &[0..=5], ecn(4, 0, 0)), Reading::Unplaced);
        // ECT(1), which erc never writes.
        assert_eq!(ack(&mut counts, &[0..=6], ecn(4, 1, 0)), Reading::Unplaced);
        // From the last counts on, frames read again.
        assert!(matches!(
            ack(&mut counts, &[0..=7], ecn(5, 1, 0)),
            Reading::Read { .. }
        ));
        assert_eq!(calls.lock().unwrap().len(), 1);
        assert_eq!(counts.frames_skipped, 2);
        // A frame without counts tells no marks; the next counts are only
        // a new baseline, as they also hold that frame's packets' marks.
        let no_counts = Reading::NoCounts { stopped: false };
        assert_eq!(ack(&mut counts, &[0..=8], None), no_counts);
        assert_eq!(ack(&mut counts, &[0..=9], ecn(7, 1, 0)), Reading::Unplaced);
        assert_eq!(calls.lock().unwrap().len(), 1);
    }

    /// RFC 9000 §13.4.2.1's validation: counts never fall, and never count
    /// more packets than the space numbered.
    #[test]
    fn counts_that_fall_or_outnumber_the_packets_sent_are_invalid() {
        let (mut counts, _) = sent(0..10);
        ack(&mut counts, &[0..=5], ecn(4, 0, 0));
        assert_eq!(ack(&mut counts, &[0..=6], ecn(3, 0, 0)), Reading::Invalid);
        let (mut counts, _) = sent(0..10);
        assert_eq!(ack(&mut counts, &[0..=5], ecn(9, 0, 2)), Reading::Invalid);
    }

    /// Packets acknowledged without counts are tallied frame by frame,
    /// and a frame with counts clears the tally whatever its size.
    #[test]
    fn the_peer_sends_no_counts_only_after_many_packets_without() {
        let last = 3 * NO_COUNTS_AFTER;
        let (mut counts, _) = sent(0..=last);
        let half = NO_COUNTS_AFTER / 2;
        let stopped = |stopped| Reading::NoCounts { stopped };
        assert_eq!(ack(&mut counts, &[0..=half], None), stopped(false));
        let all = 2 * NO_COUNTS_AFTER;
        assert!(matches!(
            ack(&mut counts, &[0..=all], ecn(9, 0, 0)),
            Reading::Read { .. }
        ));
        assert_eq!(ack(&mut counts, &[0..=all + half], None), stopped(false));
        assert_eq!(ack(&mut counts, &[0..=last], None), stopped(true));
    }

    #[test]
    fn holes_far_below_the_largest_are_forgotten() {
        let (mut counts, _) = sent(0..=KEPT_BELOW_LARGEST + 10);
        // Packet 0 is never acknowledged.
        ack(&mut counts, &[1..=5], ecn(5, 0, 0));
        assert!(counts.holes.contains_key(&0));
        let largest = KEPT_BELOW_LARGEST + 10;
        ack(&mut counts, &[1..=largest], ecn(largest, 0, 0));
        assert!(counts.holes.is_empty());
        assert!(counts.in_flight.is_empty());
    }
}

//! The receiving half of a session: the decoder of the peer's scheme, the
//! codepoint counts, and when to report.

use std::time::Duration;

use super::presence::MIN_PROBES;
use super::report::{FeedbackSender, Next, Repr, SendPolicy};
use crate::signal::{Decoder, Feedback};
use crate::wire::ecn::{Ecn, SchemeTag, WireScheme};

/// Prompt reports go out after the first [`MIN_PROBES`] tagged packets, and
/// after twice, four and eight times as many.
const EARLY_REPORTS: u32 = 4;

/// The receiving direction: what the socket feeds.
#[derive(Debug)]
pub(super) struct Receiving {
    /// The decoder of the scheme the peer's packets are tagged with.
    decoder: Option<(WireScheme, Box<dyn Decoder>)>,
    /// Packets received per codepoint, indexed by [`Ecn::bits`].
    pub counts: [u64; 4],
    /// Presence probes that arrived unraised: no ecnq router saw them.
    pub unraised_probes: u64,
    /// Tagged packets received.
    tagged_packets: u64,
    sender: FeedbackSender,
    pub reports_sent: u64,
    /// The last poll found nothing to report: the next decoded packet is
    /// worth waking the reporter for.
    wake_on_packet: bool,
}

impl Receiving {
    pub fn new() -> Receiving {
        Receiving {
            decoder: None,
            counts: [0; 4],
            unraised_probes: 0,
            tagged_packets: 0,
            sender: FeedbackSender::new(SendPolicy::default()),
            reports_sent: 0,
            wake_on_packet: false,
        }
    }

    /// A datagram of `hashes.len()` packets with codepoint `ecn` and tag
    /// `tag`, the decoder reading those with a hash; returns whether the
    /// reporter should look again.
    pub fn on_datagram(
        &mut self,
        now: Duration,
        ecn: Ecn,
        tag: SchemeTag,
        hashes: impl ExactSizeIterator<Item = Option<u32>>,
    ) -> bool {
        let packets = hashes.len() as u64;
        self.counts[usize::from(ecn.bits())] += packets;
        if tag.is_untagged() {
            return false;
        }
        let wire = tag.wire();
        if wire.is_unraised_probe(tag, ecn) {
            self.unraised_probes += packets;
        }
        // A peer that probes sends nothing but probes until it has its first
        // presence verdict, raised or not: report promptly after the first
        // few tagged packets, so that it has one within about two round
        // trips even when it sends little (an upload's ACKs).
        let before = self.tagged_packets;
        self.tagged_packets += packets;
        let mut changed = (0..EARLY_REPORTS)
            .map(|i| MIN_PROBES << i)
            .any(|n| before < n && self.tagged_packets >= n);
        if changed {
            self.sender.on_news();
        }
        if self.decoder.as_ref().map(|(w, _)| *w) != Some(wire) {
            self.decoder = wire.decoder().map(|d| (wire, d));
            changed |= self.decoder.is_some();
        }
        if let Some((_, decoder)) = self.decoder.as_mut() {
            for hash in hashes.flatten() {
                changed |= decoder.on_packet(now, ecn, tag, hash);
            }
            self.sender.on_packets(packets);
        }
        changed || std::mem::take(&mut self.wake_on_packet)
    }

    /// The decoder's estimate of the peer's path.
    pub fn estimate(&self, now: Duration) -> Option<Feedback> {
        self.decoder.as_ref().map(|(_, d)| d.estimate(now))
    }

    /// Asks the report policy; with [`Next::Send`], also builds the report.
    pub fn poll_report(
        &mut self,
        now: Duration,
        srtt: Duration,
        progress: u64,
    ) -> (Next, Option<Vec<u8>>) {
        let Some((wire, decoder)) = self.decoder.as_ref() else {
            self.wake_on_packet = true;
            return (Next::Idle, None);
        };
        let (wire, feedback) = (*wire, decoder.estimate(now));
        let next = self.sender.poll(now, feedback, srtt, progress);
        if next != Next::Send {
            self.wake_on_packet |= next == Next::Idle;
            return (next, None);
        }
        let sequence = self.sender.on_sent(now, feedback, progress);
        self.reports_sent += 1;
        let repr = Repr {
            scheme: wire,
            sequence,
            feedback,
            counts: self.counts,
            unraised_probes: self.unraised_probes,
        };
        (Next::Send, Some(repr.to_bytes()))
    }
}

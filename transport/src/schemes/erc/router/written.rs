//! The index a router writes into one flow's packets.

use crate::schemes::erc::{rate_of, Digits};

/// The index a router writes into one flow's packets: its own, at once,
/// but for a flow that sends under [`LAGGING`] of the rate it was told (and
/// of the new one, where that is slower). Such a flow has not read the
/// last index yet, or is limited elsewhere: it is told no other until the
/// last has passed at every position of the chain, so that its receiver
/// reads it whole. Where the router's share moved every interval (a dual
/// queue's share beside web transfers that come and go), every move mixed
/// indices into the chain of a flow that sent a packet or two per interval:
/// its receiver never read a whole one again and kept its last, slow,
/// reading, far under what the router advertised (`coexist-short-flows`;
/// test `a_slow_flow_reads_a_share_that_moves_every_interval`).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct WrittenIndex {
    index: u16,
    /// The positions passed since it was last changed.
    carried: Digits,
}

impl WrittenIndex {
    /// The index to write at `position` into the packet of a flow that
    /// arrives at `rate`, where the router's own is `wanted`. A young flow
    /// hears a slower one at once: its rate is not measured yet.
    pub(super) fn write(&mut self, wanted: u16, position: u32, rate: f64, young: bool) -> u16 {
        let lagging = |index: u16| rate_of(index).is_some_and(|told| rate < LAGGING * told);
        let change = || {
            if wanted > self.index {
                young || !lagging(wanted)
            } else {
                !lagging(self.index)
            }
        };
        if wanted != self.index && (self.carried.complete() || change()) {
            *self = WrittenIndex {
                index: wanted,
                carried: Digits::default(),
            };
        }
        self.carried.set(position, false);
        self.index
    }
}

/// A flow sending under this fraction of the rate written into its packets
/// has not read it yet, or is limited elsewhere (ecnq's own rule). At a
/// half, `bmcc-fig11-13` (a slow link, flows each way) lost utilization; a
/// quarter keeps it, and keeps the long flows of `adpm-afct` and
/// `coexist-short-flows` at their rate.
const LAGGING: f64 = 0.25;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::testing::*;
    use crate::schemes::erc::{digit, ecn_of, position, rate_of, ErcDecoder};
    use crate::schemes::erc::{ErcConfig, ErcMarker};
    use crate::signal::flow_table::FlowTableConfig;
    use crate::signal::{Decoder, Marker};

    #[test]
    fn a_flow_at_its_share_hears_a_lower_one_at_once() {
        let mut router = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        let from = ErcConfig::default().young + MS * 1_000;
        drive(&mut router, 1e6, &[2e6], Duration::ZERO, from);
        // The share doubles for one packet, then halves: the next packets
        // carry the slower index's digits, though the faster one's chain
        // was not whole.
        let mut now = from + MS * 20;
        router.mark(now, &link(2e6, 0), &mut packet(1, 0));
        for hash in 1..4u32 {
            now += MS * 20;
            let mut pkt = packet(1, hash);
            router.mark(now, &link(0.5e6, 0), &mut pkt);
            assert!(rate_of(router.index()).is_some_and(|rate| rate < 0.6e6));
            assert_eq!(pkt.ecn, ecn_of(digit(router.index(), position(hash))));
        }
    }

    #[test]
    fn a_slow_flow_reads_a_share_that_moves_every_interval() {
        // One flow of 20 packets a second. Its link gives it 50 kbyte/s
        // for 5 s, then a share that moves between 1 and 4 Mbyte/s from
        // one packet to the next, as a dual queue's share does beside web
        // transfers that come and go.
        let mut router = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        let mut decoder = ErcDecoder::default();
        let mut hash = 0u32;
        let mut slow = 0;
        for i in 0..400u32 {
            hash = hash.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let capacity = match i {
                0..100 => 50e3,
                _ => 1e6 * f64::from(1 + (hash >> 16) % 4),
            };
            let mut pkt = packet(1, hash);
            let now = MS * 50 * i;
            router.mark(now, &link(capacity, 0), &mut pkt);
            decoder.on_packet(now, pkt.ecn, pkt.tag, pkt.hash);
            if i == 99 {
                slow = decoder.index();
            }
        }
        let rate = |index| rate_of(index).unwrap_or(0.0);
        assert!(rate(slow) < 100e3, "{}", rate(slow));
        // Without whole chains it kept its slow reading.
        assert!(rate(decoder.index()) > 0.9e6, "{}", rate(decoder.index()));
    }
}

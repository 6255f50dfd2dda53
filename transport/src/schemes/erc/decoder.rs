//! The receiver's decoder ([`ErcDecoder`]): reads the index from the
//! digits of the packets that arrive, cautious while a chain is partial.

use std::time::Duration;

use super::{digit_of, position, Digits, PARTIAL};
use crate::signal::{Decoder, Feedback};
use crate::wire::ecn::{Ecn, SchemeTag};
/// The receiver's reading of the index (see the [scheme's docs](crate::schemes::erc)).
#[derive(Clone, Debug, Default)]
pub struct ErcDecoder {
    digits: Digits,
    /// Positions seen since the digits last stopped spelling one reading.
    fresh: Digits,
    /// The last index the digits spelled whole; 0 before the first.
    complete: u16,
}

impl ErcDecoder {
    /// The level the decoder reports: its index once every position has
    /// been seen, before that a bound ([`PARTIAL`]) if a router writes the
    /// chain, else 0.
    pub fn level(&self) -> u16 {
        if self.digits.complete() {
            self.index()
        } else if self.digits.mixed() {
            PARTIAL + self.digits.largest_index()
        } else {
            0
        }
    }

    /// The index the decoder reports: none (0) until every position has
    /// been seen once, since a partial chain spells any index at all; while
    /// digits seen since a change are missing, the slower of the last whole
    /// reading and what the digits spell.
    pub fn index(&self) -> u16 {
        if !self.digits.complete() || self.fresh.complete() {
            self.complete
        } else {
            self.complete.max(self.digits.index())
        }
    }
}

impl Decoder for ErcDecoder {
    fn on_packet(&mut self, _now: Duration, ecn: Ecn, _tag: SchemeTag, hash: u32) -> bool {
        let Some(digit) = digit_of(ecn) else {
            return false;
        };
        let level = self.level();
        let position = position(hash);
        let whole = self.fresh.complete();
        if self.digits.set(position, digit) {
            let spelled = self.digits.index();
            // From a whole reading, one changed digit that spells a
            // neighbouring index is that index: Gray neighbours differ in
            // one digit. Anything else waits for every position again.
            if !(whole && spelled.abs_diff(self.complete) == 1) {
                self.fresh = Digits::default();
            }
        }
        self.fresh.set(position, digit);
        if self.fresh.complete() {
            self.complete = self.digits.index();
        }
        self.level() != level
    }

    fn estimate(&self, _now: Duration) -> Feedback {
        Feedback {
            level: self.level(),
            ..Feedback::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schemes::erc::{digit, ecn_of, DIGITS, WIRE};

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_chain_of_unmarked_packets_reads_as_no_router() {
        let mut d = ErcDecoder::default();
        for p in 0..40 {
            d.on_packet(MS, Ecn::Ect0, SchemeTag::new(WIRE.id()), p);
            assert_eq!(d.level(), 0, "after {p} packets");
        }
    }

    /// A hash for each chain position.
    fn at(position: u32) -> u32 {
        position
    }

    fn send_chain(decoder: &mut ErcDecoder, index: u16, positions: impl Iterator<Item = u32>) {
        for p in positions {
            decoder.on_packet(
                MS,
                ecn_of(digit(index, p)),
                SchemeTag::new(WIRE.id()),
                at(p),
            );
        }
    }

    #[test]
    fn the_decoder_reads_a_whole_chain_and_is_cautious_in_between() {
        let mut d = ErcDecoder::default();
        assert_eq!(d.estimate(MS).level, 0, "no router yet");
        send_chain(&mut d, 400, 0..DIGITS - 1);
        assert_eq!(d.index(), 0, "a partial chain is no reading");
        // ... but a bound: index 400 or 401, whichever the last digit makes.
        let bound = d.estimate(MS).level - PARTIAL;
        assert!((400..=401).contains(&bound), "{bound}");
        send_chain(&mut d, 400, DIGITS - 1..DIGITS);
        assert_eq!(d.index(), 400);
        // A smaller rate (larger index) is heard from the first changed digit on.
        send_chain(&mut d, 401, 0..DIGITS);
        assert_eq!(d.index(), 401);
        // A much larger rate: nothing above the last whole reading is
        // reported until every position was seen again.
        send_chain(&mut d, 100, 0..5);
        assert!(d.index() >= 401, "{}", d.index());
        // A stream of one-step changes is followed step by step, never
        // ratcheting down the rate.
        let mut steady = ErcDecoder::default();
        send_chain(&mut steady, 600, 0..DIGITS);
        for (i, index) in [601, 600, 601, 602, 601, 600, 599].into_iter().enumerate() {
            send_chain(
                &mut steady,
                index,
                (0..DIGITS).map(|p| (p + i as u32 * 3) % DIGITS).take(4),
            );
            send_chain(&mut steady, index, 0..DIGITS);
            assert_eq!(steady.index(), index);
        }
        // Complete again once every position has been seen since the last
        // changed digit.
        send_chain(&mut d, 100, 5..DIGITS);
        send_chain(&mut d, 100, 0..DIGITS);
        assert_eq!(d.index(), 100);
        // CE carries no digit.
        assert!(!d.on_packet(MS, Ecn::Ce, SchemeTag::new(WIRE.id()), 3));
        assert_eq!(d.index(), 100);
    }
}

//! Impairments drawn per packet: a small seedable generator, the loss and
//! corruption patterns it drives, and what a corruption does to a payload.

use std::num::NonZeroU8;

use super::spec::Pattern;

/// How many leading bytes of a UDP payload a corruption may hit: the QUIC
/// header and the first bytes after it, as in the quic-interop-runner's
/// `corrupt-rate` scenario (it picks one of the first 51 bytes).
pub const CORRUPT_SPAN: usize = 51;

/// One corruption: which byte changes, and to what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corruption {
    pick: u64,
    /// The byte always changes: XOR with a uniform non-zero mask makes it a
    /// uniformly random other value, as the runner's model draws it.
    mask: NonZeroU8,
}

impl Corruption {
    /// A corruption that hits byte `pick mod span` and XORs it with `mask`.
    pub fn new(pick: u64, mask: NonZeroU8) -> Corruption {
        Corruption { pick, mask }
    }

    /// A random corruption: any byte of the span, any other value.
    pub(crate) fn draw(rng: &mut Rng) -> Corruption {
        let pick = rng.next_u64();
        let mask = NonZeroU8::MIN.saturating_add((rng.next_u64() % 255) as u8);
        Corruption::new(pick, mask)
    }

    /// Changes one of the first [`CORRUPT_SPAN`] bytes of a UDP payload and
    /// returns its index and former value. An empty payload and a QUIC Version Negotiation
    /// packet (which the runner spares, since a corrupted version field
    /// legitimately elicits one) are left alone.
    pub fn apply(&self, payload: &mut [u8]) -> Option<(usize, u8)> {
        let version_negotiation =
            payload.len() >= 5 && payload[0] & 0x80 != 0 && payload[1..5] == [0; 4];
        if payload.is_empty() || version_negotiation {
            return None;
        }
        let i = (self.pick % payload.len().min(CORRUPT_SPAN) as u64) as usize;
        let old = payload[i];
        payload[i] ^= self.mask.get();
        Some((i, old))
    }
}

/// SplitMix64: a small, seedable generator, enough for loss and jitter.
#[derive(Clone, Debug)]
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p` (never draws for p = 0).
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }
}

/// Draws which packets a [`Pattern`] strikes.
#[derive(Clone, Debug)]
pub(crate) struct Strikes {
    pattern: Pattern,
    /// Packets struck in a row so far.
    run: u32,
    /// Gilbert-Elliott: in the bad state.
    bad: bool,
}

impl Strikes {
    pub(crate) fn new(pattern: Pattern) -> Strikes {
        Strikes {
            pattern,
            run: 0,
            bad: false,
        }
    }

    /// Whether the next packet is struck.
    pub(crate) fn next(&mut self, rng: &mut Rng) -> bool {
        let struck = match self.pattern {
            Pattern::Random { p, max_run } => max_run.is_none_or(|n| self.run < n) && rng.chance(p),
            Pattern::GilbertElliott { p, r, bad, good } => {
                let (strike, leave) = if self.bad { (bad, r) } else { (good, p) };
                let struck = rng.chance(strike);
                if rng.chance(leave) {
                    self.bad = !self.bad;
                }
                struck
            }
        };
        self.run = if struck {
            self.run.saturating_add(1)
        } else {
            0
        };
        struck
    }
}

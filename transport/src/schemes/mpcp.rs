//! MPCP — Multi Packet Congestion-control Protocol (Li & Yousefi'zadeh, CCR
//! 39(5), 2009): DPCP (chains of two packets, 9 levels) and TPCP (chains of
//! three, 27 levels).
//!
//! A load level is a base-3 number of n digits; each packet carries one digit
//! in its ECN bits (`01`, `10`, `11` for 0, 1, 2; `00` is never used, so plain
//! ECN stays safe). The paper orders a chain with TCP's seq/ack; QUIC encrypts
//! those, so a packet's position is `h % n` from the packet hash (docs/design.md §2).
//!
//! * Router ([`MpcpMarker`]): Algorithm 2, generalized to n digits. A router
//!   must know, for the digit at hand, whether its own level's higher digits
//!   already beat, equal or trail the packet's: that per-flow flag lives in a
//!   bounded, expiring [`FlowTable`]. The paper's typo is fixed: equal most
//!   significant digits set `MSP_EQ`. The result is the digit-by-digit
//!   (lexicographic) maximum of all routers' levels.
//! * Receiver ([`MpcpDecoder`]): the newest digit per position. When a
//!   position's digit changes, the lower positions are forgotten (the paper's
//!   "the previous LSP is ignored"), and until fresh ones arrive the decoder
//!   keeps reporting the last complete level: the sender acts on its first
//!   overload report and then holds for t_p, so a guessed digit would choose
//!   the MD factor (the paper's "replaced with 11" makes every overload onset
//!   a ×0.43 decrease). With random positions the missing digits come within
//!   a packet or two; if they do not come for [`STALE_PACKETS`] per position,
//!   they count as their top digit, `11` — conservative, as docs/design.md asks
//!   for missing positions. A position never seen counts as `11` too, except
//!   the most significant one, which stays at the paper's initial LOW_LOAD
//!   until the flow's own packets prove it missing.
//! * Sender ([`MpcpLaw`]): VCP's MIAIMD per level, increasing from the upper
//!   bound of the level's range; each overload level has its own MD factor
//!   (Table 1); it reacts to every new estimate at once.

use std::sync::OnceLock;
use std::time::Duration;

use crate::schemes::vcp::{self, Step, VcpLaw};
use crate::signal::flow_table::{FlowTable, FlowTableConfig};
use crate::signal::load::LoadFactor;
use crate::signal::{
    Congestion, Decoder, Feedback, Law, LawConfig, LinkState, Marker, Mode, PacketMarks, RttSample,
};
use crate::wire::ecn::{Ecn, SchemeTag, WireScheme};

/// The load zone a level belongs to (its most significant digit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Zone {
    /// MSP `01`: multiplicative increase.
    Low,
    /// MSP `10`: additive (and small multiplicative) increase.
    High,
    /// MSP `11`: multiplicative decrease.
    Over,
}

/// One row of a level table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Level {
    /// Loads below this (and at or above the previous row's) map to this level.
    pub upper: f64,
    /// The MD factor, for overload levels (1.0 elsewhere).
    pub md: f64,
}

/// DPCP's Table 1 ("LF and MD Specifications of DPCP"), in level order
/// 0101, 0110, 0111, 1001, …, 1111. The top row's "< 200 %" also takes every
/// load above 200 %.
pub const DPCP_TABLE: [Level; 9] = [
    Level {
        upper: 0.20,
        md: 1.0,
    },
    Level {
        upper: 0.40,
        md: 1.0,
    },
    Level {
        upper: 0.80,
        md: 1.0,
    },
    Level {
        upper: 0.85,
        md: 1.0,
    },
    Level {
        upper: 0.95,
        md: 1.0,
    },
    Level {
        upper: 1.00,
        md: 1.0,
    },
    Level {
        upper: 1.05,
        md: 0.875,
    },
    Level {
        upper: 1.40,
        md: 0.6,
    },
    Level {
        upper: 2.00,
        md: 0.43,
    },
];

/// TPCP's 27 levels, derived from DPCP's Table 1 (the paper gives none):
/// each DPCP level's range [lo, hi) is cut into three equal parts, so the
/// third sub-level of each triple ends exactly at DPCP's bound. Overload MD
/// factors interpolate DPCP's factors linearly in the upper bound between
/// (1.05, 0.875), (1.40, 0.60) and (2.00, 0.43), and are 0.875 up to 1.05.
/// Consequence: a TPCP estimate whose last digit is `11` (as the decoder
/// assumes when it is missing) behaves exactly as DPCP.
///
/// | levels | uppers | MD |
/// |---|---|---|
/// | 0–8 (low) | .067 .133 .2 .267 .333 .4 .533 .667 .8 | — |
/// | 9–17 (high) | .817 .833 .85 .883 .917 .95 .967 .983 1.0 | — |
/// | 18–26 (over) | 1.017 1.033 1.05 1.167 1.283 1.4 1.6 1.8 2.0 | .875 .875 .875 .783 .692 .6 .543 .487 .43 |
pub fn tpcp_table() -> &'static [Level; 27] {
    static TABLE: OnceLock<[Level; 27]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = [Level {
            upper: 0.0,
            md: 1.0,
        }; 27];
        let mut lo = 0.0;
        for (i, dpcp) in DPCP_TABLE.iter().enumerate() {
            for j in 0..3 {
                let upper = lo + (dpcp.upper - lo) * (j + 1) as f64 / 3.0;
                let md = if i >= 6 { interpolated_md(upper) } else { 1.0 };
                table[i * 3 + j] = Level { upper, md };
            }
            lo = dpcp.upper;
        }
        table
    })
}

fn interpolated_md(upper: f64) -> f64 {
    let points = [(1.05, 0.875), (1.40, 0.6), (2.00, 0.43)];
    if upper <= points[0].0 {
        return points[0].1;
    }
    for w in points.windows(2) {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        if upper <= x1 {
            return y0 + (y1 - y0) * (upper - x0) / (x1 - x0);
        }
    }
    points[2].1
}

/// Chain length: DPCP (2) or TPCP (3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Chain {
    /// DPCP: two packets, 9 levels.
    Two,
    /// TPCP: three packets, 27 levels.
    Three,
}

impl Chain {
    /// Digits per level: n.
    pub const fn digits(self) -> usize {
        match self {
            Chain::Two => 2,
            Chain::Three => 3,
        }
    }

    /// Levels a chain spells: 3^n, one per base-3 number of n digits (MPCP
    /// paper Table 1 for n = 2).
    pub const fn levels(self) -> u16 {
        3u16.pow(self.digits() as u32)
    }

    /// The level table.
    pub fn table(self) -> &'static [Level] {
        match self {
            Chain::Two => &DPCP_TABLE,
            Chain::Three => tpcp_table(),
        }
    }

    /// The scheme carrying this chain on the wire.
    pub const fn wire(self) -> WireScheme {
        match self {
            // docs/design.md §2, tag table: DPCP 2, TPCP 3.
            Chain::Two => WireScheme::new(2),
            Chain::Three => WireScheme::new(3),
        }
    }

    /// The level of a measured load factor.
    pub fn level_of(self, load: LoadFactor) -> usize {
        let table = self.table();
        table
            .iter()
            .position(|l| load.get() < l.upper)
            .unwrap_or(table.len() - 1)
    }

    /// Digit `position` (0 = most significant) of `level`, 0..=2.
    pub fn digit(self, level: usize, position: usize) -> u8 {
        let shift = self.digits() - 1 - position;
        (level / 3usize.pow(shift as u32) % 3) as u8
    }

    /// The level spelled by `digits` (most significant first).
    pub fn level_from_digits(self, digits: &[u8]) -> usize {
        digits
            .iter()
            .take(self.digits())
            .fold(0, |acc, &d| acc * 3 + usize::from(d.min(2)))
    }

    /// The zone of a level.
    pub fn zone(self, level: usize) -> Zone {
        match self.digit(level, 0) {
            0 => Zone::Low,
            1 => Zone::High,
            _ => Zone::Over,
        }
    }

    /// The chain position of a packet: `h % n`.
    pub fn position(self, hash: u32) -> usize {
        hash as usize % self.digits()
    }
}

fn digit_ecn(digit: u8) -> Ecn {
    Ecn::from_bits(digit + 1)
}

/// How a router's level compares with a packet's, over the digits seen so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Prefix {
    /// Equal so far (the paper's `MSP_EQ`): compare the next digit.
    #[default]
    Equal,
    /// This router is more congested (`MSP_LOW`): write its digits.
    RouterHigher,
    /// Upstream is more congested (`MSP_HIGH`): leave the digits.
    UpstreamHigher,
}

/// Per flow: the prefix comparison after each of the first n − 1 positions.
#[derive(Clone, Copy, Debug, Default)]
struct FlowFlags([Prefix; 2]);

/// MPCP router marking (Algorithm 2, generalized and fixed; see module docs).
#[derive(Clone, Debug)]
pub struct MpcpMarker {
    chain: Chain,
    flows: FlowTable<FlowFlags>,
}

impl MpcpMarker {
    /// A marker for chains of `chain` packets.
    pub fn new(chain: Chain, flows: FlowTableConfig) -> MpcpMarker {
        MpcpMarker {
            chain,
            flows: FlowTable::new(flows),
        }
    }

    /// Flows whose state was evicted by newer flows.
    pub fn evictions(&self) -> u64 {
        self.flows.evictions()
    }
}

impl Marker for MpcpMarker {
    #[inline]
    fn mark(&mut self, now: Duration, link: &LinkState, pkt: &mut PacketMarks) {
        if !pkt.ecn.is_ect() {
            return;
        }
        let n = self.chain.digits();
        let position = self.chain.position(pkt.hash);
        let own = self
            .chain
            .digit(self.chain.level_of(link.load[vcp::FORMULA]), position);
        let carried = pkt.ecn.bits() - 1;
        let before = if position == 0 {
            Prefix::Equal
        } else {
            // An unknown flow compares digit by digit: the result can only be
            // higher than the true maximum, never lower.
            self.flows
                .get(now, pkt.flow)
                .map_or(Prefix::Equal, |f| f.0[position - 1])
        };
        let after = match before {
            Prefix::Equal if own > carried => Prefix::RouterHigher,
            Prefix::Equal if own < carried => Prefix::UpstreamHigher,
            other => other,
        };
        if after == Prefix::RouterHigher {
            pkt.ecn = digit_ecn(own);
        }
        if position < n - 1 {
            self.flows.entry(now, pkt.flow).0[position] = after;
        }
    }
}

/// A digit is stale once this many packets per chain position arrived
/// without refreshing it: with random positions, a live position goes
/// unseen for 16·n packets with probability about e⁻¹⁶.
pub const STALE_PACKETS: u64 = 16;

/// MPCP receiver: newest digit per position (see module docs).
#[derive(Clone, Debug)]
pub struct MpcpDecoder {
    chain: Chain,
    /// Per position: the digit and the packet count when it arrived.
    digits: [Option<(u8, u64)>; 3],
    /// After a digit changed and until the digits below it are known again:
    /// the last complete level, the packet count of the change, and the
    /// changed position.
    pending: Option<(usize, u64, usize)>,
    received: u64,
}

impl MpcpDecoder {
    /// A decoder for chains of `chain` packets.
    pub fn new(chain: Chain) -> MpcpDecoder {
        MpcpDecoder {
            chain,
            digits: [None; 3],
            pending: None,
            received: 0,
        }
    }

    fn stale_after(&self) -> u64 {
        STALE_PACKETS * self.chain.digits() as u64
    }

    fn level(&self) -> usize {
        if self.received == 0 {
            // The paper's initial LF: LOW_LOAD, 0101.
            return 0;
        }
        if let Some((level, since, _)) = self.pending {
            if self.received - since < self.stale_after() {
                return level;
            }
        }
        let n = self.chain.digits();
        let stale_after = self.stale_after();
        let mut digits = [2u8; 3];
        for (position, digit) in digits.iter_mut().enumerate().take(n) {
            *digit = match self.digits[position] {
                Some((d, seen)) if self.received - seen < stale_after => d,
                None if position == 0 && self.received < stale_after => 0,
                _ => 2,
            };
        }
        self.chain.level_from_digits(&digits[..n])
    }
}

impl Decoder for MpcpDecoder {
    fn on_packet(&mut self, _now: Duration, ecn: Ecn, _tag: SchemeTag, hash: u32) -> bool {
        if !ecn.is_ect() {
            return false;
        }
        let before = self.level();
        self.received += 1;
        let position = self.chain.position(hash);
        let digit = ecn.bits() - 1;
        let n = self.chain.digits();
        if position + 1 < n && self.digits[position].is_some_and(|(d, _)| d != digit) {
            let since = self.pending.map_or(self.received, |(_, since, _)| since);
            let highest = self.pending.map_or(position, |(_, _, p)| p.min(position));
            self.pending = Some((
                self.pending.map_or(before, |(level, _, _)| level),
                since,
                highest,
            ));
            for lower in &mut self.digits[position + 1..] {
                *lower = None;
            }
        }
        self.digits[position] = Some((digit, self.received));
        if let Some((_, _, changed)) = self.pending {
            if self.digits[changed + 1..n].iter().all(Option::is_some) {
                self.pending = None;
            }
        }
        self.level() != before
    }

    fn estimate(&self, _now: Duration) -> Feedback {
        let level = self.level();
        Feedback {
            level: level as u16,
            load: LoadFactor::new(self.chain.table()[level].upper),
            fairing: false,
        }
    }
}

/// The DPCP / TPCP sender (see module docs). The hold after an MD and the
/// Reno reaction to loss are VCP's.
#[derive(Clone, Debug)]
pub struct MpcpLaw {
    chain: Chain,
    vcp: VcpLaw,
    level: usize,
}

impl MpcpLaw {
    /// A DPCP (`Chain::Two`) or TPCP (`Chain::Three`) sender.
    pub fn new(chain: Chain, config: LawConfig) -> MpcpLaw {
        MpcpLaw {
            chain,
            vcp: VcpLaw::new(config),
            level: 0,
        }
    }

    /// The step for the current level. Low zone: MI with ξ(upper bound);
    /// high zone: MI with ξ(upper bound) plus VCP's AI ("both multiplicative
    /// and additive factors", §3.1) — ξ(1.0) = 0, so the top high level is
    /// plain AI; overload: MD by the level's factor (Table 1).
    pub fn step(&self) -> Step {
        let row = self.chain.table()[self.level];
        match self.chain.zone(self.level) {
            Zone::Low => Step::Increase {
                xi: vcp::xi(row.upper),
                alpha: 0.0,
            },
            Zone::High => Step::Increase {
                xi: vcp::xi(row.upper),
                alpha: vcp::ALPHA,
            },
            Zone::Over => Step::Decrease { beta: row.md },
        }
    }

    /// The level the law is acting on.
    pub fn level(&self) -> usize {
        self.level
    }
}

impl Law for MpcpLaw {
    fn on_ack(&mut self, now: Duration, acked_bytes: u64, rtt: &RttSample) {
        self.vcp.apply(now, acked_bytes, rtt, self.step());
    }

    fn on_feedback(&mut self, now: Duration, feedback: Feedback, rtt: &RttSample) {
        self.level = usize::from(feedback.level).min(self.chain.table().len() - 1);
        if self.chain.zone(self.level) == Zone::Over {
            self.vcp
                .decrease_if_due(now, rtt, self.chain.table()[self.level].md);
        }
    }

    fn on_congestion(&mut self, now: Duration, sent: Duration, kind: Congestion, rtt: &RttSample) {
        self.vcp.on_congestion(now, sent, kind, rtt)
    }

    fn window(&self) -> u64 {
        self.vcp.window()
    }

    fn mode(&self) -> Mode {
        self.vcp.mode()
    }

    fn tag(&self) -> SchemeTag {
        SchemeTag::new(self.chain.wire().id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schemes::vcp::tests::link;
    use crate::wire::hash::fmix32;

    const MS: Duration = Duration::from_millis(1);

    /// Digits of a level as ECN codepoints, most significant first.
    fn code(chain: Chain, level: usize) -> Vec<u8> {
        (0..chain.digits())
            .map(|p| chain.digit(level, p) + 1)
            .collect()
    }

    #[test]
    fn dpcp_table1_thresholds_and_codes() {
        let c = Chain::Two;
        // (LF just below the bound, MSP LSP) rows of Table 1.
        let rows = [
            (0.19, [0b01, 0b01]),
            (0.39, [0b01, 0b10]),
            (0.79, [0b01, 0b11]),
            (0.84, [0b10, 0b01]),
            (0.94, [0b10, 0b10]),
            (0.99, [0b10, 0b11]),
            (1.04, [0b11, 0b01]),
            (1.39, [0b11, 0b10]),
            (1.99, [0b11, 0b11]),
        ];
        for (i, (lf, digits)) in rows.into_iter().enumerate() {
            assert_eq!(c.level_of(LoadFactor::new(lf)), i);
            assert_eq!(code(c, i), digits);
        }
        // Bounds are exclusive: exactly 20 % is the second level, 80 % is high load.
        assert_eq!(c.level_of(LoadFactor::new(0.2)), 1);
        assert_eq!(c.level_of(LoadFactor::new(0.8)), 3);
        assert_eq!(c.level_of(LoadFactor::new(1.0)), 6);
        assert_eq!(c.level_of(LoadFactor::new(50.0)), 8);
        assert_eq!(c.zone(2), Zone::Low);
        assert_eq!(c.zone(5), Zone::High);
        assert_eq!(c.zone(6), Zone::Over);
    }

    /// A DPCP sender (1000-byte packets) after one report of `level`.
    fn dpcp_told(level: u16, rtt: &RttSample) -> MpcpLaw {
        let mut law = MpcpLaw::new(Chain::Two, LawConfig::with_mss(1000));
        law.on_feedback(
            MS,
            Feedback {
                level,
                ..Feedback::default()
            },
            rtt,
        );
        law
    }

    #[test]
    fn dpcp_md_factors() {
        let mds: Vec<f64> = DPCP_TABLE[6..].iter().map(|l| l.md).collect();
        assert_eq!(mds, [0.875, 0.6, 0.43]);
        for (level, beta) in [(6u16, 0.875), (7, 0.6), (8, 0.43)] {
            let law = dpcp_told(level, &RttSample::uniform(MS * 100));
            assert_eq!(law.window(), (10_000.0 * beta) as u64, "level {level}");
            assert_eq!(law.mode(), Mode::Hold);
        }
    }

    #[test]
    fn dpcp_increases_from_the_upper_bound() {
        let rtt = RttSample::uniform(MS * 200); // T = t_p: no scaling
        for (level, factor) in [(0u16, 2.0), (1, 1.375), (2, 1.0625)] {
            let mut law = dpcp_told(level, &rtt);
            law.on_ack(MS, 10_000, &rtt);
            // ξ(upper) = 0.25(1 − u)/u: 1.0, 0.375, 0.0625.
            assert_eq!(law.window(), (10_000.0 * factor) as u64, "level {level}");
            assert_eq!(law.mode(), Mode::MultiplicativeIncrease);
        }
        // Top of the high zone (upper 100 %): plain AI, one packet per RTT.
        let mut law = dpcp_told(5, &rtt);
        law.on_ack(MS, 10_000, &rtt);
        assert_eq!(law.window(), 11_000);
        assert_eq!(law.mode(), Mode::AdditiveIncrease);
    }

    #[test]
    fn tpcp_table_refines_dpcp() {
        let t = tpcp_table();
        for (i, dpcp) in DPCP_TABLE.iter().enumerate() {
            let last = t[i * 3 + 2];
            assert!((last.upper - dpcp.upper).abs() < 1e-12);
            assert!((last.md - dpcp.md).abs() < 1e-12);
        }
        for w in t.windows(2) {
            assert!(w[0].upper < w[1].upper);
            assert!(w[0].md >= w[1].md);
        }
        assert!((t[21].upper - 1.1667).abs() < 1e-4 && (t[21].md - 0.7833).abs() < 1e-3);
        // Level 26 is 111111; level 13 (the middle) is 101010.
        assert_eq!(code(Chain::Three, 26), [3, 3, 3]);
        assert_eq!(code(Chain::Three, 13), [2, 2, 2]);
        assert_eq!(Chain::Three.level_from_digits(&[1, 0, 2]), 11);
    }

    /// Sends `packets` of one flow through routers at loads `rhos` into a decoder.
    fn through_routers(chain: Chain, rhos: &[f64], packets: u32) -> MpcpDecoder {
        let mut routers: Vec<MpcpMarker> = rhos
            .iter()
            .map(|_| MpcpMarker::new(chain, FlowTableConfig::default()))
            .collect();
        let mut decoder = MpcpDecoder::new(chain);
        for i in 0..packets {
            let mut pkt = PacketMarks {
                ecn: Ecn::Ect1,
                tag: SchemeTag::new(chain.wire().id()),
                hash: fmix32(i),
                flow: 42,
            };
            for (router, &rho) in routers.iter_mut().zip(rhos) {
                router.mark(MS, &link(rho), &mut pkt);
            }
            decoder.on_packet(MS, pkt.ecn, pkt.tag, pkt.hash);
        }
        decoder
    }

    #[test]
    fn routers_in_series_yield_the_digit_by_digit_maximum() {
        for chain in [Chain::Two, Chain::Three] {
            let table = chain.table();
            // Every pair of levels, with the more congested router first or second.
            for a in 0..table.len() {
                for b in 0..table.len() {
                    let lo = |l: usize| if l == 0 { 0.0 } else { table[l - 1].upper };
                    let decoder = through_routers(chain, &[lo(a), lo(b)], 200);
                    let got = decoder.estimate(MS).level as usize;
                    assert_eq!(got, a.max(b), "{chain:?}: levels {a} then {b}");
                }
            }
        }
    }

    #[test]
    fn three_routers_in_series() {
        let decoder = through_routers(Chain::Three, &[0.9, 1.2, 0.3], 300);
        assert_eq!(
            decoder.estimate(MS).level as usize,
            Chain::Three.level_of(LoadFactor::new(1.2))
        );
    }

    #[test]
    fn unknown_flows_are_marked_conservatively() {
        // A router that lost the flow's flag (here: a fresh router for each
        // LSP) compares digit by digit, which can only overestimate.
        let chain = Chain::Two;
        let mut pkt = PacketMarks {
            ecn: Ecn::Ect1,
            tag: SchemeTag::new(2),
            hash: 1, // position 1: an LSP
            flow: 7,
        };
        // Upstream said 1001 (LSP 01); this router is at 0111 (LSP 11).
        MpcpMarker::new(chain, FlowTableConfig::default()).mark(MS, &link(0.79), &mut pkt);
        assert_eq!(pkt.ecn, Ecn::Ce, "LSP raised to the maximum digit");
    }

    #[test]
    fn decoder_waits_for_the_lower_digits_when_the_msp_changes() {
        let mut d = MpcpDecoder::new(Chain::Two);
        let tag = SchemeTag::new(2);
        assert_eq!(d.estimate(MS).level, 0, "initial LOW_LOAD 0101");
        // A first MSP with no LSP yet: top of its zone, 1011.
        d.on_packet(MS, Ecn::Ect0, tag, 0);
        assert_eq!(d.estimate(MS).level, 5);
        // LSP 01: 1001 = level 3. The same MSP again keeps it.
        d.on_packet(MS, Ecn::Ect1, tag, 1);
        d.on_packet(MS, Ecn::Ect0, tag, 2);
        assert_eq!(d.estimate(MS).level, 3);
        // A new MSP (11): the old LSP is forgotten and the complete level
        // 1001 stands until the new chain's LSP arrives — no report yet.
        assert!(!d.on_packet(MS, Ecn::Ce, tag, 4));
        assert_eq!(d.estimate(MS).level, 3);
        // Its LSP (01): 1101, the mildest overload, MD 0.875.
        assert!(d.on_packet(MS, Ecn::Ect1, tag, 5));
        assert_eq!(d.estimate(MS).level, 6);
    }

    #[test]
    fn a_missing_lsp_after_an_msp_change_turns_conservative() {
        let mut d = MpcpDecoder::new(Chain::Two);
        let tag = SchemeTag::new(2);
        d.on_packet(MS, Ecn::Ect0, tag, 0);
        d.on_packet(MS, Ecn::Ect1, tag, 1);
        d.on_packet(MS, Ecn::Ce, tag, 2); // MSP 11, LSP pending
        for _ in 0..STALE_PACKETS * 2 {
            d.on_packet(MS, Ecn::Ce, tag, 0);
        }
        assert_eq!(
            d.estimate(MS).level,
            8,
            "1111 once the LSP is proven missing"
        );
    }

    #[test]
    fn stale_digits_count_as_top() {
        let mut d = MpcpDecoder::new(Chain::Two);
        let tag = SchemeTag::new(2);
        d.on_packet(MS, Ecn::Ect1, tag, 0); // MSP 01
        d.on_packet(MS, Ecn::Ect1, tag, 1); // LSP 01
        assert_eq!(d.estimate(MS).level, 0);
        // Only LSPs for a long time: the MSP goes stale and counts as 11.
        for _ in 0..STALE_PACKETS * 2 {
            d.on_packet(MS, Ecn::Ect1, tag, 1);
        }
        assert_eq!(d.estimate(MS).level, 6);
        // A packet without ECT tells nothing.
        assert!(!d.on_packet(MS, Ecn::NotEct, tag, 0));
    }

    #[test]
    fn missing_msp_is_low_until_proven_missing() {
        let mut d = MpcpDecoder::new(Chain::Two);
        d.on_packet(MS, Ecn::Ce, SchemeTag::new(2), 1); // an LSP (11) first
        assert_eq!(d.estimate(MS).level, 2, "0111: low zone, LSP known");
        d.on_packet(MS, Ecn::Ect1, SchemeTag::new(2), 1);
        assert_eq!(d.estimate(MS).level, 0, "0101");
    }
}

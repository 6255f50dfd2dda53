//! The feedback report a receiver sends its peer's sender (docs/design.md §3), its
//! acceptance rules, and the policy that decides when to send one. Sans-IO:
//! time is an argument, bytes are slices.
//!
//! # Wire format, version 3
//!
//! A report is the whole payload of one QUIC DATAGRAM frame (RFC 9221), so it
//! is encrypted and authenticated by QUIC. All integers are big-endian.
//!
//! | bytes  | field      | meaning |
//! |--------|------------|---------|
//! | 0..4   | magic      | `EC 0E C9 51`: tells reports from application datagrams |
//! | 4      | version    | `3` |
//! | 5      | scheme     | the DSCP pool tag of the traffic the report describes (docs/design.md §2; MCP's first tag, 8) |
//! | 6      | flags      | bit 0: MCP fairing bit echo; bits 1..7 reserved, sent as 0 |
//! | 7      | reserved   | sent as 0, ignored |
//! | 8..12  | sequence   | report number, +1 per report, wrapping |
//! | 12..14 | level      | the decoder's quantized level ([`Feedback::level`]) |
//! | 14..18 | load       | the load factor in units of 1/10 000 |
//! | 18..50 | counts     | packets received with Not-ECT, ECT(1), ECT(0), CE (u64 each, cumulative) |
//! | 50..58 | unraised   | presence probes received unraised (u64, cumulative; docs/design.md §2) |
//!
//! A receiver of a report never trusts it blindly: [`ReportFilter`] drops
//! truncated reports, unknown versions, levels beyond the scheme's range,
//! absurd load factors, stale sequence numbers and regressing counts.

use std::fmt;
use std::time::Duration;

use crate::signal::load::LoadFactor;
use crate::signal::Feedback;
use crate::wire::ecn::{Ecn, WireScheme};

/// The first four bytes of every report. Application datagrams that start
/// with them cannot be sent over an ecnq connection.
pub const MAGIC: [u8; 4] = [0xEC, 0x0E, 0xC9, 0x51];
/// The report version this code writes and reads. Version 3 counts the
/// unraised presence probes itself (MCP's are tagged, not Not-ECT);
/// version 2 left the sender to read them from the Not-ECT count, and
/// version 1 used the retired tag layout's ids.
pub const VERSION: u8 = 3;
/// The length of a report.
pub const LEN: usize = 58;
/// Load factors travel in units of 1/`LOAD_SCALE`.
pub const LOAD_SCALE: f64 = 10_000.0;

mod field {
    use std::ops::Range;
    pub const MAGIC: Range<usize> = 0..4;
    pub const VERSION: usize = 4;
    pub const SCHEME: usize = 5;
    pub const FLAGS: usize = 6;
    pub const SEQUENCE: Range<usize> = 8..12;
    pub const LEVEL: Range<usize> = 12..14;
    pub const LOAD: Range<usize> = 14..18;
    pub const COUNTS: usize = 18;
    pub const UNRAISED: Range<usize> = 50..58;
}

const FLAG_FAIRING: u8 = 0b1;

/// Whether a datagram is a report (starts with [`MAGIC`]) rather than an
/// application datagram.
pub fn is_report(datagram: &[u8]) -> bool {
    datagram.starts_with(&MAGIC)
}

/// Why a report was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportError {
    /// Shorter than a report.
    Truncated,
    /// A version this code does not speak.
    Version(u8),
    /// A scheme id that has no decoder, or not the scheme this sender runs.
    Scheme(u8),
    /// A level beyond the scheme's range.
    Level(u16),
    /// A load factor beyond [`LoadFactor::MAX`].
    Load(u32),
    /// A sequence number not newer than the last accepted report.
    Stale,
    /// A codepoint or probe count lower than in an earlier report.
    CountRegression,
}

impl fmt::Display for ReportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReportError::Truncated => write!(f, "truncated report"),
            ReportError::Version(v) => write!(f, "unknown report version {v}"),
            ReportError::Scheme(s) => write!(f, "unexpected scheme id {s}"),
            ReportError::Level(l) => write!(f, "level {l} out of range"),
            ReportError::Load(l) => write!(f, "absurd load factor {l}/10000"),
            ReportError::Stale => write!(f, "stale sequence number"),
            ReportError::CountRegression => write!(f, "codepoint or probe counts went backwards"),
        }
    }
}

impl std::error::Error for ReportError {}

/// A zero-copy view of a report's bytes (smoltcp `wire` style).
#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it; use [`Packet::new_checked`].
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after [`Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Packet<T>, ReportError> {
        let packet = Packet::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Fails unless the buffer holds a whole report of this version with the magic.
    pub fn check_len(&self) -> Result<(), ReportError> {
        let data = self.buffer.as_ref();
        if data.len() <= field::VERSION || !is_report(data) {
            return Err(ReportError::Truncated);
        }
        if data[field::VERSION] != VERSION {
            return Err(ReportError::Version(data[field::VERSION]));
        }
        if data.len() < LEN {
            return Err(ReportError::Truncated);
        }
        Ok(())
    }

    fn bytes<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut out = [0; N];
        out.copy_from_slice(&self.buffer.as_ref()[at..at + N]);
        out
    }

    /// The version byte.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// The scheme wire id.
    pub fn scheme(&self) -> u8 {
        self.buffer.as_ref()[field::SCHEME]
    }

    /// The flags byte.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// The sequence number.
    pub fn sequence(&self) -> u32 {
        u32::from_be_bytes(self.bytes(field::SEQUENCE.start))
    }

    /// The quantized level.
    pub fn level(&self) -> u16 {
        u16::from_be_bytes(self.bytes(field::LEVEL.start))
    }

    /// The load factor in units of 1/10 000.
    pub fn load(&self) -> u32 {
        u32::from_be_bytes(self.bytes(field::LOAD.start))
    }

    /// The cumulative count of packets received with codepoint `ecn`.
    pub fn count(&self, ecn: Ecn) -> u64 {
        u64::from_be_bytes(self.bytes(field::COUNTS + 8 * ecn.bits() as usize))
    }

    /// The cumulative count of presence probes received unraised.
    pub fn unraised_probes(&self) -> u64 {
        u64::from_be_bytes(self.bytes(field::UNRAISED.start))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn put(&mut self, at: usize, bytes: &[u8]) {
        self.buffer.as_mut()[at..at + bytes.len()].copy_from_slice(bytes);
    }
}

/// The meaning of a report.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Repr {
    /// The scheme of the traffic the report describes.
    pub scheme: WireScheme,
    /// The report number.
    pub sequence: u32,
    /// The decoder's estimate.
    pub feedback: Feedback,
    /// Cumulative packets received per codepoint, indexed by [`Ecn::bits`].
    pub counts: [u64; 4],
    /// Cumulative presence probes received unraised.
    pub unraised_probes: u64,
}

impl Repr {
    /// Parses a checked packet; refuses values no decoder produces.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr, ReportError> {
        packet.check_len()?;
        let id = packet.scheme();
        let scheme = WireScheme::from_id(id);
        if !WireScheme::is_assigned(id) || scheme == WireScheme::CLASSIC {
            return Err(ReportError::Scheme(id));
        }
        let level = packet.level();
        if level > scheme.max_level() {
            return Err(ReportError::Level(level));
        }
        let load = packet.load();
        if f64::from(load) / LOAD_SCALE > LoadFactor::MAX {
            return Err(ReportError::Load(load));
        }
        Ok(Repr {
            scheme,
            sequence: packet.sequence(),
            feedback: Feedback {
                level,
                load: LoadFactor::new(f64::from(load) / LOAD_SCALE),
                fairing: packet.flags() & FLAG_FAIRING != 0,
            },
            counts: Ecn::ALL.map(|ecn| packet.count(ecn)),
            unraised_probes: packet.unraised_probes(),
        })
    }

    /// Writes the report into `packet`, which must be [`LEN`] bytes long or more.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let load = (self.feedback.load.get() * LOAD_SCALE).round() as u32;
        packet.put(field::MAGIC.start, &MAGIC);
        packet.put(
            field::VERSION,
            &[
                VERSION,
                self.scheme.id(),
                if self.feedback.fairing {
                    FLAG_FAIRING
                } else {
                    0
                },
                0,
            ],
        );
        packet.put(field::SEQUENCE.start, &self.sequence.to_be_bytes());
        packet.put(field::LEVEL.start, &self.feedback.level.to_be_bytes());
        packet.put(field::LOAD.start, &load.to_be_bytes());
        for (i, count) in self.counts.iter().enumerate() {
            packet.put(field::COUNTS + 8 * i, &count.to_be_bytes());
        }
        packet.put(field::UNRAISED.start, &self.unraised_probes.to_be_bytes());
    }

    /// The report as a new buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut packet = Packet::new_unchecked(vec![0; LEN]);
        self.emit(&mut packet);
        packet.buffer
    }
}

/// Accepts reports for one sender: refuses the wrong scheme, stale sequence
/// numbers and regressing counts, and counts what it refused.
#[derive(Clone, Debug)]
pub struct ReportFilter {
    expected: WireScheme,
    last: Option<Repr>,
    accepted: u64,
    rejected: u64,
}

impl ReportFilter {
    /// A filter for a sender of `expected`'s traffic.
    pub fn new(expected: WireScheme) -> ReportFilter {
        ReportFilter {
            expected,
            last: None,
            accepted: 0,
            rejected: 0,
        }
    }

    /// Parses and checks one report datagram.
    pub fn accept(&mut self, datagram: &[u8]) -> Result<Repr, ReportError> {
        let result = self.check(datagram);
        match result {
            Ok(repr) => {
                self.accepted += 1;
                self.last = Some(repr);
            }
            Err(_) => self.rejected += 1,
        }
        result
    }

    fn check(&self, datagram: &[u8]) -> Result<Repr, ReportError> {
        let repr = Repr::parse(&Packet::new_checked(datagram)?)?;
        if repr.scheme != self.expected {
            return Err(ReportError::Scheme(repr.scheme.id()));
        }
        if let Some(last) = &self.last {
            // Serial-number arithmetic: newer means ahead by less than 2^31.
            if repr.sequence.wrapping_sub(last.sequence).wrapping_sub(1) >= 1 << 31 {
                return Err(ReportError::Stale);
            }
            if repr
                .counts
                .iter()
                .zip(&last.counts)
                .any(|(new, old)| new < old)
                || repr.unraised_probes < last.unraised_probes
            {
                return Err(ReportError::CountRegression);
            }
        }
        Ok(repr)
    }

    /// The last accepted report.
    pub fn last(&self) -> Option<&Repr> {
        self.last.as_ref()
    }

    /// Reports accepted so far.
    pub fn accepted(&self) -> u64 {
        self.accepted
    }

    /// Reports refused so far.
    pub fn rejected(&self) -> u64 {
        self.rejected
    }
}

/// Bounds on how often a receiver reports (docs/design.md §3: on change, at least
/// once per RTT while data flows, at most a few per RTT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendPolicy {
    /// At most one report per max(srtt / 4, `min_gap`).
    pub min_gap: Duration,
    /// While data arrives, a report at least every max(srtt, `period`).
    pub period: Duration,
}

impl Default for SendPolicy {
    /// 2 ms minimum gap and 10 ms period floors: on sub-millisecond paths
    /// (loopback, LAN) a per-RTT report would cost more than it tells, and
    /// routers refresh their estimate only every t_p = 200 ms anyway.
    fn default() -> SendPolicy {
        SendPolicy {
            min_gap: Duration::from_millis(2),
            period: Duration::from_millis(10),
        }
    }
}

/// What a [`FeedbackSender`] wants next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Send a report now.
    Send,
    /// Ask again at this time (or earlier if the estimate changes).
    At(Duration),
    /// Nothing arrived since the last report: ask again when packets arrive.
    Idle,
}

/// When to send reports, for one receiving connection.
///
/// Packets that carry only ACKs or reports also carry marks, so the policy
/// tells them apart from data with a progress counter the caller keeps
/// (stream frames and application datagrams received): periodic reports are
/// sent only while it moves, so two idle ecnq endpoints do not keep each
/// other busy answering reports with reports.
#[derive(Clone, Debug)]
pub struct FeedbackSender {
    policy: SendPolicy,
    last_sent: Option<(Duration, Feedback, u64)>,
    received_since: u64,
    /// Something other than the estimate is worth reporting promptly.
    news: bool,
    sequence: u32,
}

impl FeedbackSender {
    /// A sender following `policy`.
    pub fn new(policy: SendPolicy) -> FeedbackSender {
        FeedbackSender {
            policy,
            last_sent: None,
            received_since: 0,
            news: false,
            sequence: 0,
        }
    }

    /// `packets` more packets of the peer's traffic were decoded.
    pub fn on_packets(&mut self, packets: u64) {
        self.received_since += packets;
    }

    /// The next report is due as soon as a changed estimate's would be
    /// (the peer's first packets arrived, which its first presence verdict
    /// waits for).
    pub fn on_news(&mut self) {
        self.news = true;
    }

    /// Whether to report `estimate` now, given the connection's smoothed RTT
    /// and the data progress counter.
    pub fn poll(&self, now: Duration, estimate: Feedback, srtt: Duration, progress: u64) -> Next {
        if self.received_since == 0 {
            return Next::Idle;
        }
        let Some((last_at, last_estimate, last_progress)) = self.last_sent else {
            return Next::Send;
        };
        let period = srtt.max(self.policy.period);
        let due = if estimate != last_estimate || self.news {
            last_at + (srtt / 4).max(self.policy.min_gap)
        } else if progress != last_progress {
            last_at + period
        } else {
            // Marked packets but no data: only a change is worth a report;
            // look at the progress counter again a period from now.
            now + period
        };
        if now >= due {
            Next::Send
        } else {
            // Ask again within the policy's period: `srtt` may be stale (a
            // new path starts from the initial RTT, 333 ms in quinn, RFC
            // 9002 §6.2.2) and shrink before `due`.
            Next::At(due.min(now + self.policy.period))
        }
    }

    /// A report of `estimate` is being sent now; returns its sequence number.
    pub fn on_sent(&mut self, now: Duration, estimate: Feedback, progress: u64) -> u32 {
        self.last_sent = Some((now, estimate, progress));
        self.received_since = 0;
        self.news = false;
        self.sequence = self.sequence.wrapping_add(1);
        self.sequence
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schemes::mpcp::Chain;
    use crate::schemes::vcp;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parsing_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let mut filter = ReportFilter::new(vcp::WIRE);
            let _ = Repr::parse(&Packet::new_unchecked(&bytes[..]));
            let _ = filter.accept(&bytes);
        }

        #[test]
        fn parsed_reports_re_emit_identically(mut bytes in proptest::collection::vec(any::<u8>(), LEN..=LEN)) {
            bytes[..4].copy_from_slice(&MAGIC);
            bytes[4] = VERSION;
            if let Ok(repr) = Repr::parse(&Packet::new_unchecked(&bytes[..])) {
                let again = Repr::parse(&Packet::new_unchecked(&repr.to_bytes()[..])).unwrap();
                prop_assert_eq!(again.counts, repr.counts);
                prop_assert_eq!(again.unraised_probes, repr.unraised_probes);
                prop_assert_eq!(again.sequence, repr.sequence);
                prop_assert_eq!(again.feedback.level, repr.feedback.level);
            }
        }
    }

    fn sample(sequence: u32) -> Repr {
        Repr {
            scheme: vcp::WIRE,
            sequence,
            feedback: Feedback {
                level: 1,
                load: LoadFactor::new(0.95),
                fairing: true,
            },
            counts: [1, 2, 3, 4 + u64::from(sequence)],
            unraised_probes: 5,
        }
    }

    #[test]
    fn round_trips_and_layout_is_stable() {
        let repr = sample(7);
        let bytes = repr.to_bytes();
        assert_eq!(bytes.len(), LEN);
        assert_eq!(&bytes[..8], &[0xEC, 0x0E, 0xC9, 0x51, 3, 1, 1, 0]);
        assert_eq!(&bytes[8..18], &[0, 0, 0, 7, 0, 1, 0, 0, 0x25, 0x1C]);
        assert_eq!(&bytes[50..58], &[0, 0, 0, 0, 0, 0, 0, 5]);
        let parsed = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(parsed, repr);
        assert!(is_report(&bytes) && !is_report(b"hello"));
    }

    #[test]
    fn every_prefix_of_a_report_is_refused_without_panic() {
        let bytes = sample(1).to_bytes();
        for len in 0..LEN {
            let err = Repr::parse(&Packet::new_unchecked(&bytes[..len])).unwrap_err();
            assert_eq!(err, ReportError::Truncated, "len {len}");
        }
    }

    #[test]
    fn refuses_bad_fields() {
        let good = sample(1).to_bytes();
        let with = |at: usize, value: &[u8]| {
            let mut b = good.clone();
            b[at..at + value.len()].copy_from_slice(value);
            Repr::parse(&Packet::new_unchecked(&b[..]))
        };
        assert_eq!(with(4, &[1]), Err(ReportError::Version(1)));
        assert_eq!(with(4, &[2]), Err(ReportError::Version(2)));
        assert_eq!(with(5, &[0]), Err(ReportError::Scheme(0)));
        // Unassigned tags, and MCP's flag-carrying tags, name no scheme.
        assert_eq!(with(5, &[7]), Err(ReportError::Scheme(7)));
        assert_eq!(with(5, &[9]), Err(ReportError::Scheme(9)));
        assert_eq!(with(5, &[200]), Err(ReportError::Scheme(200)));
        assert_eq!(with(12, &[0, 3]), Err(ReportError::Level(3)));
        assert_eq!(with(14, &[0xFF; 4]), Err(ReportError::Load(u32::MAX)));
        // A longer report is fine (room for extensions).
        let mut longer = good.clone();
        longer.extend_from_slice(&[9; 8]);
        assert!(Repr::parse(&Packet::new_unchecked(&longer[..])).is_ok());
    }

    #[test]
    fn filter_refuses_stale_regressing_and_foreign_reports() {
        let mut filter = ReportFilter::new(vcp::WIRE);
        assert!(filter.accept(&sample(5).to_bytes()).is_ok());
        assert_eq!(
            filter.accept(&sample(5).to_bytes()),
            Err(ReportError::Stale)
        );
        assert_eq!(
            filter.accept(&sample(4).to_bytes()),
            Err(ReportError::Stale)
        );
        let mut regressed = sample(6);
        regressed.counts[0] = 0;
        assert_eq!(
            filter.accept(&regressed.to_bytes()),
            Err(ReportError::CountRegression)
        );
        let mut regressed = sample(6);
        regressed.unraised_probes = 4;
        assert_eq!(
            filter.accept(&regressed.to_bytes()),
            Err(ReportError::CountRegression)
        );
        let mut foreign = sample(7);
        foreign.scheme = Chain::Two.wire();
        assert_eq!(
            filter.accept(&foreign.to_bytes()),
            Err(ReportError::Scheme(2))
        );
        assert_eq!(filter.accept(&[0xEC, 0x0E]), Err(ReportError::Truncated));
        assert!(filter.accept(&sample(8).to_bytes()).is_ok());
        assert_eq!((filter.accepted(), filter.rejected()), (2, 6));
        assert_eq!(filter.last().map(|r| r.sequence), Some(8));
    }

    #[test]
    fn sequence_numbers_wrap() {
        let mut filter = ReportFilter::new(vcp::WIRE);
        let mut repr = sample(0);
        repr.sequence = u32::MAX;
        assert!(filter.accept(&repr.to_bytes()).is_ok());
        repr.sequence = 0;
        assert!(filter.accept(&repr.to_bytes()).is_ok());
    }

    #[test]
    fn sender_reports_on_change_periodically_and_never_too_often() {
        let ms = Duration::from_millis;
        let srtt = ms(40);
        let low = Feedback::default();
        let high = Feedback {
            level: 1,
            ..Feedback::default()
        };
        let mut sender = FeedbackSender::new(SendPolicy::default());
        assert_eq!(sender.poll(ms(0), low, srtt, 0), Next::Idle);
        sender.on_packets(3);
        assert_eq!(sender.poll(ms(0), low, srtt, 0), Next::Send);
        assert_eq!(sender.on_sent(ms(0), low, 0), 1);
        assert_eq!(sender.poll(ms(1), low, srtt, 5), Next::Idle);
        sender.on_packets(1);
        // Unchanged while data flows: once per RTT, asking again every period.
        assert_eq!(sender.poll(ms(1), low, srtt, 5), Next::At(ms(11)));
        assert_eq!(sender.poll(ms(39), low, srtt, 5), Next::At(ms(40)));
        assert_eq!(sender.poll(ms(40), low, srtt, 5), Next::Send);
        // Changed: after a quarter RTT at the earliest.
        assert_eq!(sender.poll(ms(1), high, srtt, 5), Next::At(ms(10)));
        assert_eq!(sender.poll(ms(10), high, srtt, 5), Next::Send);
        assert_eq!(sender.on_sent(ms(10), high, 5), 2);
        // Tiny RTTs: the floors bound the rate.
        sender.on_packets(1);
        let tiny = Duration::from_micros(50);
        assert_eq!(sender.poll(ms(11), low, tiny, 6), Next::At(ms(12)));
        assert_eq!(sender.poll(ms(11), high, tiny, 6), Next::At(ms(20)));
    }

    /// After a path change the RTT starts again from quinn's initial 333 ms;
    /// the reports must not wait that long once the real RTT is known.
    #[test]
    fn a_shrinking_rtt_brings_the_next_report_forward() {
        let ms = Duration::from_millis;
        let low = Feedback::default();
        let mut sender = FeedbackSender::new(SendPolicy::default());
        sender.on_packets(1);
        sender.on_sent(ms(0), low, 1);
        sender.on_packets(5);
        assert_eq!(sender.poll(ms(1), low, ms(333), 2), Next::At(ms(11)));
        assert_eq!(sender.poll(ms(11), low, ms(1), 3), Next::Send);
    }

    #[test]
    fn marked_packets_without_data_get_no_periodic_reports() {
        let ms = Duration::from_millis;
        let (srtt, low) = (ms(40), Feedback::default());
        let mut sender = FeedbackSender::new(SendPolicy::default());
        sender.on_packets(1);
        sender.on_sent(ms(0), low, 7);
        // ACK-only packets keep arriving, the progress counter stays at 7.
        sender.on_packets(10);
        assert_eq!(sender.poll(ms(100), low, srtt, 7), Next::At(ms(110)));
        assert_eq!(sender.poll(ms(500), low, srtt, 7), Next::At(ms(510)));
        // A change is still reported.
        let high = Feedback {
            level: 1,
            ..Feedback::default()
        };
        assert_eq!(sender.poll(ms(500), high, srtt, 7), Next::Send);
    }
}

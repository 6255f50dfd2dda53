//! Whether a connection's sender uses router feedback ([`PeerMode`]), the
//! one table of its transitions, and the marks its datagrams carry in each
//! mode ([`Marking`]).

use crate::wire::ecn::{Ecn, SchemeTag};

/// Whether a connection's sender uses router feedback, and if not, why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PeerMode {
    /// Nothing received from the peer yet: packets are tagged, ECN is quinn's ECT(0).
    Probing,
    /// The peer tags its packets: it runs ecnq, the scheme's law is in control.
    Ecnq,
    /// Classic congestion control: the peer's packets are untagged.
    ClassicPeerNotEcnq,
    /// Classic congestion control: the peer's reports stopped.
    ClassicReportsStopped,
    /// This connection's controller uses no router feedback (the classic
    /// law, or one of quinn's controllers).
    Unassisted,
    /// Classic congestion control: the scheme's presence probes arrive
    /// unraised, so no ecnq router is on the path.
    ClassicNoRouter,
    /// The peer does not run ecnq, and the scheme's law reads the routers'
    /// marks from the peer's ACK-ECN counts (erc; docs/design.md §3).
    EcnqAckCounts,
    /// Classic congestion control: the peer does not run ecnq, and its
    /// ACKs carry no ECN counts (it does not support ECN, the path
    /// bleaches it, or it stopped sending them). Packets stay tagged with
    /// the scheme's codepoint, and counts that come back end it.
    ClassicNoEcnCounts,
    /// Classic congestion control: the peer's ECN counts fail ECN
    /// validation (RFC 9000 §13.4.2.1: a count fell, or more packets were
    /// counted than sent).
    ClassicEcnInvalid,
}

/// What moves a sender from one [`PeerMode`] to another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Signal {
    /// A packet arrived from the peer, with a scheme tag or without;
    /// `reads_counts`: the sender can read its scheme's marks from ACK-ECN
    /// counts.
    PeerPacket { tagged: bool, reads_counts: bool },
    /// A report from the peer was accepted.
    ReportAccepted,
    /// The presence verdict at an accepted report.
    RouterPresent(bool),
    /// No report for too long while data flowed.
    ReportsStopped,
    /// The peer acknowledged many packets in ACK frames without ECN
    /// counts since its last frame with counts.
    EcnCountsStopped,
    /// An ACK frame with ECN counts arrived.
    EcnCountsSeen,
    /// The peer's ECN counts failed validation.
    EcnCountsInvalid,
}

impl PeerMode {
    const ALL: [PeerMode; 9] = [
        PeerMode::Probing,
        PeerMode::Ecnq,
        PeerMode::ClassicPeerNotEcnq,
        PeerMode::ClassicReportsStopped,
        PeerMode::Unassisted,
        PeerMode::ClassicNoRouter,
        PeerMode::EcnqAckCounts,
        PeerMode::ClassicNoEcnCounts,
        PeerMode::ClassicEcnInvalid,
    ];

    /// A short name for logs and stats.
    pub const fn name(self) -> &'static str {
        match self {
            PeerMode::Probing => "probing",
            PeerMode::Ecnq => "ecnq",
            PeerMode::ClassicPeerNotEcnq => "classic (peer not ecnq)",
            PeerMode::ClassicReportsStopped => "classic (reports stopped)",
            PeerMode::Unassisted => "no router feedback",
            PeerMode::ClassicNoRouter => "classic (no ecnq router)",
            PeerMode::EcnqAckCounts => "ecnq (ACK-ECN counts)",
            PeerMode::ClassicNoEcnCounts => "classic (no ECN counts)",
            PeerMode::ClassicEcnInvalid => "classic (ECN counts invalid)",
        }
    }

    /// Whether the scheme's law runs on router feedback: the peer's reports
    /// or its ACK-ECN counts.
    pub const fn uses_feedback(self) -> bool {
        matches!(self, PeerMode::Ecnq | PeerMode::EcnqAckCounts)
    }

    /// Whether the scheme's law has been replaced by the classic law.
    pub const fn is_fallback(self) -> bool {
        matches!(
            self,
            PeerMode::ClassicPeerNotEcnq
                | PeerMode::ClassicReportsStopped
                | PeerMode::ClassicNoRouter
                | PeerMode::ClassicNoEcnCounts
                | PeerMode::ClassicEcnInvalid
        )
    }

    /// The mode after `signal`: every transition a sender makes (docs/design.md
    /// §3). An untagged peer is final, and so are invalid ECN counts; a
    /// fallback for stopped reports, an absent router or missing counts
    /// ends when reports, raised probes, or counts come back.
    pub(super) fn after(self, signal: Signal) -> PeerMode {
        use PeerMode::*;
        match (self, signal) {
            (Probing, Signal::PeerPacket { tagged: true, .. }) => Ecnq,
            (
                Probing,
                Signal::PeerPacket {
                    tagged: false,
                    reads_counts,
                },
            ) => match reads_counts {
                true => EcnqAckCounts,
                false => ClassicPeerNotEcnq,
            },
            (EcnqAckCounts, Signal::EcnCountsStopped) => ClassicNoEcnCounts,
            (ClassicNoEcnCounts, Signal::EcnCountsSeen) => EcnqAckCounts,
            (EcnqAckCounts | ClassicNoEcnCounts, Signal::EcnCountsInvalid) => ClassicEcnInvalid,
            (ClassicReportsStopped, Signal::ReportAccepted) => Ecnq,
            (Ecnq, Signal::RouterPresent(false)) => ClassicNoRouter,
            (ClassicNoRouter, Signal::RouterPresent(true)) => Ecnq,
            (Probing | Ecnq, Signal::ReportsStopped) => ClassicReportsStopped,
            (mode, _) => mode,
        }
    }

    /// Whether the peer's Not-ECT packets may be its presence probes.
    pub(super) const fn peer_probes(self) -> bool {
        matches!(
            self,
            PeerMode::Ecnq | PeerMode::ClassicReportsStopped | PeerMode::ClassicNoRouter
        )
    }

    const fn from_index(index: u8) -> PeerMode {
        PeerMode::ALL[index as usize % PeerMode::ALL.len()]
    }
}

/// What decides the TOS byte of the next datagrams: published by the session
/// after every change, read by the socket without a lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marking {
    /// The sender's mode.
    pub mode: PeerMode,
    /// The active law's current tag (MCP changes its fairing bits; the
    /// classic law after a fallback is untagged).
    pub tag: SchemeTag,
    /// The scheme's own tag, kept while fallen back.
    pub scheme_tag: SchemeTag,
}

impl Marking {
    /// Whether datagrams sent now take turns as presence probes: once the
    /// peer runs ecnq (its receiver hands quinn tagged Not-ECT as ECT(0), so
    /// quinn's ECN validation holds), for schemes that probe.
    pub fn takes_probes(self) -> bool {
        matches!(self.mode, PeerMode::Ecnq | PeerMode::ClassicNoRouter)
            && self.scheme_tag.wire().sends_probes()
    }

    /// The whole TOS byte of a datagram quinn wants sent with `quinn_ecn`;
    /// `probe` makes it a presence probe.
    pub fn tos(self, quinn_ecn: Ecn, probe: bool) -> u8 {
        let (tag, ecn) = match self.mode {
            // Until the peer is known to run ecnq, use quinn's codepoint so that a
            // vanilla peer's ECN counts pass quinn's validation (ECT(1) would fail it).
            PeerMode::Probing => (self.tag, quinn_ecn),
            PeerMode::Ecnq => (self.tag, self.scheme_tag.wire().base_ecn()),
            // Tagged, with the scheme's base codepoint whatever quinn's ECN
            // validation makes of the routers' marks: the peer's counts
            // carry them.
            PeerMode::EcnqAckCounts => (self.tag, self.scheme_tag.wire().base_ecn()),
            // As tagged as with counts, so that counts the peer sends again
            // carry the routers' marks.
            PeerMode::ClassicNoEcnCounts => (self.scheme_tag, self.scheme_tag.wire().base_ecn()),
            // Still tagged, so routers keep marking and the peer keeps
            // decoding: when its reports get through again, or its probes
            // come back raised, feedback resumes.
            PeerMode::ClassicReportsStopped | PeerMode::ClassicNoRouter => {
                (self.scheme_tag, quinn_ecn)
            }
            PeerMode::ClassicPeerNotEcnq | PeerMode::ClassicEcnInvalid | PeerMode::Unassisted => {
                (SchemeTag::UNTAGGED, quinn_ecn)
            }
        };
        let (tag, ecn) = if probe {
            self.scheme_tag.wire().probe(tag, ecn)
        } else {
            (tag, ecn)
        };
        tag.tos(ecn)
    }

    /// Packed into one word, for an atomic.
    pub(super) fn to_bits(self) -> u32 {
        u32::from(self.mode as u8)
            | u32::from(self.tag.dscp()) << 8
            | u32::from(self.scheme_tag.dscp()) << 16
    }

    /// The inverse of [`Marking::to_bits`].
    pub(super) fn from_bits(bits: u32) -> Marking {
        let [mode, tag, scheme_tag, _] = bits.to_le_bytes();
        Marking {
            mode: PeerMode::from_index(mode),
            tag: SchemeTag::from_dscp(tag),
            scheme_tag: SchemeTag::from_dscp(scheme_tag),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Scheme;

    #[test]
    fn fallbacks_end_only_when_their_cause_does() {
        use PeerMode::*;
        use Signal::*;
        let packet = |tagged, reads_counts| PeerPacket {
            tagged,
            reads_counts,
        };
        assert_eq!(Probing.after(packet(true, true)), Ecnq);
        assert_eq!(Probing.after(packet(false, false)), ClassicPeerNotEcnq);
        assert_eq!(Probing.after(packet(false, true)), EcnqAckCounts);
        assert_eq!(EcnqAckCounts.after(EcnCountsStopped), ClassicNoEcnCounts);
        assert_eq!(ClassicNoEcnCounts.after(EcnCountsSeen), EcnqAckCounts);
        assert_eq!(EcnqAckCounts.after(EcnCountsInvalid), ClassicEcnInvalid);
        assert_eq!(
            ClassicNoEcnCounts.after(EcnCountsInvalid),
            ClassicEcnInvalid
        );
        // An untagged peer, or one with invalid counts, stays classic
        // whatever arrives later; a peer read by its counts sends no
        // reports, and only counts end a fallback for missing ones.
        for signal in [
            packet(true, true),
            ReportAccepted,
            RouterPresent(true),
            ReportsStopped,
            EcnCountsSeen,
        ] {
            assert_eq!(ClassicPeerNotEcnq.after(signal), ClassicPeerNotEcnq);
            assert_eq!(ClassicEcnInvalid.after(signal), ClassicEcnInvalid);
            assert_eq!(EcnqAckCounts.after(signal), EcnqAckCounts);
            if signal != EcnCountsSeen {
                assert_eq!(ClassicNoEcnCounts.after(signal), ClassicNoEcnCounts);
            }
        }
        assert_eq!(Ecnq.after(ReportsStopped), ClassicReportsStopped);
        assert_eq!(
            ClassicReportsStopped.after(RouterPresent(true)),
            ClassicReportsStopped
        );
        assert_eq!(ClassicReportsStopped.after(ReportAccepted), Ecnq);
        assert_eq!(Ecnq.after(RouterPresent(false)), ClassicNoRouter);
        assert_eq!(ClassicNoRouter.after(ReportsStopped), ClassicNoRouter);
        assert_eq!(ClassicNoRouter.after(RouterPresent(true)), Ecnq);
        assert_eq!(Unassisted.after(packet(true, true)), Unassisted);
    }

    #[test]
    fn marking_round_trips_through_bits() {
        let scheme_tag = SchemeTag::new(Scheme::Vcp.wire().id());
        for mode in PeerMode::ALL {
            for tag in [scheme_tag, SchemeTag::UNTAGGED] {
                let marking = Marking {
                    mode,
                    tag,
                    scheme_tag,
                };
                assert_eq!(Marking::from_bits(marking.to_bits()), marking);
            }
        }
    }
}

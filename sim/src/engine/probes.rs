//! A probing sender's presence probes (`ecnq::session::presence`): every
//! data packet that `is_probe` picks goes out as its scheme's probe (Not-ECT,
//! or MCP's probe bit), an ecnq router raises it, and the receiver echoes
//! the probes that arrived unraised. When they say
//! no ecnq router is on the path, Cubic with ECT(0) stands in for the
//! scheme's law (and hands back when one appears), as the QUIC sender does.

use ecnq::schemes::cubic::CubicLaw;
use ecnq::session::presence::{is_probe, RouterPresence};
use ecnq::signal::{Law, LawConfig, PacketMarks};
use ecnq::{Ecn, SchemeTag};

use crate::protocol::Protocol;

/// What a probing sender sent, what came back unraised, and the verdict.
#[derive(Debug)]
pub(super) struct Probes {
    presence: RouterPresence,
    tag: SchemeTag,
    sent: u64,
    unraised: u64,
    /// Packets acknowledged: what can have arrived.
    acked: u64,
    config: LawConfig,
}

impl Probes {
    /// Probes for a flow running `protocol` with law `config`.
    pub(super) fn new(protocol: Protocol, config: LawConfig) -> Probes {
        Probes {
            presence: RouterPresence::default(),
            tag: SchemeTag::new(protocol.law(config).tag().wire_id),
            sent: 0,
            unraised: 0,
            acked: 0,
            config,
        }
    }

    /// Whether Cubic stands in for the scheme's law (no ecnq router).
    pub(super) fn fallen_back(&self) -> bool {
        !self.presence.present()
    }

    /// Marks the sender's `packets_sent`-th data packet: the scheme's tag
    /// also while Cubic (untagged) stands in for its law, and the scheme's
    /// probe marks on a probe.
    pub(super) fn mark(&mut self, packets_sent: u64, marks: &mut PacketMarks) {
        if is_probe(packets_sent, self.presence.decided()) {
            self.probe_marks(marks);
            self.sent += 1;
        } else if marks.tag.is_untagged() {
            marks.tag = self.tag;
        }
    }

    /// Marks a packet as a probe of the scheme, uncounted.
    pub(super) fn probe_marks(&self, marks: &mut PacketMarks) {
        if marks.tag.is_untagged() {
            marks.tag = self.tag;
        }
        (marks.tag, marks.ecn) = self.tag.wire().probe(marks.tag, marks.ecn);
    }

    /// An ACK of `acked` packets echoed `unraised` probes that arrived
    /// unraised. On a change of verdict, returns the law to send with from
    /// now on, starting at the `current` law's window, and its data packets'
    /// ECN codepoint.
    pub(super) fn on_echo(
        &mut self,
        acked: u64,
        unraised: u64,
        current: &dyn Law,
        protocol: Protocol,
    ) -> Option<(Box<dyn Law>, Ecn)> {
        self.unraised += unraised;
        self.acked += acked;
        let was = self.presence.present();
        let present = self
            .presence
            .on_report(self.unraised, self.sent, self.acked);
        if present == was {
            return None;
        }
        if present {
            let config = LawConfig {
                initial_window: current.window(),
                ..self.config
            };
            Some((protocol.law(config), protocol.data_ecn()))
        } else {
            let cubic = CubicLaw::in_place_of(current, self.config);
            Some((Box::new(cubic), Ecn::Ect0))
        }
    }
}

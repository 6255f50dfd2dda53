//! QUIC's handshake ahead of every flow's data (RFC 9000 §7, RFC 9001
//! §4.1): the client (the flow's receiver) sends its Initial on the ACK
//! path; the server (the flow's sender) answers with its flight on the
//! data path; once the whole flight is in, the client sends its Finished
//! with the request, and the server starts the data when that arrives.
//! Every handshake packet crosses the links as data does, tagged as its
//! end's other packets are, so routers queue, count and mark it. The
//! receiver's decoder reads only the data's marks: the flight's digits
//! are written a round trip before the data's, and a chain mixing the two
//! spelled an unrelated rate (docs/design.md §2, Arrivals); an erc
//! router writes its start code into the flight instead, which slows the
//! server's first window (`a_flash_crowd_paces_its_initial_windows_to_the_start_code`). An explicit
//! baseline's flight carries its header ([`SenderLaw::handshake_header`]),
//! which the routers fill in and the Finished echoes, so RCP's sender
//! learns the path's rate as its SYN does (`rcp-afct`). Lost packets are
//! sent again on the client's probe timeout (RFC 9002 §6.2): its Initial
//! while the flight is incomplete, else its Finished; the server answers
//! every Initial with its whole flight.
//! Tests: `sim/tests/engine.rs`, `a_flow_starts_with_the_handshake`.

use ecnq::schemes::erc::start_with_code;
use ecnq::session::HandshakeSpace;
use ecnq::signal::RttSample;
use ecnq::wire::ack::{AckRepr, EcnCounts};
use ecnq::wire::ecn::Ecn;

use super::clock::{dur, Event, Nanos};
use super::packet::{Packet, PacketKind};
use super::state::FlowState;
use super::Sim;
use crate::explicit::Header;
#[cfg(doc)]
use crate::explicit::SenderLaw;

/// The client's Initial datagram: padded to QUIC's smallest datagram (RFC
/// 9000 §14.1).
const INITIAL_LEN: u32 = 1200;
/// The server's first flight: at most three times what the client sent
/// before the client's address is validated (RFC 9000 §8.1), so three
/// datagrams of the Initial's size (Initial and Handshake packets
/// coalesced, the certificate chain inside).
const FLIGHT: u8 = ecnq::schemes::erc::START_CODE_DIGITS;
/// The bytes of the server's flight, which cross the data path ahead of
/// the data and take their part of its bottleneck (the processor-sharing
/// reference counts them too).
pub const FLIGHT_BYTES: u32 = FLIGHT as u32 * INITIAL_LEN;
/// The client's Finished with the request: IPv4 and UDP headers (28), a
/// Handshake packet with an ACK and the 36-byte Finished (RFC 8446 §4.4.4)
/// and a 1-RTT packet with a short request, each with its 16-byte AEAD tag.
const FINISHED_LEN: u32 = 160;
/// The client's packet numbers for its Initial and its Finished.
const INITIAL_PN: u64 = 0;
const FINISHED_PN: u64 = 1;
/// The probe timeout before any RTT sample: RFC 9002 §6.2.2's initial RTT
/// of 333 ms plus four times half of it (§5.3, §6.2.1).
const FIRST_PTO: Nanos = 999_000_000;

/// Where a flow's handshake is.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Handshake {
    /// The flight's datagrams the client got, one bit each.
    flight: u8,
    /// The client's first RTT sample: its Initial to the flight's first
    /// datagram.
    client_rtt: Option<Nanos>,
    /// When the client last sent its Initial, and its last packet.
    initial_sent: Nanos,
    client_sent: Nanos,
    /// Probe timeouts so far; each doubles the next (RFC 9002 §6.2.1).
    backoff: u32,
    /// The flight's header as the routers left it, which the client's
    /// Finished echoes.
    echo: Header,
    /// When the server last sent its flight.
    flight_sent: Nanos,
    /// The flight's packets that came, every copy, and those of them that
    /// came Not-ECT (erc's start code), per packet-number space
    /// ([`HandshakeSpace`] as index): the client's ACK-ECN counts of the
    /// handshake tell the server. As quinn sends it, the flight's first
    /// datagram holds an Initial and a Handshake packet, the others a
    /// Handshake packet each, so the Handshake space counts every datagram.
    received: [u8; 2],
    cleared: [u8; 2],
}

impl Handshake {
    fn flight_complete(&self) -> bool {
        self.flight == (1 << FLIGHT) - 1
    }

    /// A packet of the flight in `space` came, Not-ECT or not.
    fn count(&mut self, space: HandshakeSpace, not_ect: bool) {
        let i = space as usize;
        self.received[i] = self.received[i].saturating_add(1);
        self.cleared[i] = self.cleared[i].saturating_add(u8::from(not_ect));
    }

    /// erc's start code as the counts tell it: (cleared, flight datagrams).
    fn code(&self) -> (u8, u8) {
        let i = HandshakeSpace::Handshake as usize;
        (self.cleared[i], self.received[i])
    }

    /// The client's ACK frames of the flight, one per space that got a
    /// packet, each acknowledging every packet that came, with the ACK-ECN
    /// counts (RFC 9000 §19.3.2): those not cleared count as ECT(0), where
    /// a CE mark would count; the code reads both as not cleared.
    fn acks(&self) -> Vec<(HandshakeSpace, AckRepr)> {
        let spaces = [HandshakeSpace::Initial, HandshakeSpace::Handshake];
        let ack = |space: HandshakeSpace| {
            let (received, cleared) = (self.received[space as usize], self.cleared[space as usize]);
            let largest = u64::from(received.checked_sub(1)?);
            let ect0 = u64::from(received - cleared);
            let ecn = Some(EcnCounts {
                ect0,
                ect1: 0,
                ce: 0,
            });
            let ranges = vec![0..=largest];
            Some((
                space,
                AckRepr {
                    largest,
                    delay: 0,
                    ranges,
                    ecn,
                },
            ))
        };
        spaces.into_iter().filter_map(ack).collect()
    }

    /// The client's probe timeout: 3 × its first RTT sample (srtt plus four
    /// times rttvar = sample / 2, RFC 9002 §5.3), doubled per timeout.
    fn pto(&self) -> Nanos {
        self.client_rtt.map_or(FIRST_PTO, |r| 3 * r) << self.backoff.min(6)
    }
}

impl Sim {
    /// Flow `f` opens its connection: the client's Initial goes out.
    pub(super) fn open(&mut self, f: usize) {
        self.flows[f].state = FlowState::Connecting;
        self.client_sends(f, INITIAL_PN, INITIAL_LEN);
    }

    /// The client of flow `f` sends packet `pn` of `len` bytes and arms its
    /// probe timer.
    fn client_sends(&mut self, f: usize, pn: u64, len: u32) {
        let now = self.clock.now();
        let flow = &mut self.flows[f];
        if pn == INITIAL_PN {
            flow.handshake.initial_sent = now;
        }
        flow.handshake.client_sent = now;
        let marks = flow.reply_marks(flow.law.tag(), f as u64);
        let pto = flow.handshake.pto();
        let mut pkt = Packet::bare(f, PacketKind::ClientHandshake, len, marks, pn, now);
        if pn == FINISHED_PN {
            pkt.explicit = flow.handshake.echo;
        }
        self.inject(pkt);
        self.clock
            .schedule_at(now + pto, Event::Handshake(f as u32));
    }

    /// The server of flow `f` sends its whole flight.
    fn server_sends_flight(&mut self, f: usize) {
        let now = self.clock.now();
        self.flows[f].handshake.flight_sent = now;
        let header = self.flows[f].law.handshake_header();
        for pn in 0..u64::from(FLIGHT) {
            let hash = self.rng.next_u32();
            let marks = self.flows[f].handshake_marks(hash, f as u64);
            let kind = PacketKind::ServerHandshake;
            let mut pkt = Packet::bare(f, kind, INITIAL_LEN, marks, pn, now);
            pkt.explicit = header;
            self.inject(pkt);
        }
    }

    /// Flow `f`'s client probe timer fired: while the server has not begun
    /// the data, the client sends again what the server may lack.
    pub(super) fn handshake_timer(&mut self, f: usize) {
        let now = self.clock.now();
        let flow = &mut self.flows[f];
        let due = flow.handshake.client_sent + flow.handshake.pto();
        if flow.state != FlowState::Connecting || now < due {
            return;
        }
        flow.handshake.backoff += 1;
        match flow.handshake.flight_complete() {
            false => self.client_sends(f, INITIAL_PN, INITIAL_LEN),
            true => self.client_sends(f, FINISHED_PN, FINISHED_LEN),
        }
    }

    /// A handshake packet reached its end.
    pub(super) fn on_handshake(&mut self, pkt: Packet) {
        let now = self.clock.now();
        let f = pkt.flow as usize;
        let flow = &mut self.flows[f];
        if flow.state != FlowState::Connecting {
            return;
        }
        if pkt.kind == PacketKind::ServerHandshake {
            let hs = &mut flow.handshake;
            let complete = hs.flight_complete();
            hs.client_rtt.get_or_insert(now - hs.initial_sent);
            hs.flight |= 1 << pkt.pn;
            let spaces: &[HandshakeSpace] = match pkt.pn {
                0 => &[HandshakeSpace::Initial, HandshakeSpace::Handshake],
                _ => &[HandshakeSpace::Handshake],
            };
            for &space in spaces {
                hs.count(space, pkt.marks.ecn == Ecn::NotEct);
            }
            hs.echo = pkt.explicit;
            if !complete && self.flows[f].handshake.flight_complete() {
                self.client_sends(f, FINISHED_PN, FINISHED_LEN);
            }
            return;
        }
        flow.on_reply(now, &pkt.marks);
        if pkt.pn == INITIAL_PN {
            self.server_sends_flight(f);
            return;
        }
        // The sender takes no RTT sample from the handshake: its first
        // window goes out as it did without one (quinn paces it from the
        // handshake's RTT; the simulator's laws start from their ACKs).
        // Only an explicit header's echo comes with the handshake's round
        // trip, as an RCP SYN's does, and erc's start code: the flight's
        // datagrams a router cleared, which the client's ACK-ECN counts of
        // the handshake tell the server, pace its first window. A session
        // hears the handshake as the QUIC stack's does: the client's ACK
        // frames, quinn's acknowledgement of the flight with its round
        // trip, then the handshake's end (`session_mode_hears_the_start_code`).
        let rtt = RttSample::uniform(dur(now - flow.handshake.flight_sent));
        if pkt.explicit != Header::None {
            flow.law.on_echo(dur(now), pkt.explicit, &rtt);
        }
        match flow.session.as_deref_mut() {
            Some(session) => {
                let flight = flow.handshake.code().1;
                session.on_handshake(now, &flow.handshake.acks(), flight, INITIAL_LEN, rtt);
            }
            None => start_with_code(&mut *flow.law, dur(now), flow.handshake.code(), &rtt),
        }
        flow.state = FlowState::Active;
        flow.pace_next = now;
        self.try_send(f);
    }
}

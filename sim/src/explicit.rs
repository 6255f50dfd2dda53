//! What the explicit-rate baselines, RCP ([`crate::rcp`]) and XCP
//! ([`crate::xcp`]), add to the simulator: a congestion header in every data
//! packet, which routers rewrite and the receiver echoes in its ACK, the
//! routers that rewrite it at each bottleneck, and the sender's side of it.
//!
//! ecnq's two ECN bits cannot carry these fields, so they live in the
//! simulator only, not in the registry of wire schemes (docs/design.md §2,
//! "Explicit-rate baselines"). The engine's
//! hooks are narrow: a link hands each packet's header to its RCP and XCP
//! routers as the packet arrives and as it departs (with the
//! [`LinkState`] they read), a sender stamps the header its law writes
//! ([`SenderLaw::header`]) and gives the law the header its ACK echoed
//! ([`SenderLaw::on_echo`]).

use std::ops::{Deref, DerefMut};
use std::time::Duration;

use ecnq::signal::{Law, RttSample};

/// A packet's explicit congestion header, as its sender wrote it and the
/// routers on its path rewrote it; an ACK carries its data packet's back.
/// Its fields are `f32`, as a real header's would be narrow: every
/// simulated packet carries one, and a smaller packet runs faster.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Header {
    /// No header: every protocol but RCP and XCP.
    #[default]
    None,
    /// RCP's (Dukkipati and McKeown, IWQoS 2005, §2): the rate the path
    /// offers, the smallest of its routers' R, and the sender's RTT.
    Rcp {
        /// Bytes per second; the sender writes infinity ("any rate").
        rate: f32,
        /// The sender's smoothed RTT, seconds; 0 before it has one.
        rtt: f32,
    },
    /// XCP's (Katabi, Handley, Rohrs, SIGCOMM 2002, §3.1): the sender's
    /// window and RTT, and the change of window the routers allow.
    Xcp {
        /// H_cwnd, bytes.
        cwnd: f32,
        /// H_rtt, seconds; 0 before the sender has one.
        rtt: f32,
        /// H_feedback, bytes; the sender writes infinity (no limit of its
        /// own), and each router lowers it to its own feedback.
        feedback: f32,
    },
}

/// The RTT a sender writes into a header, seconds: its smoothed RTT, or 0
/// before it has one (routers leave such a packet out of their averages).
pub fn header_rtt(srtt: Option<Duration>) -> f32 {
    srtt.map_or(0.0, |d| d.as_secs_f32())
}

/// What a router reads of its link as a packet arrives or departs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkState {
    /// The capacity the link's router meters against, bytes per second.
    pub capacity: f64,
    /// Bytes waiting in the link's queues.
    pub queue_bytes: u64,
}

#[cfg(test)]
impl LinkState {
    /// A 10 Mbit/s link with `queue_bytes` waiting, for the routers' tests.
    pub(crate) fn ten_mbit(queue_bytes: u64) -> LinkState {
        LinkState {
            capacity: 1.25e6,
            queue_bytes,
        }
    }
}

/// The sender's side of an explicit header: a [`Law`] that writes the
/// header of each data packet and reads the one its ACK echoes.
pub trait ExplicitLaw: Law {
    /// The header of the next data packet.
    fn header(&self) -> Header;

    /// An ACK echoed `header`, its data packet's header as the path's
    /// routers left it. Every ACK of such a law echoes one, before
    /// [`Law::on_ack`], so the law takes the RTT here and has nothing to
    /// do in `on_ack` or `on_feedback` (no ecnq decoder runs).
    fn on_echo(&mut self, now: Duration, header: Header, rtt: &RttSample);

    /// The header the server's handshake flight carries, which the routers
    /// fill in as a data packet's and the client's Finished echoes; none
    /// for a law that learns only from its data's ACKs.
    fn handshake_header(&self) -> Header {
        Header::None
    }
}

/// A flow's law: the core's or a baseline's, or one that speaks an
/// explicit header. It derefs to the [`Law`] either way.
#[derive(Debug)]
pub enum SenderLaw {
    /// A law with no header.
    Plain(Box<dyn Law>),
    /// RCP's or XCP's.
    Explicit(Box<dyn ExplicitLaw>),
}

impl SenderLaw {
    /// The header of the next data packet ([`Header::None`] for a plain law).
    pub fn header(&self) -> Header {
        match self {
            SenderLaw::Plain(_) => Header::None,
            SenderLaw::Explicit(law) => law.header(),
        }
    }

    /// The header of the server's handshake flight
    /// ([`ExplicitLaw::handshake_header`]; none for a plain law).
    pub fn handshake_header(&self) -> Header {
        match self {
            SenderLaw::Plain(_) => Header::None,
            SenderLaw::Explicit(law) => law.handshake_header(),
        }
    }

    /// An ACK echoed `header` (a plain law has none to read).
    pub fn on_echo(&mut self, now: Duration, header: Header, rtt: &RttSample) {
        if let SenderLaw::Explicit(law) = self {
            law.on_echo(now, header, rtt);
        }
    }
}

impl Deref for SenderLaw {
    type Target = dyn Law;

    fn deref(&self) -> &(dyn Law + 'static) {
        match self {
            SenderLaw::Plain(law) => law.as_ref(),
            SenderLaw::Explicit(law) => law.as_ref(),
        }
    }
}

impl DerefMut for SenderLaw {
    fn deref_mut(&mut self) -> &mut (dyn Law + 'static) {
        match self {
            SenderLaw::Plain(law) => law.as_mut(),
            SenderLaw::Explicit(law) => law.as_mut(),
        }
    }
}

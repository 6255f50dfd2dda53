//! # ecnq
//!
//! Router-assisted, multi-bit ECN congestion control — VCP, EVCP, DPCP / TPCP
//! (MPCP), BMCC (ADPM) and MCP — delivered in userspace.
//!
//! This crate has two layers:
//!
//! * the **sans-IO protocol core** (always built): for every scheme a router
//!   [`Marker`], a receiver [`Decoder`] and a sender [`Law`], plus the
//!   [`LoadFactorMeter`] routers run on each output link, and the
//!   [`session::Session`] that holds one connection's feedback state. No
//!   sockets, no tasks, no clocks: time is an argument. The router shim, the simulator
//!   and the QUIC stack all run this same code.
//! * the **QUIC integration** (feature `quic`, on by default): quinn
//!   congestion controllers fed by the load factor routers write into ECN.
//!   Its socket reads and writes the TOS byte through `tos_io` (feature
//!   `tos-io`, which the router shim's relay uses without QUIC).
//!
//! The core is grouped by role:
//!
//! * [`schemes`]: one module per scheme, its marker, decoder and law side
//!   by side ([`schemes::erc`], [`schemes::vcp`], [`schemes::evcp`],
//!   [`schemes::mpcp`] (DPCP and TPCP), [`schemes::bmcc`], [`schemes::mcp`],
//!   [`schemes::prague`], [`schemes::classic`] and [`schemes::cubic`] for
//!   paths without ecnq feedback), and the registry that lists them;
//! * [`router`]: the link model, the meter, the policer and the marking
//!   pipeline of one output link;
//! * [`session`]: one connection's feedback state (decoder, reports,
//!   fallback, router presence, rate gate);
//! * [`wire`]: ECN codepoints, the DSCP scheme tag, the packet hash, QUIC
//!   ACK frames;
//! * [`signal`]: the traits of the three roles and what they share (load
//!   figures, the per-flow table, the max-min split); [`statistics`] and
//!   [`units`]: the figures and quantities every tool shares.

#![warn(missing_docs)]

pub mod router;
pub mod schemes;
pub mod session;
pub mod signal;
pub mod statistics;
#[cfg(feature = "tos-io")]
pub mod tos_io;
pub mod units;
pub mod wire;

#[cfg(feature = "quic")]
pub mod quic;

pub use router::meter::{IntervalStats, LinkLoad, LoadFactorMeter, MeterConfig};
pub use router::{MarkCounters, MarkingMode, RouterConfig, RouterLink};
pub use schemes::registry::FORMULAS;
pub use schemes::{Scheme, UnknownScheme};
pub use signal::flow_table::FlowTableConfig;
pub use signal::load::LoadFactor;
pub use signal::{
    Congestion, Decoder, Feedback, Law, LawConfig, LinkState, Marker, Mode, PacketMarks, RttSample,
};
pub use wire::ecn::{Ecn, SchemeTag, WireScheme};
pub use wire::hash::packet_hash;

//! # ecnq
//!
//! Router-assisted, multi-bit ECN congestion control — VCP, EVCP, DPCP / TPCP
//! (MPCP), BMCC (ADPM) and MCP — delivered in userspace.
//!
//! This crate has two layers:
//!
//! * the **sans-IO protocol core** (always built): for every scheme a router
//!   [`Marker`], a receiver [`Decoder`] and a sender [`Law`], plus the
//!   [`LoadFactorMeter`] routers run on each output link. No sockets, no
//!   tasks, no clocks: time is an argument. The router shim, the simulator
//!   and the QUIC stack all run this same code.
//! * the **QUIC integration** (feature `quic`, on by default): quinn
//!   congestion controllers fed by the load factor routers write into ECN.
//!
//! One module per scheme holds its marker, decoder and law side by side:
//! [`vcp`], [`evcp`], [`mpcp`] (DPCP and TPCP), [`bmcc`], [`mcp`], and
//! [`classic`] for paths and peers without ecnq feedback.

#![warn(missing_docs)]

pub mod bmcc;
pub mod bottleneck;
pub mod classic;
pub mod cubic;
pub mod ecn;
pub mod erc;
pub mod evcp;
pub mod fairness;
pub mod flow_table;
pub mod hash;
pub mod load;
pub mod mcp;
pub mod meter;
pub mod mpcp;
pub mod policer;
pub mod prague;
pub mod presence;
pub mod router;
pub mod scheme;
pub mod signal;
pub mod statistics;
pub mod units;
pub mod vcp;

#[cfg(feature = "quic")]
pub mod quic;

pub use ecn::{Ecn, SchemeTag, WireScheme};
pub use flow_table::FlowTableConfig;
pub use hash::packet_hash;
pub use load::LoadFactor;
pub use meter::{IntervalStats, LinkLoad, LoadFactorMeter, MeterConfig};
pub use router::{MarkCounters, MarkingMode, RouterConfig, RouterLink};
pub use scheme::{Scheme, UnknownScheme};
pub use signal::{
    Congestion, Decoder, Feedback, Law, LawConfig, LinkState, Marker, Mode, PacketMarks, RttSample,
};

//! The emulated link, sans-IO: what a packet meets between the shim's
//! input and output (docs/design.md §4).
//!
//! * [`spec`]: a link in tc/netem words.
//! * [`classify`]: raw packet → [`ecnq::PacketMarks`] and back.
//! * the link model ([`Link`]): marking, queue, rate, delay, and the
//!   impairments (loss, corruption, duplication, reordering, outages).

pub mod classify;
mod impair;
mod model;
pub mod spec;

pub use impair::{Corruption, CORRUPT_SPAN};
pub use model::{
    router_config, Direction, DropCause, Link, LinkCounters, LinkPacket, MTU,
    UNLIMITED_CAPACITY_BPS,
};

/// Test packets and links, for the data paths' tests.
#[cfg(test)]
pub(crate) use model::tests;

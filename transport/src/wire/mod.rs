//! What travels in the IP header: ECN codepoints, the DSCP scheme tag and
//! the registry's wire facts per tag, and the packet hash that picks a
//! packet's place in a chain. The feedback report's format is
//! [`crate::session::report`].
//! The QUIC ACK frames a sender reads its peer's ECN counts from are [`ack`].

pub mod ack;
pub mod ecn;
pub mod hash;

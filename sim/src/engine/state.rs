//! Where a flow is in its life: the state the engine's modules share
//! (the handshake, the sender, the measurement), apart from the flow's
//! own record so that none of them imports another for it.

use super::clock::Nanos;

/// Where a flow is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowState {
    /// Not started yet.
    Pending,
    /// In its handshake: no data yet.
    Connecting,
    /// Sending.
    Active,
    /// Past its stop time: no new data.
    Stopped,
    /// Every byte of a finite flow was acknowledged at this time.
    Done(Nanos),
}

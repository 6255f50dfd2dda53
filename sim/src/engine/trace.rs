//! What a run counts and, for tests, records: the packet conservation
//! counters and the trace of every queue event.

use ecnq::signal::PacketMarks;

use super::clock::Nanos;

/// What the trace records (tests check engine invariants on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceKind {
    /// Accepted into the link (queue or straight into transmission).
    Enqueue,
    /// Finished transmission.
    Depart,
    /// Dropped by the full buffer.
    Drop,
    /// Lost on the wire.
    Lost,
}

/// One trace record.
#[derive(Clone, Copy, Debug)]
pub struct TraceRecord {
    /// When.
    pub time: Nanos,
    /// Which link.
    pub link: usize,
    /// What happened.
    pub kind: TraceKind,
    /// Packet id.
    pub id: u64,
    /// The engine's flow index (a flood's own flow for its fake flows).
    pub flow: u32,
    /// The packet's marks as the event found them (on enqueue, as they
    /// arrived); `marks.flow` is the id routers key their state by, each
    /// fake newcomer's own.
    pub marks: PacketMarks,
    /// Packet size.
    pub len: u32,
}

/// Whole-run packet counters (the conservation invariant).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets handed to their first link.
    pub injected: u64,
    /// Packets that reached their endpoint.
    pub delivered: u64,
    /// Packets dropped (buffer) or lost (wire).
    pub dropped: u64,
    /// Events processed.
    pub events: u64,
}

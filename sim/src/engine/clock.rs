//! Virtual time and the event queue: the engine's only clock. Events at the
//! same instant run in the order they were scheduled, so a run is the same
//! for a given seed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

/// Virtual time in nanoseconds.
pub type Nanos = u64;

/// Nanoseconds in one second.
pub const SECOND: Nanos = 1_000_000_000;

/// The core's time type for a virtual instant.
pub(super) fn dur(t: Nanos) -> Duration {
    Duration::from_nanos(t)
}

/// What happens at a scheduled instant; the index is a link's, a flow's, a
/// Pareto source's or a flood's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Event {
    TxDone(u32),
    PipeHead(u32),
    Start(u32),
    Stop(u32),
    Resume(u32),
    RouterRestart(u32),
    Pace(u32),
    Rto(u32),
    DelayedAck(u32),
    Report(u32),
    Handshake(u32),
    Arrival(u32),
    Flood(u32),
    Sample,
    Measure,
}

/// The virtual clock and the events scheduled on it.
#[derive(Debug, Default)]
pub(super) struct Clock {
    now: Nanos,
    seq: u64,
    heap: BinaryHeap<Reverse<(Nanos, u64, Event)>>,
}

impl Clock {
    /// The current virtual time.
    pub(super) fn now(&self) -> Nanos {
        self.now
    }

    /// Schedules `ev` at time `t` (after every event already scheduled at `t`).
    #[inline]
    pub(super) fn schedule_at(&mut self, t: Nanos, ev: Event) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, ev)));
    }

    /// The next event at or before `until`, with the clock moved to its time.
    pub(super) fn next_until(&mut self, until: Nanos) -> Option<Event> {
        let &Reverse((t, _, ev)) = self.heap.peek()?;
        if t > until {
            return None;
        }
        self.heap.pop();
        self.now = t;
        Some(ev)
    }

    /// Moves the clock forward to `t` (never back).
    pub(super) fn advance_to(&mut self, t: Nanos) {
        self.now = self.now.max(t);
    }
}

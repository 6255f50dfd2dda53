//! A bounded, expiring per-flow table for router state (MPCP's Algorithm 2
//! flag). Its memory is fixed at creation, so a flood of new flows can only
//! evict state, never grow the router.
//!
//! The table is two-way set-associative, keyed by the flow hash: a flow lives
//! in one of two slots of its set; a new flow takes an empty or expired slot,
//! else evicts the least recently seen of the two. An evicted or expired
//! flow's state is simply forgotten — the marker then falls back to its
//! conservative default, never to a wrong answer.

use std::time::Duration;

/// Size and expiry of a [`FlowTable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowTableConfig {
    /// Number of flows held (rounded up to a power of two, at least 2 and
    /// at most [`FlowTableConfig::MAX_CAPACITY`]).
    pub capacity: usize,
    /// A flow not seen for this long is forgotten.
    pub idle_timeout: Duration,
}

impl FlowTableConfig {
    /// The largest table: 2^24 flows (512 MB with a 4-byte state). Larger capacities
    /// are clamped to it, so `next_power_of_two` cannot overflow.
    pub const MAX_CAPACITY: usize = 1 << 24;
}

impl Default for FlowTableConfig {
    /// 65 536 flows, forgotten after 10 s idle.
    fn default() -> Self {
        FlowTableConfig {
            capacity: 1 << 16,
            idle_timeout: Duration::from_secs(10),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Slot<V> {
    key: u64,
    last_seen: Duration,
    value: V,
}

/// Fixed-size flow state (see the module docs).
#[derive(Clone, Debug)]
pub struct FlowTable<V> {
    slots: Vec<Option<Slot<V>>>,
    set_mask: usize,
    idle_timeout: Duration,
    evictions: u64,
}

impl<V: Copy + Default> FlowTable<V> {
    /// An empty table.
    pub fn new(config: FlowTableConfig) -> FlowTable<V> {
        let capacity = config
            .capacity
            .clamp(2, FlowTableConfig::MAX_CAPACITY)
            .next_power_of_two();
        FlowTable {
            slots: vec![None; capacity],
            set_mask: capacity / 2 - 1,
            idle_timeout: config.idle_timeout,
            evictions: 0,
        }
    }

    /// How many flows the table can hold.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Live state evicted by newer flows so far.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    fn live(&self, slot: &Option<Slot<V>>, now: Duration) -> bool {
        slot.as_ref()
            .is_some_and(|s| now.saturating_sub(s.last_seen) < self.idle_timeout)
    }

    /// The state of `key` if it is held and not expired.
    pub fn get(&self, now: Duration, key: u64) -> Option<V> {
        let base = self.set_of(key);
        self.slots[base..base + 2]
            .iter()
            .find(|s| s.as_ref().is_some_and(|s| s.key == key) && self.live(s, now))
            .and_then(|s| s.as_ref().map(|s| s.value))
    }

    /// The state of `key` for updating if it is held and not expired,
    /// without marking it as seen.
    pub fn get_mut(&mut self, now: Duration, key: u64) -> Option<&mut V> {
        let base = self.set_of(key);
        let i = (0..2).find(|&i| {
            let slot = &self.slots[base + i];
            slot.as_ref().is_some_and(|s| s.key == key) && self.live(slot, now)
        })?;
        self.slots[base + i].as_mut().map(|s| &mut s.value)
    }

    /// The state of `key` for updating, inserting the default state if the
    /// flow is new or expired. Marks the flow as seen at `now`.
    pub fn entry(&mut self, now: Duration, key: u64) -> &mut V {
        let base = self.set_of(key);
        let index =
            match (0..2).find(|&i| self.slots[base + i].as_ref().is_some_and(|s| s.key == key)) {
                Some(i) => {
                    if !self.live(&self.slots[base + i], now) {
                        self.slots[base + i] = None;
                    }
                    base + i
                }
                None => {
                    let free = (0..2).find(|&i| !self.live(&self.slots[base + i], now));
                    let i = free.unwrap_or_else(|| {
                        self.evictions += 1;
                        let seen = |i: usize| {
                            self.slots[base + i]
                                .as_ref()
                                .map_or(Duration::ZERO, |s| s.last_seen)
                        };
                        if seen(0) <= seen(1) {
                            0
                        } else {
                            1
                        }
                    });
                    self.slots[base + i] = None;
                    base + i
                }
            };
        let slot = self.slots[index].get_or_insert(Slot {
            key,
            last_seen: now,
            value: V::default(),
        });
        slot.last_seen = now;
        &mut slot.value
    }

    fn set_of(&self, key: u64) -> usize {
        // Mix the key so flows that differ only in high bits spread too.
        let mixed = key ^ (key >> 29) ^ (key >> 47);
        (mixed as usize & self.set_mask) * 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn table(capacity: usize) -> FlowTable<u32> {
        FlowTable::new(FlowTableConfig {
            capacity,
            idle_timeout: S * 10,
        })
    }

    #[test]
    fn holds_and_updates_state() {
        let mut t = table(64);
        *t.entry(S, 7) = 3;
        *t.entry(S, 8) = 4;
        assert_eq!(t.get(S, 7), Some(3));
        assert_eq!(t.get(S, 8), Some(4));
        assert_eq!(t.get(S, 9), None);
        *t.entry(S * 2, 7) += 1;
        assert_eq!(t.get(S * 2, 7), Some(4));
    }

    #[test]
    fn state_expires_after_the_idle_timeout() {
        let mut t = table(64);
        *t.entry(S, 7) = 3;
        assert_eq!(t.get(S * 10, 7), Some(3));
        assert_eq!(t.get(S * 11, 7), None);
        // An expired flow starts again from the default.
        assert_eq!(*t.entry(S * 11, 7), 0);
    }

    #[test]
    fn memory_is_bounded_under_a_flood() {
        let mut t = table(1024);
        for key in 0..1_000_000u64 {
            *t.entry(S, key.wrapping_mul(0x9e37_79b9_7f4a_7c15)) = 1;
        }
        assert_eq!(t.capacity(), 1024);
        assert!(t.evictions() >= 1_000_000 - 1024);
    }

    #[test]
    fn recent_flows_survive_eviction() {
        let mut t = table(2);
        *t.entry(S, 1) = 1;
        *t.entry(S * 2, 2) = 2;
        *t.entry(S * 3, 1) = 11; // 1 is now the most recent
        *t.entry(S * 4, 3) = 3; // evicts 2
        assert_eq!(t.get(S * 4, 1), Some(11));
        assert_eq!(t.get(S * 4, 2), None);
        assert_eq!(t.get(S * 4, 3), Some(3));
    }
}

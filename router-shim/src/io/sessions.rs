//! The relay's session table, sans-IO: one entry per client address, a
//! limit per source IP address (one host, or one spoofing flood, cannot take
//! the whole table), and eviction of the idlest session when the table is
//! full, so a flood delays new clients by at most one eviction instead of
//! locking them out for the idle time.
//!
//! Activity is kept as milliseconds since the relay's epoch in an atomic
//! shared with the session's reply reader, which updates it too.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::observe::SessionCounters;

/// Most sessions a relay may be configured for (a socket each).
pub const MAX_SESSIONS: usize = 1 << 20;

/// How many sessions, how many per source, and how long they live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionLimits {
    /// Sessions at once; when full, the idlest one makes room.
    pub max: usize,
    /// Sessions at once from one source IP address; further ones are refused.
    pub per_source: usize,
    /// Sessions idle this long are closed.
    pub idle: Duration,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            max: 4096,
            per_source: 1024,
            idle: Duration::from_secs(60),
        }
    }
}

impl SessionLimits {
    /// Checks the ranges: `max` and `per_source` in 1..=[`MAX_SESSIONS`],
    /// `idle` from 1 ms to an hour.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=MAX_SESSIONS).contains(&self.max) {
            return Err(format!(
                "--max-sessions must be between 1 and {MAX_SESSIONS}, got {}",
                self.max
            ));
        }
        if !(1..=MAX_SESSIONS).contains(&self.per_source) {
            return Err(format!(
                "--max-sessions-per-source must be between 1 and {MAX_SESSIONS}, got {}",
                self.per_source
            ));
        }
        if !(Duration::from_millis(1)..=Duration::from_secs(3600)).contains(&self.idle) {
            return Err(format!(
                "--session-idle must be between 1ms and 1 hour, got {:?}",
                self.idle
            ));
        }
        Ok(())
    }
}

/// A session's last activity, in milliseconds since the relay's epoch.
pub type Activity = Arc<AtomicU64>;

struct Entry<S> {
    last_active: Activity,
    session: S,
}

/// Whether a datagram from a new client may open a session.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission<S> {
    /// Open it; the table has room.
    Open,
    /// Open it after closing this session (the idlest), already removed.
    OpenAfterEvicting(S),
    /// Drop the datagram: its source has `per_source` sessions.
    Refuse,
}

/// Sessions by client address; `S` is what the I/O layer keeps per session.
pub struct SessionTable<S> {
    limits: SessionLimits,
    /// `limits.max`, or less while descriptors are short.
    max: usize,
    map: HashMap<SocketAddr, Entry<S>>,
    per_source: HashMap<IpAddr, usize>,
    counters: SessionCounters,
}

impl<S> SessionTable<S> {
    /// An empty table.
    pub fn new(limits: SessionLimits) -> Self {
        SessionTable {
            limits,
            max: limits.max,
            map: HashMap::new(),
            per_source: HashMap::new(),
            counters: SessionCounters::default(),
        }
    }

    /// The session of `client`, with its activity stamp.
    pub fn get(&self, client: &SocketAddr) -> Option<(&S, &Activity)> {
        self.map.get(client).map(|e| (&e.session, &e.last_active))
    }

    /// Decides on a new session for `client` (not in the table); makes room
    /// by evicting the idlest session when the table is full.
    pub fn admit(&mut self, client: SocketAddr) -> Admission<S> {
        if self.sessions_of(client.ip()) >= self.limits.per_source {
            self.counters.refused_source += 1;
            return Admission::Refuse;
        }
        if self.map.len() < self.max {
            return Admission::Open;
        }
        let idlest = self
            .map
            .iter()
            .min_by_key(|(_, e)| e.last_active.load(Ordering::Relaxed))
            .map(|(addr, _)| *addr);
        match idlest.and_then(|addr| self.remove(&addr)) {
            Some(session) => {
                self.counters.evicted += 1;
                Admission::OpenAfterEvicting(session)
            }
            None => Admission::Open,
        }
    }

    /// Counts a session that could not be opened for want of a socket, and
    /// caps the table at what it holds: from then on a new client evicts
    /// the idlest session (whose descriptor it gets) instead of being
    /// refused. The cap lifts when sessions expire.
    pub fn refuse_for_sockets(&mut self) {
        self.counters.refused_sockets += 1;
        self.max = self.map.len().max(1);
    }

    /// Adds an admitted session, with its activity stamp.
    pub fn insert(&mut self, client: SocketAddr, last_active: Activity, session: S) {
        *self.per_source.entry(client.ip()).or_default() += 1;
        self.counters.opened += 1;
        let entry = Entry {
            last_active,
            session,
        };
        let previous = self.map.insert(client, entry);
        debug_assert!(previous.is_none(), "insert after admit only");
        self.counters.active = self.map.len() as u64;
    }

    /// Removes and returns the sessions idle for the idle time at `now_ms`.
    pub fn expire(&mut self, now_ms: u64) -> Vec<S> {
        let idle = self.limits.idle.as_millis() as u64;
        let stale: Vec<SocketAddr> = self
            .map
            .iter()
            .filter(|(_, e)| now_ms.saturating_sub(e.last_active.load(Ordering::Relaxed)) >= idle)
            .map(|(addr, _)| *addr)
            .collect();
        let closed: Vec<S> = stale.iter().filter_map(|a| self.remove(a)).collect();
        self.counters.expired += closed.len() as u64;
        if !closed.is_empty() {
            self.max = self.limits.max;
        }
        closed
    }

    /// Removes every session.
    pub fn drain(&mut self) -> Vec<S> {
        self.per_source.clear();
        let all = self.map.drain().map(|(_, e)| e.session).collect();
        self.counters.active = 0;
        all
    }

    /// The counters so far.
    pub fn counters(&self) -> SessionCounters {
        self.counters
    }

    fn sessions_of(&self, ip: IpAddr) -> usize {
        self.per_source.get(&ip).copied().unwrap_or(0)
    }

    fn remove(&mut self, client: &SocketAddr) -> Option<S> {
        let entry = self.map.remove(client)?;
        let ip = client.ip();
        if let Some(n) = self.per_source.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.per_source.remove(&ip);
            }
        }
        self.counters.active = self.map.len() as u64;
        Some(entry.session)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn addr(host: u8, port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, host], port))
    }

    fn limits(max: usize, per_source: usize) -> SessionLimits {
        SessionLimits {
            max,
            per_source,
            idle: Duration::from_secs(1),
        }
    }

    /// Admits and inserts `client` at `now`, as the relay does.
    fn open(table: &mut SessionTable<u16>, client: SocketAddr, now: u64) -> Admission<u16> {
        let admission = table.admit(client);
        if admission != Admission::Refuse {
            table.insert(client, Arc::new(AtomicU64::new(now)), client.port());
        }
        admission
    }

    #[test]
    fn a_full_table_evicts_its_idlest_session() {
        let mut table = SessionTable::new(limits(3, 3));
        for (port, now) in [(1, 10), (2, 5), (3, 20)] {
            assert_eq!(open(&mut table, addr(1, port), now), Admission::Open);
        }
        // Port 1 turns active again: port 2 is the idlest.
        table
            .get(&addr(1, 1))
            .unwrap()
            .1
            .store(30, Ordering::Relaxed);
        assert_eq!(
            open(&mut table, addr(2, 9), 40),
            Admission::OpenAfterEvicting(2)
        );
        assert!(table.get(&addr(1, 2)).is_none());
        let c = table.counters();
        assert_eq!((c.active, c.opened, c.evicted), (3, 4, 1));
    }

    #[test]
    fn out_of_sockets_the_table_evicts_instead() {
        let mut table = SessionTable::new(limits(10, 10));
        open(&mut table, addr(1, 1), 0);
        open(&mut table, addr(1, 2), 5);
        assert_eq!(table.admit(addr(1, 3)), Admission::Open);
        table.refuse_for_sockets();
        assert_eq!(
            open(&mut table, addr(1, 4), 9),
            Admission::OpenAfterEvicting(1)
        );
        assert_eq!(table.counters().refused_sockets, 1);
        // Once sessions expire, the table may grow again.
        assert_eq!(table.expire(1007).len(), 1);
        assert_eq!(open(&mut table, addr(1, 5), 1004), Admission::Open);
        assert_eq!(open(&mut table, addr(1, 6), 1004), Admission::Open);
    }

    #[test]
    fn one_source_gets_at_most_its_share() {
        let mut table = SessionTable::new(limits(10, 2));
        assert_eq!(open(&mut table, addr(1, 1), 0), Admission::Open);
        assert_eq!(open(&mut table, addr(1, 2), 0), Admission::Open);
        assert_eq!(open(&mut table, addr(1, 3), 0), Admission::Refuse);
        assert_eq!(open(&mut table, addr(2, 3), 0), Admission::Open);
        assert_eq!(table.counters().refused_source, 1);
        // Expiry frees the source's share.
        assert_eq!(table.expire(1000).len(), 3);
        assert_eq!(open(&mut table, addr(1, 3), 1000), Admission::Open);
        assert_eq!(table.counters().expired, 3);
    }

    proptest! {
        /// Whatever arrives, the table never exceeds its limits, and its
        /// per-source counts match its entries.
        #[test]
        fn limits_hold(
            max in 1usize..8,
            per_source in 1usize..4,
            ops in proptest::collection::vec((0u8..4, 0u16..6, 0u64..3000), 0..200),
        ) {
            let mut table = SessionTable::new(limits(max, per_source));
            for (host, port, now) in ops {
                let client = addr(host, port);
                if table.get(&client).is_none() {
                    open(&mut table, client, now);
                } else if now % 7 == 0 {
                    table.expire(now);
                }
                prop_assert!(table.map.len() <= max && table.max <= max);
                for (ip, n) in &table.per_source {
                    prop_assert!(*n <= per_source);
                    prop_assert_eq!(*n, table.map.keys().filter(|a| a.ip() == *ip).count());
                }
                prop_assert_eq!(table.counters().active, table.map.len() as u64);
            }
        }
    }
}

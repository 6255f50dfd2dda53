//! What the shim reports, as JSON lines (`--stats FILE`), periodically and
//! at shutdown: a snapshot of each link's counters, queue and load, and the
//! relay's session counters.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::sync::Mutex;
use std::time::Duration;

use ecnq::router::bottleneck::{Class, CLASSES};
use ecnq::router::MarkCounters;
use ecnq::statistics::SojournHistogram;
use ecnq::{IntervalStats, LinkLoad};

use crate::link::{Link, LinkCounters, LinkPacket};

/// Everything worth reporting about one link at one instant.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSnapshot {
    /// Which direction (`up`: client → server, `down`: server → client).
    pub direction: &'static str,
    /// Time since the shim started.
    pub time: Duration,
    /// Link counters.
    pub counters: LinkCounters,
    /// Packets by the scheme that marked them and the codepoint they left with.
    pub marks: MarkCounters,
    /// Queue in bytes and packets.
    pub queue_bytes: u64,
    /// Queue in packets.
    pub queue_packets: usize,
    /// The last completed measurement interval.
    pub interval: Option<IntervalStats>,
    /// Load figures of that interval.
    pub load: LinkLoad,
    /// Capacity the meter uses, bytes per second.
    pub capacity: f64,
    /// Capacity the link's router meters against now, the whole link's,
    /// bytes per second (configured or measured).
    pub router_capacity: f64,
    /// Bytes the link could carry since it started (the capacity in force;
    /// none for a link with no rate): utilization over a span is the
    /// departures over the difference of two.
    pub capacity_bytes: Option<f64>,
    /// Sends that failed (socket errors), counted by the I/O layer.
    pub send_errors: u64,
    /// Measurement intervals whose load figures were kept from the one
    /// before because the shim was stalled during them.
    pub intervals_disregarded: u64,
    /// Flows active in the ecnq, the classic and the L4S queue.
    pub active_flows: [usize; CLASSES],
    /// Flows of the ecnq queue the policer holds to their share.
    pub policed_flows: usize,
    /// Bytes waiting in the ecnq, the classic and the L4S queue.
    pub class_bytes: [u64; CLASSES],
    /// Packets that left each queue, and their sojourns added up (ns):
    /// differences of the two over a span give the mean wait in it.
    pub class_departures: [u64; CLASSES],
    /// See [`LinkSnapshot::class_departures`].
    pub class_sojourn_ns: [u64; CLASSES],
    /// The sojourn of every packet that left each queue so far: the
    /// difference of two gives the per-packet percentiles of a span.
    pub class_sojourn_hist: [SojournHistogram; CLASSES],
}

impl LinkSnapshot {
    /// Takes a snapshot of `link`.
    pub fn of<P: LinkPacket>(
        direction: &'static str,
        time: Duration,
        link: &Link<P>,
        send_errors: u64,
    ) -> LinkSnapshot {
        let meter = link.router().meter();
        LinkSnapshot {
            direction,
            time,
            counters: *link.counters(),
            marks: *link.router().counters(),
            queue_bytes: link.queue_bytes(),
            queue_packets: link.queue_packets(),
            interval: meter.last_interval().copied(),
            load: *meter.load(),
            intervals_disregarded: meter.disregarded(),
            capacity: meter.config().capacity,
            router_capacity: link.bottleneck().capacity(),
            capacity_bytes: link.capacity_bytes(time),
            send_errors,
            active_flows: link.bottleneck().active_flows(),
            policed_flows: link.bottleneck().policed_flows(),
            class_bytes: Class::ALL.map(|class| link.bottleneck().class_bytes(class)),
            class_departures: Class::ALL.map(|class| link.bottleneck().counters(class).departures),
            class_sojourn_ns: Class::ALL.map(|class| link.bottleneck().counters(class).sojourn_ns),
            class_sojourn_hist: Class::ALL.map(|class| link.bottleneck().sojourns(class).clone()),
        }
    }

    /// One JSON object, no trailing newline. `final_` marks the shutdown line.
    /// A queue that any packet left has its sojourn histogram as
    /// `"sojourn_{class}_hist":[[bucket,count],...]`, non-zero 0.1 ms
    /// buckets only (see [`SojournHistogram`]). `router_capacity_bps` is
    /// the router's figure now; `capacity_bytes`, on a link with a rate,
    /// counts what the link could carry since it started.
    pub fn to_json(&self, final_: bool) -> String {
        let c = &self.counters;
        let mut s = format!(
            "{{\"t\":{:.6},\"dir\":\"{}\",\"final\":{final_}",
            self.time.as_secs_f64(),
            self.direction
        );
        let fields = [
            ("arrivals", c.arrivals),
            ("arrival_bytes", c.arrival_bytes),
            ("departures", c.departures),
            ("departure_bytes", c.departure_bytes),
            ("drops_overflow", c.drops_overflow),
            ("drops_loss", c.drops_loss),
            ("drops_blackhole", c.drops_blackhole),
            ("drops_aqm", c.drops_aqm),
            ("drops_policed", c.drops_policed),
            ("corrupted", c.corrupted),
            ("duplicates", c.duplicates),
            ("reordered", c.reordered),
            ("passed_fragment", c.passed.fragment),
            ("passed_not_udp", c.passed.not_udp),
            ("passed_malformed", c.passed.malformed),
            ("send_errors", self.send_errors),
            ("rewritten", self.marks.rewritten),
            ("queue_bytes", self.queue_bytes),
            ("queue_packets", self.queue_packets as u64),
            ("intervals_disregarded", self.intervals_disregarded),
            ("flows_ecnq", self.active_flows[0] as u64),
            ("flows_classic", self.active_flows[1] as u64),
            ("flows_l4s", self.active_flows[2] as u64),
            ("flows_policed", self.policed_flows as u64),
        ];
        for (name, value) in fields {
            let _ = write!(s, ",\"{name}\":{value}");
        }
        let _ = write!(
            s,
            ",\"router_capacity_bps\":{:.0}",
            self.router_capacity * 8.0
        );
        if let Some(bytes) = self.capacity_bytes {
            let _ = write!(s, ",\"capacity_bytes\":{bytes:.0}");
        }
        for class in Class::ALL {
            let (name, c) = (class.name(), class as usize);
            let _ = write!(
                s,
                ",\"queue_{name}_bytes\":{},\"departures_{name}\":{},\"sojourn_{name}_us\":{}",
                self.class_bytes[c],
                self.class_departures[c],
                self.class_sojourn_ns[c] / 1_000
            );
            let hist = &self.class_sojourn_hist[c];
            if !hist.is_empty() {
                let _ = write!(s, ",\"sojourn_{name}_hist\":{hist}");
            }
        }
        if let Some(iv) = &self.interval {
            let _ = write!(
                s,
                ",\"epoch\":{},\"utilization\":{:.6},\"offered\":{:.6},\"queue_avg\":{:.1},\"queue_persistent\":{}",
                iv.epoch,
                iv.utilization(self.capacity),
                iv.offered(self.capacity),
                iv.queue_avg,
                iv.queue_persistent,
            );
        }
        for (formula, load) in self.load.iter() {
            let _ = write!(s, ",\"load_{}\":{:.6}", formula.name, load.get());
        }
        s.push_str(",\"marks\":{");
        // Packets by marking scheme, as [left with 00, 01, 10, 11].
        for (i, (wire, m)) in self.marks.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let name = wire.name();
            let _ = write!(s, "{sep}\"{name}\":[{},{},{},{}]", m[0], m[1], m[2], m[3]);
        }
        s.push_str("}}");
        s
    }
}

/// What the table did with sessions, for stats and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionCounters {
    /// Sessions open now.
    pub active: u64,
    /// Sessions opened.
    pub opened: u64,
    /// New sessions refused: their source had `per_source` sessions.
    pub refused_source: u64,
    /// New sessions refused: no socket could be opened (descriptor limit).
    pub refused_sockets: u64,
    /// Sessions closed to make room for a new one.
    pub evicted: u64,
    /// Sessions closed after the idle time.
    pub expired: u64,
}

impl SessionCounters {
    /// New sessions refused, all causes.
    pub fn refused(&self) -> u64 {
        self.refused_source + self.refused_sockets
    }

    /// The counters as `(name, value)`, names as in the JSON line.
    pub fn fields(&self) -> [(&'static str, u64); 7] {
        [
            ("sessions", self.opened),
            ("sessions_active", self.active),
            ("sessions_refused", self.refused()),
            ("sessions_refused_source", self.refused_source),
            ("sessions_refused_sockets", self.refused_sockets),
            ("sessions_evicted", self.evicted),
            ("sessions_expired", self.expired),
        ]
    }

    /// One JSON object, like a link's line: time since the relay started,
    /// `final_` on the shutdown line, then [`SessionCounters::fields`].
    pub fn to_json(&self, time: Duration, final_: bool) -> String {
        let mut s = format!("{{\"t\":{:.6},\"final\":{final_}", time.as_secs_f64());
        for (name, value) in self.fields() {
            let _ = write!(s, ",\"{name}\":{value}");
        }
        s.push('}');
        s
    }
}

/// Where JSON lines go; shared by the links of one shim.
pub struct StatsSink {
    out: Mutex<Box<dyn Write + Send>>,
}

impl StatsSink {
    /// A sink writing to `out`.
    pub fn new(out: Box<dyn Write + Send>) -> StatsSink {
        StatsSink {
            out: Mutex::new(out),
        }
    }

    /// Writes one line and flushes (a crash loses at most the line in progress).
    pub fn write_line(&self, line: &str) -> io::Result<()> {
        let mut out = self
            .out
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        writeln!(out, "{line}")?;
        out.flush()
    }
}

impl std::fmt::Debug for StatsSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StatsSink")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_line_has_the_fields() {
        let mut snap = LinkSnapshot {
            direction: "up",
            time: Duration::from_millis(1500),
            counters: LinkCounters {
                arrivals: 10,
                drops_overflow: 2,
                ..LinkCounters::default()
            },
            marks: MarkCounters::default(),
            queue_bytes: 3000,
            queue_packets: 2,
            interval: None,
            load: LinkLoad::default(),
            capacity: 1e6,
            router_capacity: 2e6,
            capacity_bytes: Some(1_875_000.4),
            send_errors: 0,
            intervals_disregarded: 1,
            active_flows: [1, 0, 0],
            policed_flows: 0,
            class_bytes: [1000, 2000, 0],
            class_departures: [4, 0, 0],
            class_sojourn_ns: [2_500_000, 0, 0],
            class_sojourn_hist: Default::default(),
        };
        snap.marks.by_scheme[1][3] = 7;
        for us in [100, 150, 650, 1_600] {
            snap.class_sojourn_hist[0].record(Duration::from_micros(us));
        }
        let line = snap.to_json(true);
        for want in [
            "\"t\":1.500000",
            "\"dir\":\"up\"",
            "\"final\":true",
            "\"arrivals\":10",
            "\"drops_overflow\":2",
            "\"queue_bytes\":3000",
            "\"queue_ecnq_bytes\":1000",
            "\"queue_classic_bytes\":2000",
            "\"departures_ecnq\":4",
            "\"sojourn_ecnq_us\":2500",
            "\"sojourn_ecnq_hist\":[[1,2],[6,1],[16,1]],",
            "\"intervals_disregarded\":1",
            "\"router_capacity_bps\":16000000,\"capacity_bytes\":1875000,",
            ",\"load_vcp\":0.000000,\"load_bmcc\":0.000000,\"load_mcp\":0.000000,\"marks\":{",
            "\"vcp\":[0,0,0,7]",
            "\"classic\":[0,0,0,0]",
        ] {
            assert!(line.contains(want), "{line} lacks {want}");
        }
        // Queues no packet left have no histogram.
        assert!(!line.contains("sojourn_classic_hist"), "{line}");
        assert!(!line.contains("sojourn_l4s_hist"), "{line}");
        assert!(line.starts_with('{') && line.ends_with('}'));
        assert_eq!(line.matches('{').count(), line.matches('}').count());
        // A link with no rate could carry anything: no counter.
        snap.capacity_bytes = None;
        assert!(!snap.to_json(false).contains("capacity_bytes"));
    }

    /// On a link whose rate steps down, the counter adds up each step's
    /// bytes and the router's figure follows the step in force.
    #[test]
    fn the_capacity_counter_follows_a_schedule() {
        use crate::link::tests::{link, pkt};
        let mut stepped = link("schedule 0s:8mbit,1s:4mbit limit 1000");
        let at = |ms| Duration::from_millis(ms);
        // A packet every 10 ms keeps the router told the rate in force.
        for i in 0..200 {
            let _ = stepped.enqueue(at(i * 10), pkt(i, 1000));
            while stepped.dequeue(at(i * 10)).is_some() {}
        }
        let snap = LinkSnapshot::of("up", at(2_000), &stepped, 0);
        // 1 s at 1 Mbyte/s, then 1 s at 0.5 Mbyte/s.
        assert_eq!(snap.capacity_bytes, Some(1_500_000.0));
        assert_eq!(snap.router_capacity, 500_000.0);
        let line = snap.to_json(false);
        assert!(
            line.contains("\"router_capacity_bps\":4000000,\"capacity_bytes\":1500000,"),
            "{line}"
        );
        let unlimited = link("delay 5ms");
        assert_eq!(
            LinkSnapshot::of("up", at(1_000), &unlimited, 0).capacity_bytes,
            None
        );
    }
}

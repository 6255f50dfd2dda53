//! What the bottleneck's tests share: a packet, links and a traffic loop.

use std::collections::HashMap;
use std::time::Duration;

use super::{Bottleneck, BottleneckConfig, Discipline, QueueLimit, Queued};
use crate::router::capacity::{CapacitySource, LinkRate};
use crate::router::RouterConfig;
use crate::signal::PacketMarks;
use crate::wire::ecn::{Ecn, SchemeTag};

/// A 1000-byte packet: only its marks vary.
#[derive(Clone, Debug)]
pub(super) struct Pkt(pub(super) PacketMarks);

impl Queued for Pkt {
    fn wire_len(&self) -> u32 {
        1000
    }
    fn marks(&self) -> Option<PacketMarks> {
        Some(self.0)
    }
    fn set_marks(&mut self, marks: &PacketMarks) {
        self.0 = *marks;
    }
}

pub(super) fn pkt(flow: u64, tag: SchemeTag, ecn: Ecn) -> Pkt {
    Pkt(PacketMarks {
        ecn,
        tag,
        hash: flow as u32,
        flow,
    })
}

/// 8 Mbit/s: one 1000-byte packet per millisecond.
pub(super) fn link(discipline: Discipline) -> Bottleneck<Pkt> {
    link_from(discipline, Duration::ZERO)
}

/// The same link, its first interval starting at `start`.
pub(super) fn link_from(discipline: Discipline, start: Duration) -> Bottleneck<Pkt> {
    link_at(discipline, 8_000_000, start)
}

/// A link of `rate` bits per second, its first interval starting at
/// `start`.
pub(super) fn link_at(discipline: Discipline, rate: u64, start: Duration) -> Bottleneck<Pkt> {
    Bottleneck::new(
        BottleneckConfig {
            rate: Some(LinkRate::Fixed(rate)),
            capacity: CapacitySource::Configured,
            limit: QueueLimit::Packets(1000),
            discipline,
            router: RouterConfig::new(rate as f64 / 8.0, 1_000_000),
            seed: 0,
        },
        start,
    )
}

/// The capacity the ecnq queue's router meters against, bytes per
/// second: its share of the link.
pub(super) fn ecnq_capacity(b: &Bottleneck<Pkt>) -> f64 {
    b.router().meter().config().capacity
}

pub(super) const MS: Duration = Duration::from_millis(1);
pub(super) const ERC: SchemeTag = SchemeTag::new(6);

/// Offers `per_ms` packets of each flow every millisecond for `ms`
/// milliseconds and returns the departed packets per flow.
pub(super) fn run(
    b: &mut Bottleneck<Pkt>,
    flows: &[(u64, SchemeTag, Ecn)],
    ms: u64,
) -> HashMap<u64, u64> {
    let mut out = HashMap::new();
    for t in 0..ms {
        let now = MS * t as u32;
        while let Some((_, p)) = b.depart(now) {
            *out.entry(p.0.flow).or_default() += 1;
        }
        for &(flow, tag, ecn) in flows {
            let _ = b.offer(now, pkt(flow, tag, ecn));
        }
    }
    out
}

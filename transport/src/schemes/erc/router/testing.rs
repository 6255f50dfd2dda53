//! Helpers the router's tests share: links, packets, and flows driven
//! through a router.

use std::time::Duration;

use super::ErcMarker;
use crate::schemes::erc::{DIGITS, START_CODE_DIGITS, WIRE};
use crate::signal::{LinkState, Marker, PacketMarks};
use crate::wire::ecn::{Ecn, SchemeTag, WireScheme};

/// A millisecond.
pub(super) const MS: Duration = Duration::from_millis(1);

/// A link of `capacity` bytes per second with `queue` bytes queued, and a
/// packet of 1000 bytes on it.
pub(super) fn link(capacity: f64, queue: u64) -> LinkState {
    LinkState {
        capacity,
        queue_bytes: queue,
        packet_len: 1_000,
        ..LinkState::default()
    }
}

/// An unmarked erc packet of `flow`.
pub(super) fn packet(flow: u64, hash: u32) -> PacketMarks {
    PacketMarks {
        ecn: Ecn::Ect0,
        tag: SchemeTag::new(WIRE.id()),
        hash,
        flow,
    }
}

/// A new `flow`'s handshake flight at `now` on a link of `capacity`: its
/// first [`START_CODE_DIGITS`] packets, which carry the start code and no
/// chain. Returns their codepoints as the router left them.
pub(super) fn send_flight(
    router: &mut ErcMarker,
    flow: u64,
    now: Duration,
    capacity: f64,
) -> Vec<Ecn> {
    (0..u32::from(START_CODE_DIGITS))
        .map(|n| {
            let mut pkt = packet(flow, n);
            router.mark(now, &link(capacity, 0), &mut pkt);
            pkt.ecn
        })
        .collect()
}

/// Drives `flows` flows through a router, each offering `rates[i]` bytes
/// per second, for `span`; returns the router.
pub(super) fn drive(
    router: &mut ErcMarker,
    capacity: f64,
    rates: &[f64],
    from: Duration,
    span: Duration,
) {
    drive_beside(
        router,
        capacity,
        rates,
        (0, SchemeTag::UNTAGGED),
        from,
        span,
    );
}

/// As [`drive`], with the last `foreign` flows another scheme's,
/// tagged `tag`: the router observes their packets.
pub(super) fn drive_beside(
    router: &mut ErcMarker,
    capacity: f64,
    rates: &[f64],
    (foreign, tag): (usize, SchemeTag),
    from: Duration,
    span: Duration,
) {
    let mut next: Vec<Duration> = vec![from; rates.len()];
    // Each flow's packets pass the chain's positions in turn.
    let mut sent = vec![0u32; rates.len()];
    let end = from + span;
    loop {
        let (f, &t) = next
            .iter()
            .enumerate()
            .min_by_key(|&(_, t)| *t)
            .expect("flows");
        if t >= end {
            break;
        }
        sent[f] += 1;
        let mut pkt = packet(f as u64 + 1, sent[f]);
        if f + foreign < rates.len() {
            router.mark(t, &link(capacity, 0), &mut pkt);
        } else {
            pkt.tag = tag;
            router.observe(t, &link(capacity, 0), &pkt);
        }
        next[f] = t + Duration::from_secs_f64(1_000.0 / rates[f]);
    }
}

/// The router advertises `expected` bytes per second, within 2 %.
#[track_caller]
pub(super) fn assert_share(r: &ErcMarker, expected: f64) {
    let share = r.share();
    assert!(
        (share / expected - 1.0).abs() < 0.02,
        "share {share} vs {expected}"
    );
}

/// The tag of an ecnq scheme other than erc.
pub(super) fn other_ecnq_tag() -> SchemeTag {
    let mut others = WireScheme::all().filter(|w| w.is_ecnq() && *w != WIRE);
    SchemeTag::new(others.next().expect("an ecnq scheme besides erc").id())
}

/// Marks packets of flows `(flow, at)` in time order, on a link of
/// 10 MB/s, beside one long flow that could fill it, from `from` until
/// `until`.
pub(super) fn beside_a_long_flow(
    router: &mut ErcMarker,
    from: Duration,
    until: Duration,
    mut packets: Vec<(u64, Duration)>,
) {
    let mut t = from;
    while t < until {
        packets.push((1, t));
        t += MS / 10;
    }
    packets.sort_by_key(|&(_, at)| at);
    // Each flow's packets pass the chain's positions in turn.
    let mut sent = std::collections::HashMap::new();
    for (flow, at) in packets {
        let n = sent.entry(flow).or_insert(0u32);
        let mut pkt = packet(flow, *n);
        *n += 1;
        router.mark(at, &link(1e7, 0), &mut pkt);
    }
}

/// A short flow's packets: its handshake flight from `start`, a first
/// flight of ten a round trip of 100 ms later, and five more a round trip
/// after that (1 ms apart, far under the share).
pub(super) fn short_flow(flow: u64, start: Duration) -> impl Iterator<Item = (u64, Duration)> {
    let handshake = (0..u32::from(START_CODE_DIGITS)).map(move |i| (flow, start + MS * i));
    let first = (0..DIGITS).map(move |i| (flow, start + MS * (100 + i)));
    let second = (0..5).map(move |i| (flow, start + MS * (200 + i)));
    handshake.chain(first).chain(second)
}

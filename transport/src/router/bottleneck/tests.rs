//! The entry points' tests: restarts, serialization, the FIFO fallback
//! and the policer behind [`Bottleneck::offer`].

use super::*;
use crate::router::bottleneck::test_support::*;
use crate::router::capacity::{CapacitySource, DeliveryTrace, LinkRate, RateSchedule};
use crate::wire::ecn::SchemeTag;

#[test]
fn a_restarted_router_marks_as_a_new_one_does() {
    // Two erc flows at a quarter of the link each, so that nothing
    // waits when the router restarts at 2 s.
    let offer_until = |b: &mut Bottleneck<Pkt>, from: u32, until: u32| {
        let mut marks = Vec::new();
        for t in from..until {
            let now = MS * t;
            while let Some((_, p)) = b.depart(now) {
                marks.push((p.0.flow, p.0.ecn));
            }
            if t % 4 == 0 {
                for flow in [1, 2] {
                    b.offer(now, pkt(flow, ERC, Ecn::NotEct)).unwrap();
                }
            }
        }
        marks
    };
    let mut restarted = link(Discipline::Dual);
    let mut kept = link(Discipline::Dual);
    let before = offer_until(&mut restarted, 0, 2_000);
    offer_until(&mut kept, 0, 2_000);
    restarted.restart_router(MS * 2_000);
    let mut fresh = link_from(Discipline::Dual, MS * 2_000);
    let after = offer_until(&mut restarted, 2_000, 4_000);
    assert_eq!(after, offer_until(&mut fresh, 2_000, 4_000));
    // What the router had learned before shows in the marks of one
    // that did not restart.
    assert_ne!(after, offer_until(&mut kept, 2_000, 4_000));
    // Its counters carry on.
    let total =
        |b: &Bottleneck<Pkt>| -> u64 { b.router().counters().by_scheme.iter().flatten().sum() };
    assert_eq!(total(&restarted), total(&fresh) + before.len() as u64);
}

/// A packet lost before the queue counts at the ecnq queue's router if
/// it would have waited there (every packet in a FIFO, only tagged ones
/// in a dual queue), and nothing is queued for it.
#[test]
fn a_packet_lost_on_its_way_in_loads_the_meter() {
    let counted =
        |b: &Bottleneck<Pkt>| -> u64 { b.router().counters().by_scheme.iter().flatten().sum() };
    for (discipline, classic_counts) in [(Discipline::Dual, 0), (Discipline::Fifo, 1)] {
        let mut b = link(discipline);
        let erc = pkt(1, ERC, Ecn::NotEct).0;
        b.lost_on_arrival(MS, 1000, Some(&erc));
        assert_eq!(counted(&b), 1, "{discipline:?}");
        let classic = pkt(2, SchemeTag::UNTAGGED, Ecn::NotEct).0;
        b.lost_on_arrival(MS, 1000, Some(&classic));
        assert_eq!(counted(&b), 1 + classic_counts, "{discipline:?}");
        assert_eq!(b.queue_packets(), 0);
        b.advance(b.router().interval());
        let first = b
            .router
            .take_completed()
            .expect("the first interval closed");
        assert_eq!(first.arrived_packets, 1 + classic_counts, "{discipline:?}");
    }
}

#[test]
fn departures_are_exact_at_the_link_rate() {
    let mut b = link(Discipline::Fifo);
    for _ in 0..10 {
        b.offer(Duration::ZERO, pkt(1, ERC, Ecn::Ect0)).unwrap();
    }
    let ends: Vec<Duration> = std::iter::from_fn(|| b.depart(MS * 100).map(|(t, _)| t)).collect();
    assert_eq!(ends, (1..=10).map(|i| MS * i).collect::<Vec<_>>());
}

#[test]
fn fifo_and_forced_marking_keep_one_queue() {
    let mut b = link(Discipline::Fifo);
    b.offer(Duration::ZERO, pkt(2, SchemeTag::UNTAGGED, Ecn::NotEct))
        .unwrap();
    assert_eq!(b.counters(Class::Ecnq).arrivals, 1);
    let mut config = RouterConfig::new(1e6, 1_000_000);
    config.mode = MarkingMode::Off;
    let b: Bottleneck<Pkt> = Bottleneck::new(
        BottleneckConfig {
            rate: Some(LinkRate::Fixed(8_000_000)),
            capacity: CapacitySource::Configured,
            limit: QueueLimit::Packets(10),
            discipline: Discipline::Dual,
            router: config,
            seed: 0,
        },
        Duration::ZERO,
    );
    assert_eq!(b.discipline(), Discipline::Fifo);
    assert_eq!("FIFO".parse(), Ok(Discipline::Fifo));
    assert!("red".parse::<Discipline>().is_err());
}

/// A sender tagged erc that ignores every signal, offering three times
/// the link, beside an honest one at half the link: the policer holds
/// the first to its share and the second keeps all of its own.
#[test]
fn an_unresponsive_flow_gets_no_more_than_its_share() {
    let mut b = link(Discipline::Dual);
    let mut out = [0u64; 2];
    for t in 0..6000u32 {
        let now = MS * t;
        while let Some((_, p)) = b.depart(now) {
            if t >= 2000 {
                out[usize::from(p.0.flow == 2)] += 1;
            }
        }
        for _ in 0..3 {
            let _ = b.offer(now, pkt(1, ERC, Ecn::Ect0));
        }
        if t % 2 == 0 {
            let _ = b.offer(now, pkt(2, ERC, Ecn::Ect0));
        }
    }
    // 4 s judged on a 1000-packet/s link: 500 packets per second each.
    assert!(out[0] <= 2100, "the unresponsive flow got {}", out[0]);
    assert!(out[1] >= 1990, "the honest flow got {}", out[1]);
    assert_eq!(b.policed_flows(), 1);
    assert!(b.counters(Class::Ecnq).policed > 0);
}

/// A FIFO link of `rate`, its router told `capacity` bytes per second
/// and taking it from `source`.
fn variable_link(rate: LinkRate, capacity: f64, source: CapacitySource) -> Bottleneck<Pkt> {
    Bottleneck::new(
        BottleneckConfig {
            rate: Some(rate),
            capacity: source,
            limit: QueueLimit::Packets(1000),
            discipline: Discipline::Fifo,
            router: RouterConfig::new(capacity, 1_000_000),
            seed: 0,
        },
        Duration::ZERO,
    )
}

/// Offers one packet of each flow every millisecond from `from` to
/// `to` ms, taking what departs.
fn drive(b: &mut Bottleneck<Pkt>, flows: &[(u64, SchemeTag, Ecn)], from: u32, to: u32) {
    for ms in from..to {
        let now = MS * ms;
        while b.depart(now).is_some() {}
        for &(flow, tag, ecn) in flows {
            let _ = b.offer(now, pkt(flow, tag, ecn));
        }
    }
}

fn schedule(words: &str) -> LinkRate {
    LinkRate::Schedule(std::sync::Arc::new(RateSchedule::parse(words).unwrap()))
}

#[test]
fn a_trace_link_delivers_at_its_opportunities() {
    let trace = DeliveryTrace::parse("t", "1\n1\n2\n").unwrap();
    let mut b = variable_link(
        LinkRate::Trace(std::sync::Arc::new(trace)),
        1e6,
        CapacitySource::Configured,
    );
    for _ in 0..6 {
        b.offer(Duration::ZERO, pkt(1, ERC, Ecn::Ect0)).unwrap();
    }
    let mut ends = Vec::new();
    while let Some((end, _)) = b.depart(MS * 10) {
        ends.push(end);
    }
    // 1000-byte packets, 1500 bytes an opportunity at 1, 1, 2, then 3, 3,
    // 4 ms (the loop): three packets by 1 ms, the fourth at 2 ms, two
    // more with the next loop's two at 3 ms.
    assert_eq!(ends, [MS, MS, MS, MS * 2, MS * 3, MS * 3]);
    assert_eq!(b.capacity_bytes(Duration::ZERO, MS * 4), Some(7_500.0));
}

#[test]
fn a_configured_schedule_is_metered_at_its_rate_in_force() {
    let mut b = variable_link(
        schedule("0s:8mbit,100ms:4mbit"),
        1e6,
        CapacitySource::Configured,
    );
    let one = [(1, ERC, Ecn::Ect0)];
    drive(&mut b, &one, 0, 100);
    assert_eq!(ecnq_capacity(&b), 1e6);
    drive(&mut b, &one, 100, 101);
    assert_eq!(ecnq_capacity(&b), 5e5);
    assert_eq!(b.capacity_bytes(Duration::ZERO, MS * 200), Some(150_000.0));
}

#[test]
fn a_measured_capacity_follows_what_the_link_drains() {
    // Told 1 Mbyte/s, the link drains 250 kbyte/s from 100 ms: a backlog
    // (two packets offered a millisecond) reads it, averaged over about
    // four windows: on its way down after 50 ms, there after 500.
    let mut b = variable_link(
        schedule("0s:8mbit,100ms:2mbit"),
        1e6,
        CapacitySource::Measured,
    );
    let busy = [(1, ERC, Ecn::Ect0), (2, ERC, Ecn::Ect0)];
    drive(&mut b, &busy, 0, 100);
    assert!(
        (ecnq_capacity(&b) - 1e6).abs() < 1e3,
        "{}",
        ecnq_capacity(&b)
    );
    drive(&mut b, &busy, 100, 150);
    let falling = ecnq_capacity(&b);
    assert!(falling > 2.6e5 && falling < 8e5, "{falling}");
    drive(&mut b, &busy, 150, 600);
    assert!(
        (ecnq_capacity(&b) - 2.5e5).abs() < 2.5e3,
        "{}",
        ecnq_capacity(&b)
    );
    // The configured one stays at what it was told.
    let mut told = variable_link(LinkRate::Fixed(2_000_000), 1e6, CapacitySource::Configured);
    let _ = run(&mut told, &busy, 150);
    assert_eq!(ecnq_capacity(&told), 1e6);
}

//! The entry points' tests: restarts, serialization, the FIFO fallback
//! and the policer behind [`Bottleneck::offer`].

use super::*;
use crate::router::bottleneck::test_support::*;
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
            rate: Some(8_000_000),
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

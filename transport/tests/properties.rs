//! Properties every scheme must hold, whatever the network sends it:
//! decoders never panic and report sane estimates; laws keep their window and
//! rate finite and inside their bounds; a law fed overload forever never grows.

use std::time::Duration;

use ecnq::{
    Congestion, Ecn, Feedback, LawConfig, LoadFactor, RttSample, Scheme, SchemeTag, WireScheme,
};
use proptest::prelude::*;

/// Every wire scheme with a decoder.
fn wires() -> impl Iterator<Item = WireScheme> {
    WireScheme::all().filter(|wire| *wire != WireScheme::CLASSIC)
}

#[derive(Clone, Debug)]
enum Event {
    Ack {
        bytes: u32,
    },
    Feedback {
        level: u16,
        load: f64,
        fairing: bool,
    },
    Congestion {
        sent_back_ms: u16,
        loss: bool,
    },
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        (0u32..2_000_000).prop_map(|bytes| Event::Ack { bytes }),
        (
            any::<u16>(),
            prop_oneof![any::<f64>(), 0.0..3.0f64],
            any::<bool>()
        )
            .prop_map(|(level, load, fairing)| Event::Feedback {
                level,
                load,
                fairing
            }),
        (any::<u16>(), any::<bool>())
            .prop_map(|(sent_back_ms, loss)| Event::Congestion { sent_back_ms, loss }),
    ]
}

fn rtt(ms: u16) -> RttSample {
    RttSample::uniform(Duration::from_micros(u64::from(ms) * 100 + 1))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn decoders_never_panic_and_stay_in_range(
        packets in prop::collection::vec((0u8..4, 0u8..64, any::<u32>(), 0u16..1000), 0..300)
    ) {
        for wire in wires() {
            let mut decoder = wire.decoder().expect("ecnq schemes have decoders");
            let mut now = Duration::ZERO;
            for &(ecn, dscp, hash, dt_ms) in &packets {
                now += Duration::from_millis(u64::from(dt_ms));
                decoder.on_packet(now, Ecn::from_bits(ecn), SchemeTag::from_dscp(dscp), hash);
                let fb = decoder.estimate(now);
                prop_assert!(fb.load.get().is_finite() && fb.load.get() >= 0.0);
                prop_assert!(fb.level <= wire.max_level(), "{wire:?} level {}", fb.level);
            }
        }
    }

    #[test]
    fn laws_stay_finite_and_bounded(
        events in prop::collection::vec((event(), 0u16..2000, 1u16..20_000), 0..200),
        mss in 1u64..9000,
    ) {
        let config = LawConfig::with_mss(mss);
        for scheme in Scheme::ALL {
            let mut law = scheme.law(config);
            let mut now = Duration::ZERO;
            for (ev, dt_ms, rtt_ms) in &events {
                now += Duration::from_millis(u64::from(*dt_ms));
                let rtt = rtt(*rtt_ms);
                match *ev {
                    Event::Ack { bytes } => law.on_ack(now, u64::from(bytes), &rtt),
                    Event::Feedback { level, load, fairing } => {
                        let fb = Feedback { level, load: LoadFactor::new(load), fairing };
                        law.on_feedback(now, fb, &rtt)
                    }
                    Event::Congestion { sent_back_ms, loss } => {
                        let sent = now.saturating_sub(Duration::from_millis(u64::from(sent_back_ms)));
                        let kind = if loss { Congestion::Loss } else { Congestion::Ce };
                        law.on_congestion(now, sent, kind, &rtt)
                    }
                }
                let w = law.window();
                prop_assert!(w >= config.min_window && w <= config.max_window, "{scheme}: window {w}");
                if let Some(rate) = law.pacing_rate() {
                    prop_assert!(rate.is_finite() && rate > 0.0, "{scheme}: rate {rate}");
                }
            }
        }
    }

    #[test]
    fn overload_forever_never_grows(
        steps in prop::collection::vec((0u16..500, 1u32..200_000, 0u8..9, 1u16..5000), 1..300),
    ) {
        let config = LawConfig::with_mss(1200);
        for scheme in Scheme::router_assisted() {
            if overload(scheme, 0).is_none() {
                continue;
            }
            let mut law = scheme.law(config);
            let mut now = Duration::ZERO;
            // Start from a large window or rate.
            for _ in 0..50 {
                now += Duration::from_millis(400);
                law.on_ack(now, 1 << 20, &rtt(500));
            }
            let mut last = (law.window(), law.pacing_rate());
            for &(dt_ms, bytes, pick, rtt_ms) in &steps {
                now += Duration::from_millis(u64::from(dt_ms));
                let rtt = rtt(rtt_ms);
                if let Some(fb) = overload(scheme, pick) {
                    law.on_feedback(now, fb, &rtt);
                }
                law.on_ack(now, u64::from(bytes), &rtt);
                let current = (law.window(), law.pacing_rate());
                match (current.1, last.1) {
                    // A rate law sends no less than its least window per
                    // round trip (so that it still reads the router): that
                    // rate follows the RTT, the window does not grow.
                    (Some(rate), Some(before)) => prop_assert!(
                        rate <= before || current.0 == config.min_window,
                        "{scheme}: rate grew"
                    ),
                    _ => prop_assert!(current.0 <= last.0, "{scheme}: window grew {} -> {}", last.0, current.0),
                }
                last = current;
            }
        }
    }
}

/// An overload report of `scheme`, one of several variants picked by
/// `pick`; none for Prague, whose overload signal is CE, not a report.
fn overload(scheme: Scheme, pick: u8) -> Option<Feedback> {
    let (level, load) = match scheme {
        Scheme::Vcp | Scheme::Evcp => (2, 1.2),
        Scheme::Dpcp => (6 + u16::from(pick % 3), 1.05),
        Scheme::Tpcp => (18 + u16::from(pick), 1.05),
        Scheme::Bmcc => (0, 1.0 + f64::from(pick) / 4.0),
        Scheme::Mcp => (3, 1.2),
        // The smallest rate erc advertises.
        Scheme::Erc => (ecnq::schemes::erc::MAX_INDEX, 1.2),
        Scheme::Prague => return None,
        Scheme::Classic => unreachable!("classic has no router feedback"),
    };
    Some(Feedback {
        level,
        load: LoadFactor::new(load),
        fairing: pick % 2 == 0,
    })
}

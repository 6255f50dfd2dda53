//! Unit tests of MCP's marker, decoder and law, and properties of the law.

use super::*;
use crate::signal::load::LinkLoad;
use crate::signal::Law;
use proptest::prelude::*;

const MS: Duration = Duration::from_millis(1);

fn feedback(code: McpCode, fairing: bool) -> Feedback {
    Feedback {
        level: code.level(),
        load: LoadFactor::new(code.encoded_load()),
        fairing,
    }
}

fn rtt() -> RttSample {
    RttSample::uniform(MS * 50)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

/// A law at the default T = 200 ms that saw `code` at time 0, so its
/// adjustments fall due at 400 ms, 800 ms, ...
fn law_seeing(code: McpCode, fairing: bool) -> McpLaw {
    let mut law = McpLaw::new(LawConfig::default());
    law.on_feedback(Duration::ZERO, feedback(code, fairing), &rtt());
    law
}

fn link(utilization: f64, epoch: u64) -> LinkState {
    let mut load = LinkLoad {
        epoch,
        ..LinkLoad::default()
    };
    load[FORMULA] = LoadFactor::new(utilization);
    LinkState {
        load,
        queue_bytes: 0,
        ..LinkState::default()
    }
}

fn packet(ecn: Ecn, fairing: bool, this_path: bool, flow: u64) -> PacketMarks {
    PacketMarks {
        ecn,
        tag: SchemeTag {
            this_path,
            fairing,
            ..SchemeTag::new(WIRE.id())
        },
        hash: 0,
        flow,
    }
}

fn requester() -> PacketMarks {
    packet(Ecn::NotEct, true, true, 1)
}

fn marked(marker: &mut McpMarker, link: &LinkState, mut pkt: PacketMarks) -> PacketMarks {
    marker.mark(Duration::ZERO, link, &mut pkt);
    pkt
}

#[test]
fn codes_follow_fig_2_boundaries() {
    let cases = [
        (0.0, McpCode::Light),
        (0.479_999, McpCode::Light),
        (0.48, McpCode::Moderate),
        (0.879_999, McpCode::Moderate),
        (0.88, McpCode::High),
        (0.979_999, McpCode::High),
        (0.98, McpCode::Overload),
        (7.0, McpCode::Overload),
    ];
    for (u, code) in cases {
        assert_eq!(McpCode::of(LoadFactor::new(u)), code, "U = {u}");
        assert_eq!(code_of(LoadFactor::new(u)), code.ecn(), "U = {u}");
    }
    let bits: Vec<u8> = [
        McpCode::Light,
        McpCode::Moderate,
        McpCode::High,
        McpCode::Overload,
    ]
    .iter()
    .map(|c| c.ecn().bits())
    .collect();
    assert_eq!(bits, [0b00, 0b01, 0b10, 0b11]);
    for ecn in Ecn::ALL {
        let code = McpCode::from_ecn(ecn);
        assert_eq!(code.ecn(), ecn);
        assert_eq!(code.level(), u16::from(ecn.bits()));
        assert_eq!(McpCode::from_level(code.level()), code);
    }
    assert_eq!(McpCode::from_level(9), McpCode::Overload);
    assert!(McpCode::Moderate.admits_fairing() && McpCode::High.admits_fairing());
    assert!(!McpCode::Light.admits_fairing() && !McpCode::Overload.admits_fairing());
}

#[test]
fn marker_raises_from_00_and_never_lowers() {
    let mut m = McpMarker::new();
    let plain = |ecn| packet(ecn, false, false, 2);
    assert_eq!(
        marked(&mut m, &link(0.5, 3), plain(Ecn::NotEct)).ecn,
        Ecn::Ect1
    );
    assert_eq!(
        marked(&mut m, &link(0.9, 3), plain(Ecn::Ect1)).ecn,
        Ecn::Ect0
    );
    assert_eq!(
        marked(&mut m, &link(1.5, 3), plain(Ecn::NotEct)).ecn,
        Ecn::Ce
    );
    assert_eq!(
        marked(&mut m, &link(0.1, 3), plain(Ecn::Ect0)).ecn,
        Ecn::Ect0
    );
    assert_eq!(
        marked(&mut m, &link(0.1, 3), plain(Ecn::NotEct)).ecn,
        Ecn::NotEct
    );
}

#[test]
fn fairing_request_reaches_other_flows_with_codes_01_and_10_only() {
    let mut m = McpMarker::new();
    let other = |ecn| packet(ecn, false, false, 2);
    // No request yet: nobody's fairing bit is set.
    assert!(
        !marked(&mut m, &link(0.5, 3), other(Ecn::NotEct))
            .tag
            .fairing
    );
    let req = marked(&mut m, &link(0.5, 3), requester());
    assert!(req.tag.fairing && req.tag.this_path);
    assert!(m.propagating(3));
    // Code raised to 01 here, or 10 from upstream: fairing, never this-path.
    for (u, ecn, want) in [
        (0.5, Ecn::NotEct, true),
        (0.9, Ecn::NotEct, true),
        (0.3, Ecn::Ect0, true),
        (0.3, Ecn::NotEct, false),
        (0.99, Ecn::NotEct, false),
        (0.3, Ecn::Ce, false),
    ] {
        let p = marked(&mut m, &link(u, 3), other(ecn));
        assert_eq!(p.tag.fairing, want, "U = {u}, arriving {ecn:?}");
        assert!(!p.tag.this_path);
    }
}

#[test]
fn fairing_propagation_expires_after_the_next_period() {
    let mut m = McpMarker::new();
    marked(&mut m, &link(0.5, 10), requester());
    let other = packet(Ecn::NotEct, false, false, 2);
    // Period 11 is in progress (last completed 10), then period 12 (last 11).
    assert!(marked(&mut m, &link(0.5, 10), other).tag.fairing);
    assert!(marked(&mut m, &link(0.5, 11), other).tag.fairing);
    // Period 12 has ended.
    assert!(!marked(&mut m, &link(0.5, 12), other).tag.fairing);
    // A new request extends it; an old one never shortens it.
    marked(&mut m, &link(0.5, 12), requester());
    marked(&mut m, &link(0.5, 5), requester());
    assert!(m.propagating(13) && !m.propagating(14));
}

#[test]
fn router_set_fairing_bits_do_not_trigger_propagation() {
    let mut m = McpMarker::new();
    let relayed = packet(Ecn::Ect1, true, false, 2);
    assert!(marked(&mut m, &link(0.5, 3), relayed).tag.fairing);
    assert!(!m.propagating(3));
    // this-path alone is no request either.
    marked(&mut m, &link(0.5, 3), packet(Ecn::Ect1, false, true, 2));
    assert!(!m.propagating(3));
    assert!(
        !marked(&mut m, &link(0.5, 3), packet(Ecn::NotEct, false, false, 3))
            .tag
            .fairing
    );
}

#[test]
fn two_markers_in_series() {
    // The Fig. 1 example: the requester crosses A only, flow X crosses A
    // then C, flow Y crosses C only.
    let (mut a, mut c) = (McpMarker::new(), McpMarker::new());
    let (link_a, link_c) = (link(0.5, 7), link(0.9, 7));
    let req = marked(&mut a, &link_a, requester());
    let x = marked(&mut a, &link_a, packet(Ecn::NotEct, false, false, 2));
    let x = marked(&mut c, &link_c, x);
    let y = marked(&mut c, &link_c, packet(Ecn::NotEct, false, false, 3));
    assert!(req.tag.this_path && req.tag.fairing);
    assert!(x.tag.fairing && !x.tag.this_path);
    assert!(!c.propagating(7), "no chain reaction at C");
    assert!(!y.tag.fairing && !y.tag.this_path);
    // X's receiver learns the larger code of the two links.
    let mut rx = McpDecoder::default();
    rx.on_packet(Duration::ZERO, x.ecn, x.tag, x.hash);
    let est = rx.estimate(Duration::ZERO);
    assert_eq!((est.level, est.fairing), (McpCode::High.level(), true));
    // Series the other way round: the max still wins.
    let back = marked(&mut a, &link_a, marked(&mut c, &link_c, y));
    assert_eq!(back.ecn, McpCode::High.ecn());
}

#[test]
fn decoder_echoes_latest_code_and_fairing_bit() {
    let mut rx = McpDecoder::default();
    let t = Duration::ZERO;
    let plain = SchemeTag::new(WIRE.id());
    let fairing = SchemeTag {
        fairing: true,
        ..plain
    };
    assert_eq!(rx.estimate(t), feedback(McpCode::Light, false));
    assert!(!rx.on_packet(t, Ecn::NotEct, plain, 0));
    assert!(rx.on_packet(t, Ecn::Ce, plain, 0));
    assert_eq!(rx.estimate(t), feedback(McpCode::Overload, false));
    assert_eq!(rx.estimate(t).load.get(), OVERLOAD_REPRESENTATIVE);
    assert!(rx.on_packet(t, Ecn::Ect1, fairing, 0));
    assert_eq!(rx.estimate(t), feedback(McpCode::Moderate, true));
    assert_eq!(rx.estimate(t).load.get(), ENHANCING_BOUND);
    // The latest packet decides, down as well as up.
    assert!(rx.on_packet(t, Ecn::Ect1, plain, 0));
    assert!(!rx.estimate(t).fairing);
    assert!(rx.on_packet(t, Ecn::Ect0, plain, 0));
    assert_eq!(rx.estimate(t).load.get(), OVERLOAD_BOUND);
}

#[test]
fn starts_at_80_kbit_and_requests_fairing() {
    let law = McpLaw::new(LawConfig::default());
    assert_eq!(law.pacing_rate(), Some(INITIAL_RATE));
    assert_eq!(law.mode(), Mode::Scaling);
    assert_eq!(
        law.tag(),
        SchemeTag {
            this_path: true,
            fairing: true,
            ..SchemeTag::new(WIRE.id())
        }
    );
    // Before any RTT sample: the initial window.
    assert_eq!(law.window(), LawConfig::default().initial_window);
}

#[test]
fn scaling_doubles_once_per_2t() {
    let mut law = law_seeing(McpCode::Light, true);
    law.on_ack(MS * 399, 1000, &rtt());
    assert_eq!(law.rate(), INITIAL_RATE);
    law.on_ack(MS * 400, 1000, &rtt());
    assert_eq!(law.rate(), 2.0 * INITIAL_RATE);
    law.on_ack(MS * 799, 1000, &rtt());
    assert_eq!(law.rate(), 2.0 * INITIAL_RATE);
    law.on_ack(MS * 800, 1000, &rtt());
    assert_eq!(law.rate(), 4.0 * INITIAL_RATE);
    assert_eq!(law.mode(), Mode::Scaling);
}

#[test]
fn adjustment_period_is_twice_the_interval() {
    let cfg = LawConfig {
        interval: MS * 100,
        ..LawConfig::default()
    };
    let mut law = McpLaw::new(cfg);
    law.on_ack(Duration::ZERO, 0, &rtt());
    law.on_ack(MS * 199, 0, &rtt());
    assert_eq!(law.rate(), INITIAL_RATE);
    law.on_ack(MS * 200, 0, &rtt());
    assert_eq!(law.rate(), 2.0 * INITIAL_RATE);
    assert_eq!(law.next_adjustment(), Some(MS * 400));
}

#[test]
fn enhancing_multiplies_by_1_1() {
    let mut law = law_seeing(McpCode::Moderate, false);
    assert_eq!(law.mode(), Mode::Enhancing);
    law.on_ack(MS * 400, 0, &rtt());
    assert!(close(law.rate(), INITIAL_RATE * ENHANCING_FACTOR));
}

#[test]
fn fairing_adds_80_kbit_in_01_and_10() {
    for code in [McpCode::Moderate, McpCode::High] {
        let mut law = law_seeing(code, true);
        assert_eq!(law.mode(), Mode::Fairing);
        law.on_ack(MS * 400, 0, &rtt());
        law.on_ack(MS * 800, 0, &rtt());
        assert!(
            close(law.rate(), INITIAL_RATE + 2.0 * RATE_STEP),
            "{code:?}"
        );
    }
    // Fairing bit with code 00 or 11 does not make it fairing (Fig. 2).
    assert_eq!(law_seeing(McpCode::Light, true).mode(), Mode::Scaling);
}

#[test]
fn smoothing_adds_until_overload_then_backs_off_once_and_holds() {
    let mut law = law_seeing(McpCode::High, false);
    assert_eq!(law.mode(), Mode::Smoothing);
    law.on_ack(MS * 400, 0, &rtt());
    law.on_ack(MS * 800, 0, &rtt());
    let peak = INITIAL_RATE + 2.0 * RATE_STEP;
    assert!(close(law.rate(), peak));
    // First overload: AD(80 kbit/s), not MD, then stable.
    law.on_feedback(MS * 900, feedback(McpCode::Overload, false), &rtt());
    assert!(close(law.rate(), peak - RATE_STEP));
    assert_eq!(law.mode(), Mode::Stable);
    law.on_feedback(MS * 1000, feedback(McpCode::High, false), &rtt());
    for t in [1300, 1700, 2100, 5000] {
        law.on_ack(MS * t, 0, &rtt());
        assert!(close(law.rate(), peak - RATE_STEP), "constant at {t} ms");
        assert_eq!(law.mode(), Mode::Stable);
    }
    // Leaving 10 ends stable; coming back smooths again.
    law.on_feedback(MS * 5100, feedback(McpCode::Moderate, false), &rtt());
    assert_eq!(law.mode(), Mode::Enhancing);
    law.on_feedback(MS * 5150, feedback(McpCode::High, false), &rtt());
    assert_eq!(law.mode(), Mode::Smoothing);
}

/// A law that smoothed to two steps above 10 000 B/s and backed off
/// once at 900 ms: stable at `INITIAL_RATE + RATE_STEP`, code `10` again.
fn stable_law() -> McpLaw {
    let mut law = law_seeing(McpCode::High, false);
    law.on_ack(MS * 400, 0, &rtt());
    law.on_ack(MS * 800, 0, &rtt());
    law.on_feedback(MS * 900, feedback(McpCode::Overload, false), &rtt());
    law.on_feedback(MS * 1000, feedback(McpCode::High, false), &rtt());
    assert_eq!(law.mode(), Mode::Stable);
    law
}

/// [`stable_law`] that saw code `11` at 2000 ms, and its stable rate.
fn stable_law_overloaded() -> (McpLaw, f64) {
    let mut law = stable_law();
    let rate = law.rate();
    law.on_feedback(MS * 2000, feedback(McpCode::Overload, false), &rtt());
    (law, rate)
}

#[test]
fn a_stable_flow_rides_out_a_one_period_overload() {
    // Two overload readings in a row (2000 ms and 2200 ms), then 10.
    let (mut law, rate) = stable_law_overloaded();
    law.on_ack(MS * 2150, 0, &rtt());
    law.on_feedback(MS * 2200, feedback(McpCode::Overload, false), &rtt());
    law.on_ack(MS * 2350, 0, &rtt());
    law.on_feedback(MS * 2390, feedback(McpCode::High, false), &rtt());
    for t in [2400, 2500, 3000, 4000] {
        law.on_ack(MS * t, 0, &rtt());
        assert_eq!(law.rate(), rate, "{t} ms");
        assert_eq!(law.mode(), Mode::Stable);
    }
}

#[test]
fn a_stable_flow_halves_an_overload_that_holds_2t() {
    let (mut law, rate) = stable_law_overloaded();
    law.on_ack(MS * 2399, 0, &rtt());
    assert_eq!(law.rate(), rate);
    law.on_ack(MS * 2400, 0, &rtt());
    assert!(close(law.rate(), rate * DECREASE_FACTOR));
    assert_eq!(law.mode(), Mode::Overloaded);
    assert_eq!(law.next_adjustment(), Some(MS * 2800));
}

#[test]
fn lower_codes_end_a_stable_state_at_once() {
    let mut law = stable_law();
    law.on_feedback(MS * 2000, feedback(McpCode::Moderate, false), &rtt());
    assert_eq!(law.mode(), Mode::Enhancing);
    let mut law = stable_law();
    law.on_feedback(MS * 2000, feedback(McpCode::High, true), &rtt());
    assert_eq!(law.mode(), Mode::Fairing);
}

#[test]
fn a_halving_that_lands_under_48_percent_enhances_instead_of_doubling() {
    let mut law = scaled_up(4);
    let peak = law.rate();
    // Nascent overload at 1700 ms halves and restarts the timer.
    law.on_feedback(MS * 1700, feedback(McpCode::Overload, false), &rtt());
    law.on_feedback(MS * 1800, feedback(McpCode::Light, false), &rtt());
    assert_eq!(law.mode(), Mode::Enhancing);
    law.on_ack(MS * 2100, 0, &rtt());
    assert!(close(law.rate(), peak / 2.0 * ENHANCING_FACTOR));
    // Still 00 at the next instant: still no doubling.
    law.on_ack(MS * 2500, 0, &rtt());
    assert!(close(
        law.rate(),
        peak / 2.0 * ENHANCING_FACTOR * ENHANCING_FACTOR
    ));
    // Once a higher code came, 00 means a light load again: MI(2), but
    // no higher than the rate the overload came at.
    law.on_feedback(MS * 2600, feedback(McpCode::Moderate, false), &rtt());
    law.on_feedback(MS * 2700, feedback(McpCode::Light, false), &rtt());
    let before = law.rate();
    assert!(before * SCALING_FACTOR > peak);
    law.on_ack(MS * 2900, 0, &rtt());
    assert!(close(law.rate(), peak));
    // Still 00 at that rate: capacity was freed, and it doubles.
    law.on_ack(MS * 3300, 0, &rtt());
    assert!(close(law.rate(), peak * SCALING_FACTOR));
}

/// A flow scaled up to its peak rate (returned) and halved by an
/// overload at 3300 ms, on a round trip as long as T (also returned):
/// reports reach the sender 200 ms after the router wrote them, and
/// describe the period before.
fn halved_on_a_long_rtt() -> (McpLaw, f64, RttSample) {
    let mut law = scaled_up(8);
    let peak = law.rate();
    let rtt = RttSample::uniform(MS * 200);
    law.on_feedback(MS * 3300, feedback(McpCode::Overload, false), &rtt);
    (law, peak, rtt)
}

#[test]
fn codes_from_before_a_halving_do_not_halve_again() {
    let (mut law, peak, rtt) = halved_on_a_long_rtt();
    assert_eq!(law.rate(), peak / 2.0);
    // Until 3300 + T + srtt = 3700 ms no code can describe traffic sent
    // after the halving: a new 11, and the instant at 3700, keep the rate.
    law.on_feedback(MS * 3400, feedback(McpCode::Moderate, false), &rtt);
    law.on_feedback(MS * 3500, feedback(McpCode::Overload, false), &rtt);
    law.on_ack(MS * 3700, 0, &rtt);
    assert_eq!(law.rate(), peak / 2.0);
    // An overload reported after that halves at the next instant.
    law.on_feedback(MS * 3750, feedback(McpCode::Overload, false), &rtt);
    assert_eq!(law.rate(), peak / 2.0);
    law.on_ack(MS * 4100, 0, &rtt);
    assert_eq!(law.rate(), peak / 4.0);
}

#[test]
fn a_code_from_before_a_halving_does_not_end_its_enhancing() {
    let (mut law, peak, rtt) = halved_on_a_long_rtt();
    law.on_feedback(MS * 3400, feedback(McpCode::High, false), &rtt);
    law.on_feedback(MS * 3500, feedback(McpCode::Light, false), &rtt);
    law.on_ack(MS * 3700, 0, &rtt);
    let enhanced = peak / 2.0 * ENHANCING_FACTOR;
    assert!(close(law.rate(), enhanced));
    // A 10 reported from 3700 ms on is news: 00 then means light load,
    // MI(2) up to the rate the overload came at.
    law.on_feedback(MS * 3750, feedback(McpCode::High, false), &rtt);
    law.on_feedback(MS * 3800, feedback(McpCode::Light, false), &rtt);
    law.on_ack(MS * 4100, 0, &rtt);
    assert!(enhanced * SCALING_FACTOR > peak);
    assert!(close(law.rate(), peak));
}

#[test]
fn overload_that_outlasts_the_backtrack_halves() {
    let mut law = law_seeing(McpCode::High, false);
    law.on_ack(MS * 400, 0, &rtt());
    law.on_feedback(MS * 500, feedback(McpCode::Overload, false), &rtt());
    let after_ad = law.rate();
    assert_eq!(law.mode(), Mode::Stable);
    // Still 11 at the next instant (timer restarted at 500 ms).
    law.on_feedback(MS * 899, feedback(McpCode::Overload, false), &rtt());
    assert_eq!(law.rate(), after_ad);
    law.on_ack(MS * 900, 0, &rtt());
    assert!(close(law.rate(), after_ad * DECREASE_FACTOR));
    assert_eq!(law.mode(), Mode::Overloaded);
}

/// A law at the default T that doubled `n` times from 0, last at n·400 ms.
fn scaled_up(n: u32) -> McpLaw {
    let mut law = law_seeing(McpCode::Light, false);
    for k in 1..=n {
        law.on_ack(MS * (400 * k), 0, &rtt());
    }
    law
}

#[test]
fn nascent_overload_halves_at_once_and_restarts_the_timer() {
    let mut law = scaled_up(4);
    let peak = INITIAL_RATE * 16.0;
    assert_eq!(law.rate(), peak);
    // 1600 ms: last adjustment. 1700 ms: code turns 11.
    law.on_feedback(MS * 1700, feedback(McpCode::Overload, false), &rtt());
    assert_eq!(law.rate(), peak / 2.0);
    assert_eq!(law.mode(), Mode::Overloaded);
    assert_eq!(law.next_adjustment(), Some(MS * 2100));
    // The old schedule's 2000 ms instant is gone.
    law.on_ack(MS * 2000, 0, &rtt());
    assert_eq!(law.rate(), peak / 2.0);
    // Back to 10 before the instant: no further decrease, smoothing AI.
    law.on_feedback(MS * 2050, feedback(McpCode::High, false), &rtt());
    law.on_ack(MS * 2100, 0, &rtt());
    assert!(close(law.rate(), peak / 2.0 + RATE_STEP));
    assert_eq!(law.mode(), Mode::Smoothing);
}

#[test]
fn sustained_overload_halves_once_per_2t() {
    let mut law = scaled_up(8);
    let peak = law.rate();
    let start = MS * 3300;
    let mut decreases = Vec::new();
    let mut last = peak;
    for step in 0..=200u32 {
        let now = start + MS * (10 * step);
        law.on_feedback(now, feedback(McpCode::Overload, true), &rtt());
        if law.rate() < last {
            decreases.push((now - start).as_millis());
            assert!(close(law.rate(), last * DECREASE_FACTOR));
            last = law.rate();
        }
    }
    assert_eq!(decreases, [0, 400, 800, 1200, 1600, 2000]);
}

#[test]
fn an_idle_spell_gets_one_adjustment_and_keeps_the_phase() {
    let mut law = law_seeing(McpCode::Light, false);
    law.on_ack(MS * 10_100, 0, &rtt());
    assert_eq!(law.rate(), 2.0 * INITIAL_RATE);
    assert_eq!(law.next_adjustment(), Some(MS * 10_400));
}

#[test]
fn fairing_request_lasts_seven_cycles() {
    let mut law = law_seeing(McpCode::Light, false);
    // A decrease before any increase ends no cycle.
    law.on_feedback(MS * 10, feedback(McpCode::Overload, false), &rtt());
    law.on_feedback(MS * 20, feedback(McpCode::Light, false), &rtt());
    assert_eq!(law.cycles(), 0);
    let mut now = MS * 20;
    for cycle in 1..=FAIRING_CYCLES {
        assert!(law.tag().fairing && law.tag().this_path, "cycle {cycle}");
        now += MS * 400;
        law.on_ack(now, 0, &rtt());
        // Two decreases in a row: one cycle.
        now += MS * 10;
        law.on_feedback(now, feedback(McpCode::Overload, false), &rtt());
        now += MS * 400;
        law.on_ack(now, 0, &rtt());
        now += MS * 10;
        law.on_feedback(now, feedback(McpCode::Light, false), &rtt());
        assert_eq!(law.cycles(), cycle);
    }
    assert!(!law.requests_fairing());
    let tag = law.tag();
    assert!(!tag.fairing && !tag.this_path);
    assert_eq!(tag.wire_id, WIRE.id());
    law.request_fairing();
    assert!(law.tag().fairing && law.tag().this_path);
}

#[test]
fn loss_halves_at_most_once_per_round_trip() {
    let mut law = scaled_up(4);
    // An ecnq router spoke lately: the loss is MCP's to answer.
    law.router_spoke_at = Some(MS * 1600);
    let peak = law.rate();
    let rtt = rtt();
    law.on_congestion(MS * 1700, MS * 1650, Congestion::Loss, &rtt);
    assert_eq!(law.rate(), peak / 2.0);
    assert_eq!(law.next_adjustment(), Some(MS * 2100));
    // Sent before that reaction: the same event.
    law.on_congestion(MS * 1720, MS * 1690, Congestion::Ce, &rtt);
    assert_eq!(law.rate(), peak / 2.0);
    law.on_congestion(MS * 1800, MS * 1750, Congestion::Loss, &rtt);
    assert_eq!(law.rate(), peak / 4.0);
    // Feedback-driven decreases count as reactions too.
    law.on_feedback(MS * 1900, feedback(McpCode::Overload, false), &rtt);
    law.on_congestion(MS * 1950, MS * 1890, Congestion::Loss, &rtt);
    assert_eq!(law.rate(), peak / 8.0);
}

#[test]
fn window_is_rate_times_srtt_within_config_bounds() {
    let mut law = scaled_up(7);
    let srtt = RttSample::uniform(MS * 100);
    law.on_ack(MS * 2900, 0, &srtt);
    let want = law.rate() * 0.1;
    assert!((law.window() as f64 - want).abs() <= 1.0);
    assert_eq!(law.pacing_rate(), Some(INITIAL_RATE * 128.0));
    // A tiny rate is clamped up to the minimum window.
    let mut slow = McpLaw::new(LawConfig::default());
    slow.on_ack(Duration::ZERO, 0, &RttSample::uniform(MS));
    assert_eq!(slow.window(), LawConfig::default().min_window);
    // A zero RTT sample is no sample.
    let mut fresh = McpLaw::new(LawConfig::default());
    fresh.on_ack(Duration::ZERO, 0, &RttSample::uniform(Duration::ZERO));
    assert_eq!(fresh.window(), LawConfig::default().initial_window);
}

#[test]
fn rate_stays_between_one_mss_per_2t_and_the_maximum() {
    let mut law = law_seeing(McpCode::Overload, false);
    for k in 1..40 {
        let overload = feedback(McpCode::Overload, false);
        law.on_feedback(MS * (400 * k), overload, &rtt());
    }
    // 1200 bytes per 400 ms.
    assert_eq!(law.rate(), 3000.0);
    assert_eq!(law.min_rate(), 3000.0);
    let mut law = law_seeing(McpCode::Light, false);
    for k in 1..100 {
        law.on_ack(MS * (400 * k), 0, &rtt());
    }
    assert_eq!(law.rate(), MAX_RATE);
}

/// One 20 Mbit/s link (the paper's §V default) in 10 ms fluid steps,
/// with flows joining 10 s apart; feedback reaches senders at once.
/// Returns (utilization, peak queue in bytes, min/max rate ratio) over
/// the last 20 s of `secs`.
fn closed_loop(flows: usize, secs: u32) -> (f64, u64, f64) {
    use crate::{LoadFactorMeter, MeterConfig};
    let capacity = 2.5e6;
    let step = MS * 10;
    let mut meter = LoadFactorMeter::new(MeterConfig::new(capacity), Duration::ZERO);
    let mut marker = McpMarker::new();
    let mut senders: Vec<(McpLaw, McpDecoder, f64)> = Vec::new();
    let (mut queue, mut departed, mut peak) = (0u64, 0.0, 0u64);
    let steps = secs * 100;
    for i in 0..steps {
        let now = step * i;
        if senders.len() < flows && i % 1000 == 0 {
            senders.push((
                McpLaw::new(LawConfig::default()),
                McpDecoder::default(),
                0.0,
            ));
        }
        for (flow, (law, rx, credit)) in senders.iter_mut().enumerate() {
            *credit += law.rate() * step.as_secs_f64();
            while *credit >= 1200.0 {
                *credit -= 1200.0;
                meter.on_arrival(now, 1200);
                queue += 1200;
                meter.on_queue(now, queue);
                let state = LinkState {
                    load: *meter.load(),
                    queue_bytes: queue,
                    ..LinkState::default()
                };
                let mut pkt = packet(Ecn::NotEct, false, false, flow as u64);
                pkt.tag = law.tag();
                marker.mark(now, &state, &mut pkt);
                rx.on_packet(now, pkt.ecn, pkt.tag, pkt.hash);
            }
            law.on_feedback(now, rx.estimate(now), &rtt());
        }
        let out = queue.min((capacity * step.as_secs_f64()) as u64);
        queue -= out;
        meter.on_departure(now, out as u32);
        meter.on_queue(now, queue);
        if i >= steps - 2000 {
            departed += out as f64;
            peak = peak.max(queue);
        }
    }
    let rates: Vec<f64> = senders.iter().map(|s| s.0.rate()).collect();
    let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
    let max = rates.iter().copied().fold(0.0, f64::max);
    (departed / (capacity * 20.0), peak, min / max)
}

#[test]
fn closed_loop_converges_to_high_fair_utilization_with_a_short_queue() {
    // Three flows on 20 Mbit/s, as in the paper's §V-A (Fig. 3: stable
    // utilization 0.97, fairness index 0.91, queue under 7 packets).
    // Fairing lasts until about 140 s here; the last 20 s of 400 are stable.
    let (utilization, peak_queue, fairness) = closed_loop(3, 400);
    assert!(utilization > 0.9, "utilization {utilization}");
    assert!(peak_queue <= 7 * 1200, "peak queue {peak_queue} B");
    assert!(fairness > 0.85, "min/max rate {fairness}");
}

#[derive(Clone, Debug)]
enum Event {
    Ack { rtt_ms: u32 },
    Feedback { level: u16, fairing: bool },
    Congestion { sent_ago_ms: u32 },
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        (0u32..2000).prop_map(|rtt_ms| Event::Ack { rtt_ms }),
        (0u16..6, any::<bool>()).prop_map(|(level, fairing)| Event::Feedback { level, fairing }),
        (0u32..3000).prop_map(|sent_ago_ms| Event::Congestion { sent_ago_ms }),
    ]
}

fn apply(law: &mut McpLaw, now: Duration, ev: &Event) {
    match *ev {
        Event::Ack { rtt_ms } => law.on_ack(now, 1200, &RttSample::uniform(MS * rtt_ms)),
        Event::Feedback { level, fairing } => law.on_feedback(
            now,
            Feedback {
                level,
                load: LoadFactor::new(f64::from(level)),
                fairing,
            },
            &rtt(),
        ),
        Event::Congestion { sent_ago_ms } => {
            let sent = now.saturating_sub(MS * sent_ago_ms);
            law.on_congestion(now, sent, Congestion::Loss, &rtt());
        }
    }
}

#[test]
fn a_loss_no_router_saw_turns_the_flow_to_cubic_until_a_router_speaks() {
    let mut law = law_seeing(McpCode::Light, false);
    let second = Duration::from_secs(1);
    // Scaling on code 00 for a few seconds, then a loss: no ecnq router
    // wrote anything above 00, so the loss happened at a link none meters.
    for t in 1..=4 {
        law.on_ack(second * t, 1200, &rtt());
    }
    let rate = law.rate();
    law.on_congestion(second * 4, second * 4 - MS, Congestion::Loss, &rtt());
    assert!(law.is_unassisted());
    assert_eq!(law.pacing_rate(), None, "Cubic's window rules");
    // Cubic's decrease (β = 0.7) of the window the flow sent at.
    let window = law.window() as f64;
    let sent = rate * rtt().smoothed.as_secs_f64();
    assert!(
        (window - 0.7 * sent).abs() <= 0.01 * sent + 1200.0,
        "{window} vs {sent}"
    );
    // Acks grow Cubic's window, not MCP's rate.
    for ms in 1..200 {
        law.on_ack(second * 4 + MS * ms, 1200, &rtt());
    }
    assert!(law.window() as f64 > window);
    assert_eq!(law.rate(), rate, "MCP's rate waits");
    // A router at a loaded link speaks: MCP again, from Cubic's rate.
    let cubic_rate = law.window() as f64 / rtt().smoothed.as_secs_f64();
    law.on_feedback(second * 5, feedback(McpCode::Moderate, false), &rtt());
    assert!(!law.is_unassisted());
    assert!((law.rate() - cubic_rate).abs() < 1e-6 * cubic_rate);
    assert_eq!(law.pacing_rate(), Some(law.rate()));
}

#[test]
fn a_loss_soon_after_a_router_spoke_is_answered_by_mcp() {
    let mut law = law_seeing(McpCode::High, false);
    let at = ROUTER_SPAN_PERIODS * law.period / 2;
    law.on_feedback(at, feedback(McpCode::Light, false), &rtt());
    let rate = law.rate();
    law.on_congestion(at + MS, at, Congestion::Loss, &rtt());
    assert!(!law.is_unassisted());
    assert_eq!(law.mode(), Mode::Overloaded);
    assert!(law.rate() <= rate * DECREASE_FACTOR + 1e-9);
}

proptest! {
    #[test]
    fn decoder_never_panics(packets in proptest::collection::vec((any::<u8>(), any::<u8>(), any::<u32>()), 0..200)) {
        let mut rx = McpDecoder::default();
        for (i, (tos, dscp, hash)) in packets.into_iter().enumerate() {
            let now = MS * i as u32;
            rx.on_packet(now, Ecn::from_tos(tos), SchemeTag::from_dscp(dscp), hash);
            let est = rx.estimate(now);
            prop_assert!(est.level <= 3);
            prop_assert!(est.load.get().is_finite());
            prop_assert_eq!(est.level, u16::from(tos & 0b11));
        }
    }

    #[test]
    fn rate_and_window_stay_finite_and_bounded(
        mss in 1u64..9000,
        interval_ms in 0u64..1000,
        events in proptest::collection::vec((0u64..2000, event()), 0..300),
    ) {
        let cfg = LawConfig { interval: MS * interval_ms as u32, ..LawConfig::with_mss(mss) };
        let mut law = McpLaw::new(cfg);
        let mut now = Duration::ZERO;
        for (dt, ev) in &events {
            now += MS * *dt as u32;
            apply(&mut law, now, ev);
            let rate = law.rate();
            prop_assert!(rate.is_finite());
            prop_assert!(rate >= law.min_rate() && rate <= MAX_RATE, "rate {}", rate);
            let paced = (!law.is_unassisted()).then_some(rate);
            prop_assert_eq!(law.pacing_rate(), paced);
            prop_assert!(law.window() >= cfg.min_window && law.window() <= cfg.max_window);
        }
    }

    #[test]
    fn overload_forever_never_grows(
        events in proptest::collection::vec((0u64..2000, event()), 0..300),
    ) {
        let mut law = McpLaw::new(LawConfig::default());
        let mut now = Duration::ZERO;
        law.on_feedback(now, feedback(McpCode::Overload, false), &rtt());
        let mut last = law.rate();
        for (dt, ev) in &events {
            now += MS * *dt as u32;
            // Every report says overload; acks and losses come as they may.
            let ev = match ev {
                Event::Feedback { level, fairing } => {
                    Event::Feedback { level: (*level).max(3), fairing: *fairing }
                }
                other => other.clone(),
            };
            apply(&mut law, now, &ev);
            prop_assert!(law.rate() <= last);
            last = law.rate();
        }
    }
}

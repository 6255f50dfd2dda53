//! The feedback path through a simulated pair ([`super::pair`]): reports,
//! their loss, delay and reordering, fallback and recovery.

use std::time::Duration;

use super::pair::{Pair, VanillaPeer, HEADERS, LINK_RATE, MSS};
use super::report::Repr;
use super::{Event, PeerEvent, PeerMode, Session};
use crate::router::MarkingMode;
use crate::schemes::registry::Scheme;
use crate::signal::load::LoadFactor;
use crate::signal::{Feedback, LawConfig, Mode};
use crate::wire::ecn::{Ecn, SchemeTag};

const MS: Duration = Duration::from_millis(1);
const SECOND: Duration = Duration::from_secs(1);

fn is_classic(mode: Option<Mode>) -> bool {
    matches!(
        mode,
        Some(Mode::SlowStart | Mode::CongestionAvoidance | Mode::Recovery)
    )
}

fn scheme_tag(scheme: Scheme) -> SchemeTag {
    SchemeTag::new(scheme.wire().id())
}

/// The bytes per second acknowledged while `pair` runs for `span`.
fn goodput(pair: &mut Pair, span: Duration) -> f64 {
    let before = pair.acked_bytes;
    pair.run_until(pair.now + span);
    (pair.acked_bytes - before) as f64 / span.as_secs_f64()
}

/// The goodput once the router meters the link against a quarter of its
/// rate: the marks say overload although nothing is lost or queued, and
/// the law follows them down.
fn goodput_metered_at_a_quarter(pair: &mut Pair) -> f64 {
    let capacity = LINK_RATE as f64 / 8.0;
    pair.bottleneck
        .as_mut()
        .unwrap()
        .router_mut()
        .set_capacity(capacity / 4.0);
    pair.run_until(pair.now + 3 * SECOND);
    goodput(pair, 3 * SECOND)
}

#[test]
fn reports_flow_and_the_law_follows_the_routers_signal() {
    let capacity = LINK_RATE as f64 / 8.0;
    for scheme in [Scheme::Erc, Scheme::Vcp] {
        let mut pair = Pair::new(scheme);
        pair.run_until(5 * SECOND);
        let full = goodput(&mut pair, 3 * SECOND);
        let stats = pair.stats();
        assert_eq!(stats.mode, PeerMode::Ecnq, "{scheme}: {stats:?}");
        assert!(stats.reports_accepted > 100, "{scheme}: {stats:?}");
        assert_eq!(stats.reports_rejected, 0, "{scheme}");
        assert!(full > 0.6 * capacity, "{scheme}: {full} B/s");
        let quarter = goodput_metered_at_a_quarter(&mut pair);
        assert!(quarter < 0.4 * capacity, "{scheme}: {quarter} B/s");
        assert!(quarter > 0.1 * capacity, "{scheme}: {quarter} B/s");
        assert_eq!(pair.stats().mode, PeerMode::Ecnq, "{scheme}");
    }
}

#[test]
fn some_lost_or_late_reports_do_not_trigger_fallback() {
    let mut pair = Pair::new(Scheme::Erc);
    let leg = pair.report_leg();
    leg.loss = 0.3;
    leg.delay = 60 * MS;
    pair.run_until(10 * SECOND);
    let stats = pair.stats();
    assert_eq!(stats.mode, PeerMode::Ecnq, "{stats:?}");
    assert!(stats.reports_accepted > 100, "{stats:?}");
    let modes: Vec<PeerMode> = pair.mode_changes().iter().map(|c| c.1).collect();
    assert_eq!(modes, [PeerMode::Ecnq], "one change, to ecnq");
}

#[test]
fn reports_stopping_falls_back_and_reports_resuming_bring_the_scheme_back() {
    let scheme = Scheme::Erc;
    let mut pair = Pair::new(scheme);
    pair.report_leg().blackout = Some(3 * SECOND..5 * SECOND);
    pair.run_until(8 * SECOND);
    // The timeout is max(4 srtt, 500 ms) after the last report, which came
    // within a report period (about a 20 ms round trip) before 3 s.
    let fell = pair
        .entered(PeerMode::ClassicReportsStopped, 3 * SECOND)
        .expect("fallback");
    assert!(fell > 3450 * MS && fell < 3600 * MS, "{fell:?}");
    let back = pair.entered(PeerMode::Ecnq, fell).expect("recovery");
    assert!(back > 5 * SECOND && back < 5100 * MS, "{back:?}");
    // While fallen back the packets keep the scheme's tag, with quinn's ECT(0).
    let tag = scheme_tag(scheme);
    let meanwhile: Vec<u8> = pair.tos_sent(fell + MS..back).collect();
    assert!(meanwhile.len() > 1000);
    assert!(meanwhile.iter().all(|&tos| tos == tag.tos(Ecn::Ect0)));
    assert!(pair.events.iter().any(|(at, e)| *at == fell
        && matches!(
            e,
            Event::LawReplaced {
                mode: PeerMode::ClassicReportsStopped,
                ..
            }
        )));
    assert!(pair.events.iter().any(|(at, e)| *at == back
        && matches!(e, Event::SchemeResumed { scheme: s, .. } if *s == scheme)));
    let stats = pair.stats();
    assert_eq!(stats.mode, PeerMode::Ecnq);
    assert!(!is_classic(stats.law_mode), "{stats:?}");
    let base = tag.tos(scheme.wire().base_ecn());
    assert!(pair.tos_sent(back + MS..pair.now).all(|tos| tos == base));
}

#[test]
fn a_peer_that_does_not_run_ecnq_gets_classic_congestion_control() {
    // VCP's codes are not in ACK-ECN counts (erc's are, below).
    let mut pair = Pair::new(Scheme::Vcp);
    pair.receiver = None;
    pair.run_until(3 * SECOND);
    // At the first ACK, one round trip after the first packet.
    let changes = pair.mode_changes();
    assert_eq!(changes.len(), 1, "{changes:?}");
    let (at, mode) = changes[0];
    assert_eq!(mode, PeerMode::ClassicPeerNotEcnq);
    assert!(at >= 20 * MS && at < 25 * MS, "{at:?}");
    let stats = pair.stats();
    assert!(is_classic(stats.law_mode), "{stats:?}");
    assert_eq!(stats.reports_accepted, 0);
    let untagged = SchemeTag::UNTAGGED.tos(Ecn::Ect0);
    assert!(pair.tos_sent(at + MS..pair.now).all(|tos| tos == untagged));
    assert!(goodput(&mut pair, 2 * SECOND) > 0.5 * LINK_RATE as f64 / 8.0);
}

/// The most packets queued at the bottleneck while `pair` runs for `span`.
fn peak_queue(pair: &mut Pair, span: Duration) -> usize {
    let mut peak = 0;
    pair.run_checking(pair.now + span, |p| {
        peak = peak.max(p.bottleneck.as_ref().map_or(0, |b| b.queue_packets()));
    });
    peak
}

/// erc from a peer that runs no ecnq, through its ACK frames' ECN counts:
/// one frame per two packets (quinn), or per ten with a tenth of them
/// lost and the rest reordered by up to 5 ms (Chromium decimates so). The
/// law follows the router as it does on an ecnq receiver's reports: as
/// much of the link, a queue no longer than one frame's packets more, and
/// down when the router meters against less.
#[test]
fn erc_reads_the_router_from_a_vanilla_peers_ack_ecn_counts() {
    let capacity = LINK_RATE as f64 / 8.0;
    let mut reports = Pair::new(Scheme::Erc);
    reports.run_until(5 * SECOND);
    let (by_reports, queue_by_reports) = (
        goodput(&mut reports, 3 * SECOND),
        peak_queue(&mut reports, 3 * SECOND),
    );
    for (ack_every, loss, jitter) in [(2, 0.0, Duration::ZERO), (10, 0.1, 5 * MS)] {
        let mut pair = Pair::new(Scheme::Erc);
        pair.receiver = None;
        pair.vanilla = Some(VanillaPeer::new(ack_every, true));
        let leg = pair.ack_frame_leg();
        leg.loss = loss;
        leg.jitter = jitter;
        pair.run_until(5 * SECOND);
        let full = goodput(&mut pair, 3 * SECOND);
        let queue = peak_queue(&mut pair, 3 * SECOND);
        let stats = pair.stats();
        let modes: Vec<PeerMode> = pair.mode_changes().iter().map(|c| c.1).collect();
        assert_eq!(modes, [PeerMode::EcnqAckCounts], "{ack_every}: {stats:?}");
        assert!(stats.ack_frames_read > 100, "{ack_every}: {stats:?}");
        assert!(
            full > 0.9 * by_reports,
            "{ack_every}: {full} B/s, {by_reports} B/s by reports"
        );
        // Decimated ACKs release a frame's worth of packets at once.
        assert!(
            queue <= queue_by_reports + ack_every as usize,
            "{ack_every}: {queue} packets queued, {queue_by_reports} by reports"
        );
        // Tagged, with erc's ECT(0), whatever quinn made of the marks.
        let tagged = scheme_tag(Scheme::Erc).tos(Ecn::Ect0);
        let since = pair.now - 3 * SECOND;
        assert!(pair.tos_sent(since..pair.now).all(|tos| tos == tagged));
        let quarter = goodput_metered_at_a_quarter(&mut pair);
        assert!(quarter < 0.4 * capacity, "{ack_every}: {quarter} B/s");
        assert!(quarter > 0.1 * capacity, "{ack_every}: {quarter} B/s");
    }
}

/// A vanilla peer whose ACKs carry no ECN counts (aioquic), or a path
/// that bleaches ECN (the peer then has none to report): Cubic once the
/// peer has acknowledged enough packets to be sure, still tagged with
/// erc's codepoint so that counts can come back.
#[test]
fn a_vanilla_peer_without_ecn_counts_gets_classic_congestion_control() {
    for bleached in [false, true] {
        let mut pair = Pair::new(Scheme::Erc);
        pair.receiver = None;
        pair.vanilla = Some(VanillaPeer::new(2, bleached));
        if bleached {
            pair.set_router(MarkingMode::Off);
            pair.bleach_ecn = true;
        }
        pair.run_until(3 * SECOND);
        let changes = pair.mode_changes();
        let modes: Vec<PeerMode> = changes.iter().map(|c| c.1).collect();
        assert_eq!(
            modes,
            [PeerMode::EcnqAckCounts, PeerMode::ClassicNoEcnCounts],
            "bleached {bleached}"
        );
        let at = changes[1].0;
        assert!(at < SECOND, "bleached {bleached}: {at:?}");
        let stats = pair.stats();
        assert!(is_classic(stats.law_mode), "{stats:?}");
        let tagged = scheme_tag(Scheme::Erc).tos(Ecn::Ect0);
        assert!(pair.tos_sent(at + MS..pair.now).all(|tos| tos == tagged));
        assert!(goodput(&mut pair, 2 * SECOND) > 0.5 * LINK_RATE as f64 / 8.0);
    }
}

/// With no ecnq router, every packet reaches the peer with erc's ECT(0):
/// the counts spell "no router", and erc's law runs Cubic, tagged, until
/// a router speaks.
#[test]
fn counts_without_a_router_read_as_no_router() {
    let mut pair = Pair::new(Scheme::Erc);
    pair.receiver = None;
    pair.vanilla = Some(VanillaPeer::new(2, true));
    pair.set_router(MarkingMode::Off);
    pair.run_until(3 * SECOND);
    let stats = pair.stats();
    assert_eq!(stats.mode, PeerMode::EcnqAckCounts, "{stats:?}");
    assert_eq!(stats.counts_estimate.map(|f| f.level), Some(0));
    assert!(stats.pacing_rate.is_none(), "Cubic: {stats:?}");
    pair.set_router(MarkingMode::Auto);
    pair.run_until(6 * SECOND);
    let stats = pair.stats();
    assert!(stats.pacing_rate.is_some(), "erc's rate: {stats:?}");
}

/// VCP probes with Not-ECT packets, MCP (whose base codepoint is Not-ECT)
/// with its tag's probe bit: either way, with no ecnq router the probes
/// arrive unraised and the sender runs Cubic, and a router brings the
/// scheme back.
#[test]
fn probes_without_an_ecnq_router_mean_classic_until_a_router_appears() {
    for scheme in [Scheme::Vcp, Scheme::Mcp] {
        let mut pair = Pair::new(scheme);
        pair.set_router(MarkingMode::Off);
        pair.run_until(4 * SECOND);
        let absent = pair
            .entered(PeerMode::ClassicNoRouter, Duration::ZERO)
            .expect("no router");
        // Every datagram is a probe until the verdict, and the receiver
        // reports promptly after the first few packets: it comes about two
        // 20 ms round trips in (48 ms for VCP). MCP starts at 80 kbit/s,
        // about eight packets a second, so its probes come slower (110 ms).
        let bound = if scheme == Scheme::Mcp { 200 } else { 70 };
        assert!(absent < bound * MS, "{scheme}: {absent:?}");
        // Every 16th datagram is a probe; the rest carry quinn's ECT(0).
        let tag = scheme_tag(scheme);
        let (probe_tag, probe_ecn) = scheme.wire().probe(tag, Ecn::Ect0);
        let tos: Vec<u8> = pair.tos_sent(absent + MS..pair.now).collect();
        let probes = tos
            .iter()
            .filter(|&&t| t == probe_tag.tos(probe_ecn))
            .count();
        let ect0 = tos.iter().filter(|&&t| t == tag.tos(Ecn::Ect0)).count();
        assert_eq!(probes + ect0, tos.len(), "{scheme}");
        assert!(
            probes.abs_diff(tos.len() / 16) <= 1,
            "{scheme}: {probes} of {}",
            tos.len()
        );
        assert!(is_classic(pair.stats().law_mode), "{scheme}");
        pair.set_router(MarkingMode::Auto);
        pair.run_until(8 * SECOND);
        let present = pair
            .entered(PeerMode::Ecnq, 4 * SECOND)
            .expect("a router again");
        // Within a few windows of probes (about 60 a second here).
        assert!(present < 7 * SECOND, "{scheme}: {present:?}");
        assert!(!is_classic(pair.stats().law_mode), "{scheme}");
    }
}

/// A report the sender has not seen yet: `ahead` past its last one, with
/// its counts.
fn report_after(pair: &Pair, ahead: u32, level: u16) -> Vec<u8> {
    let last = pair.stats().last_report.expect("reports arrived");
    Repr {
        sequence: last.sequence.wrapping_add(ahead),
        feedback: Feedback {
            level,
            load: LoadFactor::new(if level == 0 { 0.5 } else { 1.2 }),
            fairing: false,
        },
        ..last
    }
    .to_bytes()
}

#[test]
fn reordered_reports_never_move_the_law_backwards() {
    // Reports that overtake each other: the stale ones are refused.
    let mut pair = Pair::new(Scheme::Vcp);
    pair.report_leg().jitter = 40 * MS;
    let mut last_sequence = 0;
    pair.run_checking(5 * SECOND, |pair| {
        if let Some(report) = pair.stats().last_report {
            assert!(report.sequence >= last_sequence);
            last_sequence = report.sequence;
        }
    });
    let stats = pair.stats();
    assert!(stats.reports_rejected > 5, "reordered: {stats:?}");
    assert_eq!(stats.mode, PeerMode::Ecnq);

    // A newer report says low load, then an older one says overload: the
    // law keeps the newer word.
    let report = |pair: &mut Pair, ahead, level| {
        let datagram = report_after(pair, ahead, level);
        pair.sender.on_peer(pair.now, PeerEvent::Report(&datagram));
    };
    report(&mut pair, 2, 0);
    let before = pair.stats();
    report(&mut pair, u32::MAX, 2);
    let after = pair.stats();
    assert_eq!(after.reports_rejected, before.reports_rejected + 1);
    assert_eq!(after.decreases, before.decreases);
    assert_eq!(after.window, before.window);
    // The same overload report, newer, is a decrease.
    report(&mut pair, 1, 2);
    let newer = pair.stats();
    assert_eq!(newer.decreases, before.decreases + 1);
    assert!(newer.window < before.window);
}

/// A rate law is under its rate (the transport asks for its window between
/// ACKs) from its first reading on, at its rate too, while less than its
/// cap is in flight, whether it catches up (erc) or not (Prague); a window
/// law never is. On a 200 ms path the first reading finds a start's few
/// packets in flight.
#[test]
fn a_rate_law_is_under_rate_until_its_cap() {
    for scheme in [Scheme::Erc, Scheme::Prague] {
        let mut pair = Pair::new(scheme);
        pair.set_one_way_delay(100 * MS);
        assert!(!pair.sender.under_rate(), "{scheme}: no rate yet");
        pair.run_until(5 * SECOND);
        let (mut below_cap, mut under) = (0, 0);
        pair.run_checking(6 * SECOND, |p| {
            let Some(window) = p.stats().window else {
                return;
            };
            if p.in_flight() < window {
                below_cap += 1;
                under += usize::from(p.sender.under_rate());
            }
        });
        assert!(below_cap > 10, "{scheme}: {below_cap} steps");
        assert_eq!(
            under, below_cap,
            "{scheme}: under in {under} of {below_cap}"
        );
    }
    let mut window_law = Pair::new(Scheme::Classic);
    window_law.run_checking(2 * SECOND, |p| assert!(!p.sender.under_rate()));
}

/// quinn paces at 1.25 times its window per srtt. Given only the gate's
/// window (what is in flight plus a burst), its pacer held a start to
/// about a quarter more per round trip; a floor of rate × srtt / 1.25
/// lets it send the law's rate at once: on a 200 ms path the start has
/// less than half its rate × srtt in flight for under a round trip after
/// its first reading.
#[test]
fn once_a_start_knows_its_rate_the_pacer_sends_it() {
    let mut pair = Pair::new(Scheme::Erc);
    pair.set_one_way_delay(100 * MS);
    let (mut short_from, mut at_rate) = (None, None);
    pair.run_checking(2 * SECOND, |p| {
        let stats = p.stats();
        let short = stats.pacing_rate.is_some()
            && stats
                .window
                .is_some_and(|window| p.in_flight() * 2 < window);
        if short && short_from.is_none() {
            short_from = Some(p.now);
        }
        if !short && short_from.is_some() && at_rate.is_none() {
            at_rate = Some(p.now);
        }
    });
    let (Some(from), Some(to)) = (short_from, at_rate) else {
        panic!("the start was never short of its rate, or never reached it");
    };
    assert!(to - from < 200 * MS, "{:?} short of its rate", to - from);
}

/// A sender held by its window can sleep until the time
/// `window_reaches_at` names: its window lets the next packet out then,
/// and not a microsecond before, whether its rate law has a floor (erc)
/// or not (Prague). Only acknowledgements open a window law's window
/// (Cubic): no time is named.
#[test]
fn the_window_opens_when_the_session_says() {
    for scheme in [Scheme::Erc, Scheme::Prague, Scheme::Classic] {
        let mut pair = Pair::new(scheme);
        let mut waits = 0;
        pair.run_checking(3 * SECOND, |p| {
            let (now, target) = (p.now, p.in_flight() + MSS);
            let window = |at| p.sender.window(at).expect("a law");
            match p.sender.window_reaches_at(now, target) {
                Some(at) if at > now => {
                    waits += 1;
                    assert!(window(at) >= target, "{scheme} at {at:?}");
                    let early = at - Duration::from_micros(1);
                    assert!(early < now || window(early) < target, "{scheme} at {at:?}");
                }
                Some(_) => assert!(window(now) >= target, "{scheme} at {now:?}"),
                None => assert!(window(now + SECOND) < target, "{scheme} at {now:?}"),
            }
        });
        let paced = pair.stats().pacing_rate.is_some();
        assert_eq!(waits > 10, paced, "{scheme}: {waits} waits");
    }
}

/// A pair whose sender can send nothing (it runs no law) and has nothing
/// in transit has no next event: it fails saying so rather than spin.
#[test]
fn a_stuck_pair_says_so() {
    let mut pair = Pair::new(Scheme::Erc);
    pair.sender = Session::new(None, LawConfig::with_mss(MSS), HEADERS);
    let stuck = pair
        .try_run(SECOND, |_| {})
        .expect_err("nothing can happen");
    assert!(stuck.starts_with("the pair is stuck at 0ns"), "{stuck}");
}

/// A handshake datagram (no hash: the QUIC glue hashes only 1-RTT ones) is
/// counted but never decoded: routers wrote its marks a round trip before
/// the data's, and a chain mixing the two spells neither index. Many whole
/// chains of such packets leave the decoder as it was; the same packets
/// with their hashes give it a reading.
#[test]
fn handshake_datagrams_are_counted_but_not_decoded() {
    // An erc chain: the digit at position `hash % 10` of a code that is
    // not all ones ("no router"), 1 as ECT(0) and 0 as Not-ECT.
    const CODE: u32 = 0b01_0101_0101;
    let tag = scheme_tag(Scheme::Erc);
    let read = |packets: u32, hashed: bool| {
        let mut receiver = Session::new(Some(Scheme::Erc), LawConfig::with_mss(MSS), HEADERS);
        for i in 0..packets {
            let hash = crate::wire::hash::fmix32(i);
            let ecn = match CODE >> (hash % 10) & 1 {
                1 => Ecn::Ect0,
                _ => Ecn::NotEct,
            };
            receiver.on_receive(
                MS * i,
                tag.tos(ecn),
                std::iter::once(hashed.then_some(hash)),
            );
        }
        receiver.stats(MS * packets)
    };
    let (fresh, handshake, data) = (read(1, false), read(200, false), read(200, true));
    assert_eq!(handshake.ecn_received.iter().sum::<u64>(), 200);
    assert_eq!(handshake.local_estimate, fresh.local_estimate);
    assert_ne!(data.local_estimate, fresh.local_estimate);
}

/// erc's start code: the flight datagrams the handshake's ACK-ECN counts
/// say came Not-ECT halve the first window's pace each (the window over
/// the handshake's round trip); none, or no counts, leave the start as it
/// is, and a law that does not read the code ignores it.
#[test]
fn a_start_code_paces_the_first_window() {
    use super::HandshakeSpace::{Handshake, Initial};
    use crate::wire::ack::{ack_frames, AckRepr, EcnCounts};
    let now = 50 * MS;
    let start = |scheme: Scheme, cleared: u64, counts: bool| {
        let config = LawConfig::with_mss(MSS);
        let mut session = Session::new(Some(scheme), config, HEADERS);
        // quinn's flight: Initial and Handshake coalesced, then Handshake.
        for (space, acked) in [(Initial, 1), (Handshake, 3)] {
            let not_ect = cleared.min(acked);
            let repr = AckRepr {
                largest: acked - 1,
                delay: 0,
                ranges: vec![0..=acked - 1],
                ecn: counts.then_some(EcnCounts {
                    ect0: acked - not_ect,
                    ect1: 0,
                    ce: 0,
                }),
            };
            let mut bytes = Vec::new();
            repr.emit(&mut bytes);
            let frame = ack_frames(&bytes).next().unwrap().unwrap();
            session.on_peer(now, PeerEvent::HandshakeAck { space, frame });
        }
        assert_eq!(
            session.pacing_rate(),
            None,
            "not before the handshake's end"
        );
        session.on_peer(now, PeerEvent::HandshakeDone);
        let window_rate = config.initial_window as f64 / 0.333;
        let ratio = session.pacing_rate().map(|r| window_rate / r);
        (session.stats(now).start_code, ratio)
    };
    let (code, halved) = start(Scheme::Erc, 1, true);
    assert_eq!(code, Some(1));
    assert!(
        halved.is_some_and(|r| (1.5..3.0).contains(&r)),
        "{halved:?}"
    );
    let (code, quartered) = start(Scheme::Erc, 2, true);
    assert_eq!(code, Some(2));
    assert!(
        quartered.is_some_and(|r| (3.0..6.0).contains(&r)),
        "{quartered:?}"
    );
    assert_eq!(start(Scheme::Erc, 0, true), (Some(0), None));
    assert_eq!(start(Scheme::Erc, 3, true), (Some(3), None), "bleached");
    assert_eq!(start(Scheme::Erc, 1, false), (None, None), "no counts");
    assert_eq!(start(Scheme::Vcp, 1, true).1, None, "not erc");
}

/// A handshake datagram's Not-ECT reaches quinn as it came, so that this
/// end's counts of the handshake tell the peer erc's start code; a tagged
/// 1-RTT datagram's Not-ECT is a digit, which quinn takes for ECT(0).
#[test]
fn a_handshake_datagram_keeps_its_not_ect_for_quinn() {
    let tagged = scheme_tag(Scheme::Erc);
    assert_eq!(super::quinn_view(Ecn::NotEct, tagged, true), Ecn::NotEct);
    assert_eq!(super::quinn_view(Ecn::NotEct, tagged, false), Ecn::Ect0);
    assert_eq!(super::quinn_view(Ecn::Ce, tagged, true), Ecn::Ce);
    let mut session = Session::new(Some(Scheme::Erc), LawConfig::with_mss(MSS), HEADERS);
    let tos = tagged.tos(Ecn::NotEct);
    let arrival = session.on_receive(MS, tos, [None].into_iter());
    assert_eq!(arrival.quinn_ecn, Ecn::NotEct);
    let arrival = session.on_receive(MS, tos, [Some(7)].into_iter());
    assert_eq!(arrival.quinn_ecn, Ecn::Ect0);
}

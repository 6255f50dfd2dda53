//! The bodies of the fuzz targets, one function per target: each
//! `fuzz_targets/*.rs` is a one-line libFuzzer wrapper around its function,
//! and `tests/fuzz_smoke.rs` runs the same functions on stable
//! Rust with seeded pseudo-random and mutated inputs (it includes this file
//! by path). Every function takes arbitrary bytes and panics only when a
//! property fails.

use ecnq::quic::report::{Packet, ReportFilter, Repr, LEN};
use ecnq::{Ecn, SchemeTag, WireScheme};
use ecnq_shim::link::classify::{classify, rewrite, IpVersion, Verdict};
use ecnq_shim::link::router_config;
use ecnq_shim::link::spec::LinkSpec;
use ecnq_shim::wire::Ipv4Packet;
use ecnq_sim::scenario::{Overrides, Scenario};

/// A target's body.
pub type Target = fn(&[u8]);

/// Every target, by name (the names of the `fuzz_targets/*.rs` files).
pub const TARGETS: [(&str, Target); 4] = [
    ("parse_classify_rewrite", parse_classify_rewrite),
    ("feedback_report", feedback_report),
    ("scenario", scenario),
    ("link_spec", link_spec),
];

/// Parse + classify + rewrite: never a panic; a rewrite keeps the packet
/// classifiable with exactly the marks written (as far as its tag carries
/// them: only MCP's tags have flag bits), keeps a valid IPv4 header
/// checksum valid, and changes nothing but the TOS byte (and the checksum).
/// The first byte chooses the marks to write; the rest is the packet.
pub fn parse_classify_rewrite(input: &[u8]) {
    let Some((&choice, packet)) = input.split_first() else {
        return;
    };
    let Verdict::Udp(classified) = classify(packet) else {
        return;
    };
    let mut marks = classified.marks;
    marks.ecn = Ecn::from_bits(choice);
    marks.tag.fairing ^= choice & 0x4 != 0;
    marks.tag = SchemeTag::from_dscp(marks.tag.dscp());
    let mut rewritten = packet.to_vec();
    rewrite(&mut rewritten, &classified, &marks);
    let Verdict::Udp(again) = classify(&rewritten) else {
        panic!("a rewritten packet must stay classifiable");
    };
    assert_eq!(again.marks, marks);
    let (tos_at, checksum_at) = match classified.version {
        IpVersion::V4 => {
            let before = Ipv4Packet::new_checked(packet).map(|p| p.verify_checksum());
            let after = Ipv4Packet::new_checked(&rewritten[..]).map(|p| p.verify_checksum());
            assert_eq!(before, after, "checksum validity must not change");
            (1..2, 10..12)
        }
        IpVersion::V6 => (0..2, 0..0),
    };
    for (i, (a, b)) in packet.iter().zip(&rewritten).enumerate() {
        assert!(
            a == b || tos_at.contains(&i) || checksum_at.contains(&i),
            "byte {i} changed"
        );
    }
}

/// The feedback report (`ecnq::quic::report`). The whole input as one
/// report: what parses re-emits to the same meaning and the same bytes (but
/// the reserved ones). Then the input as a stream of datagrams (a length
/// byte before each) to a [`ReportFilter`] expecting the scheme of the
/// first byte: every datagram is accepted or refused and counted, and what
/// it accepts has a newer sequence number and no count below the last
/// accepted report's.
pub fn feedback_report(input: &[u8]) {
    if let Ok(repr) = Packet::new_checked(input).and_then(|p| Repr::parse(&p)) {
        let bytes = repr.to_bytes();
        let again = Packet::new_checked(&bytes[..]).and_then(|p| Repr::parse(&p));
        assert_eq!(again, Ok(repr), "a parsed report must re-emit to itself");
        // Byte 6 is the flags (bit 0 kept, the rest reserved), byte 7 reserved.
        let meaning = |b: &[u8]| (b[..6].to_vec(), b[6] & 1, b[8..LEN].to_vec());
        assert_eq!(meaning(&bytes), meaning(input), "re-emitted bytes differ");
    }
    let Some((&scheme, mut rest)) = input.split_first() else {
        return;
    };
    let mut filter = ReportFilter::new(WireScheme::new(scheme));
    let mut offered = 0;
    while let Some((&len, tail)) = rest.split_first() {
        let (datagram, tail) = tail.split_at(usize::from(len).min(tail.len()));
        rest = tail;
        offered += 1;
        let last = filter.last().copied();
        if let (Ok(repr), Some(last)) = (filter.accept(datagram), last) {
            assert!(
                repr.sequence.wrapping_sub(last.sequence).wrapping_sub(1) < 1 << 31,
                "accepted a stale report"
            );
            assert!(
                repr.counts.iter().zip(&last.counts).all(|(a, b)| a >= b),
                "accepted regressing counts"
            );
        }
        assert_eq!(filter.accepted() + filter.rejected(), offered);
    }
}

/// Most flows (all groups' counts) a scenario may have for [`scenario`] to
/// build it: building allocates per flow, and a scenario's budget (millions
/// of flows) is more than a fuzzer's memory limit.
const MAX_BUILT_FLOWS: u64 = 10_000;

/// Simulator scenario files: the input is TOML text, optionally followed by
/// a line `%%` and `--set key=value` edits, one per line. Parsing and then
/// building never panics, and every error names the file.
pub fn scenario(input: &[u8]) {
    const ORIGIN: &str = "fuzz.toml";
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    let (text, edits) = text.split_once("\n%%\n").unwrap_or((text, ""));
    let set: Vec<String> = edits.lines().map(str::to_owned).collect();
    let built = Scenario::parse("fuzz", ORIGIN, text, &set).and_then(|scenario| {
        let flows: u64 = scenario
            .file
            .flows
            .iter()
            .map(|g| u64::from(g.get_ref().count))
            .sum();
        if flows > MAX_BUILT_FLOWS {
            return Ok(());
        }
        scenario.build(&Overrides::default()).map(drop)
    });
    if let Err(e) = built {
        assert!(e.starts_with(ORIGIN), "error without the file's name: {e}");
    }
}

/// Link specs (`ecnq_shim::link::spec`): what parses displays as a spec that
/// parses again and displays the same (the display is a fixed point), and
/// yields a router configuration.
pub fn link_spec(input: &[u8]) {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    let Ok(spec) = text.parse::<LinkSpec>() else {
        return;
    };
    let shown = spec.to_string();
    let again: LinkSpec = shown
        .parse()
        .unwrap_or_else(|e| panic!("{text:?} displays as {shown:?}, which does not parse: {e}"));
    assert_eq!(
        again.to_string(),
        shown,
        "{text:?}: the display is unstable"
    );
    router_config(&spec);
}

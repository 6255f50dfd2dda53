//! Parse + classify + rewrite on arbitrary bytes: never a panic; a rewrite
//! keeps the packet classifiable with exactly the marks written, keeps a
//! valid IPv4 header checksum valid, and changes nothing but the TOS byte
//! (and the checksum).
//!
//! Run: `cd router-shim/fuzz && cargo +nightly fuzz run parse_classify_rewrite`.
#![no_main]

use ecnq::Ecn;
use ecnq_shim::classify::{classify, rewrite, IpVersion, Verdict};
use ecnq_shim::wire::Ipv4Packet;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    // The first byte chooses the marks to write; the rest is the packet.
    let Some((&choice, packet)) = input.split_first() else {
        return;
    };
    let Verdict::Udp(classified) = classify(packet) else {
        return;
    };
    let mut marks = classified.marks;
    marks.ecn = Ecn::from_bits(choice);
    marks.tag.fairing ^= choice & 0x4 != 0;
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
});

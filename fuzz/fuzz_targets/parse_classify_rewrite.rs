//! Parse + classify + rewrite of raw IP packets: the body and its properties are
//! [`ecnq_fuzz::parse_classify_rewrite`].
//!
//! Run: `cargo +nightly fuzz run parse_classify_rewrite`.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| ecnq_fuzz::parse_classify_rewrite(input));

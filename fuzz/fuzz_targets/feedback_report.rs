//! The feedback report parser and filter (ecnq::quic::report): the body and its properties are
//! [`ecnq_fuzz::feedback_report`].
//!
//! Run: `cargo +nightly fuzz run feedback_report`.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| ecnq_fuzz::feedback_report(input));

//! Link specs in tc/netem words (ecnq-shim spec): the body and its properties are
//! [`ecnq_fuzz::link_spec`].
//!
//! Run: `cargo +nightly fuzz run link_spec`.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| ecnq_fuzz::link_spec(input));

//! Simulator scenario files (ecnq-sim): the body and its properties are
//! [`ecnq_fuzz::scenario`].
//!
//! Run: `cargo +nightly fuzz run scenario`.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| ecnq_fuzz::scenario(input));

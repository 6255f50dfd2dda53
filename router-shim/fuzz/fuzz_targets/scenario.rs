//! Simulator scenario files (ecnq-sim): the body and its properties are
//! [`ecnq_shim_fuzz::scenario`].
//!
//! Run: `cd router-shim/fuzz && cargo +nightly fuzz run scenario`.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| ecnq_shim_fuzz::scenario(input));

//! End-to-end tests of ecnq live in `e2e.rs`: QUIC flows of every scheme
//! through chained in-process relay shims on loopback. The short versions
//! run with `cargo test`; the long ones are `#[ignore]`d — run them with
//! `cargo test -p ecnq-e2e --release -- --ignored`. `testbed.rs` runs on
//! the namespace testbed (root only): a short `ecnq-perf testbed`
//! comparison and a transfer across a shim restart.

//! The scale bench (issue 21): many concurrent QUIC connections through one
//! server endpoint and one in-process relay-mode shim on loopback. Each
//! client has its own endpoint (its own UDP port, so its own relay session
//! and its own flow at the shim) and downloads a pattern that it checks
//! byte by byte. Vanilla quinn (Cubic) and ecnq (the default scheme) run
//! twice each, in the order quinn, ecnq, ecnq, quinn, so that ecnq's own
//! cost is the difference of figures measured on the same machine in the
//! same minutes.
//!
//! Memory is the process's resident set (`/proc/self/statm`) after glibc
//! has given freed memory back (`malloc_trim`): quinn's and ecnq's state
//! share one heap, and no API tells them apart, so the vanilla runs are the
//! baseline. CPU is the process's user + system time (`getrusage`). The
//! shim's memory per session is measured apart, with plain UDP clients.
//!
//! `cargo bench -p ecnq-examples --bench scale` runs it, each run in a
//! fresh process; the test `examples/tests/scale.rs` runs the same code in
//! one process with 20 connections.
//!
//! The files: `config` (the command line, the stacks), `download` (the
//! request and the checked pattern), `endpoints` (both stacks' QUIC ends
//! and the server), `clients` (the clients and the phases they share),
//! `shim` (the relay and its memory per session), `process` (memory, CPU,
//! descriptors, tasks), `run` (the runs in order, one stack's run) and
//! `report` (the figures and the printed report).

mod clients;
mod config;
pub mod cpu;
mod download;
mod endpoints;
mod process;
mod report;
mod run;
mod shim;

pub use config::{parse_args, Command, ScaleConfig, Stack, MAX_BYTES, MAX_CONNECTIONS, USAGE};
pub use download::{fill, Checker};
pub use process::DRAIN_LIMIT;
pub use report::{render, ScaleReport, ShimSessions, StackReport};
pub use run::{order, run, run_child, run_name, run_only, run_stack};
pub use shim::shim_sessions;

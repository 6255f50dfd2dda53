//! ecnq-sim: a packet-level simulator that runs the ecnq core's markers,
//! meters, decoders and laws under virtual time.
//!
//! [`scenario`] turns a scenario file into a [`engine::SimConfig`],
//! [`engine`] runs it, [`report`] says what it measured, and [`runner`]
//! finds scenario files and runs them; [`protocol`] names what a flow runs,
//! and [`bbr`] is the one baseline law the core does not have.

#![warn(missing_docs)]

pub mod bbr;
pub mod engine;
pub mod protocol;
pub mod report;
pub mod rng;
pub mod runner;
pub mod scenario;

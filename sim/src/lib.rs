//! ecnq-sim: a packet-level simulator that runs the ecnq core's markers,
//! meters, decoders and laws under virtual time.
//!
//! [`scenario`] turns a scenario file into a [`engine::SimConfig`],
//! [`engine`] runs it, [`report`] says what it measured, and [`runner`]
//! finds scenario files and runs them; [`protocol`] names what a flow runs;
//! [`rcp`] and [`xcp`] are the baselines the core does not have, with the
//! explicit headers of [`explicit`].

#![warn(missing_docs)]

pub mod engine;
pub mod explicit;
pub mod protocol;
pub mod rcp;
pub mod report;
pub mod rng;
pub mod runner;
pub mod scenario;
pub mod xcp;

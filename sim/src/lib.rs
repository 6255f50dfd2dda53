//! ecnq-sim: a packet-level simulator that runs the ecnq core's markers,
//! meters, decoders and laws under virtual time.

#![warn(missing_docs)]

pub mod baseline;
pub mod engine;
pub mod metrics;
pub mod plot;
pub mod protocol;
pub mod rng;
pub mod runner;
pub mod scenario;
pub mod topology;
pub mod units;

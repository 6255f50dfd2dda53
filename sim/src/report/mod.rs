//! What a run reports: the figures it measured ([`metrics`]), as terminal
//! text ([`text`]), CSV and JSON files ([`files`]) and SVG plots ([`plot`], drawn
//! with the `ecnq-charts` crate, which ecnq-perf's plots use too).
//! Everything here reads a finished [`crate::engine::Sim`]; nothing runs one.

pub mod files;
pub mod metrics;
pub mod plot;
pub mod sharing;
pub mod text;

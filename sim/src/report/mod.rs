//! What a run reports: the figures it measured ([`metrics`]), as terminal
//! text ([`text`]), CSV and JSON files ([`files`]) and SVG plots ([`plot`]).
//! Everything here reads a finished [`crate::engine::Sim`]; nothing runs one.

pub mod files;
pub mod metrics;
pub mod plot;
pub mod text;

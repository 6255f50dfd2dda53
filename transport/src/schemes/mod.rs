//! The schemes: one module each, holding the scheme's router marker,
//! receiver decoder and sender law side by side, and the registry that
//! lists them with their names, wire facts and constructors. Shared code
//! reads the registry; nothing else lists schemes. [`cubic`] and [`bbr`]
//! are laws that no scheme's router feeds: baselines, not registry schemes.

pub mod bbr;
pub mod bmcc;
pub mod classic;
pub mod cubic;
pub mod erc;
pub mod evcp;
pub mod mcp;
pub mod mpcp;
pub mod prague;
pub mod registry;
pub mod vcp;

pub use registry::{Scheme, SchemeEntry, UnknownScheme, SCHEMES};

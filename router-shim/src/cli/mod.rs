//! The `ecnq-shim` command line: the command tree ([`command`]) and the
//! configurations its options make ([`options`]).

pub mod command;
pub mod options;

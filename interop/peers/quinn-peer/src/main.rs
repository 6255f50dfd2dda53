//! quinn-peer: a quic-interop-runner endpoint on vanilla quinn from crates.io
//! (quinn's default congestion controller, plain ECT(0)), the independent
//! quinn column of the interop matrix.

use std::process::ExitCode;

use ecnq_interop::{cli, Stack};

fn main() -> ExitCode {
    cli::main(Stack::vanilla(
        "quinn-peer",
        "Vanilla quinn (crates.io) interop peer: hq-interop, quinn's default congestion control",
    ))
}

//! quinn-peer: a quic-interop-runner endpoint on vanilla quinn from crates.io
//! (quinn's default congestion controller, plain ECT(0)), the independent
//! quinn column of the interop matrix.

use std::process::ExitCode;

use ecnq_interop::{cli, Vanilla};

fn main() -> ExitCode {
    cli::main(&mut Vanilla {
        name: "quinn-peer",
        about:
            "Vanilla quinn (crates.io) interop peer: hq-interop, quinn's default congestion control",
    })
}

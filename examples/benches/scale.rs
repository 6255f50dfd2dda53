//! Scale (issue 21): many concurrent QUIC connections through one server
//! endpoint and one relay-mode shim on loopback; see `ecnq_examples::scale`.
//! Each stack's run is a fresh process (this program with `--only`), so
//! one run's heap does not weigh on the next one's memory figures.
//!
//! `cargo bench -p ecnq-examples --bench scale [-- --help]`

use std::process::ExitCode;

use ecnq_examples::scale::{self, Command, ScaleConfig, ScaleReport, Stack};

fn main() -> ExitCode {
    // `cargo bench` adds `--bench`; the children need none of it.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let config = match scale::parse_args(args.iter().cloned()) {
        Ok(Command::Run(config)) => config,
        Ok(Command::Help) => {
            println!("{}", scale::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match config.only {
        Some(stack) => child(&runtime, &config, stack),
        None => parent(&runtime, &config, &args),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn progress(line: &str) {
    eprintln!("{line}");
}

/// One stack's run; its figures go to stdout as one JSON line.
fn child(
    runtime: &tokio::runtime::Runtime,
    config: &ScaleConfig,
    stack: Stack,
) -> Result<bool, String> {
    let progress = |line: &str| progress(&format!("{stack}: {line}"));
    runtime.block_on(scale::run_only(stack, config, &progress))?;
    Ok(true)
}

/// The shim's session memory here, then every run in a child process;
/// prints the report. Whether every connection completed.
fn parent(
    runtime: &tokio::runtime::Runtime,
    config: &ScaleConfig,
    args: &[String],
) -> Result<bool, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let shim = runtime.block_on(scale::shim_sessions(config, &progress))?;
    let mut runs = Vec::new();
    for (i, &stack) in scale::order(config).iter().enumerate() {
        progress(&format!(
            "{}: in a new process",
            scale::run_name(config, i, stack)
        ));
        runs.push(scale::run_child(&exe, args, stack)?);
    }
    let report = ScaleReport {
        config: config.clone(),
        shim,
        runs,
    };
    print!("{}", scale::render(&report));
    Ok(report.all_completed())
}

//! CPU per Gbit/s (issue 73): ecnq against vanilla quinn, one bulk
//! connection and many through the relay shim; see `ecnq_examples::scale::cpu`.
//! Each run is a fresh process (this program with the scale bench's
//! arguments and `--only`).
//!
//! `cargo bench -p ecnq-examples --bench cpu [-- --help]`

use std::path::Path;
use std::process::ExitCode;

use ecnq_examples::scale::cpu::{self, CaseReport, CpuCommand, CpuConfig, CpuReport, Round};
use ecnq_examples::scale::{self, ScaleConfig, Stack};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match cpu::parse_cpu_args(&args) {
        Ok(CpuCommand::Help) => {
            println!("{}", cpu::CPU_USAGE);
            return ExitCode::SUCCESS;
        }
        Ok(CpuCommand::Child(config)) => child(&config),
        Ok(CpuCommand::Run(config)) => parent(&config),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One stack's run, as the scale bench's children do it.
fn child(config: &ScaleConfig) -> Result<(), String> {
    let stack = config.only.ok_or("a child run needs --only")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the tokio runtime: {e}"))?;
    let progress = |line: &str| eprintln!("{stack}: {line}");
    runtime.block_on(scale::run_only(stack, config, &progress))
}

/// Every round of every case, each run in a child process; prints the
/// report. Fails on the first run it cannot measure.
fn parent(config: &CpuConfig) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let load_before = cpu::load_average()?;
    let mut cases = Vec::new();
    for &case in &config.cases {
        let args = config.scale_args(case);
        let mut rounds = Vec::new();
        for round in 1..=config.rounds {
            let run_of = |exe: &Path, stack| {
                eprintln!("{case:?} round {round}/{}: {stack}", config.rounds);
                let run = scale::run_child(exe, &args, stack)?;
                cpu::measured(&run).map_err(|e| format!("{case:?} round {round}: {e}"))?;
                Ok::<_, String>(run)
            };
            // quinn first, then ecnq (then the build before), round after round.
            let quinn = run_of(&exe, Stack::Vanilla)?;
            let ecnq = run_of(&exe, Stack::Ecnq)?;
            let before = match &config.before {
                Some(before) => Some(run_of(before, Stack::Ecnq)?),
                None => None,
            };
            rounds.push(Round {
                quinn,
                ecnq,
                before,
            });
        }
        cases.push(CaseReport { case, rounds });
    }
    let report = CpuReport {
        config: config.clone(),
        load_before,
        load_after: cpu::load_average()?,
        cases,
    };
    print!("{}", cpu::render_cpu(&report));
    Ok(())
}

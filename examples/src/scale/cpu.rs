//! The CPU bench (issue 73): ecnq's CPU per Gbit/s of checked payload
//! against vanilla quinn's, for one bulk connection with no router and for
//! many connections through the relay shim. Each run is a fresh process
//! running the scale bench's code ([`run_stack`](super::run_stack)); the
//! two stacks alternate, quinn then ecnq, round after round, and the
//! figure is the ratio of their medians, so that a neighbour's load that
//! comes and goes hits both stacks alike.

use std::fmt::Write as _;

use super::config::ScaleConfig;
use super::report::{verdict, StackReport};
use crate::perf::output::bytes as human_bytes;

/// How to run the CPU bench.
pub const CPU_USAGE: &str = "\
usage: cargo bench -p ecnq-examples --bench cpu [-- OPTIONS]

Measures the CPU per Gbit/s of checked payload (user + system time of the
whole process: clients, server and, for the many connections, the relay
shim) of vanilla quinn (cubic) and of ecnq (erc), each run in a fresh
process, quinn and ecnq alternating round after round, in two cases:
  bulk   one connection downloading --bulk SIZE, client to server with no
         router between them
  many   N connections through the in-process relay shim, --bytes each
Prints each run, the medians, ecnq/quinn and the machine's load average
before and after. Fails when a run cannot measure its CPU time or a
download does not complete.

options:
  -r, --rounds N        rounds of (quinn, ecnq) per case, 1 to 100 (default 5)
  -n, --connections N   connections of the many case, 1 to 10000 (default 300)
  -b, --bytes SIZE      bytes each of them downloads (default 128kb)
      --bulk SIZE       bytes the bulk connection downloads (default 256mb)
      --only-case CASE  run one case only (bulk or many)
      --before EXE      another build of this bench (say, before a change):
                        its ecnq runs too, after this build's in each round,
                        and the report adds this build / that one
  -h, --help            this text";

/// The goal of issue 73: ecnq's CPU per Gbit/s at most this many times
/// vanilla quinn's.
pub const CPU_GOAL: f64 = 1.1;
/// The goal of issue 73: one erc connection's loopback goodput with no
/// router at least this share of Cubic's.
pub const GOODPUT_GOAL: f64 = 0.95;

/// The two cases the bench measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// One connection, no router.
    Bulk,
    /// Many connections through the relay shim.
    Many,
}

impl Case {
    const ALL: [Case; 2] = [Case::Bulk, Case::Many];

    fn name(self) -> &'static str {
        match self {
            Case::Bulk => "bulk",
            Case::Many => "many",
        }
    }
}

/// What the CPU bench runs.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuConfig {
    pub rounds: usize,
    pub connections: usize,
    pub bytes: u64,
    pub bulk_bytes: u64,
    pub cases: Vec<Case>,
    /// Another build of this bench whose ecnq runs in each round too.
    pub before: Option<std::path::PathBuf>,
}

impl Default for CpuConfig {
    fn default() -> Self {
        CpuConfig {
            rounds: 5,
            connections: 300,
            bytes: 128 << 10,
            bulk_bytes: 256 << 20,
            cases: Case::ALL.to_vec(),
            before: None,
        }
    }
}

impl CpuConfig {
    /// The scale bench's arguments for a run of `case` (without `--only`).
    pub fn scale_args(&self, case: Case) -> Vec<String> {
        let (n, bytes) = match case {
            Case::Bulk => (1, self.bulk_bytes),
            Case::Many => (self.connections, self.bytes),
        };
        let mut args = vec![
            "-n".into(),
            n.to_string(),
            "-b".into(),
            bytes.to_string(),
            "--batch".into(),
            n.min(100).to_string(),
        ];
        if case == Case::Bulk {
            args.push("--no-relay".into());
        }
        args
    }
}

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum CpuCommand {
    /// Print [`CPU_USAGE`].
    Help,
    /// Run the bench.
    Run(CpuConfig),
    /// Run one stack as a child process: the scale bench's arguments.
    Child(Box<ScaleConfig>),
}

/// Reads the CPU bench's arguments (without the program name); a child's
/// (`--only STACK` among them) are the scale bench's.
pub fn parse_cpu_args(args: &[String]) -> Result<CpuCommand, String> {
    if args
        .iter()
        .any(|a| a == "--only" || a.starts_with("--only="))
    {
        return match super::parse_args(args.iter().cloned())? {
            super::Command::Run(config) => Ok(CpuCommand::Child(config)),
            super::Command::Help => Ok(CpuCommand::Help),
        };
    }
    let mut config = CpuConfig::default();
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value (see --help)"))
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(CpuCommand::Help),
            "--bench" => {}
            "-r" | "--rounds" => {
                let text = value()?;
                config.rounds = text
                    .parse()
                    .ok()
                    .filter(|n| (1..=100).contains(n))
                    .ok_or_else(|| format!("{flag} must be from 1 to 100, got `{text}`"))?;
            }
            // The scale bench checks these the way its children will.
            "-n" | "--connections" | "-b" | "--bytes" | "--bulk" => {
                let text = value()?;
                let name = if flag == "--bulk" { "--bytes" } else { flag };
                let super::Command::Run(parsed) = super::parse_args([name.to_owned(), text])?
                else {
                    return Ok(CpuCommand::Help);
                };
                match flag.as_str() {
                    "-n" | "--connections" => config.connections = parsed.connections,
                    "--bulk" => config.bulk_bytes = parsed.bytes,
                    _ => config.bytes = parsed.bytes,
                }
            }
            "--before" => config.before = Some(value()?.into()),
            "--only-case" => {
                let text = value()?;
                let case = Case::ALL
                    .into_iter()
                    .find(|c| c.name() == text)
                    .ok_or_else(|| format!("--only-case takes bulk or many, got `{text}`"))?;
                config.cases = vec![case];
            }
            _ => return Err(format!("unknown argument `{flag}` (see --help)")),
        }
    }
    Ok(CpuCommand::Run(config))
}

/// One round of a case: quinn's run, then ecnq's, then the other build's
/// ecnq run if asked for (`--before`).
#[derive(Clone, Debug)]
pub struct Round {
    pub quinn: StackReport,
    pub ecnq: StackReport,
    pub before: Option<StackReport>,
}

/// A case's rounds.
#[derive(Clone, Debug)]
pub struct CaseReport {
    pub case: Case,
    pub rounds: Vec<Round>,
}

/// What the CPU bench measured.
#[derive(Clone, Debug)]
pub struct CpuReport {
    pub config: CpuConfig,
    /// `/proc/loadavg` before the first run and after the last.
    pub load_before: String,
    pub load_after: String,
    pub cases: Vec<CaseReport>,
}

/// A run's figures, checked: its CPU per Gbit/s and goodput, or why the
/// bench cannot use it.
pub fn measured(run: &StackReport) -> Result<(f64, f64), String> {
    let stack = run.stack;
    if run.completed != run.connections {
        return Err(format!(
            "{stack}: {} of {} downloads completed (first failure: {})",
            run.completed,
            run.connections,
            run.first_failure.as_deref().unwrap_or("none")
        ));
    }
    let cpu = run
        .cpu_per_gbit()
        .ok_or_else(|| format!("{stack}: the process's CPU time could not be read"))?;
    if !(cpu > 0.0 && cpu.is_finite()) {
        return Err(format!(
            "{stack}: CPU per Gbit/s is {cpu}, not a measurement"
        ));
    }
    Ok((cpu, run.goodput()))
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

impl CaseReport {
    /// The medians of a figure over the rounds: quinn's and ecnq's.
    fn medians(&self, figure: impl Fn(&StackReport) -> f64) -> (f64, f64) {
        let mut quinn: Vec<f64> = self.rounds.iter().map(|r| figure(&r.quinn)).collect();
        let mut ecnq: Vec<f64> = self.rounds.iter().map(|r| figure(&r.ecnq)).collect();
        (median(&mut quinn), median(&mut ecnq))
    }

    /// This build's median CPU per Gbit/s over the other build's, if it ran.
    pub fn before_ratio(&self) -> Option<f64> {
        let mut before = self
            .rounds
            .iter()
            .map(|r| r.before.as_ref().and_then(StackReport::cpu_per_gbit))
            .collect::<Option<Vec<f64>>>()?;
        let (_, ecnq) = self.medians(|r| r.cpu_per_gbit().unwrap_or(f64::NAN));
        Some(ecnq / median(&mut before))
    }

    /// ecnq's median CPU per Gbit/s over quinn's.
    pub fn cpu_ratio(&self) -> f64 {
        let (quinn, ecnq) = self.medians(|r| r.cpu_per_gbit().unwrap_or(f64::NAN));
        ecnq / quinn
    }

    /// ecnq's median goodput over quinn's.
    pub fn goodput_ratio(&self) -> f64 {
        let (quinn, ecnq) = self.medians(StackReport::goodput);
        ecnq / quinn
    }
}

/// The report as printed.
pub fn render_cpu(report: &CpuReport) -> String {
    let c = &report.config;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "cpu: {} rounds of (quinn (cubic), ecnq (erc)), each run a fresh process",
        c.rounds
    );
    let _ = writeln!(out, "load average before: {}", report.load_before);
    let _ = writeln!(out, "load average after:  {}", report.load_after);
    for case in &report.cases {
        let what = match case.case {
            Case::Bulk => format!("one connection, {}, no router", human_bytes(c.bulk_bytes)),
            Case::Many => format!(
                "{} connections, {} each, through the relay shim",
                c.connections,
                human_bytes(c.bytes)
            ),
        };
        let _ = writeln!(out, "\n{}: {what}", case.case.name());
        let _ = writeln!(
            out,
            "{:<6} {:>22} {:>22} {:>8}",
            "round", "quinn cores/Gbit/s", "ecnq cores/Gbit/s", "ratio"
        );
        for (i, round) in case.rounds.iter().enumerate() {
            let cell = |r: &StackReport| {
                format!(
                    "{:.2} ({:.0} Mbit/s)",
                    r.cpu_per_gbit().unwrap_or(f64::NAN),
                    r.goodput() / 1e6
                )
            };
            let ratio = round.ecnq.cpu_per_gbit().unwrap_or(f64::NAN)
                / round.quinn.cpu_per_gbit().unwrap_or(f64::NAN);
            let before = round
                .before
                .as_ref()
                .map_or(String::new(), |b| format!("   before: {}", cell(b)));
            let _ = writeln!(
                out,
                "{:<6} {:>22} {:>22} {:>8.2}{before}",
                i + 1,
                cell(&round.quinn),
                cell(&round.ecnq),
                ratio
            );
        }
        let (quinn, ecnq) = case.medians(|r| r.cpu_per_gbit().unwrap_or(f64::NAN));
        let _ = writeln!(
            out,
            "median {quinn:>22.2} {ecnq:>22.2} {:>8.2}",
            case.cpu_ratio()
        );
        if let Some(ratio) = case.before_ratio() {
            let _ = writeln!(
                out,
                "ecnq, this build / the one before: {ratio:.2} (medians)"
            );
        }
        let _ = writeln!(
            out,
            "goal: CPU per Gbit/s, ecnq / quinn <= {CPU_GOAL}: {} ({:.2})",
            verdict(case.cpu_ratio() <= CPU_GOAL),
            case.cpu_ratio()
        );
        if case.case == Case::Bulk {
            let _ = writeln!(
                out,
                "goal: goodput, ecnq / quinn >= {GOODPUT_GOAL}: {} ({:.2}, medians)",
                verdict(case.goodput_ratio() >= GOODPUT_GOAL),
                case.goodput_ratio()
            );
        }
    }
    out
}

/// The machine's load average (`/proc/loadavg`), as `uptime` prints it.
pub fn load_average() -> Result<String, String> {
    let text = std::fs::read_to_string("/proc/loadavg")
        .map_err(|e| format!("cannot read /proc/loadavg: {e}"))?;
    Ok(text
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<CpuCommand, String> {
        parse_cpu_args(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn arguments_parse_and_bad_ones_are_refused() {
        let Ok(CpuCommand::Run(config)) =
            args(&["--bench", "-r", "3", "--bulk", "64mb", "--before", "old"])
        else {
            panic!("should parse");
        };
        assert_eq!((config.rounds, config.bulk_bytes), (3, 64 << 20));
        assert_eq!(config.before, Some("old".into()));
        assert_eq!(config.scale_args(Case::Bulk).last().unwrap(), "--no-relay");
        let Ok(CpuCommand::Child(child)) = args(&["-n", "1", "--no-relay", "--only", "ecnq"])
        else {
            panic!("should parse");
        };
        assert_eq!((child.connections, child.relay), (1, false));
        for (bad, message) in [
            (&["-r", "0"][..], "-r must be from 1 to 100"),
            (&["--bulk", "2gb"], "from 1 byte to 1gb"),
            (&["--only-case", "x"], "--only-case takes bulk or many"),
            (&["-n"], "-n needs a value"),
            (&["--frob"], "unknown argument `--frob`"),
        ] {
            let error = args(bad).unwrap_err();
            assert!(error.contains(message), "{bad:?}: {error}");
        }
    }

    #[test]
    fn the_median_takes_the_middle() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&mut []).is_nan());
    }
}

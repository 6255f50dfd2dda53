//! `ecnq-sim`: run the papers' experiments with ecnq's production protocol
//! code under virtual time.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use ecnq::units::UNITS_HELP;
use ecnq_sim::engine::{FeedbackPath, Sim};
use ecnq_sim::protocol::Protocol;
use ecnq_sim::protocol::{Case, Cases};
use ecnq_sim::report::text::{self, Row};
use ecnq_sim::report::{files, plot};
use ecnq_sim::runner;
use ecnq_sim::scenario::quantity::Time;
use ecnq_sim::scenario::{Overrides, Scenario};

/// Packet-level simulator for router-assisted multi-bit ECN congestion
/// control. Routers run ecnq's load-factor meter and markers, receivers its
/// decoders, senders its laws (or NewReno / Cubic models), in virtual time:
/// deterministic for a given seed, and much faster than real time.
#[derive(Parser)]
#[command(name = "ecnq-sim", version, after_help = UNITS_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Clone)]
struct RunArgs {
    /// Scenario name (see `list`) or path to a TOML file.
    scenario: String,
    /// Run every flow that does not fix its own scheme with this one.
    #[arg(long, long_help = format!("Run every flow that does not fix its own scheme with this one:\n{}", Protocol::help()))]
    scheme: Option<Protocol>,
    /// RNG seed (start jitter, packet hashes, random loss, Pareto flows).
    #[arg(long)]
    seed: Option<u64>,
    /// Simulated duration, e.g. `30s` (default: the scenario's).
    #[arg(long)]
    duration: Option<Time>,
    /// How ecnq flows' feedback reaches their senders: `ack` (every ACK
    /// carries the receiver's estimate, as in the papers), `session` (each
    /// end runs the QUIC stack's session; reports are packets of their own)
    /// or `ack-counts` (the receiver runs no ecnq and ACKs carry only its
    /// ECN counts, which the sender reads; erc only) (default: the
    /// scenario's, else `ack`).
    #[arg(long, value_name = "ack|session|ack-counts")]
    feedback: Option<FeedbackPath>,
    /// Change a scenario field before running, e.g. `--set links.0.rate=10Mbit`
    /// or `--set flows.0.count=4` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

impl RunArgs {
    fn load(&self) -> Result<(Scenario, Overrides), String> {
        let path = runner::resolve(&self.scenario)?;
        let scenario = Scenario::load(&path, &self.set)?;
        let overrides = Overrides {
            scheme: self.scheme,
            seed: self.seed,
            duration: self.duration.map(|d| d.0),
            feedback: self.feedback,
            queue: None,
        };
        Ok((scenario, overrides))
    }
}

#[derive(Subcommand)]
enum Command {
    /// List the scenarios in sim/scenarios (or $ECNQ_SIM_SCENARIOS).
    List,
    /// Run one scenario; print a one-screen summary and, with --out, write
    /// flows.csv, links.csv, summary.json and SVG plots.
    #[command(after_help = UNITS_HELP)]
    Run {
        #[command(flatten)]
        args: RunArgs,
        /// Directory for CSV time series, summary.json and plots.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Run a scenario with every scheme and baseline (or those of --schemes,
    /// or the scenario's own line-up), in parallel, and print one table
    /// (and, with finite flows, their completion times by size class under
    /// it; on a link whose capacity varies, each run's throughput and
    /// per-packet delay percentiles).
    #[command(after_help = UNITS_HELP)]
    Compare {
        #[command(flatten)]
        args: RunArgs,
        /// Comma-separated cases to compare: a scheme, or a scheme and the
        /// queue every link takes, e.g. `erc,cubic@fifo,cubic@dual,bbr`, or
        /// `arrivals`, the arrival benchmarks' line-up (erc, cubic, bbr,
        /// prague, bmcc, rcp, xcp) (default: the scenario's `compare`
        /// list, else every scheme).
        #[arg(long, value_delimiter = ',', value_name = "SCHEME[@QUEUE],..")]
        schemes: Vec<Cases>,
        /// Directory for one summary JSON per run and the throughput
        /// against delay plot (goodput-delay.svg).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print the table as Markdown, under a heading with the scenario's
        /// title and paper (what scripts/update-results puts in docs/results.md).
        #[arg(long)]
        markdown: bool,
    },
    /// Run a parameter sweep in parallel on all cores: the cartesian product
    /// of every --vary list (and of --schemes), one table row per run.
    #[command(after_help = UNITS_HELP)]
    Sweep {
        #[command(flatten)]
        args: RunArgs,
        /// A field and its values, e.g. `--vary links.0.rate=2Mbit,4Mbit,10Mbit` (repeatable).
        #[arg(long, value_name = "KEY=V1,V2,..")]
        vary: Vec<String>,
        /// Comma-separated cases to sweep over, as for `compare` (default:
        /// the scenario's scheme or --scheme).
        #[arg(long, value_delimiter = ',', value_name = "SCHEME[@QUEUE],..")]
        schemes: Vec<Cases>,
        /// Directory for one summary JSON per run (named by scheme and values).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print the table as Markdown, under a heading with the scenario's
        /// title and paper.
        #[arg(long)]
        markdown: bool,
    },
    /// Measure engine speed: simulated packet events per wall-clock second
    /// (default: the EVCP 1 Gbit/s two-flow scenario, first 100 s).
    #[command(after_help = UNITS_HELP)]
    Bench {
        /// Scenario to time.
        #[arg(default_value = "evcp-fig1-5")]
        scenario: String,
        /// Simulated time to run.
        #[arg(long, default_value = "100s")]
        duration: Time,
    },
}

/// Piped into `head` or `grep -m1`, the simulator stops as other
/// command-line tools do when the reader goes away, instead of panicking on
/// its next line of output (Rust ignores SIGPIPE by default). It writes no
/// sockets, so the signal can only come from its standard streams.
fn stop_quietly_on_a_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in `main`, before any other thread exists;
    // SIG_DFL is a valid disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    stop_quietly_on_a_closed_pipe();
    match real_main(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ecnq-sim: {e}");
            ExitCode::FAILURE
        }
    }
}

fn real_main(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::List => {
            for (name, s) in runner::list()? {
                println!("{name:<28} {:<6} {}", s.file.scheme.name(), s.file.title);
            }
            Ok(())
        }
        Command::Run { args, out } => {
            let (scenario, o) = args.load()?;
            create_out_dir(out.as_deref())?;
            let run = runner::run(&scenario, &o)?;
            print!("{}", text::one_screen(&scenario, &run.summary, run.wall_s));
            if let Some(dir) = out {
                files::write_outputs(&run.sim, &run.summary, &dir)?;
                println!(
                    "wrote {}/{{flows.csv,links.csv,summary.json,*.svg}}",
                    dir.display()
                );
            }
            Ok(())
        }
        Command::Compare {
            args,
            schemes,
            out,
            markdown,
        } => {
            let (scenario, o) = args.load()?;
            if markdown {
                print!("{}", text::heading_markdown(&scenario));
            } else {
                println!("{} — {}", scenario.name, scenario.file.title);
                if !scenario.file.expect.is_empty() {
                    println!("paper reports: {}", scenario.file.expect);
                }
            }
            let cases = match (schemes.is_empty(), scenario.file.compare.is_empty()) {
                (false, _) => Cases::flatten(schemes),
                (true, false) => scenario.file.compare.clone(),
                (true, true) => Case::every_protocol(),
            };
            create_out_dir(out.as_deref())?;
            let rows = runner::compare(&scenario, &o, &cases);
            print!("{}", Table { markdown }.format(&["scheme"], &rows));
            if let Some(dir) = out {
                write_summaries(&rows, &dir)?;
                plot::goodput_delay(&scenario.name, &rows, &dir.join("goodput-delay.svg"))?;
                note(
                    markdown,
                    &format!(
                        "wrote one summary JSON per run and goodput-delay.svg to {}",
                        dir.display()
                    ),
                );
            }
            all_ran(&rows)
        }
        Command::Sweep {
            args,
            vary,
            schemes,
            out,
            markdown,
        } => sweep(
            &args,
            &vary,
            &Cases::flatten(schemes),
            out.as_deref(),
            Table { markdown },
        ),
        Command::Bench { scenario, duration } => bench(&scenario, Some(duration.0)),
    }
}

/// One `--vary` axis: a field and the values it takes.
type Axis = (String, Vec<String>);

/// How `compare` and `sweep` print their table: text for the terminal,
/// or Markdown (`--markdown`).
#[derive(Clone, Copy)]
struct Table {
    markdown: bool,
}

impl Table {
    fn format(self, heads: &[&str], rows: &[Row]) -> String {
        if self.markdown {
            text::table_markdown(heads, rows)
        } else {
            text::table(heads, rows)
        }
    }
}

fn sweep(
    args: &RunArgs,
    vary: &[String],
    schemes: &[Case],
    out: Option<&std::path::Path>,
    table: Table,
) -> Result<(), String> {
    use rayon::prelude::*;
    let (base, o) = args.load()?;
    let axes = parse_axes(vary)?;
    let schemes: Vec<Case> = if schemes.is_empty() {
        vec![Case::from(base.scheme(&o))]
    } else {
        schemes.to_vec()
    };
    create_out_dir(out)?;
    let points = grid(&axes);
    let path = runner::resolve(&args.scenario)?;
    let jobs: Vec<(Case, Vec<String>)> = schemes
        .iter()
        .flat_map(|&s| points.iter().map(move |p| (s, p.clone())))
        .collect();
    let rows: Vec<Row> = jobs
        .par_iter()
        .map(|(scheme, values)| {
            let mut set = args.set.clone();
            set.extend(
                axes.iter()
                    .zip(values)
                    .map(|((k, _), v)| format!("{k}={v}")),
            );
            let result = Scenario::load(&path, &set)
                .and_then(|s| runner::run(&s, &o.for_case(*scheme)).map(|r| r.summary));
            Row {
                label: [vec![scheme.to_string()], values.clone()].concat(),
                result,
            }
        })
        .collect();
    let heads: Vec<&str> = std::iter::once("scheme")
        .chain(axes.iter().map(|(k, _)| k.as_str()))
        .collect();
    if table.markdown {
        print!("{}", text::heading_markdown(&base));
    }
    print!("{}", table.format(&heads, &rows));
    if let Some(dir) = out {
        write_summaries(&rows, dir)?;
        let wrote = format!("wrote one summary JSON per run to {}", dir.display());
        note(table.markdown, &wrote);
    }
    all_ran(&rows)
}

/// Says what was written: on stderr under Markdown, which is a document
/// of its own.
fn note(markdown: bool, text: &str) {
    if markdown {
        eprintln!("{text}");
    } else {
        println!("{text}");
    }
}

/// Creates the output directory before a run, so that a path that cannot
/// be written fails at once rather than after the simulation.
fn create_out_dir(out: Option<&std::path::Path>) -> Result<(), String> {
    match out {
        Some(dir) => std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display())),
        None => Ok(()),
    }
}

/// An error when a row of a table printed above did not run, so that a
/// script sees the failure in the exit status.
fn all_ran(rows: &[Row]) -> Result<(), String> {
    match rows.iter().filter(|r| r.result.is_err()).count() {
        0 => Ok(()),
        failed => Err(format!(
            "{failed} of {} runs did not run (`skipped` in the table above)",
            rows.len()
        )),
    }
}

/// `--vary KEY=V1,V2,..` arguments as axes.
fn parse_axes(vary: &[String]) -> Result<Vec<Axis>, String> {
    vary.iter()
        .map(|v| {
            let (key, values) = v
                .split_once('=')
                .ok_or_else(|| format!("--vary `{v}`: expected KEY=V1,V2,.."))?;
            Ok((
                key.trim().to_owned(),
                values.split(',').map(|s| s.trim().to_owned()).collect(),
            ))
        })
        .collect()
}

/// Every combination of the axes' values (the cartesian product), first
/// axis slowest.
fn grid(axes: &[Axis]) -> Vec<Vec<String>> {
    let mut points: Vec<Vec<String>> = vec![Vec::new()];
    for (_, values) in axes {
        points = points
            .into_iter()
            .flat_map(|p| {
                values
                    .iter()
                    .map(move |v| [p.clone(), vec![v.clone()]].concat())
            })
            .collect();
    }
    points
}

/// One summary JSON per run that ran, named by its label.
fn write_summaries(rows: &[Row], dir: &std::path::Path) -> Result<(), String> {
    for row in rows {
        if let Ok(summary) = &row.result {
            let name: String = row
                .label
                .join("_")
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            let path = dir.join(format!("{name}.json"));
            let json = serde_json::to_string_pretty(summary).map_err(|e| e.to_string())?;
            std::fs::write(&path, json).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(())
}

fn bench(scenario: &str, duration: Option<u64>) -> Result<(), String> {
    let path = runner::resolve(scenario)?;
    let scenario = Scenario::load(&path, &[])?;
    let overrides = Overrides {
        duration,
        ..Overrides::default()
    };
    let config = scenario.build(&overrides)?;
    let simulated = config.duration as f64 / 1e9;
    let mut sim = Sim::new(config)?;
    let started = Instant::now();
    sim.run();
    let wall = started.elapsed().as_secs_f64();
    let events = sim.counters.events as f64;
    let rate = events / wall;
    println!(
        "{}: {simulated:.0} s simulated in {wall:.2} s wall ({:.0}× real time)",
        scenario.name,
        simulated / wall
    );
    println!(
        "events:  {events:.0} = {:.2} M events/s (goal ≥ 5 M/s: {})",
        rate / 1e6,
        if rate >= 5e6 { "met" } else { "not met" }
    );
    println!(
        "packets: {} = {:.2} M packets/s",
        sim.counters.injected,
        sim.counters.injected as f64 / wall / 1e6
    );
    let full = scenario.file.duration.0 as f64 / 1e9;
    println!(
        "the full {full:.0} s scenario would take about {:.1} s at this speed",
        wall * full / simulated
    );
    Ok(())
}

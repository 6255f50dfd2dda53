//! `ecnq-perf demo`: every scheme through one emulated bottleneck on
//! loopback, with nothing to set up.
//!
//! An ecnq server, a relay-mode shim (in this process: link emulation,
//! metering and re-marking by DSCP tag) and clients. Each controller runs
//! alone with two flows, the second arriving a third of the way in; then a
//! mixed run adds one flow of every controller, one after another. The
//! comparison table and SVG plots come from the shim's link statistics and
//! the flows' own interval samples.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use ecnq::quic::CongestionControl;
use ecnq::router::capacity::LinkRate;
use ecnq::schemes::registry::FORMULAS;
use ecnq::units::{parse_duration, Rate, Size, UNITS_HELP};
use ecnq_shim::link::spec::LinkSpec;
use serde::Serialize;

use super::client::ClientConfig;
use super::fake_newcomers;
use super::host::steal_note;
use super::loopback::{Flow, LinkSeries, LoopbackBed, RelayLink, RunSummary, FLOW_INTERVAL};
use super::{check_seconds, parse_seconds};
use ecnq::statistics::FlowSeries;
use ecnq_charts::{Chart, Look, Point, Series};

/// Options of `ecnq-perf demo`.
#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// Bottleneck rate, both directions (e.g. 50mbit, 1gbit).
    #[arg(long, default_value = "50mbit", value_parser = rate_arg, long_help = format!("Bottleneck rate, both directions (e.g. 50mbit, 1gbit). {UNITS_HELP}"))]
    pub rate: u64,
    /// Round-trip propagation delay (half each way).
    #[arg(long, default_value = "40ms", value_parser = time_arg)]
    pub rtt: Duration,
    /// Bottleneck buffer: a size (e.g. 250kb) or `bdp` for one bandwidth-delay product.
    #[arg(long, default_value = "bdp")]
    pub buffer: String,
    /// Length of each single-controller run, in seconds (2 to 3600; or a time such as 30s).
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS", value_parser = parse_seconds)]
    pub duration: f64,
    /// Seconds between flow arrivals in the mixed run (0 to 600; or a time such as 500ms).
    #[arg(long, default_value_t = 2.0, value_name = "SECONDS", value_parser = parse_seconds)]
    pub stagger: f64,
    /// Controllers to compare, comma separated [default: every ecnq scheme
    /// but classic, then cubic and bbr].
    #[arg(long, value_delimiter = ',', default_values_t = demo_controllers(), value_parser = cc_arg, long_help = format!("Controllers to compare, comma separated [default: every ecnq scheme but classic, then cubic and bbr]:\n{}", CongestionControl::help()))]
    pub cc: Vec<CongestionControl>,
    /// Skip the mixed run.
    #[arg(long)]
    pub no_mixed: bool,
    /// Make the receiving end vanilla quinn, with no ecnq: it reports only
    /// the ACK-ECN counts every QUIC receiver sends, which erc reads the
    /// routers' rate from (the other schemes fall back to Cubic).
    #[arg(long)]
    pub vanilla_receiver: bool,
    /// Where to write plots and summary.json.
    #[arg(long, default_value = "ecnq-demo")]
    pub out: PathBuf,
    /// Also write the comparison table, and the notes under it, as
    /// Markdown to this file (what scripts/update-results puts in
    /// docs/results.md).
    #[arg(long, value_name = "PATH")]
    pub markdown: Option<PathBuf>,
}

/// `ecnq-perf demo`'s command line: the demo's options (which `ecnq-perf
/// testbed` shares), its links in the shim's words and its flood table.
#[derive(Args, Debug, Clone)]
pub struct DemoCommand {
    #[command(flatten)]
    pub args: DemoArgs,
    /// The link both ways, in the shim's words, in place of --rate, --rtt
    /// and --buffer.
    #[arg(long, value_name = "SPEC", value_parser = link_arg, conflicts_with_all = LINK_CONFLICTS, long_help = LINK_HELP)]
    pub link: Option<LinkSpec>,
    /// The direction the data flows, client to server (else --link).
    #[arg(long, value_name = "SPEC", value_parser = link_arg, conflicts_with_all = LINK_CONFLICTS, long_help = LINK_DOWN_HELP)]
    pub link_down: Option<LinkSpec>,
    /// The direction of the ACKs, server to client (else --link).
    #[arg(long, value_name = "SPEC", value_parser = link_arg, conflicts_with_all = LINK_CONFLICTS, long_help = LINK_UP_HELP)]
    pub link_up: Option<LinkSpec>,
    /// Instead of the comparison: floods of fake newcomers at these
    /// percentages of the link, comma separated (e.g. 2,5,10).
    #[arg(
        long,
        value_name = "PERCENTS",
        value_delimiter = ',',
        value_parser = fake_newcomers::percent_arg,
        conflicts_with_all = ["cc", "stagger", "no_mixed", "out"],
        long_help = FAKE_NEWCOMERS_HELP
    )]
    pub fake_newcomers: Option<Vec<f64>>,
    /// The receiver acknowledges only every N-th packet (2 to 1000),
    /// as Chromium does with 10: the senders ask it to, with QUIC's
    /// ack-frequency extension, which every quinn receiver supports
    /// [default: the receiver's own rule, every second packet].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=1000))]
    pub ack_every: Option<u32>,
}

/// The options `--link`, `--link-down` and `--link-up` replace: a link in
/// the shim's words has its own rate, delay and limit.
const LINK_CONFLICTS: [&str; 3] = ["rate", "rtt", "buffer"];

/// `--link`'s long help.
const LINK_HELP: &str = "The relay's link both ways, in the shim's words (README, \"Link specs\"; \
    `ecnq-shim relay --help`), e.g. \"rate 20mbit delay 20ms limit 100\", \"trace FILE delay 25ms \
    limit 250\" (a Mahimahi trace, looped) or \"schedule 0s:20mbit,10s:5mbit delay 20ms\". In place \
    of --rate, --rtt and --buffer, which cannot be given with it. --link-down and --link-up set one \
    direction each; a direction none of the three sets gets the default link (50 Mbit/s, 20 ms \
    each way, one bandwidth-delay product of buffer).";

/// `--link-down`'s long help.
const LINK_DOWN_HELP: &str = "The link in the direction the data flows, in the shim's words \
    (see --link). The demo's clients send to the server, so this is the relay's client-to-server \
    direction, what a trace's .down file describes (the opposite of `ecnq-shim relay --link-down`, \
    which names the server-to-client direction). The table's utilization, queue and loss are this \
    direction's. Overrides --link.";

/// `--link-up`'s long help.
const LINK_UP_HELP: &str = "The link in the direction of the ACKs, server to client, in the \
    shim's words (see --link); the relay's server-to-client direction (`ecnq-shim relay \
    --link-down`). Overrides --link.";

/// `--fake-newcomers`' long help.
const FAKE_NEWCOMERS_HELP: &str = "Instead of the comparison, issue 54's abuse test: \
    percentages of the link, comma separated, each above 0 and at most 50 (e.g. 2,5,10). \
    For each, and for a 0 % baseline, one long flow (erc, then cubic) crosses the bottleneck \
    and from 3 s on a flood sends that share of the link beside it: every 12 packets of 300 \
    bytes come from a new source port, with erc's DSCP tag and ECT(0), and never answer. \
    Each run lasts 3 s plus --duration (the flood's length). The table shows the long flow's \
    goodput and the flood's rate over the flood, and the long flow's share of what the flood \
    leaves (the link rate less the flood's): the goal is at least 85 % for erc. \
    --markdown writes the table as Markdown; no plots are drawn. The data path needs a fixed \
    rate (--rate, or `rate` in --link-down or --link): a link whose capacity varies has no one \
    share to flood.";

pub fn rate_arg(s: &str) -> Result<u64, String> {
    s.parse::<Rate>()
        .map(|r| r.bits_per_sec().round() as u64)
        .map_err(|e| e.to_string())
}

fn link_arg(s: &str) -> Result<LinkSpec, String> {
    s.parse::<LinkSpec>().map_err(|e| e.to_string())
}

pub fn time_arg(s: &str) -> Result<Duration, String> {
    parse_duration(s, Some(Duration::from_secs(60))).map_err(|e| e.to_string())
}

/// The demo's default line-up: every router-assisted scheme, then quinn's
/// Cubic and BBR as the baselines.
fn demo_controllers() -> Vec<CongestionControl> {
    CongestionControl::all()
        .into_iter()
        .filter(|cc| cc.router_assisted().is_some())
        .chain([CongestionControl::Cubic, CongestionControl::Bbr])
        .collect()
}

pub fn cc_arg(s: &str) -> Result<CongestionControl, String> {
    s.parse::<CongestionControl>().map_err(|e| e.to_string())
}

/// The link of `--rate` (bit/s), `--rtt` (half each way) and `--buffer`
/// (a size, or `bdp` for one bandwidth-delay product, at least two
/// packets), and its buffer in bytes.
pub fn bottleneck(rate: u64, rtt: Duration, buffer: &str) -> Result<(LinkSpec, u64), String> {
    let buffer = match buffer.trim() {
        "bdp" => ((rate as f64 / 8.0) * rtt.as_secs_f64()).max(3000.0) as u64,
        size => size
            .parse::<Size>()
            .map(Size::bytes)
            .map_err(|e| format!("--buffer: {e}"))?,
    };
    let half = rtt / 2;
    let spec: LinkSpec = format!(
        "rate {rate}bit delay {}us limit {buffer}b",
        half.as_micros()
    )
    .parse()
    .map_err(|e| format!("bad link: {e}"))?;
    Ok((spec, buffer))
}

impl DemoArgs {
    /// Checks the options; returns the bottleneck link (both directions)
    /// and its buffer in bytes.
    pub fn link(&self) -> Result<(LinkSpec, u64), String> {
        check_seconds("--duration", self.duration, 2.0, 3600.0)?;
        check_seconds("--stagger", self.stagger, 0.0, 600.0)?;
        if self.cc.is_empty() {
            return Err("--cc needs at least one controller".into());
        }
        bottleneck(self.rate, self.rtt, &self.buffer)
    }

    /// One controller's run: a flow for the whole duration and a second
    /// arriving a third of the way in.
    pub fn single(&self, cc: CongestionControl) -> [Flow; 2] {
        [
            Flow {
                cc,
                offset: 0.0,
                seconds: self.duration,
            },
            Flow {
                cc,
                offset: self.duration / 3.0,
                seconds: self.duration * 2.0 / 3.0,
            },
        ]
    }

    /// The mixed run: one flow of every controller, arriving `--stagger`
    /// apart, all ending together; None when skipped.
    pub fn mixed(&self) -> Option<Vec<Flow>> {
        if self.no_mixed || self.cc.len() < 2 {
            return None;
        }
        let total = self.stagger * self.cc.len() as f64 + self.duration / 2.0;
        Some(
            self.cc
                .iter()
                .enumerate()
                .map(|(i, &cc)| Flow {
                    cc,
                    offset: self.stagger * i as f64,
                    seconds: total - self.stagger * i as f64,
                })
                .collect(),
        )
    }
}

impl DemoCommand {
    /// The relay's link: the data (client to server) from `--link-down`,
    /// the ACKs from `--link-up`, each else from `--link`, else `default`
    /// (the link of `--rate`, `--rtt` and `--buffer`).
    pub fn relay_link(&self, default: &LinkSpec) -> RelayLink {
        let spec = |one: &Option<LinkSpec>| {
            (one.as_ref().or(self.link.as_ref()).unwrap_or(default)).clone()
        };
        RelayLink {
            to_server: spec(&self.link_down),
            to_client: spec(&self.link_up),
        }
    }

    /// Whether `--link`, `--link-down` or `--link-up` was given.
    fn links_given(&self) -> bool {
        self.link.is_some() || self.link_down.is_some() || self.link_up.is_some()
    }
}

/// A link in the shim's words, with a trace's mean rate.
fn link_words(spec: &LinkSpec) -> String {
    match &spec.varies {
        Some(LinkRate::Trace(trace)) => {
            format!("{spec} (mean {:.1} Mbit/s)", trace.mean_bps() / 1e6)
        }
        _ => spec.to_string(),
    }
}

/// The data path's rate for `--fake-newcomers`, whose floods are shares of
/// it: none on a link whose capacity varies, where a share has no one size.
fn flood_rate(spec: &LinkSpec) -> Result<f64, String> {
    match (spec.rate, &spec.varies) {
        (Some(bps), None) => Ok(bps as f64),
        (_, Some(varies)) => Err(format!(
            "--fake-newcomers needs a fixed rate on the data path: its floods are shares of the link's rate, which varies on {varies}"
        )),
        (None, None) => Err(
            "--fake-newcomers needs a rate on the data path (`rate` in --link-down or --link): its floods are shares of it"
                .into(),
        ),
    }
}

/// Runs the demo, or with `--fake-newcomers` its flood table.
pub async fn run(command: DemoCommand) -> Result<(), String> {
    let args = &command.args;
    let (default, buffer) = args.link()?;
    let link = command.relay_link(&default);
    if let Some(percents) = &command.fake_newcomers {
        let markdown = args.markdown.as_deref();
        let rate = flood_rate(&link.to_server)?;
        return fake_newcomers::run(&link, rate, percents, args.duration, markdown).await;
    }
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;

    let (bed, receiver) = match args.vanilla_receiver {
        true => (LoopbackBed::vanilla().await?, "vanilla quinn"),
        false => (LoopbackBed::ecnq().await?, "ecnq"),
    };
    let path = match command.links_given() {
        true => format!(
            "data (client to server) {}, ACKs (server to client) {}",
            link_words(&link.to_server),
            link_words(&link.to_client)
        ),
        false => format!(
            "bottleneck {} Mbit/s, RTT {} ms, buffer {} KB",
            args.rate as f64 / 1e6,
            args.rtt.as_millis(),
            buffer / 1000
        ),
    };
    let acks = match command.ack_every {
        Some(every) => format!(", acknowledging every {every} packets"),
        None => String::new(),
    };
    println!(
        "ecnq-perf demo: {path}, {} s per controller, {receiver} receiver{acks}; plots in {}",
        args.duration,
        args.out.display()
    );
    let mut summaries = Vec::new();
    for &cc in &args.cc {
        eprint!("  running {cc:<8} …");
        let (summary, modes) =
            run_plotted(&bed, cc.name(), &args.single(cc), &link, &command).await?;
        eprintln!(" {:.1} Mbit/s, {modes}", summary.goodput_mbit);
        summaries.push(summary);
    }
    if let Some(flows) = args.mixed() {
        eprint!("  running mixed …");
        let (summary, modes) = run_plotted(&bed, "mixed", &flows, &link, &command).await?;
        eprintln!(" {:.1} Mbit/s, {modes}", summary.goodput_mbit);
        summaries.push(summary);
    }
    report(&summaries, &args.out)?;
    match &args.markdown {
        Some(path) => std::fs::write(path, table_markdown(&summaries))
            .map_err(|e| format!("cannot write {}: {e}", path.display())),
        None => Ok(()),
    }
}

/// Prints the comparison table and writes it to `out/summary.json`.
pub fn report(summaries: &[RunSummary], out: &Path) -> Result<(), String> {
    report_rows(summaries, &[], summaries, out)
}

/// Like [`report`], with `notes` printed after the table and `rows` (the
/// summaries and whatever else the caller measured) written to summary.json.
pub fn report_rows(
    summaries: &[RunSummary],
    notes: &[String],
    rows: &(impl Serialize + ?Sized),
    out: &Path,
) -> Result<(), String> {
    print_table(summaries);
    for note in notes {
        println!("{note}");
    }
    // One point per controller, as Pantheon draws it: up and left is better,
    // on a log delay axis where the link varies and delays span decades.
    let log_delay = summaries.iter().any(|s| s.capacity_varies);
    let points: Vec<Point> = summaries
        .iter()
        .filter(|s| s.flows.iter().all(|(cc, _)| *cc == s.name))
        .map(|s| Point {
            name: s.name.clone(),
            x: s.queue_p95_ms,
            y: s.goodput_mbit,
        })
        .collect();
    let scatter = [
        "goodput-delay.svg",
        "goodput against queueing delay (up and left is better)",
        "bottleneck queueing delay, 95th percentile (ms)",
    ];
    goodput_delay_and_summary(out, scatter, &points, log_delay, rows)
}

/// Writes into `out` the scatter of goodput against queueing delay
/// (`file`, `title`, `x_label`: [`scatter_chart`]) and `rows` as
/// summary.json.
pub(super) fn goodput_delay_and_summary(
    out: &Path,
    [file, title, x_label]: [&str; 3],
    points: &[Point],
    log_delay: bool,
    rows: &(impl Serialize + ?Sized),
) -> Result<(), String> {
    let y_label = "goodput (Mbit/s)";
    scatter_chart(&out.join(file), title, x_label, y_label, points, log_delay)?;
    let json = serde_json::to_string_pretty(rows).map_err(|e| e.to_string())?;
    let path = out.join("summary.json");
    std::fs::write(&path, json).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("Plots and summary.json in {}", out.display());
    Ok(())
}

/// One run through the bottleneck, plotted.
async fn run_plotted(
    bed: &LoopbackBed,
    name: &str,
    flows: &[Flow],
    link: &RelayLink,
    command: &DemoCommand,
) -> Result<(RunSummary, String), String> {
    let out = &command.args.out;
    let ack_every = command.ack_every;
    let configure = move |_: usize, config: &mut ClientConfig| config.ack_every = ack_every;
    let links = std::slice::from_ref(link);
    let result = bed.run_configured(flows, links, &configure, None).await?;
    let labels: Vec<String> = flows.iter().map(|f| f.cc.to_string()).collect();
    plot_run(name, &labels, &result.series, &result.links[0], out)?;
    // What each sender ran on at its end: router feedback (by reports or
    // by ACK-ECN counts), or a fallback and why.
    let mut modes: Vec<&str> = result
        .runs
        .iter()
        .flatten()
        .map(|r| r.stats.mode.name())
        .collect();
    modes.sort_unstable();
    modes.dedup();
    Ok((result.summary(name, 0), modes.join("; ")))
}

/// Writes a run's plots: each flow's sending rate (`labels` name the
/// flows' controllers) beside a varying link's capacity, the bottleneck's
/// queue and its load factors.
pub fn plot_run(
    name: &str,
    labels: &[String],
    series: &[FlowSeries],
    link: &LinkSeries,
    out: &Path,
) -> Result<(), String> {
    let mut throughput: Vec<Series> = labels
        .iter()
        .zip(series)
        .enumerate()
        .map(|(i, (label, s))| Series {
            name: format!("flow {} ({label})", i + 1),
            points: s.samples.iter().map(|&(t, r)| (t, r / 1e6)).collect(),
        })
        .collect();
    if link.varies {
        throughput.push(Series {
            name: "link capacity".into(),
            points: link.capacity_mbit(FLOW_INTERVAL.as_secs_f64()),
        });
    }
    line_chart(
        &out.join(format!("{name}-throughput.svg")),
        &format!("{name}: sending rate per flow"),
        "seconds",
        "Mbit/s",
        &throughput,
    )?;
    let queue = [Series {
        name: "queueing delay".into(),
        points: link
            .samples
            .iter()
            .map(|s| (s.t, s.queue_bytes * 8.0 / link.capacity_bps * 1e3))
            .collect(),
    }];
    let queue_unit = match link.varies {
        true => "ms at the link's nominal rate (approximate: its capacity varies)",
        false => "ms",
    };
    line_chart(
        &out.join(format!("{name}-queue.svg")),
        &format!("{name}: bottleneck queue"),
        "seconds",
        queue_unit,
        &queue,
    )?;
    let load: Vec<Series> = (FORMULAS.iter().enumerate())
        .map(|(i, formula)| Series {
            name: format!("{} {}", formula.name.to_uppercase(), formula.symbol),
            points: link
                .samples
                .iter()
                .map(|s| (s.t, s.load[i] * 100.0))
                .collect(),
        })
        .collect();
    line_chart(
        &out.join(format!("{name}-load.svg")),
        &format!("{name}: bottleneck load factor"),
        "seconds",
        "%",
        &load,
    )
}

/// A [`Look::BOLD`] chart at `path` whose axes run from the origin to `max`.
fn bold_chart<'a>(path: &'a Path, labels: [&'a str; 3], max: (f64, f64)) -> Chart<'a> {
    let [title, x_label, y_label] = labels;
    Chart {
        path,
        look: Look::BOLD,
        title,
        x_label,
        y_label,
        max,
    }
}

/// Draws `series` as lines, with a legend, on axes that fit their finite
/// points with a tenth to spare above.
fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Result<(), String> {
    let finite = series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(|(x, y)| x.is_finite() && y.is_finite());
    let (x_max, y_max) = finite.fold((0.0f64, 0.0f64), |(xm, ym), &(x, y)| (xm.max(x), ym.max(y)));
    let x_max = if x_max > 0.0 { x_max } else { 1.0 };
    let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    bold_chart(path, [title, x_label, y_label], (x_max, y_max)).lines(series, true)
}

/// Draws labelled points on axes that fit them ([`Chart::scatter`]); on a
/// logarithmic x axis if `log_x`.
fn scatter_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    points: &[Point],
    log_x: bool,
) -> Result<(), String> {
    let mut chart = bold_chart(path, [title, x_label, y_label], (1.0, 1.0));
    chart.look.size = (900, 520);
    chart.scatter(points, log_x)
}

/// The comparison table's heads; [`table_cells`] gives a row's cells.
pub(super) const TABLE_HEADS: [&str; 9] = [
    "run",
    "goodput",
    "util",
    "queue p50",
    "queue p95",
    "queue p99",
    "loss",
    "Jain",
    "converge",
];

/// One run's cells in the comparison table, under [`TABLE_HEADS`].
fn table_cells(r: &RunSummary) -> [String; 9] {
    let queue = [r.queue_p50_ms, r.queue_p95_ms, r.queue_p99_ms];
    let [name, goodput, util, p50, p95, p99, loss] =
        figure_cells(&r.name, r.goodput_mbit, r.utilization, queue, r.loss);
    let converge = (r.converge_s).map_or("never".to_owned(), |s| format!("{s:.1} s"));
    let jain = format!("{:.3}", r.jain);
    [name, goodput, util, p50, p95, p99, loss, jain, converge]
}

/// The first seven cells of a comparison's row, under [`TABLE_HEADS`]:
/// the run's name, goodput (Mbit/s), utilization, queueing delay's p50,
/// p95 and p99 (ms) and loss.
pub(super) fn figure_cells(
    name: &str,
    goodput_mbit: f64,
    utilization: f64,
    queue_ms: [f64; 3],
    loss: f64,
) -> [String; 7] {
    let [p50, p95, p99] = queue_ms.map(|ms| format!("{ms:.1} ms"));
    [
        name.to_owned(),
        format!("{goodput_mbit:.1} Mb/s"),
        format!("{:.1}%", utilization * 100.0),
        p50,
        p95,
        p99,
        format!("{:.2}%", loss * 100.0),
    ]
}

/// The comparison table's column widths in text.
const TABLE_WIDTHS: [usize; 9] = [9, 10, 7, 10, 10, 10, 7, 6, 10];

fn print_table(rows: &[RunSummary]) {
    use ecnq_charts::table::aligned;
    println!();
    println!(
        "{}",
        aligned(&TABLE_HEADS.map(str::to_owned), &TABLE_WIDTHS)
    );
    for r in rows {
        println!("{}", aligned(&table_cells(r), &TABLE_WIDTHS));
    }
    for note in table_notes(rows) {
        println!("{note}");
    }
}

/// The comparison table as Markdown, the notes under it as paragraphs.
pub fn table_markdown(rows: &[RunSummary]) -> String {
    use ecnq_charts::table::markdown;
    let cells: Vec<Vec<String>> = rows.iter().map(|r| table_cells(r).to_vec()).collect();
    let mut out = markdown(&TABLE_HEADS, &cells);
    for note in table_notes(rows) {
        out += &format!("\n{note}\n");
    }
    out
}

/// What the table's figures need beside them: host steal, flows that never
/// got in, and the mixed run's rate per flow.
fn table_notes(rows: &[RunSummary]) -> Vec<String> {
    let mut notes: Vec<String> = rows
        .iter()
        .filter_map(|r| steal_note(&r.name, r.host_steal))
        .collect();
    for r in rows {
        for &n in &r.unjoined {
            let cc = r.flows.get(n - 1).map_or("", |(cc, _)| cc.as_str());
            notes.push(format!(
                "{}: flow {n} ({cc}) never got in: every handshake was lost at the bottleneck ({:.1} % of packets dropped)",
                r.name,
                r.loss * 100.0
            ));
        }
    }
    if let Some(mixed) = rows.iter().find(|r| r.name == "mixed") {
        let list: Vec<String> = mixed
            .flows
            .iter()
            .map(|(cc, g)| format!("{cc} {g:.1}"))
            .collect();
        notes.push(format!(
            "mixed run, Mbit/s per flow in arrival order: {}",
            list.join(", ")
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demo(args: &[&str]) -> Result<DemoCommand, String> {
        crate::perf::parse_args("demo", args)
    }

    fn spec(words: &str) -> LinkSpec {
        words.parse().unwrap()
    }

    /// `--link-down` shapes the data (client to server), `--link-up` the
    /// ACKs, each falling back to `--link`, then to the default link.
    #[test]
    fn each_direction_takes_its_own_link() {
        let relay = |args: &[&str]| {
            let command = demo(args).unwrap();
            let (default, _) = command.args.link().unwrap();
            (command.relay_link(&default), default, command.links_given())
        };
        let (link, default, given) = relay(&[]);
        assert_eq!(link, RelayLink::from(default.clone()));
        assert_eq!(default, spec("rate 50mbit delay 20ms limit 250000b"));
        assert!(!given);
        let (link, _, given) = relay(&[
            "--link-down",
            "rate 10mbit delay 5ms",
            "--link-up",
            "delay 25ms",
        ]);
        assert_eq!(link.to_server, spec("rate 10mbit delay 5ms"));
        assert_eq!(link.to_client, spec("delay 25ms"));
        assert!(given);
        let (link, _, _) = relay(&["--link", "rate 10mbit", "--link-up", "delay 25ms"]);
        assert_eq!(
            (link.to_server, link.to_client),
            (spec("rate 10mbit"), spec("delay 25ms"))
        );
        let (link, default, _) = relay(&["--link-down", "schedule 0s:20mbit,2s:5mbit"]);
        assert_eq!(link.to_client, default);
        assert_eq!(link.to_server.rate, Some(20_000_000));
    }

    /// A bad spec names its flag, a missing trace its path; --rate, --rtt
    /// and --buffer do not mix with a link in the shim's words.
    #[test]
    fn bad_links_are_errors_that_say_why() {
        for (args, wants) in [
            (
                &["--link-down", "rate fast"][..],
                &["--link-down", "`fast` is not a rate"][..],
            ),
            (
                &["--link-up", "delay 2h"],
                &["--link-up", "unknown time unit `h`"],
            ),
            (
                &["--link", "trace /nonexistent/att.down"],
                &["--link", "trace /nonexistent/att.down: No such file"],
            ),
            (
                &["--link-down", "rate 10mbit", "--rate", "20mbit"],
                &["--link-down", "--rate"],
            ),
            (
                &["--link", "rate 10mbit", "--buffer", "64kb"],
                &["--link", "--buffer"],
            ),
            (
                &["--link-up", "delay 5ms", "--rtt", "10ms"],
                &["--link-up", "--rtt"],
            ),
        ] {
            let error = demo(args).unwrap_err();
            for want in wants {
                assert!(error.contains(want), "{args:?}: {error}");
            }
        }
    }

    /// A varying link's capacity is drawn beside the flows' rates, and
    /// the scatter of a varying link's runs has a logarithmic delay axis.
    #[test]
    fn a_varying_link_is_plotted_with_its_capacity() {
        let out = tempfile::tempdir().unwrap();
        let sample = |t: f64, capacity_bytes: f64| crate::perf::loopback::LinkSample {
            t,
            capacity_bytes: Some(capacity_bytes),
            ..Default::default()
        };
        let link = LinkSeries {
            samples: vec![sample(0.0, 0.0), sample(0.5, 1.25e6), sample(1.0, 1.5e6)],
            varies: true,
            ..LinkSeries::default()
        };
        let flow = FlowSeries {
            start: 0.0,
            samples: vec![(0.5, 10e6), (1.0, 4e6)],
        };
        plot_run("erc", &["erc".into()], &[flow], &link, out.path()).unwrap();
        let svg = std::fs::read_to_string(out.path().join("erc-throughput.svg")).unwrap();
        assert!(
            svg.contains("link capacity") && svg.contains("flow 1 (erc)"),
            "{svg}"
        );
        let point = |name: &str, x: f64| Point {
            name: name.into(),
            x,
            y: 5.0,
        };
        let path = out.path().join("scatter.svg");
        let points = [point("erc", 4.0), point("cubic", 400.0)];
        scatter_chart(&path, "t", "ms", "Mbit/s", &points, true).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(
            svg.contains(">\n10.0\n<") && svg.contains(">\n100.0\n<"),
            "{svg}"
        );
    }

    /// Floods are shares of a fixed rate: a varying or unlimited data path
    /// is refused, its ACK path does not matter.
    #[test]
    fn fake_newcomers_need_a_fixed_rate_on_the_data_path() {
        assert_eq!(flood_rate(&spec("rate 20mbit delay 10ms")), Ok(20e6));
        let varies = flood_rate(&spec("schedule 0s:20mbit,2s:5mbit")).unwrap_err();
        assert!(
            varies.contains("needs a fixed rate on the data path"),
            "{varies}"
        );
        let unlimited = flood_rate(&spec("delay 25ms")).unwrap_err();
        assert!(
            unlimited.contains("needs a rate on the data path"),
            "{unlimited}"
        );
    }

    /// The text table keeps its layout, and the Markdown table (`demo
    /// --markdown`) carries the same cells and the notes under it.
    #[test]
    fn the_table_as_text_and_as_markdown() {
        let run = RunSummary {
            name: "mixed".into(),
            goodput_mbit: 47.25,
            utilization: 0.9612,
            capacity_varies: false,
            queue_p50_ms: 1.04,
            queue_p95_ms: 3.0,
            queue_p99_ms: 4.33,
            loss: 0.0012,
            jain: 0.9871,
            converge_s: None,
            flows: vec![("erc".into(), 23.4), ("cubic".into(), 23.85)],
            unjoined: Vec::new(),
            host_steal: None,
        };
        let text = ecnq_charts::table::aligned(&table_cells(&run), &TABLE_WIDTHS);
        assert_eq!(
            text,
            "mixed      47.2 Mb/s   96.1%     1.0 ms     3.0 ms     4.3 ms   0.12%  0.987      never"
        );
        let markdown = table_markdown(&[run]);
        assert!(
            markdown.starts_with("| run | goodput | util |"),
            "{markdown}"
        );
        assert!(
            markdown.contains(
                "| mixed | 47.2 Mb/s | 96.1% | 1.0 ms | 3.0 ms | 4.3 ms | 0.12% | 0.987 | never |"
            ),
            "{markdown}"
        );
        assert!(
            markdown
                .ends_with("\nmixed run, Mbit/s per flow in arrival order: erc 23.4, cubic 23.9\n"),
            "{markdown}"
        );
    }
}

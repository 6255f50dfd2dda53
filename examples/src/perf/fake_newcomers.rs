//! `ecnq-perf demo --fake-newcomers 2,5,10`: issue 54's abuse test on the
//! real stack. One long flow crosses the demo's bottleneck; from
//! [`WARM_UP`] on a flood of fake newcomers ([`super::flood`]) sends a
//! share of the link beside it. The table shows, for each share and for
//! an erc and a Cubic long flow, what the long flow kept of the capacity
//! the flood leaves: a router must not give capacity to whoever claims to
//! be new, so erc should keep at least [`GOAL`] of it, as Cubic does
//! (`fake_newcomers_take_no_more_than_they_send` in tests/e2e.rs, the
//! simulator's `erc-fake-newcomers`).

use std::path::Path;

use ecnq::quic::CongestionControl;
use ecnq::Scheme;
use serde::Serialize;

use super::flood::{FloodSpec, PACKETS, SIZE};
use super::host::steal_note;
use super::loopback::{Flood, Flow, LoopbackBed, RelayLink, RunResult};

/// The controller the goal is for.
const ERC: CongestionControl = CongestionControl::Ecnq(Scheme::Erc);

/// The long flow's controllers, side by side in each run.
pub const CONTROLLERS: [CongestionControl; 2] = [ERC, CongestionControl::Cubic];

/// Seconds the long flow sends alone before the flood starts: its start-up
/// is over by then at the demo's 40 ms round trip.
pub const WARM_UP: f64 = 3.0;

/// Issue 54's goal: the long flow keeps this much of the capacity the
/// flood leaves (the link rate less the flood's).
pub const GOAL: f64 = 0.85;

/// Loopback addresses the fake flows take turns at. From one address the
/// relay's limit of sessions per source would refuse most of a 10 % flood
/// after a few seconds, and the table would measure the relay, not the
/// router: a spoofing attacker is not held by that limit, nor is a flood
/// through a router in the path (the TUN shim keeps no sessions). Sixteen
/// addresses' limits together exceed the relay's whole table
/// (`SessionLimits::default()`), so the per-source limit never binds; a
/// full table evicts its idlest session, a fake flow's.
pub const SOURCES: u8 = 16;

/// One run of the table: a long flow of `cc` beside a flood of `percent`
/// of the link (none at 0).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Attack {
    /// The flood's rate, percent of the link rate.
    pub percent: f64,
    /// The long flow's controller.
    pub cc: CongestionControl,
}

/// The runs of a table: a 0 % baseline, then each of `percents`, each with
/// every one of [`CONTROLLERS`].
pub fn attacks(percents: &[f64]) -> Vec<Attack> {
    (std::iter::once(0.0).chain(percents.iter().copied()))
        .flat_map(|percent| CONTROLLERS.map(|cc| Attack { percent, cc }))
        .collect()
}

/// Reads a flood's share of the link, in percent: above 0, at most 50.
pub fn percent_arg(word: &str) -> Result<f64, String> {
    let percent: f64 = (word.trim().trim_end_matches('%').parse())
        .map_err(|_| format!("`{word}` is not a percentage of the link (e.g. 2 or 2.5)"))?;
    if percent > 0.0 && percent <= 50.0 {
        Ok(percent)
    } else {
        Err(format!(
            "a flood must be above 0 and at most 50 % of the link, got {percent} \
             (the 0 % baseline is always measured)"
        ))
    }
}

impl Attack {
    /// The long flow: from the start, for the warm-up and `seconds` of
    /// flood.
    pub fn flows(&self, seconds: f64) -> [Flow; 1] {
        [Flow {
            cc: self.cc,
            offset: 0.0,
            seconds: WARM_UP + seconds,
        }]
    }

    /// The flood on a link of `link_bps`, for `seconds` after the warm-up;
    /// none at 0 %.
    pub fn flood(&self, link_bps: f64, seconds: f64) -> Option<Flood> {
        (self.percent > 0.0).then(|| Flood {
            spec: FloodSpec {
                sources: SOURCES,
                ..FloodSpec::new(link_bps * self.percent / 100.0)
            },
            offset: WARM_UP,
            seconds,
        })
    }

    /// Its row, from the run `result` on a link of `link_bps` whose flood
    /// lasted `seconds`: the figures over the flood's span.
    pub fn row(&self, result: &RunResult, link_bps: f64, seconds: f64) -> AttackRow {
        let flood = result.flood.unwrap_or_default();
        let link_mbit = link_bps / 1e6;
        let flood_mbit = flood.rate() / 1e6;
        let long_mbit = result.goodput_mbit(0, WARM_UP, WARM_UP + seconds);
        let sessions = result.links.first().map(|l| l.sessions).unwrap_or_default();
        AttackRow {
            percent: self.percent,
            cc: self.cc.to_string(),
            long_mbit,
            flood_mbit,
            kept: long_mbit / (link_mbit - flood_mbit),
            fake_flows: flood.flows,
            sessions_refused: sessions.refused(),
            sessions_evicted: sessions.evicted,
            host_steal: result.host_steal,
        }
    }
}

/// What one run of the table measured over the flood's span (the same
/// span at 0 %).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AttackRow {
    /// The flood's rate, percent of the link rate.
    pub percent: f64,
    /// The long flow's controller.
    pub cc: String,
    /// The long flow's goodput, Mbit/s.
    pub long_mbit: f64,
    /// What the flood sent, Mbit/s of IP packets.
    pub flood_mbit: f64,
    /// The long flow's goodput over the link rate less the flood's.
    pub kept: f64,
    /// Fake flows sent.
    pub fake_flows: u64,
    /// Datagrams the relay dropped rather than open a session for them
    /// (its limit per source address, or no socket to be had).
    pub sessions_refused: u64,
    /// Sessions the relay closed to make room for new ones.
    pub sessions_evicted: u64,
    /// The fraction of the machine's CPU time the host took during the run
    /// (steal, see [`super::host`]); `None` where unknown.
    pub host_steal: Option<f64>,
}

impl AttackRow {
    /// Whether it meets [`GOAL`]: always for a controller other than erc,
    /// whose figure is there to compare.
    pub fn meets_goal(&self) -> bool {
        self.cc != ERC.to_string() || self.kept >= GOAL
    }

    fn name(&self) -> String {
        format!("{} beside {} %", self.cc, self.percent)
    }
}

/// The table's heads; [`cells`] gives a row's cells.
const HEADS: [&str; 6] = [
    "flood",
    "long flow",
    "Mb/s",
    "flood Mb/s",
    "kept",
    "fake flows",
];

/// The table's column widths in text.
const WIDTHS: [usize; 6] = [6, 10, 7, 11, 7, 11];

fn cells(r: &AttackRow) -> [String; 6] {
    [
        format!("{} %", r.percent),
        r.cc.clone(),
        format!("{:.1}", r.long_mbit),
        format!("{:.2}", r.flood_mbit),
        format!("{:.1} %", r.kept * 100.0),
        r.fake_flows.to_string(),
    ]
}

/// The table as text, the notes under it.
pub fn table_text(rows: &[AttackRow]) -> String {
    use ecnq_charts::table::aligned;
    let mut out = aligned(&HEADS.map(str::to_owned), &WIDTHS) + "\n";
    for r in rows {
        out += &(aligned(&cells(r), &WIDTHS) + "\n");
    }
    for note in notes(rows) {
        out += &(note + "\n");
    }
    out
}

/// The table as Markdown, the notes under it as paragraphs.
pub fn table_markdown(rows: &[AttackRow]) -> String {
    let cells: Vec<Vec<String>> = rows.iter().map(|r| cells(r).to_vec()).collect();
    let mut out = ecnq_charts::table::markdown(&HEADS, &cells);
    for note in notes(rows) {
        out += &format!("\n{note}\n");
    }
    out
}

/// The goal and what missed it, what the relay's session table did, and
/// host steal.
fn notes(rows: &[AttackRow]) -> Vec<String> {
    let missed: Vec<String> = (rows.iter())
        .filter(|r| !r.meets_goal())
        .map(AttackRow::name)
        .collect();
    let mut notes = vec![format!(
        "kept: the long flow's goodput over what the flood leaves (the link less the flood's \
         rate); goal (issue 54): at least {:.0} % for erc; {}",
        GOAL * 100.0,
        if missed.is_empty() {
            "met".to_owned()
        } else {
            format!("missed by {}", missed.join(", "))
        }
    )];
    for r in rows {
        if r.sessions_refused + r.sessions_evicted > 0 {
            notes.push(format!(
                "{}: the relay refused {} datagrams a session and evicted {} sessions",
                r.name(),
                r.sessions_refused,
                r.sessions_evicted
            ));
        }
    }
    notes.extend(
        rows.iter()
            .filter_map(|r| steal_note(&r.name(), r.host_steal)),
    );
    notes
}

/// Runs the table through `link` (its data path of `link_bps`) with
/// floods of `percents` for `seconds` each; prints it, and writes it as
/// Markdown to `markdown` if given.
pub async fn run(
    link: &RelayLink,
    link_bps: f64,
    percents: &[f64],
    seconds: f64,
    markdown: Option<&Path>,
) -> Result<(), String> {
    let bed = LoopbackBed::ecnq().await?;
    let spec = &link.to_server;
    let acks = match link.to_client == *spec {
        true => String::new(),
        false => format!("; ACKs {}", link.to_client),
    };
    println!(
        "ecnq-perf demo --fake-newcomers: a long flow through a {} Mbit/s bottleneck ({spec}{acks}); \
         from {WARM_UP} s on, \
         {seconds} s of fake newcomers ({PACKETS} packets of {SIZE} bytes from each new source port)",
        link_bps / 1e6
    );
    let mut rows = Vec::new();
    for attack in attacks(percents) {
        eprint!(
            "  running {} beside a {} % flood …",
            attack.cc, attack.percent
        );
        let result = bed
            .run_configured(
                &attack.flows(seconds),
                std::slice::from_ref(link),
                &|_, _| {},
                attack.flood(link_bps, seconds).as_ref(),
            )
            .await?;
        let row = attack.row(&result, link_bps, seconds);
        eprintln!(
            " {:.1} Mbit/s, {:.1} % kept",
            row.long_mbit,
            row.kept * 100.0
        );
        rows.push(row);
    }
    println!();
    print!("{}", table_text(&rows));
    match markdown {
        Some(path) => std::fs::write(path, table_markdown(&rows))
            .map_err(|e| format!("cannot write {}: {e}", path.display())),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runs_are_a_baseline_then_each_share_for_each_controller() {
        let runs = attacks(&[2.0, 10.0]);
        let percents: Vec<f64> = runs.iter().map(|a| a.percent).collect();
        assert_eq!(percents, [0.0, 0.0, 2.0, 2.0, 10.0, 10.0]);
        assert_eq!(runs[2].cc, ERC);
        assert_eq!(runs[3].cc, CongestionControl::Cubic);
        assert_eq!(runs[0].flood(50e6, 10.0), None);
        let flood = runs[2].flood(50e6, 10.0).unwrap();
        assert_eq!(
            (flood.spec.rate, flood.offset, flood.seconds),
            (1e6, WARM_UP, 10.0)
        );
        assert_eq!(runs[2].flows(10.0)[0].seconds, WARM_UP + 10.0);
    }

    #[test]
    fn a_share_is_a_percentage_above_0_and_at_most_half() {
        assert_eq!(percent_arg("2.5"), Ok(2.5));
        assert_eq!(percent_arg("10%"), Ok(10.0));
        for bad in ["0", "-2", "51", "NaN", "two"] {
            assert!(percent_arg(bad).is_err(), "{bad}");
        }
    }

    /// The text and the Markdown table carry the same cells, and the notes
    /// name the run that missed the goal and what the relay refused.
    #[test]
    fn the_table_names_what_missed_the_goal() {
        let row = |cc: &str, long_mbit: f64, refused| AttackRow {
            percent: 2.0,
            cc: cc.into(),
            long_mbit,
            flood_mbit: 1.0,
            kept: long_mbit / 49.0,
            fake_flows: 347,
            sessions_refused: refused,
            sessions_evicted: 0,
            host_steal: None,
        };
        let rows = [row("erc", 28.9, 0), row("cubic", 42.0, 5)];
        let text = table_text(&rows);
        assert!(
            text.contains("2 %           erc    28.9        1.00  59.0 %         347\n"),
            "{text}"
        );
        assert!(text.contains("missed by erc beside 2 %\n"), "{text}");
        assert!(text.contains(
            "cubic beside 2 %: the relay refused 5 datagrams a session and evicted 0 sessions"
        ));
        let markdown = table_markdown(&rows);
        assert!(
            markdown.contains("| 2 % | cubic | 42.0 | 1.00 | 85.7 % | 347 |"),
            "{markdown}"
        );
        assert!(rows[1].meets_goal() && !rows[0].meets_goal());
    }
}

//! Scenario files (TOML): links, flow groups and finite-flow sources, with
//! the papers' parameters. A scenario names its default scheme; any run may
//! override it, and `--set key=value` changes any field (a dotted path such
//! as `links.0.rate` or `flows.1.count`).
//!
//! Errors name the file, the line and the field. [`file`](mod@file) is the format,
//! [`quantity`] its quantities, [`edits`] the `--set` edits, [`topology`] the
//! links and routes a scenario builds, and `build` turns it into a
//! [`crate::engine::SimConfig`].

mod build;
pub mod edits;
pub mod file;
pub mod quantity;
pub mod topology;

use std::path::{Path, PathBuf};

pub use edits::apply_edits;
pub use file::{
    FlowGroup, LinkEntry, Marking, NewcomerFloodEntry, OneOrMany, ParetoEntry, ScenarioFile,
};

use ecnq::router::bottleneck::Discipline;

use crate::engine::{FeedbackPath, Nanos, SECOND};
use crate::protocol::{Case, Protocol};

/// Longest simulated time a scenario may ask for: a day.
pub const MAX_DURATION: Nanos = 86_400 * SECOND;
/// The shortest time-series sampling period.
const MIN_SAMPLE: Nanos = 1_000_000;
/// Memory a scenario's flows and time series may take.
pub const MEMORY_BUDGET: u64 = 4 << 30;
/// A flow's state in the simulator, bytes (its specification, law, sender
/// and receiver): about 500 measured, rounded up.
const BYTES_PER_FLOW: u64 = 1024;
/// One flow's or link's sample of the time series, bytes (at least
/// `size_of` of [`crate::engine::FlowSample`]).
const BYTES_PER_SAMPLE: u64 = 64;

/// A loaded scenario: its name, source text and parsed contents.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// File stem.
    pub name: String,
    /// Where it came from (for messages).
    pub origin: String,
    /// The TOML text (after overrides).
    pub source: String,
    /// The parsed file.
    pub file: ScenarioFile,
}

/// Run-time overrides from the command line.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// Replaces the scenario's scheme.
    pub scheme: Option<Protocol>,
    /// Replaces the seed.
    pub seed: Option<u64>,
    /// Replaces the duration.
    pub duration: Option<Nanos>,
    /// Replaces the feedback path.
    pub feedback: Option<FeedbackPath>,
    /// Replaces every link's queue discipline (`compare`'s `cubic@fifo`).
    pub queue: Option<Discipline>,
}

impl Overrides {
    /// These overrides for one `compare` or `sweep` case: its scheme, and
    /// its queue where it names one.
    pub fn for_case(&self, case: Case) -> Overrides {
        Overrides {
            scheme: Some(case.protocol),
            queue: case.queue.or(self.queue),
            ..self.clone()
        }
    }
}

/// Where the public delivery traces are: `ECNQ_TRACES`, else
/// `../shared/traces` beside this source tree.
pub fn trace_dir() -> PathBuf {
    std::env::var_os("ECNQ_TRACES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces"))
}

fn line_of(source: &str, offset: usize) -> usize {
    source[..offset.min(source.len())].matches('\n').count() + 1
}

impl Scenario {
    /// Reads and parses a scenario file, applying `set` edits first.
    pub fn load(path: &Path, set: &[String]) -> Result<Scenario, String> {
        let origin = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("{origin}: cannot read: {e}"))?;
        let name = path
            .file_stem()
            .map_or_else(|| origin.clone(), |s| s.to_string_lossy().into_owned());
        Scenario::parse(&name, &origin, &text, set)
    }

    /// Parses scenario text; `origin` names it in error messages.
    pub fn parse(name: &str, origin: &str, text: &str, set: &[String]) -> Result<Scenario, String> {
        let source = apply_edits(text, set).map_err(|e| format!("{origin}: {e}"))?;
        let file: ScenarioFile = toml::from_str(&source).map_err(|e| {
            let line = e.span().map(|s| line_of(&source, s.start));
            let field = line
                .and_then(|l| source.lines().nth(l - 1))
                .and_then(|l| l.split_once('='))
                .map(|(key, _)| format!("field `{}`: ", key.trim()))
                .unwrap_or_default();
            let at = line.map(|l| format!(":{l}")).unwrap_or_default();
            format!("{origin}{at}: {field}{}", e.message().trim())
        })?;
        Ok(Scenario {
            name: name.to_owned(),
            origin: origin.to_owned(),
            source,
            file,
        })
    }

    fn error_at(
        &self,
        span: std::ops::Range<usize>,
        what: &str,
        msg: impl std::fmt::Display,
    ) -> String {
        format!(
            "{}:{}: {what}: {msg}",
            self.origin,
            line_of(&self.source, span.start)
        )
    }

    /// Where a link's `trace` file is: as written when absolute or found
    /// from the scenario file's directory, else in [`trace_dir`].
    pub fn trace_path(&self, file: &str) -> PathBuf {
        let beside = Path::new(&self.origin)
            .parent()
            .unwrap_or(Path::new(""))
            .join(file);
        if beside.is_file() {
            beside
        } else {
            trace_dir().join(file)
        }
    }

    /// The trace files its links name that are not there: a scenario over
    /// the public traces runs where they are, and tests skip it elsewhere.
    pub fn missing_traces(&self) -> Vec<PathBuf> {
        let links = self.file.links.iter().map(|l| l.get_ref());
        links
            .filter_map(|l| l.trace.as_deref())
            .map(|t| self.trace_path(t))
            .filter(|p| !p.is_file())
            .collect()
    }

    /// The protocol the scenario's main flows run under these overrides.
    pub fn scheme(&self, o: &Overrides) -> Protocol {
        o.scheme.unwrap_or(self.file.scheme)
    }

    /// Checks that something will send: a run with no flows would print
    /// an empty table, which reads as a broken simulator rather than as a
    /// `count = 0` left in the file or on the command line.
    fn check_traffic(&self) -> Result<(), String> {
        let f = &self.file;
        let sources = f.pareto.len() + f.newcomer_flood.len();
        if sources == 0 && f.flows.iter().all(|g| g.get_ref().count == 0) {
            return Err(format!(
                "{}: no traffic: every [[flows]] group has count 0 and there is no [[pareto]] source",
                self.origin
            ));
        }
        Ok(())
    }

    /// The end of the arrival period under these overrides, if the file
    /// sets one: after `measure_from`, and at most the run's end.
    pub fn arrivals(&self, o: &Overrides) -> Result<Option<Nanos>, String> {
        let Some(until) = self.file.arrivals else {
            return Ok(None);
        };
        let from = self.file.measure_from.map_or(0, |t| t.0);
        let duration = o.duration.unwrap_or(self.file.duration.0);
        if until.0 <= from || until.0 > duration {
            return Err(format!(
                "{}: arrivals: must be after measure_from and at most the duration",
                self.origin
            ));
        }
        Ok(Some(until.0))
    }

    /// The time-series sampling period: 100 ms unless the file says, and at
    /// least 1 ms.
    pub(super) fn sample(&self) -> Result<Nanos, String> {
        match self.file.sample {
            None => Ok(SECOND / 10),
            Some(t) if t.0 >= MIN_SAMPLE => Ok(t.0),
            Some(t) => Err(format!(
                "{}: sample: must be at least 1 ms, got {} ms",
                self.origin,
                t.0 as f64 / 1e6
            )),
        }
    }

    /// Checks what the scenario would cost before anything is allocated:
    /// a simulated duration of at most [`MAX_DURATION`], and flows and
    /// samples within [`MEMORY_BUDGET`].
    fn check_cost(&self, duration: Nanos) -> Result<(), String> {
        if duration == 0 || duration > MAX_DURATION {
            return Err(format!(
                "{}: duration: must be more than 0 s and at most {} s, got {} s",
                self.origin,
                MAX_DURATION / SECOND,
                duration as f64 / 1e9
            ));
        }
        let f = &self.file;
        // A flood's fake flows are one flow to the simulator.
        let flows: u64 = f
            .flows
            .iter()
            .map(|g| u64::from(g.get_ref().count))
            .sum::<u64>()
            + f.newcomer_flood.len() as u64;
        let sample = self.sample()?;
        let series = (flows + f.links.len() as u64) * (duration / sample) * BYTES_PER_SAMPLE;
        let need = flows.saturating_mul(BYTES_PER_FLOW).saturating_add(series);
        if need > MEMORY_BUDGET {
            return Err(format!(
                "{}: {flows} flows over {} s sampled every {} ms need about {} MB, more than the {} MB allowed (fewer flows, a shorter duration or a longer sample)",
                self.origin,
                duration / SECOND,
                sample / 1_000_000,
                need >> 20,
                MEMORY_BUDGET >> 20
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::quantity::{Buffer, Bytes, Rate, Time};
    use super::*;

    const TEXT: &str = r#"
title = "t"
scheme = "vcp"
duration = "10s"
[[links]]
name = "L"
rate = "10Mbit"
delay = "5ms"
buffer = "20pkt"
[[flows]]
count = 2
rtt = ["20ms", "40ms"]
"#;

    #[test]
    fn edits_change_fields_and_keep_lines() {
        let set = [
            "links.0.rate=4Mbit".to_owned(),
            "flows.0.count=3".to_owned(),
            "flows.0.rtt.1=60ms".to_owned(),
            "seed=9".to_owned(),
        ];
        let s = Scenario::parse("t", "t", TEXT, &set).unwrap();
        assert_eq!(s.file.links[0].get_ref().rate, Some(Rate(4e6)));
        assert_eq!(s.file.flows[0].get_ref().count, 3);
        assert_eq!(s.file.seed, 9);
        let config = s.build(&Overrides::default()).unwrap();
        assert_eq!(config.flows.len(), 3);
        // Flow 1 got the edited 60 ms RTT: 10 ms on the link, 50 ms of access delay.
        let rtt: Nanos = config.flows[1]
            .path
            .iter()
            .chain(&config.flows[1].ack_path)
            .map(|&l| config.links[l].delay)
            .sum();
        assert_eq!(rtt, 60_000_000);
        // Editing an existing key keeps every line where it was.
        let edited = apply_edits(TEXT, &set[..3]).unwrap();
        assert_eq!(line_of(&edited, edited.find("rate").unwrap()), 7);
        assert_eq!(edited.lines().count(), TEXT.lines().count());
        let err = apply_edits(TEXT, &["links.3.rate=1Mbit".to_owned()]).unwrap_err();
        assert!(err.contains("no field `links.3.rate`"), "{err}");
    }

    #[test]
    fn spans_must_end_after_they_start() {
        let with = |line: &str, after: &str| {
            let text = TEXT.replacen(after, &format!("{after}\n{line}"), 1);
            Scenario::parse("t", "t", &text, &[])?.build(&Overrides::default())
        };
        let err = with("pause = [\"12s\", \"10s\"]", "count = 2").unwrap_err();
        assert!(
            err.contains("flows[0].pause") && err.contains("must end after"),
            "{err}"
        );
        let err = with("reverse_blackout = [\"8s\", \"8s\"]", "buffer = \"20pkt\"").unwrap_err();
        assert!(err.contains("reverse_blackout"), "{err}");
        let config = with("pause = [\"10s\", \"12s\"]", "count = 2").unwrap();
        assert_eq!(
            config.flows[0].pause,
            Some((10_000_000_000, 12_000_000_000))
        );
    }

    #[test]
    fn a_sample_under_a_millisecond_is_refused() {
        let set = |v: &str| vec![format!("sample={v}")];
        let s = Scenario::parse("t", "t", TEXT, &set("500us")).unwrap();
        let err = s.build(&Overrides::default()).unwrap_err();
        assert!(
            err.contains("sample: must be at least 1 ms, got 0.5 ms"),
            "{err}"
        );
        let s = Scenario::parse("t", "t", TEXT, &set("1ms")).unwrap();
        assert_eq!(s.build(&Overrides::default()).unwrap().sample, 1_000_000);
    }

    #[test]
    fn an_arrival_period_ends_after_measure_from_and_within_the_run() {
        let arrivals = |set: &[&str], o: &Overrides| {
            let set: Vec<String> = set.iter().map(|s| (*s).to_owned()).collect();
            Scenario::parse("t", "t", TEXT, &set).unwrap().arrivals(o)
        };
        let o = Overrides::default();
        assert_eq!(arrivals(&[], &o), Ok(None));
        assert_eq!(arrivals(&["arrivals=2s"], &o), Ok(Some(2_000_000_000)));
        for set in [&["arrivals=11s"][..], &["arrivals=2s", "measure_from=2s"]] {
            let err = arrivals(set, &o).unwrap_err();
            assert!(
                err.contains("arrivals: must be after measure_from"),
                "{err}"
            );
        }
        let shorter = Overrides {
            duration: Some(1_000_000_000),
            ..Overrides::default()
        };
        assert!(arrivals(&["arrivals=2s"], &shorter).is_err());
    }

    #[test]
    fn overrides_replace_scheme_seed_and_duration() {
        let s = Scenario::parse("t", "t", TEXT, &[]).unwrap();
        let o = Overrides {
            scheme: Some("cubic".parse().unwrap()),
            seed: Some(4),
            duration: Some(1_000_000_000),
            feedback: None,
            queue: Some(Discipline::Fifo),
        };
        let config = s.build(&o).unwrap();
        assert_eq!((config.seed, config.duration), (4, 1_000_000_000));
        assert!(config.flows.iter().all(|f| f.protocol.name() == "cubic"));
        assert!(config
            .links
            .iter()
            .all(|l| l.discipline == Discipline::Fifo));
    }

    #[test]
    fn costly_scenarios_fail_before_allocating() {
        let build = |set: &[&str]| {
            let set: Vec<String> = set.iter().map(|s| (*s).to_owned()).collect();
            Scenario::parse("t", "t", TEXT, &set)?.build(&Overrides::default())
        };
        let err = build(&["flows.0.count=10000000"]).unwrap_err();
        assert!(
            err.contains("10000000 flows") && err.contains("MB allowed"),
            "{err}"
        );
        let err = build(&["duration=1e30s"]).unwrap_err();
        assert!(
            err.contains("`duration`: time `1e30s` is too long"),
            "{err}"
        );
        let err = build(&["duration=2d"]).unwrap_err();
        assert!(err.contains("unknown time unit"), "{err}");
        let err = build(&["duration=100000s"]).unwrap_err();
        assert!(err.contains("duration: must be"), "{err}");
        let err = build(&["duration=0s"]).unwrap_err();
        assert!(err.contains("duration: must be"), "{err}");
        assert!(build(&["flows.0.count=1000", "duration=600s"]).is_ok());
        let err = build(&["flows.0.count=0"]).unwrap_err();
        assert!(err.contains("no traffic"), "{err}");
    }

    #[test]
    fn newcomer_floods_are_checked_and_edited_as_other_tables() {
        let flood = "[[newcomer_flood]]\nscheme = \"erc\"\nrate = \"1Mbit\"\npackets = 12\nsize = \"300B\"\nrtt = \"40ms\"\nstart = \"5s\"\n";
        let build = |set: &[&str]| {
            let set: Vec<String> = set.iter().map(|s| (*s).to_owned()).collect();
            let text = format!("{TEXT}{flood}");
            Scenario::parse("t", "t", &text, &set)?.build(&Overrides::default())
        };
        let config = build(&["newcomer_flood.0.rate=2.5Mbit"]).unwrap();
        let f = &config.floods[0];
        assert_eq!((f.rate, f.packets, f.size, f.spread), (2.5e6, 12, 300, 0));
        assert_eq!((f.flow.start, f.until), (5_000_000_000, Nanos::MAX));
        assert_eq!(f.flow.group, "newcomer_flood0");
        assert_eq!(f.flow.protocol.name(), "erc");
        for (set, field) in [
            (
                "newcomer_flood.0.packets=0",
                "newcomer_flood[0].packets: must be at least 1",
            ),
            (
                "newcomer_flood.0.size=0B",
                "newcomer_flood[0].size: must be between",
            ),
            (
                "newcomer_flood.0.stop=5s",
                "newcomer_flood[0].stop: must be after start",
            ),
            ("newcomer_flood.0.rate=0Mbit", "field `rate`"),
            ("newcomer_flood.0.rate=-1Mbit", "field `rate`"),
            ("newcomer_flood.0.packets=-1", "field `packets`"),
        ] {
            let err = build(&[set]).unwrap_err();
            assert!(err.contains(field), "{set}: {err}");
        }
        // A flood is traffic of its own.
        let config = build(&["flows.0.count=0"]).unwrap();
        assert!(config.flows.is_empty());
    }

    proptest::proptest! {
        /// Quantities parse or fail, never panic, whatever the text.
        #[test]
        fn quantities_never_panic(text in "\\PC{0,24}", number in proptest::num::f64::ANY, unit in "(ns|us|ms|s|Mbit|KB|pkt|bdp|GiB|)") {
            for t in [text.clone(), format!("{number}{unit}"), format!("{number:e}{unit}")] {
                let _ = t.parse::<Time>();
                let _ = t.parse::<Rate>();
                let _ = t.parse::<Bytes>();
                let _ = t.parse::<Buffer>();
            }
        }

        /// Any edit of the scenario's fields gives a scenario or an error.
        #[test]
        fn edits_never_panic(key in "(duration|seed|flows.0.count|flows.0.rtt.0|links.0.rate|links.0.buffer|links.0.loss|mss|sample)", value in "[0-9a-zA-Z.e+-]{0,12}") {
            let set = [format!("{key}={value}")];
            if let Ok(s) = Scenario::parse("t", "t", TEXT, &set) {
                let _ = s.build(&Overrides::default());
            }
        }
    }
}

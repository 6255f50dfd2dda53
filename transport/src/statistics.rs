//! The figures every run is judged by, one definition for the simulator,
//! `ecnq-perf` and the tests: Jain's index, percentiles by nearest rank
//! (of samples or of a histogram), per-packet sojourn histograms and the
//! EVCP paper's convergence time.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Jain's fairness index (Σx)² / (n·Σx²): 1 when all shares are equal, 1/n
/// when one flow has everything. Empty or all-zero input gives 1 (nothing is
/// unfair about nothing).
pub fn jain_index(shares: &[f64]) -> f64 {
    let sum: f64 = shares.iter().sum();
    let squares: f64 = shares.iter().map(|x| x * x).sum();
    if shares.is_empty() || squares == 0.0 {
        return 1.0;
    }
    sum * sum / (shares.len() as f64 * squares)
}

/// The nearest rank (1-based) of the `p`-th percentile (0–100) among `n`
/// values: the smallest rank with at least p % of the values at or below it.
fn nearest_rank(n: u64, p: f64) -> u64 {
    (((p.clamp(0.0, 100.0) / 100.0) * n as f64).ceil() as u64).clamp(1, n.max(1))
}

/// The `p`-th percentile (0–100) by nearest rank, or `None` for no samples.
/// NaN samples are ignored.
pub fn percentile(samples: &[f64], p: f64) -> Option<f64> {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let rank = nearest_rank(sorted.len() as u64, p) as usize;
    Some(sorted[rank - 1])
}

/// The `p`-th percentile (0–100) by nearest rank of values counted in a
/// histogram (`histogram[v]` values equal `v`), or `None` if it is empty.
pub fn histogram_percentile(histogram: &[u64], p: f64) -> Option<usize> {
    let total: u64 = histogram.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = nearest_rank(total, p);
    let mut seen = 0;
    histogram.iter().position(|&n| {
        seen += n;
        seen >= rank
    })
}

/// Sojourns (queueing delays) of departed packets, counted in
/// [`SojournHistogram::BUCKET`]-wide buckets: bucket `b` holds the sojourns
/// in `[b, b + 1)` buckets' width, the last one ([`SojournHistogram::BUCKETS`]
/// − 1) everything longer. A percentile reads as the upper edge of the
/// bucket the rank falls in, so it never understates a wait.
///
/// The bottleneck ([`crate::router::bottleneck::Bottleneck::sojourns`])
/// keeps one per queue class, cumulative; [`SojournHistogram::since`]
/// gives the packets of a window from two of them. As text
/// ([`fmt::Display`] and [`FromStr`]) it is the non-zero buckets as a JSON
/// array of `[bucket,count]` pairs, e.g. `[[0,12],[3,1]]`.
///
/// Linear buckets held up to the last one used, not an HdrHistogram: its
/// buckets are exact at every length (an HdrHistogram of three
/// significant digits widens them past 2048), which the stats lines'
/// bucket numbers and the simulator's snapshot figures rely on, and a
/// queue that stays empty or short, the one ecnq is built for, costs a
/// few bytes where an HdrHistogram allocates its first 2048 counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SojournHistogram {
    /// Count per bucket; no trailing zeros.
    counts: Vec<u64>,
}

impl SojournHistogram {
    /// Width of a bucket: 0.1 ms.
    pub const BUCKET: Duration = Duration::from_micros(100);

    /// Most buckets: 10 s of sojourn.
    pub const BUCKETS: usize = 100_000;

    /// An empty histogram.
    pub fn new() -> SojournHistogram {
        SojournHistogram::default()
    }

    /// The bucket a sojourn falls in.
    pub fn bucket_of(sojourn: Duration) -> usize {
        (sojourn.as_nanos() / Self::BUCKET.as_nanos()).min(Self::BUCKETS as u128 - 1) as usize
    }

    /// Counts one packet that waited `sojourn`.
    pub fn record(&mut self, sojourn: Duration) {
        self.add(Self::bucket_of(sojourn), 1);
    }

    fn add(&mut self, bucket: usize, count: u64) {
        if count == 0 {
            return;
        }
        if self.counts.len() <= bucket {
            self.counts.resize(bucket + 1, 0);
        }
        self.counts[bucket] += count;
    }

    /// Packets counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Whether no packet is counted.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// The count of each bucket, up to the last non-empty one.
    pub fn buckets(&self) -> &[u64] {
        &self.counts
    }

    /// The `p`-th percentile (0–100) by nearest rank, as the upper edge of
    /// its bucket; `None` if empty.
    pub fn percentile(&self, p: f64) -> Option<Duration> {
        let bucket = histogram_percentile(&self.counts, p)?;
        Some(Self::BUCKET * (bucket as u32 + 1))
    }

    /// [`SojournHistogram::percentile`] in milliseconds.
    pub fn percentile_ms(&self, p: f64) -> Option<f64> {
        // Whole nanoseconds over 1e6 round once; `as_secs_f64() * 1e3` twice.
        self.percentile(p).map(|edge| edge.as_nanos() as f64 / 1e6)
    }

    /// The packets counted here but not in `earlier`, an earlier state of
    /// the same cumulative histogram: the window between the two. A bucket
    /// `earlier` has more in (the counter was restarted) counts none.
    pub fn since(&self, earlier: &SojournHistogram) -> SojournHistogram {
        let mut counts: Vec<u64> = (self.counts.iter().enumerate())
            .map(|(b, &n)| n.saturating_sub(earlier.counts.get(b).copied().unwrap_or(0)))
            .collect();
        while counts.last() == Some(&0) {
            counts.pop();
        }
        SojournHistogram { counts }
    }
}

impl std::ops::AddAssign<&SojournHistogram> for SojournHistogram {
    /// Counts `other`'s packets here too: the sojourns of several queues
    /// as one.
    fn add_assign(&mut self, other: &SojournHistogram) {
        for (bucket, &count) in other.counts.iter().enumerate() {
            self.add(bucket, count);
        }
    }
}

impl fmt::Display for SojournHistogram {
    /// The non-zero buckets as `[[bucket,count],...]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        let mut sep = "";
        for (bucket, &count) in self.counts.iter().enumerate() {
            if count > 0 {
                write!(f, "{sep}[{bucket},{count}]")?;
                sep = ",";
            }
        }
        f.write_str("]")
    }
}

impl FromStr for SojournHistogram {
    type Err = String;

    /// The [`fmt::Display`] form back (whitespace allowed; a bucket may
    /// repeat, its counts add up).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("sojourn histogram `{s}`: expected [[bucket,count],...]");
        let compact: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        let inner = (compact.strip_prefix('['))
            .and_then(|rest| rest.strip_suffix(']'))
            .ok_or_else(bad)?;
        let mut histogram = SojournHistogram::new();
        if inner.is_empty() {
            return Ok(histogram);
        }
        let pairs = (inner.strip_prefix('['))
            .and_then(|rest| rest.strip_suffix(']'))
            .ok_or_else(bad)?;
        for pair in pairs.split("],[") {
            let (bucket, count) = pair.split_once(',').ok_or_else(bad)?;
            let bucket: usize = bucket.parse().map_err(|_| bad())?;
            let count: u64 = count.parse().map_err(|_| bad())?;
            if bucket >= Self::BUCKETS {
                return Err(format!(
                    "sojourn histogram: bucket {bucket} beyond the last ({})",
                    Self::BUCKETS - 1
                ));
            }
            histogram.add(bucket, count);
        }
        Ok(histogram)
    }
}

/// Per-interval throughput samples of one flow.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSeries {
    /// When the flow started, in seconds from the start of the run.
    pub start: f64,
    /// `(time, bits per second)` at the end of each interval.
    pub samples: Vec<(f64, f64)>,
}

/// Convergence time of `flow` as the EVCP paper defines it (§"Simulation
/// environment"): the time from its start until its measured throughput
/// first reaches its fair share — here the aggregate throughput of all
/// flows active at that moment divided by their number, since the link's
/// real capacity after overheads is what they share. Flows sample on their
/// own clocks, so each other flow counts with its sample nearest in time
/// (within `window` seconds; a flow with none there is not active). Samples
/// where it is alone do not count. `None` if it never does.
pub fn convergence_time(
    flows: &[FlowSeries],
    flow: usize,
    tolerance: f64,
    window: f64,
) -> Option<f64> {
    let target = flows.get(flow)?;
    for &(t, rate) in &target.samples {
        let active: Vec<f64> = flows
            .iter()
            .filter_map(|f| {
                f.samples
                    .iter()
                    .filter(|s| (s.0 - t).abs() <= window)
                    .min_by(|a, b| (a.0 - t).abs().total_cmp(&(b.0 - t).abs()))
                    .map(|s| s.1)
            })
            .collect();
        // Alone on the link (the others have ended) there is no share to reach.
        if active.len() < 2 {
            continue;
        }
        let fair = active.iter().sum::<f64>() / active.len() as f64;
        if rate >= fair * (1.0 - tolerance) {
            return Some(t - target.start);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&xs, 50.0), Some(50.0));
        assert_eq!(percentile(&xs, 99.0), Some(99.0));
        assert_eq!(percentile(&xs, 100.0), Some(100.0));
        assert_eq!(percentile(&xs, 0.0), Some(1.0));
        assert_eq!(percentile(&[f64::NAN, 2.0], 50.0), Some(2.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn jain_extremes() {
        assert_eq!(jain_index(&[5.0, 5.0, 5.0]), 1.0);
        assert!((jain_index(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        assert!((jain_index(&[3.0, 1.0]) - 0.8).abs() < 1e-12);
        assert_eq!(jain_index(&[]), 1.0);
        assert_eq!(jain_index(&[0.0, 0.0]), 1.0);
    }

    #[test]
    fn histogram_percentiles_match_the_samples() {
        // Values 0, 0, 5, 5, 5, 40 as a histogram and as samples.
        let mut h = vec![0u64; 41];
        h[0] = 2;
        h[5] = 3;
        h[40] = 1;
        let samples = [0.0, 0.0, 5.0, 5.0, 5.0, 40.0];
        for p in [0.0, 10.0, 33.0, 34.0, 50.0, 83.0, 84.0, 99.0, 100.0] {
            assert_eq!(
                histogram_percentile(&h, p).map(|v| v as f64),
                percentile(&samples, p),
                "p{p}"
            );
        }
        assert_eq!(histogram_percentile(&h, 50.0), Some(5));
        assert_eq!(histogram_percentile(&h, 100.0), Some(40));
        assert_eq!(histogram_percentile(&[0, 0], 50.0), None);
    }

    /// A histogram of sojourns given in 0.1 ms units.
    fn sojourns(tenths: &[u64]) -> SojournHistogram {
        let mut h = SojournHistogram::new();
        for &t in tenths {
            h.record(Duration::from_micros(100 * t));
        }
        h
    }

    #[test]
    fn sojourns_fall_in_tenth_of_a_millisecond_buckets() {
        let mut h = SojournHistogram::new();
        assert_eq!(h.percentile(99.0), None);
        assert_eq!(h.percentile_ms(99.0), None);
        h.record(Duration::ZERO);
        h.record(Duration::from_nanos(99_999));
        h.record(Duration::from_micros(100));
        h.record(Duration::from_micros(2_350));
        assert_eq!(h.buckets()[..2], [2, 1]);
        assert_eq!(h.buckets().len(), 24);
        assert_eq!(h.count(), 4);
        // The upper edge of the bucket the rank falls in.
        assert_eq!(h.percentile(50.0), Some(Duration::from_micros(100)));
        assert_eq!(h.percentile(75.0), Some(Duration::from_micros(200)));
        assert_eq!(h.percentile(100.0), Some(Duration::from_micros(2_400)));
        assert_eq!(h.percentile_ms(100.0), Some(2.4));
        // Everything beyond 10 s is in the last bucket.
        h.record(Duration::from_secs(3600));
        assert_eq!(h.buckets().len(), SojournHistogram::BUCKETS);
        assert_eq!(h.percentile(100.0), Some(Duration::from_secs(10)));
    }

    #[test]
    fn sojourn_percentiles_are_by_nearest_rank_of_the_packets() {
        // 98 packets at 0.05 ms, one at 1.05 ms and one at 5.05 ms: p98 is
        // the short wait, p99 the 1 ms one, p100 the 5 ms one.
        let mut h = SojournHistogram::new();
        for _ in 0..98 {
            h.record(Duration::from_micros(50));
        }
        h.record(Duration::from_micros(1_050));
        h.record(Duration::from_micros(5_050));
        assert_eq!(h.percentile_ms(98.0), Some(0.1));
        assert_eq!(h.percentile_ms(99.0), Some(1.1));
        assert_eq!(h.percentile_ms(100.0), Some(5.1));
    }

    #[test]
    fn a_window_is_the_later_histogram_minus_the_earlier() {
        let earlier = sojourns(&[1, 1, 50]);
        let later = sojourns(&[1, 1, 50, 1, 3, 3]);
        let window = later.since(&earlier);
        assert_eq!(window, sojourns(&[1, 3, 3]));
        assert_eq!(window.count(), 3);
        // The long wait was before the window: p100 is 0.4 ms, not 5.1.
        assert_eq!(window.percentile_ms(100.0), Some(0.4));
        assert_eq!(later.since(&later), SojournHistogram::new());
        assert_eq!(later.since(&SojournHistogram::new()), later);
        // Trailing buckets that cancel leave no trailing zeros.
        assert_eq!(later.since(&earlier).buckets().len(), 4);
        // A restarted counter (earlier has more) counts nothing there.
        let restarted = sojourns(&[1, 2]);
        assert_eq!(restarted.since(&earlier), sojourns(&[2]));
    }

    #[test]
    fn histograms_add_up_bucket_by_bucket() {
        let mut h = sojourns(&[1, 50]);
        h += &sojourns(&[1, 3]);
        assert_eq!(h, sojourns(&[1, 1, 3, 50]));
        h += &SojournHistogram::new();
        assert_eq!(h.count(), 4);
    }

    #[test]
    fn sojourn_histograms_print_their_non_zero_buckets_and_parse_back() {
        let h = sojourns(&[0, 0, 3, 3, 3, 120]);
        assert_eq!(h.to_string(), "[[0,2],[3,3],[120,1]]");
        assert_eq!("[[0,2],[3,3],[120,1]]".parse(), Ok(h.clone()));
        assert_eq!(" [ [0, 2], [3,3] ,[120,1]]\n".parse(), Ok(h));
        // Repeated buckets add up; zero counts are nothing.
        assert_eq!("[[3,1],[3,2],[7,0]]".parse(), Ok(sojourns(&[3, 3, 3])));
        let empty = SojournHistogram::new();
        assert_eq!(empty.to_string(), "[]");
        assert_eq!("[]".parse(), Ok(empty));
        for bad in [
            "", "[", "[1,2]", "[[1,2],]", "[[1]]", "[[x,1]]", "[[1,-1]]", "{}",
        ] {
            assert!(bad.parse::<SojournHistogram>().is_err(), "{bad:?}");
        }
        assert!("[[100000,1]]".parse::<SojournHistogram>().is_err());
        assert!("[[99999,1]]".parse::<SojournHistogram>().is_ok());
    }

    #[test]
    fn convergence_when_the_late_flow_reaches_its_share() {
        let early = FlowSeries {
            start: 0.0,
            samples: vec![(1.0, 10.0), (2.0, 9.0), (3.0, 6.0), (4.0, 5.0)],
        };
        // Sampled on its own clock, a little after the early flow.
        let late = FlowSeries {
            start: 1.5,
            samples: vec![(2.1, 1.0), (3.1, 4.0), (4.1, 5.0)],
        };
        let flows = [early, late];
        // At t ≈ 3 the fair share is 5 and the late flow has 4: within 20 %.
        assert!((convergence_time(&flows, 1, 0.2, 0.5).unwrap() - 1.6).abs() < 1e-9);
        // Exactly: only at t ≈ 4.
        assert!((convergence_time(&flows, 1, 0.0, 0.5).unwrap() - 2.6).abs() < 1e-9);
        // Its first sample (1 against a fair 5) is not convergence.
        assert!(convergence_time(&flows, 1, 0.2, 0.5).unwrap() > 0.6);
        assert_eq!(convergence_time(&flows, 2, 0.0, 0.5), None);
        // Once the early flow has ended, the late one is alone: no convergence.
        let alone = [
            flows[0].clone(),
            FlowSeries {
                start: 1.5,
                samples: vec![(2.1, 1.0), (5.1, 9.0)],
            },
        ];
        assert_eq!(convergence_time(&alone, 1, 0.2, 0.5), None);
    }
}

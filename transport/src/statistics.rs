//! The figures every run is judged by, one definition for the simulator,
//! `ecnq-perf` and the tests: Jain's index, percentiles by nearest rank
//! (of samples or of a histogram) and the EVCP paper's convergence time.

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

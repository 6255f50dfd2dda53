//! The figures a run is judged by besides Jain's index
//! ([`ecnq::fairness::jain_index`]): percentiles and the EVCP paper's
//! convergence time.

/// The `p`-th percentile (0–100) by nearest rank, or `None` for no samples.
/// NaN samples are ignored.
pub fn percentile(samples: &[f64], p: f64) -> Option<f64> {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let rank = ((p.clamp(0.0, 100.0) / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.saturating_sub(1).min(sorted.len() - 1)])
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

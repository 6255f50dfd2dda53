//! The completion times an ideal processor-sharing link would give the same
//! finite flows: every active flow served at capacity / n, from its arrival,
//! with no start-up, no queue and no loss. RCP's authors use it as the
//! reference for flow completion time (Dukkipati and McKeown, "Why
//! flow-completion time is the right metric for congestion control", 2006);
//! issue 19 asks erc's mean to stay within 1.5× of it.

use crate::engine::FLIGHT_BYTES;

/// One finite flow: when it arrives (s) and how many bytes it carries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Job {
    /// Arrival, seconds.
    pub start: f64,
    /// Size, bytes.
    pub bytes: f64,
}

/// A finite flow whose completion time the reference gives: a [`Job`]
/// that first pays QUIC's handshake, with the propagation delays of its
/// data path and of its ACK path, seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Finite {
    /// Its arrival (the client's first packet) and its data bytes.
    pub job: Job,
    /// One-way delay of the path its data takes, s.
    pub data_delay: f64,
    /// One-way delay of the path its ACKs (and the client's handshake) take, s.
    pub ack_delay: f64,
}

/// Each finite flow's completion time with processor sharing at a
/// bottleneck of `capacity` bytes per second that all of them cross: QUIC's
/// handshake at the paths' propagation delays (the client's Initial, the
/// server's flight, the client's Finished with the request, as the
/// simulator's engine runs it), then its base round trip, in which the
/// first byte goes out and the last ACK comes back, plus its sojourn at the
/// link from the end of the handshake. The server's flight shares the link
/// as a job of its own from when the client's Initial reaches the server:
/// on short flows it is a tenth of the bytes, and a reference without it
/// would put the link's load that much under what the flows meet
/// (`rcp-afct`). Test: a_flow_pays_two_round_trips_and_its_bytes.
pub fn completion_times(flows: &[Finite], capacity: f64) -> Vec<f64> {
    let base_rtt = |f: &Finite| f.data_delay + f.ack_delay;
    let handshake = |f: &Finite| base_rtt(f) + f.ack_delay;
    let data = flows.iter().map(|f| Job {
        start: f.job.start + handshake(f),
        bytes: f.job.bytes,
    });
    let flights = flows.iter().map(|f| Job {
        start: f.job.start + f.ack_delay,
        bytes: f64::from(FLIGHT_BYTES),
    });
    let jobs: Vec<Job> = data.chain(flights).collect();
    (flows.iter().zip(sojourn_times(&jobs, capacity)))
        .map(|(f, sojourn)| handshake(f) + base_rtt(f) + sojourn)
        .collect()
}

/// How long each job stays on a processor-sharing link of `capacity` bytes
/// per second, in the order given. Jobs need not be sorted.
pub fn sojourn_times(jobs: &[Job], capacity: f64) -> Vec<f64> {
    if capacity.is_nan() || capacity <= 0.0 {
        return vec![f64::INFINITY; jobs.len()];
    }
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&a, &b| jobs[a].start.total_cmp(&jobs[b].start));
    let mut done = vec![0.0; jobs.len()];
    // (job, bytes left) of the jobs in service.
    let mut active: Vec<(usize, f64)> = Vec::new();
    let mut now = 0.0_f64;
    let mut next = order.into_iter().peekable();
    while next.peek().is_some() || !active.is_empty() {
        let arrival = next.peek().map_or(f64::INFINITY, |&j| jobs[j].start);
        if active.is_empty() {
            now = now.max(arrival);
        }
        let rate = capacity / active.len().max(1) as f64;
        let least = active.iter().map(|&(_, b)| b).fold(f64::INFINITY, f64::min);
        let finish = now + least / rate;
        if arrival <= finish {
            let served = (arrival - now).max(0.0) * rate;
            active.iter_mut().for_each(|(_, b)| *b -= served);
            now = now.max(arrival);
            if let Some(j) = next.next() {
                active.push((j, jobs[j].bytes));
            }
            continue;
        }
        let served = least;
        now = finish;
        active.retain_mut(|(j, b)| {
            *b -= served;
            if *b <= served * 1e-12 {
                done[*j] = now - jobs[*j].start;
                return false;
            }
            true
        });
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(start: f64, bytes: f64) -> Job {
        Job { start, bytes }
    }

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
    }

    #[test]
    fn a_lone_job_takes_its_size_over_the_capacity() {
        assert!(close(&sojourn_times(&[job(3.0, 500.0)], 100.0), &[5.0]));
        assert!(sojourn_times(&[], 100.0).is_empty());
        assert_eq!(sojourn_times(&[job(0.0, 1.0)], 0.0), [f64::INFINITY]);
    }

    #[test]
    fn jobs_that_overlap_share_the_capacity_equally() {
        // Together from t = 0: the small one ends at 2 (half rate), the big
        // one has 300 left and ends at 5.
        let t = sojourn_times(&[job(0.0, 400.0), job(0.0, 100.0)], 100.0);
        assert!(close(&t, &[5.0, 2.0]), "{t:?}");
        // The second arrives at 1, when 300 of the first are left: both at
        // 50 until the second's 100 are done at 3; the first's 200 at 100.
        let t = sojourn_times(&[job(1.0, 100.0), job(0.0, 400.0)], 100.0);
        assert!(close(&t, &[2.0, 5.0]), "{t:?}");
    }

    /// A lone flow pays the handshake (a round trip and the ACK path's
    /// delay), its base round trip and its bytes; the server's flight
    /// shares the link with it.
    #[test]
    fn a_flow_pays_two_round_trips_and_its_bytes() {
        let flow = Finite {
            job: job(1.0, 10_000.0),
            data_delay: 0.02,
            ack_delay: 0.03,
        };
        // The flight arrives at 1.03 and is done at 1.03 + flight / C,
        // long before the data starts at 1.08.
        let t = completion_times(&[flow], 1e6);
        assert!(close(&t, &[0.08 + 0.05 + 0.01]), "{t:?}");
        let f = f64::from(FLIGHT_BYTES);
        // At a rate where the flight is still on the link at 1.08, the
        // data shares it until the flight is done.
        let slow = f / 0.1;
        let t = completion_times(&[flow], slow);
        let shared = (f - 0.05 * slow) / (slow / 2.0);
        let expected = 0.08 + 0.05 + shared + (10_000.0 - shared * slow / 2.0) / slow;
        assert!(close(&t, &[expected]), "{t:?} vs {expected}");
    }

    #[test]
    fn an_idle_gap_costs_nothing() {
        let t = sojourn_times(&[job(0.0, 100.0), job(10.0, 100.0)], 100.0);
        assert!(close(&t, &[1.0, 1.0]), "{t:?}");
    }

    #[test]
    fn mean_sojourn_of_a_loaded_link_grows_as_one_over_one_minus_load() {
        // M/M/1-PS at load 0.5: mean sojourn = mean size / (C (1 - ρ)).
        let mut state = 12345_u64;
        let mut uniform = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let (capacity, mean, load) = (1000.0, 100.0, 0.5);
        let mut t = 0.0;
        let jobs: Vec<Job> = (0..200_000)
            .map(|_| {
                t += -uniform().ln() * mean / (capacity * load);
                job(t, -uniform().ln() * mean)
            })
            .collect();
        let times = sojourn_times(&jobs, capacity);
        let measured = times.iter().sum::<f64>() / times.len() as f64;
        let expected = mean / capacity / (1.0 - load);
        assert!(
            (measured / expected - 1.0).abs() < 0.05,
            "{measured} vs {expected}"
        );
    }
}

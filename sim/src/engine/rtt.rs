//! The sender's round-trip time estimate and retransmission timeout
//! (RFC 6298).

use ecnq::signal::RttSample;

use super::clock::{dur, Nanos, SECOND};

/// RTO before the first RTT sample (RFC 6298 §2.1 allows 1 s; 3 s covers the
/// papers' 2-second parking-lot RTTs without spurious timeouts).
const INITIAL_RTO: Nanos = 3 * SECOND;
/// Lower bound of the RTO (Linux's 200 ms rather than RFC 6298's 1 s).
const MIN_RTO: Nanos = 200_000_000;

/// RFC 6298 smoothed RTT.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RttEstimator {
    pub(super) srtt: Nanos,
    rttvar: Nanos,
    min: Nanos,
    pub(super) latest: Nanos,
    pub(super) has_sample: bool,
}

impl RttEstimator {
    pub(super) fn update(&mut self, r: Nanos) {
        self.latest = r;
        if !self.has_sample {
            self.has_sample = true;
            self.srtt = r;
            self.rttvar = r / 2;
            self.min = r;
            return;
        }
        self.min = self.min.min(r);
        self.rttvar = (3 * self.rttvar + self.srtt.abs_diff(r)) / 4;
        self.srtt = (7 * self.srtt + r) / 8;
    }

    pub(super) fn rto(&self) -> Nanos {
        if self.has_sample {
            (self.srtt + 4 * self.rttvar).max(MIN_RTO)
        } else {
            INITIAL_RTO
        }
    }

    pub(super) fn sample(&self) -> RttSample {
        RttSample {
            smoothed: dur(self.srtt),
            min: dur(self.min),
            latest: dur(self.latest),
        }
    }
}

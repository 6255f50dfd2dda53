//! The peer's ACK pattern as the sender sees it: how much of its data each
//! ACK acknowledges (docs/design.md §3, "The ACK pattern").
//!
//! A receiver acknowledges every second packet (RFC 9000 §13.2.2), or
//! fewer: every tenth (Chromium, an ack-frequency request, quinn's
//! `AckFrequencyConfig`), every quarter RTT, or whatever its
//! `max_ack_delay` timer allows (25 ms by default, §18.2). In bytes per
//! ACK every such rule reads the same way, and divided by the rate it is
//! the gap in time a flow at that rate sees between ACKs. Measured in time
//! instead, a start's few packets would read as a long gap: its ACKs are
//! far apart because it sends little, not because of the peer.

/// The smoothed bytes per ACK, counting the data sent while the sender was
/// not limited by its application.
#[derive(Clone, Debug, Default)]
pub(super) struct AckGap {
    /// Bytes the ACK being processed acknowledged.
    acked: u64,
    smoothed: Option<f64>,
}

impl AckGap {
    /// `bytes` acknowledged; `app_limited`: sent while the application had
    /// nothing more to send, which says nothing of the peer's pattern.
    pub fn on_acked(&mut self, bytes: u64, app_limited: bool) {
        if !app_limited {
            self.acked += bytes;
        }
    }

    /// The end of an ACK: its bytes are one sample, smoothed as RFC 9002
    /// §5.3 smooths RTT samples (gain 1/8). An ACK of no such data is none.
    pub fn on_ack_end(&mut self) {
        let sample = std::mem::take(&mut self.acked) as f64;
        if sample == 0.0 {
            return;
        }
        self.smoothed = Some(match self.smoothed {
            Some(smoothed) => smoothed + (sample - smoothed) / 8.0,
            None => sample,
        });
    }

    /// The smoothed bytes per ACK; 0 before the first.
    pub fn bytes(&self) -> u64 {
        self.smoothed.unwrap_or(0.0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `count` ACKs of `packets` 1200-byte packets each.
    fn acks(gap: &mut AckGap, packets: u64, count: u32, app_limited: bool) {
        for _ in 0..count {
            for _ in 0..packets {
                gap.on_acked(1200, app_limited);
            }
            gap.on_ack_end();
        }
    }

    #[test]
    fn the_gap_follows_the_acks_that_acknowledge_data() {
        let mut gap = AckGap::default();
        acks(&mut gap, 10, 50, false);
        assert_eq!(gap.bytes(), 12_000);
        // ACKs of nothing new, or only of data the application held back,
        // leave it alone.
        gap.on_ack_end();
        acks(&mut gap, 1, 50, true);
        assert_eq!(gap.bytes(), 12_000);
        // The peer starts acknowledging every second packet.
        acks(&mut gap, 2, 40, false);
        assert!(gap.bytes() < 2_500, "{}", gap.bytes());
    }
}

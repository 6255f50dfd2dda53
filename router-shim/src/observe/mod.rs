//! What the shim tells about its links: JSON lines ([`LinkSnapshot`],
//! [`SessionCounters`], [`StatsSink`]), a Prometheus endpoint
//! ([`SnapshotBoard`]) and a pcap file ([`PcapWriter`]), and the
//! [`Observers`] bundle a link reports to.

use std::sync::Arc;
use std::time::Duration;

mod metrics;
mod pcap;
mod stats;

pub use metrics::{serve_text, SnapshotBoard, MAX_SCRAPES, SCRAPE_TIMEOUT};
pub use pcap::PcapWriter;
pub use stats::{LinkSnapshot, SessionCounters, StatsSink};

/// Where a link reports: JSON lines, the metrics board, a pcap file.
#[derive(Clone, Debug, Default)]
pub struct Observers {
    /// JSON lines, shared by the shim's links.
    pub stats: Option<Arc<StatsSink>>,
    /// The latest snapshots, for `--metrics`.
    pub board: Option<Arc<SnapshotBoard>>,
    /// What leaves the shim.
    pub pcap: Option<Arc<PcapWriter>>,
    /// Period of stats lines and board updates.
    pub interval: Duration,
}

impl Observers {
    /// Whether anything wants periodic snapshots.
    pub fn periodic(&self) -> bool {
        (self.stats.is_some() || self.board.is_some()) && !self.interval.is_zero()
    }

    /// Writes a link's snapshot as a stats line and to the metrics board.
    pub fn report(&self, snapshot: &LinkSnapshot, final_: bool) {
        if let Some(sink) = &self.stats {
            let _ = sink.write_line(&snapshot.to_json(final_));
        }
        if let Some(board) = &self.board {
            board.publish(snapshot.clone());
        }
    }

    /// Writes the relay's session counters as a stats line and to the
    /// metrics board.
    pub fn report_sessions(&self, counters: &SessionCounters, time: Duration, final_: bool) {
        if let Some(sink) = &self.stats {
            let _ = sink.write_line(&counters.to_json(time, final_));
        }
        if let Some(board) = &self.board {
            board.publish_sessions(*counters);
        }
    }
}

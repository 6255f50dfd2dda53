//! The thread that drives one [`Link`] in real time, for every data path.
//!
//! Readers hand packets over a bounded channel (a full channel blocks the
//! reader, leaving the backlog in the kernel). The thread sleeps on the
//! channel with a timeout until the link's next departure: a futex wait
//! wakes within tens of microseconds, where tokio's timer rounds to whole
//! milliseconds. Departure times come from the link model, so wake-up
//! lateness delays a release but never accumulates into rate error.

use std::io;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::link::{Link, LinkPacket};
use crate::observe::{PcapWriter, SnapshotBoard};
use crate::stats::{LinkSnapshot, StatsSink};

/// Packets waiting between the readers and a link thread.
const CHANNEL_DEPTH: usize = 8192;

/// Where a link's released packets go.
pub trait Egress<P>: Send + 'static {
    /// Sends a batch of released packets (in order); returns how many failed.
    fn send_batch(&mut self, batch: &mut Vec<P>) -> u64;

    /// The packet as an IP packet on the wire, for `--pcap` (into `out`,
    /// cleared first); false if it cannot be shown.
    fn ip_image(&self, packet: &P, out: &mut Vec<u8>) -> bool;
}

/// A message to a link thread.
pub enum LinkMsg<P> {
    /// A packet that arrived at the given time since the shim's epoch.
    Packet(Duration, P),
    /// Finish: report and exit.
    Stop,
}

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
    fn periodic(&self) -> bool {
        (self.stats.is_some() || self.board.is_some()) && !self.interval.is_zero()
    }

    fn report(&self, snapshot: &LinkSnapshot, final_: bool) {
        if let Some(sink) = &self.stats {
            let _ = sink.write_line(&snapshot.to_json(final_));
        }
        if let Some(board) = &self.board {
            board.publish(*snapshot);
        }
    }
}

/// A running link thread.
#[derive(Debug)]
pub struct LinkThread<P> {
    tx: SyncSender<LinkMsg<P>>,
    handle: thread::JoinHandle<LinkSnapshot>,
}

impl<P: LinkPacket + Send + 'static> LinkThread<P> {
    /// Starts the thread for `link`, releasing into `egress`. `epoch` is the
    /// instant packet arrival times count from.
    pub fn spawn(
        name: &'static str,
        link: Link<P>,
        egress: impl Egress<P>,
        epoch: Instant,
        observers: Observers,
    ) -> io::Result<LinkThread<P>> {
        let (tx, rx) = mpsc::sync_channel(CHANNEL_DEPTH);
        let handle = thread::Builder::new()
            .name(format!("link-{name}"))
            .spawn(move || run(name, link, rx, egress, epoch, observers))?;
        Ok(LinkThread { tx, handle })
    }

    /// A handle for readers.
    pub fn sender(&self) -> SyncSender<LinkMsg<P>> {
        self.tx.clone()
    }

    /// Stops the thread (packets still queued are discarded) and returns the
    /// final snapshot. Blocks until the thread has taken the message.
    pub fn stop(self) -> io::Result<LinkSnapshot> {
        // The thread may have exited already (all senders gone): then the
        // join below still returns its snapshot.
        let _ = self.tx.send(LinkMsg::Stop);
        self.handle
            .join()
            .map_err(|_| io::Error::other("a link thread panicked"))
    }
}

/// The thread body: enqueue what arrives, release what is due, write stats.
fn run<P: LinkPacket>(
    name: &'static str,
    mut link: Link<P>,
    rx: Receiver<LinkMsg<P>>,
    mut egress: impl Egress<P>,
    epoch: Instant,
    observers: Observers,
) -> LinkSnapshot {
    let mut send_errors = 0u64;
    let mut last_now = Duration::ZERO;
    let mut batch = Vec::new();
    let mut image = Vec::new();
    let mut next_stats = observers
        .periodic()
        .then(|| epoch.elapsed() + observers.interval);
    loop {
        let now = epoch.elapsed().max(last_now);
        last_now = now;
        while let Some(p) = link.dequeue(now) {
            batch.push(p);
        }
        if !batch.is_empty() {
            if let Some(pcap) = &observers.pcap {
                for p in &batch {
                    if egress.ip_image(p, &mut image) {
                        let _ = pcap.write_all([&image[..]]);
                    }
                }
            }
            send_errors += egress.send_batch(&mut batch);
            batch.clear();
        }
        if let Some(due) = next_stats.as_mut().filter(|due| now >= **due) {
            link.router_mut().advance(now);
            observers.report(&LinkSnapshot::of(name, now, &link, send_errors), false);
            while *due <= now {
                *due += observers.interval;
            }
        }
        let mut deadline = link.next_wakeup().unwrap_or(now + Duration::from_secs(1));
        if let Some(due) = next_stats {
            deadline = deadline.min(due);
        }
        let stop = match rx.recv_timeout(deadline.saturating_sub(epoch.elapsed())) {
            Ok(LinkMsg::Packet(at, p)) => {
                enqueue(&mut link, at, p, &mut last_now);
                // Take the whole backlog before sleeping again.
                let mut stop = false;
                while let Ok(msg) = rx.try_recv() {
                    match msg {
                        LinkMsg::Packet(at, p) => enqueue(&mut link, at, p, &mut last_now),
                        LinkMsg::Stop => stop = true,
                    }
                }
                stop
            }
            Ok(LinkMsg::Stop) | Err(RecvTimeoutError::Disconnected) => true,
            Err(RecvTimeoutError::Timeout) => false,
        };
        if stop {
            break;
        }
    }
    let now = epoch.elapsed().max(last_now);
    link.router_mut().advance(now);
    let snapshot = LinkSnapshot::of(name, now, &link, send_errors);
    observers.report(&snapshot, true);
    snapshot
}

/// Offers a packet at its arrival time as stamped by the reader, kept
/// monotonic for the meter.
fn enqueue<P: LinkPacket>(link: &mut Link<P>, at: Duration, packet: P, last_now: &mut Duration) {
    let now = at.max(*last_now);
    *last_now = now;
    // A drop is counted by the link.
    let _ = link.enqueue(now, packet);
}

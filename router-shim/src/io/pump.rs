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
use std::thread;
use std::time::{Duration, Instant};

use crate::link::{Link, LinkPacket};
use crate::observe::{LinkSnapshot, Observers};

/// Packets waiting between the readers and a link thread.
const CHANNEL_DEPTH: usize = 8192;

/// A link thread that runs this much later than it was due has stalled
/// (the host took its core, or every core was busy): the shim did not
/// watch the link meanwhile, and the measurement intervals the gap touches
/// are disregarded. A tenth of the routers' t_p of 200 ms (docs/design.md §2),
/// so a shorter gap moves at most a tenth of a period's arrivals into the
/// next period.
pub const STALL: Duration = Duration::from_millis(20);

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

/// A link driven in real time, whatever feeds it: enqueue what arrives,
/// release what is due into the egress, report to the observers.
pub struct Driver<P, E> {
    name: &'static str,
    link: Link<P>,
    egress: E,
    epoch: Instant,
    observers: Observers,
    send_errors: u64,
    last_now: Duration,
    next_stats: Option<Duration>,
    batch: Vec<P>,
    image: Vec<u8>,
}

impl<P: LinkPacket, E: Egress<P>> Driver<P, E> {
    /// A driver for `link`; times count from `epoch`.
    pub fn new(
        name: &'static str,
        link: Link<P>,
        egress: E,
        epoch: Instant,
        observers: Observers,
    ) -> Self {
        let next_stats = observers
            .periodic()
            .then(|| epoch.elapsed() + observers.interval);
        Driver {
            name,
            link,
            egress,
            epoch,
            observers,
            send_errors: 0,
            last_now: Duration::ZERO,
            next_stats,
            batch: Vec::new(),
            image: Vec::new(),
        }
    }

    /// The current time, never earlier than any time the link has seen.
    pub fn now(&mut self) -> Duration {
        self.last_now = self.epoch.elapsed().max(self.last_now);
        self.last_now
    }

    /// The thread, due to run at `due`, runs now: a gap longer than
    /// [`STALL`] was time nobody watched the link, and the meter
    /// disregards it.
    pub fn resumed(&mut self, due: Duration) {
        let now = self.now();
        if now.saturating_sub(due) > STALL {
            self.link.disregard(due, now);
        }
    }

    /// Where released packets go.
    pub fn egress_mut(&mut self) -> &mut E {
        &mut self.egress
    }

    /// Offers a packet that arrived at `at` (kept monotonic for the meter);
    /// a drop is counted by the link. A packet that reaches the link more
    /// than [`STALL`] after it arrived was read or taken late: the meter
    /// disregards that time.
    pub fn enqueue(&mut self, at: Duration, packet: P) {
        let now = self.epoch.elapsed();
        if now.saturating_sub(at) > STALL {
            self.link.disregard(at, now);
        }
        self.last_now = at.max(self.last_now);
        let _ = self.link.enqueue(self.last_now, packet);
    }

    /// Releases every packet due by now into the egress, and reports when a
    /// stats period has passed.
    pub fn release(&mut self) {
        let now = self.now();
        while let Some(p) = self.link.dequeue(now) {
            self.batch.push(p);
        }
        if !self.batch.is_empty() {
            if let Some(pcap) = &self.observers.pcap {
                for p in &self.batch {
                    if self.egress.ip_image(p, &mut self.image) {
                        let _ = pcap.write_all([&self.image[..]]);
                    }
                }
            }
            self.send_errors += self.egress.send_batch(&mut self.batch);
            self.batch.clear();
        }
        if let Some(due) = self.next_stats.as_mut().filter(|due| now >= **due) {
            self.link.advance(now);
            let snapshot = LinkSnapshot::of(self.name, now, &self.link, self.send_errors);
            self.observers.report(&snapshot, false);
            while *due <= now {
                *due += self.observers.interval;
            }
        }
    }

    /// How long until the driver has something to do (a release or a
    /// report); at most one second.
    pub fn timeout(&self) -> Duration {
        let now = self.epoch.elapsed();
        let mut deadline = self
            .link
            .next_wakeup()
            .unwrap_or(now + Duration::from_secs(1));
        if let Some(due) = self.next_stats {
            deadline = deadline.min(due);
        }
        deadline.saturating_sub(now).min(Duration::from_secs(1))
    }

    /// The final snapshot (also reported to the observers).
    pub fn finish(mut self) -> LinkSnapshot {
        let now = self.now();
        self.link.advance(now);
        let snapshot = LinkSnapshot::of(self.name, now, &self.link, self.send_errors);
        self.observers.report(&snapshot, true);
        snapshot
    }
}

/// The channel-fed link thread.
fn run<P: LinkPacket>(
    name: &'static str,
    link: Link<P>,
    rx: Receiver<LinkMsg<P>>,
    egress: impl Egress<P>,
    epoch: Instant,
    observers: Observers,
) -> LinkSnapshot {
    let mut driver = Driver::new(name, link, egress, epoch, observers);
    loop {
        driver.release();
        let timeout = driver.timeout();
        let deadline = driver.now() + timeout;
        let msg = rx.recv_timeout(timeout);
        // A packet that waited shows a late thread in `enqueue`.
        if let Err(RecvTimeoutError::Timeout) = msg {
            driver.resumed(deadline);
        }
        let stop = match msg {
            Ok(LinkMsg::Packet(at, p)) => {
                driver.enqueue(at, p);
                // Take the whole backlog before sleeping again.
                let mut stop = false;
                while let Ok(msg) = rx.try_recv() {
                    match msg {
                        LinkMsg::Packet(at, p) => driver.enqueue(at, p),
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
    driver.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::tests::{link, pkt, Pkt};
    use std::sync::Arc;

    /// Counts what the link released.
    struct Count(Arc<std::sync::atomic::AtomicU64>);

    impl Egress<Pkt> for Count {
        fn send_batch(&mut self, batch: &mut Vec<Pkt>) -> u64 {
            let n = batch.len() as u64;
            self.0.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            0
        }
        fn ip_image(&self, _packet: &Pkt, _out: &mut Vec<u8>) -> bool {
            false
        }
    }

    /// A packet that arrived 100 ms before the link thread took it shows
    /// that the time was not watched: the measurement interval of that
    /// time keeps the load figures it had.
    #[test]
    fn a_packet_that_waited_for_the_link_thread_voids_its_interval() {
        let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let epoch = Instant::now();
        let thread = LinkThread::spawn(
            "up",
            link("rate 10mbit"),
            Count(sent.clone()),
            epoch,
            Observers::default(),
        )
        .unwrap();
        let stamped = epoch.elapsed();
        thread::sleep(Duration::from_millis(100));
        thread
            .sender()
            .send(LinkMsg::Packet(stamped, pkt(1, 1000)))
            .unwrap();
        // Past the end of the first 200 ms interval, so the final snapshot
        // has closed it.
        thread::sleep(Duration::from_millis(250));
        let last = thread.stop().unwrap();
        assert_eq!(sent.load(std::sync::atomic::Ordering::Relaxed), 1);
        assert!(last.intervals_disregarded >= 1, "{last:?}");
        assert_eq!(
            last.load[ecnq::schemes::vcp::FORMULA].get(),
            0.0,
            "the void interval kept the start's figures"
        );
    }

    /// A driver that resumes within [`STALL`] of when it was due measures
    /// as usual; one that resumes later voids the interval.
    #[test]
    fn only_a_resume_later_than_a_stall_disregards() {
        let epoch = Instant::now() - Duration::from_millis(500);
        let intervals_disregarded = |late: Duration| {
            let egress = Count(Arc::default());
            let mut driver = Driver::new(
                "up",
                link("rate 10mbit"),
                egress,
                epoch,
                Observers::default(),
            );
            let now = driver.now();
            driver.resumed(now - late);
            driver.link.advance(now + Duration::from_secs(1));
            driver.link.router().meter().disregarded()
        };
        assert_eq!(intervals_disregarded(STALL / 2), 0);
        assert!(intervals_disregarded(STALL * 2) >= 1);
    }
}

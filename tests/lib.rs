//! End-to-end tests of ecnq live in `e2e.rs`: QUIC flows of every scheme
//! through chained in-process relay shims on loopback. The short versions
//! run with `cargo test`; the long ones are `#[ignore]`d — run them with
//! `cargo test -p ecnq-e2e --release -- --ignored`. `testbed.rs` runs on
//! the namespace testbed (root only): a short `ecnq-perf testbed`
//! comparison and a transfer across a shim restart.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Watches whether this machine keeps running the test: a thread sleeps
/// 5 ms at a time and records how late it wakes up. On a shared virtual
/// machine the host can take both cores away (steal time) for hundreds of
/// milliseconds; the in-process shims then stop forwarding, the routers'
/// meters see an empty period followed by a burst, and the run measures
/// the host instead of ecnq. A real-time test discards such a run.
pub struct StallWatch {
    stop: Arc<AtomicBool>,
    worst_us: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl StallWatch {
    /// How long the watch thread sleeps between checks.
    const TICK: Duration = Duration::from_millis(5);

    /// Starts watching.
    pub fn start() -> StallWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let worst_us = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, worst_us) = (stop.clone(), worst_us.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let before = Instant::now();
                    thread::sleep(Self::TICK);
                    let late = before.elapsed().saturating_sub(Self::TICK);
                    let late_us = u64::try_from(late.as_micros()).unwrap_or(u64::MAX);
                    worst_us.fetch_max(late_us, Ordering::Relaxed);
                }
            })
        };
        StallWatch {
            stop,
            worst_us,
            thread: Some(thread),
        }
    }

    /// The longest the watch thread woke up late so far.
    pub fn worst(&self) -> Duration {
        Duration::from_micros(self.worst_us.load(Ordering::Relaxed))
    }
}

impl Drop for StallWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

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

/// Watches whether this machine keeps running the test: one thread per
/// CPU, pinned to it, sleeps 5 ms at a time and records how late it wakes
/// up. On a shared virtual machine the host can take a core away (steal
/// time) for hundreds of milliseconds; whatever runs there — an in-process
/// shim, a sender — stops, the routers' meters see an empty period followed
/// by a burst, and the run measures the host instead of ecnq. A real-time
/// test discards such a run. One unpinned thread misses a stall of the
/// other core: the bottleneck can sit idle for a quarter of a second while
/// that thread wakes on time.
pub struct StallWatch {
    stop: Arc<AtomicBool>,
    worst_us: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl StallWatch {
    /// How long a watch thread sleeps between checks.
    const TICK: Duration = Duration::from_millis(5);

    /// Starts watching every CPU this process may run on.
    pub fn start() -> StallWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let worst_us = Arc::new(AtomicU64::new(0));
        let threads = Self::cpus()
            .into_iter()
            .map(|cpu| {
                let (stop, worst_us) = (stop.clone(), worst_us.clone());
                thread::spawn(move || {
                    if let Some(cpu) = cpu {
                        pin_to(cpu);
                    }
                    while !stop.load(Ordering::Relaxed) {
                        let before = Instant::now();
                        thread::sleep(Self::TICK);
                        let late = before.elapsed().saturating_sub(Self::TICK);
                        let late_us = u64::try_from(late.as_micros()).unwrap_or(u64::MAX);
                        worst_us.fetch_max(late_us, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        StallWatch {
            stop,
            worst_us,
            threads,
        }
    }

    /// The CPUs to watch: those in this process's affinity mask, or one
    /// unpinned watcher where the mask cannot be read.
    fn cpus() -> Vec<Option<usize>> {
        // SAFETY: `set` is a plain bit mask that sched_getaffinity fills.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: `set` is valid for `size` bytes; pid 0 is this thread.
        if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
            return vec![None];
        }
        let cpus: Vec<_> = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `cpu` is below CPU_SETSIZE.
            .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
            .map(Some)
            .collect();
        if cpus.is_empty() {
            vec![None]
        } else {
            cpus
        }
    }

    /// The longest a watch thread woke up late so far.
    pub fn worst(&self) -> Duration {
        Duration::from_micros(self.worst_us.load(Ordering::Relaxed))
    }
}

/// Keeps the calling thread on `cpu`; a thread that cannot be pinned
/// watches unpinned.
fn pin_to(cpu: usize) {
    // SAFETY: `set` is a plain bit mask; CPU_SET writes one bit below
    // CPU_SETSIZE (cpu came from the affinity mask).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

impl Drop for StallWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The watch covers every CPU the process may run on, so a stall of
    /// either core of a 2-core machine is seen (a CPU quota can make the
    /// usable parallelism smaller than the CPUs, never larger).
    #[test]
    fn the_watch_covers_every_cpu_this_process_may_use() {
        let cpus = StallWatch::cpus();
        let usable = thread::available_parallelism().map_or(1, |n| n.get());
        assert!(cpus.len() >= usable, "{cpus:?} for {usable} usable CPUs");
        assert_eq!(StallWatch::start().threads.len(), cpus.len());
    }
}

//! The process around a run: its memory and CPU time, its descriptors,
//! its allocator and its tasks.

use std::time::{Duration, Instant};

use ecnq_shim::io::relay::{raise_fd_limit, FD_RESERVE};

use super::config::ScaleConfig;

/// Longest wait for a run's connections to drain.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(30);

/// How often the controller looks at the counters and the memory.
pub(super) const POLL: Duration = Duration::from_millis(20);

/// The process's memory and CPU time at one instant.
#[derive(Clone, Copy, Debug)]
pub(super) struct Probe {
    /// Resident set, bytes; None without `/proc`.
    pub(super) rss: Option<u64>,
    /// User + system CPU time.
    pub(super) cpu: Option<Duration>,
    pub(super) at: Instant,
}

impl Probe {
    /// Measures now, after handing freed heap memory back to the system
    /// (`trim`), so that the resident set counts what is held rather than
    /// what the allocator keeps for later.
    pub(super) fn take(trim: bool) -> Probe {
        if trim {
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            // SAFETY: malloc_trim only releases free pages of the heap.
            unsafe {
                libc::malloc_trim(0);
            }
        }
        Probe {
            rss: resident_bytes(),
            cpu: cpu_time(),
            at: Instant::now(),
        }
    }
}

/// Fixes glibc's mmap threshold at its default (128 KiB). Left dynamic,
/// it rises when a large block is freed, and later large zeroed blocks
/// then come from the heap, written with zeros and resident at once, where
/// before they were fresh untouched pages: whichever run comes second would
/// look several times bigger per connection.
fn fix_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes an allocator setting.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
    }
}

/// The resident set from `/proc/self/statm` (its second field, in pages).
pub(super) fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

/// Datagrams the kernel dropped for want of receive-buffer space, all
/// UDP sockets of the machine (`RcvbufErrors` in `/proc/net/snmp`).
pub(super) fn udp_receive_buffer_drops() -> Option<u64> {
    let snmp = std::fs::read_to_string("/proc/net/snmp").ok()?;
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next()?, udp.next()?);
    let column = names.split_whitespace().position(|n| n == "RcvbufErrors")?;
    values.split_whitespace().nth(column)?.parse().ok()
}

/// User + system CPU time of the whole process.
fn cpu_time() -> Option<Duration> {
    // SAFETY: getrusage fills a plain struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to that struct.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return None;
    }
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    Some(time(usage.ru_utime) + time(usage.ru_stime))
}

/// Waits until the runtime runs no task, at most [`DRAIN_LIMIT`]; whether
/// it got there. The next run's base is taken only once the last run's
/// connections are gone: taken at once, it would count the connections of
/// the run before that are still draining.
pub(super) async fn drain() -> bool {
    let metrics = tokio::runtime::Handle::current().metrics();
    let deadline = Instant::now() + DRAIN_LIMIT;
    while metrics.num_alive_tasks() > 0 {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
    true
}

/// Raises the descriptor limit and checks that a run fits: two sockets per
/// connection (the client's and its relay session's) and the relay's reserve.
fn check_descriptors(connections: usize) -> Result<(), String> {
    let limit = raise_fd_limit().map_err(|e| format!("cannot raise the open-file limit: {e}"))?;
    let needed = 2 * connections as u64 + 2 * FD_RESERVE;
    if limit < needed {
        return Err(format!(
            "{connections} connections need about {needed} open files, the limit is {limit} (raise it with ulimit -n)"
        ));
    }
    Ok(())
}

/// Raises the descriptor limit, checks that the run fits and fixes the
/// allocator's mmap threshold.
pub(super) fn prepare(config: &ScaleConfig) -> Result<(), String> {
    check_descriptors(config.connections)?;
    fix_mmap_threshold();
    Ok(())
}

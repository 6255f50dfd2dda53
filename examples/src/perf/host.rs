//! How much of this machine's CPU time its hypervisor took during a run
//! (Linux's steal time, from `/proc/stat`). On a shared virtual machine the
//! host can take the CPUs away for a few milliseconds at a time, often
//! enough to cost a real-time run a tenth of its CPU time: the senders and
//! the in-process shim stop, the bottleneck idles and then takes a burst,
//! and the run measures the host, not the congestion controllers. The demo
//! says so next to such a run's figures; the end-to-end tests run it again.

/// A run with more steal than this (a fraction of the CPU time) is flagged:
/// past a few percent the real-stack pause test
/// (`erc_rides_through_a_pause_on_the_real_stack` in tests/e2e.rs) passes
/// or fails with the host's load rather than with the controller's.
pub const NOTABLE_STEAL: f64 = 0.05;

/// Steal and total CPU time from a starting point on.
#[derive(Clone, Copy, Debug)]
pub struct StealMeter {
    start: Option<CpuTimes>,
}

impl StealMeter {
    /// Starts measuring now.
    pub fn start() -> StealMeter {
        StealMeter { start: read() }
    }

    /// The fraction of the machine's CPU time stolen since the start; `None`
    /// where `/proc/stat` cannot be read (not Linux) or no time passed.
    pub fn fraction(&self) -> Option<f64> {
        self.start?.steal_since(read()?)
    }
}

/// Jiffies from the aggregate `cpu` line of `/proc/stat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CpuTimes {
    steal: u64,
    total: u64,
}

impl CpuTimes {
    /// The aggregate line's first eight fields are user, nice, system, idle,
    /// iowait, irq, softirq and steal (proc(5)); the guest fields after them
    /// are already counted in user and nice.
    fn parse(stat: &str) -> Option<CpuTimes> {
        let fields = stat.lines().next()?.strip_prefix("cpu ")?;
        let times: Vec<u64> = fields
            .split_whitespace()
            .take(8)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        Some(CpuTimes {
            steal: *times.get(7)?,
            total: times.iter().sum(),
        })
    }

    fn steal_since(self, now: CpuTimes) -> Option<f64> {
        let total = now.total.checked_sub(self.total).filter(|&t| t > 0)?;
        Some(now.steal.saturating_sub(self.steal) as f64 / total as f64)
    }
}

fn read() -> Option<CpuTimes> {
    CpuTimes::parse(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// A line for a run with notable steal, `None` for one without.
pub fn steal_note(run: &str, steal: Option<f64>) -> Option<String> {
    let steal = steal.filter(|&s| s > NOTABLE_STEAL)?;
    Some(format!(
        "{run}: the host took {:.1} % of this machine's CPU time during the run (steal); \
         real-stack figures from such a run scatter, so run it again",
        steal * 100.0
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_the_eighth_field_over_the_first_eight() {
        let before = "cpu  100 5 50 800 10 0 5 30 7 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        let after = "cpu  300 5 90 1400 10 0 15 230 9 0\n";
        let (a, b) = (
            CpuTimes::parse(before).unwrap(),
            CpuTimes::parse(after).unwrap(),
        );
        assert_eq!(
            a,
            CpuTimes {
                steal: 30,
                total: 1000
            }
        );
        assert_eq!(
            b,
            CpuTimes {
                steal: 230,
                total: 2050
            }
        );
        let fraction = a.steal_since(b).unwrap();
        assert!((fraction - 200.0 / 1050.0).abs() < 1e-12, "{fraction}");
        assert!(steal_note("erc", Some(fraction)).is_some());
        assert_eq!(steal_note("erc", Some(0.01)), None);
        assert_eq!(steal_note("erc", None), None);
    }

    #[test]
    fn an_unreadable_or_unchanged_stat_gives_no_fraction() {
        assert_eq!(CpuTimes::parse("intr 1 2 3\n"), None);
        assert_eq!(CpuTimes::parse("cpu  1 2 x 4 5 6 7 8\n"), None);
        assert_eq!(CpuTimes::parse("cpu  1 2 3\n"), None);
        let t = CpuTimes::parse("cpu  1 2 3 4 5 6 7 8\n").unwrap();
        assert_eq!(t.steal_since(t), None);
    }
}

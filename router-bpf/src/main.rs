//! `ecnq-bpf`: ecnq's router in the kernel's data path (see the crate docs).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use ecnq_bpf::run::{self, EcnqClass, Options};

/// ecnq's router as a tc eBPF program: marks erc's rate and the load of
/// VCP, EVCP, DPCP, TPCP, BMCC and MCP into the packets that leave a
/// device, with a control loop that runs their routers from the program's
/// counters and the device's queue (Prague's packets pass unmarked).
/// Needs root.
#[derive(Parser, Debug)]
#[command(name = "ecnq-bpf", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Attach the program to a device's egress and run the control loop
    /// until interrupted (Ctrl-C, SIGTERM); then detach. The device's
    /// queue is the kernel's: put a tbf (or htb) on it for the bottleneck
    /// rate, e.g. `tc qdisc replace dev eth1 root tbf rate 20mbit burst
    /// 32k latency 50ms`.
    Attach {
        /// The bottleneck device.
        #[arg(long)]
        dev: String,
        /// The link's rate in tc words (`20mbit`, `1gbit`, `500kbit`);
        /// default: the rate of the device's root tbf.
        #[arg(long, value_parser = parse_rate)]
        rate: Option<f64>,
        /// Print a JSON stats line this often, seconds (0: never).
        #[arg(long, default_value_t = 1.0)]
        stats: f64,
        /// A dual queue: the htb leaf class (tc's `MAJOR:MINOR`, hex, as
        /// `1:10`) that ecnq-tagged packets queue in, apart from classic
        /// traffic in the root htb's other classes. erc's queue is then
        /// that class's, and its capacity the link (--rate) less what the
        /// other classes send, at least --ecnq-rate.
        #[arg(long, value_parser = parse_classid, requires_all = ["ecnq_rate", "rate"])]
        ecnq_class: Option<u32>,
        /// The ecnq class's guaranteed rate (its htb `rate`), in tc words.
        #[arg(long, value_parser = parse_rate, requires = "ecnq_class")]
        ecnq_rate: Option<f64>,
    },
    /// Take the program off a device (after a control loop was killed).
    Detach {
        /// The device.
        #[arg(long)]
        dev: String,
    },
}

/// A classid in tc's words (`MAJOR:MINOR`, both hex), as the kernel
/// holds it.
fn parse_classid(s: &str) -> Result<u32, String> {
    let bad = || format!("class `{s}`: expected MAJOR:MINOR in hex, as tc writes it (1:10)");
    let (major, minor) = s.split_once(':').ok_or_else(bad)?;
    let major = u16::from_str_radix(major, 16).map_err(|_| bad())?;
    let minor = u16::from_str_radix(minor, 16).map_err(|_| bad())?;
    if major == 0 || minor == 0 {
        return Err(bad());
    }
    Ok(u32::from(major) << 16 | u32::from(minor))
}

/// A rate in tc's words, in bytes per second.
fn parse_rate(s: &str) -> Result<f64, String> {
    let units = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)];
    let (number, scale) = units
        .iter()
        .find_map(|(unit, scale)| s.strip_suffix(unit).map(|n| (n, *scale)))
        .ok_or_else(|| format!("rate `{s}`: expected a number with gbit, mbit, kbit or bit"))?;
    let bits: f64 = number
        .parse()
        .map_err(|_| format!("rate `{s}`: `{number}` is not a number"))?;
    if !(bits > 0.0 && bits.is_finite()) {
        return Err(format!("rate `{s}` must be positive"));
    }
    Ok(bits * scale / 8.0)
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Attach {
            dev,
            rate,
            stats,
            ecnq_class,
            ecnq_rate,
        } => {
            let stop = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&stop);
            if let Err(e) = on_signals(&[libc::SIGINT, libc::SIGTERM], move || {
                flag.store(true, Ordering::Relaxed)
            }) {
                eprintln!("ecnq-bpf: {e}");
                std::process::exit(1);
            }
            let options = Options {
                dev,
                capacity: rate,
                stats_every: (stats > 0.0).then(|| Duration::from_secs_f64(stats)),
                ecnq_class: ecnq_class
                    .zip(ecnq_rate)
                    .map(|(classid, rate)| EcnqClass { classid, rate }),
            };
            run::run(&options, &stop).map(|c| {
                eprintln!(
                    "ecnq-bpf: detached; {} packets, {} marked, {} stale, {} GSO",
                    c.packets, c.marked, c.stale, c.gso
                );
            })
        }
        Command::Detach { dev } => ecnq_bpf::tc::detach(&dev),
    };
    if let Err(e) = result {
        eprintln!("ecnq-bpf: {e}");
        std::process::exit(1);
    }
}

/// Runs `f` on a thread of its own when one of `signals` arrives.
fn on_signals(signals: &[libc::c_int], f: impl FnOnce() + Send + 'static) -> Result<(), String> {
    // Block the signals in this thread (and the ones it starts), and wait
    // for them with sigwait on a thread of its own.
    // SAFETY: plain signal-mask calls on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &signal in signals {
            libc::sigaddset(&mut set, signal);
        }
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return Err("cannot block signals".to_owned());
        }
        std::thread::spawn(move || {
            let mut got = 0;
            if libc::sigwait(&set, &mut got) == 0 {
                f();
            }
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_as_tc_writes_them() {
        assert_eq!(parse_rate("20mbit"), Ok(2.5e6));
        assert_eq!(parse_rate("1.5gbit"), Ok(1.5e9 / 8.0));
        assert!(parse_rate("20").is_err());
        assert!(parse_rate("xmbit").is_err());
        assert!(parse_rate("0mbit").is_err());
    }

    #[test]
    fn classids_read_as_tc_writes_them() {
        assert_eq!(parse_classid("1:10"), Ok(0x1_0010));
        assert_eq!(parse_classid("ffff:a"), Ok(0xffff_000a));
        for bad in ["1", "0:10", "1:0", "x:1", "1:10000"] {
            assert!(parse_classid(bad).is_err(), "{bad}");
        }
    }
}

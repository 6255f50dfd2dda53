//! The control loop's I/O: a clock, the maps, the qdisc; every period one
//! [`ControlLoop::step`], and the index with its lease into the program's
//! control map. When it stops, it clears the index and takes the program
//! off the device.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::control::{lease, period, ClassCapacity, ControlLoop};
use crate::maps::{ClassCounters, Control, FlowReader, Maps};
use crate::qdisc::QdiscReader;
use crate::tc;

/// What `ecnq-bpf attach` runs with.
#[derive(Clone, Debug)]
pub struct Options {
    /// The bottleneck device whose egress the program marks.
    pub dev: String,
    /// The link's capacity, bytes per second; `None`: the root tbf's rate.
    pub capacity: Option<f64>,
    /// How often to print a stats line (`None`: never).
    pub stats_every: Option<Duration>,
    /// The dual queue's ecnq class, where the device's root is an htb
    /// with a class for ecnq-tagged packets (`None`: one queue for all).
    pub ecnq_class: Option<EcnqClass>,
}

/// A dual queue's ecnq class: an htb leaf that the program puts
/// ecnq-tagged packets in, whose qdisc's backlog is erc's queue and whose
/// capacity is the link less what the other classes send, at least its
/// guaranteed rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EcnqClass {
    /// Its classid (`1:10` as 0x10010).
    pub classid: u32,
    /// Its guaranteed rate (its htb `rate`), bytes per second.
    pub rate: f64,
}

/// CLOCK_MONOTONIC, the clock of `bpf_ktime_get_ns()`, in nanoseconds.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_MONOTONIC_COARSE, the clock of `bpf_ktime_get_coarse_ns()`, which
/// times erc's flights in the program, in nanoseconds.
pub fn coarse_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC_COARSE)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into `ts`, a live timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The real-time priority the control loop asks for (SCHED_FIFO, the
/// lowest): on a router whose cores are busy forwarding, a loop at the
/// normal priority woke late, its lease ran out and packets went
/// unmarked. It sleeps most of each period, so it takes little.
const PRIORITY: libc::c_int = 1;

/// Moves the calling thread to [`PRIORITY`], or says why not.
fn realtime() {
    let param = libc::sched_param {
        sched_priority: PRIORITY,
    };
    // SAFETY: changes the calling thread's policy (pid 0) with a valid param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        eprintln!(
            "ecnq-bpf: the control loop runs at normal priority ({}): on a busy router it may \
             wake late, and packets pass unmarked while its lease has run out",
            std::io::Error::last_os_error()
        );
    }
}

/// The capacity to meter against: the option, else the root tbf's rate.
fn capacity(options: &Options, qdisc: &mut QdiscReader) -> Result<f64, String> {
    if let Some(c) = options.capacity {
        return Ok(c);
    }
    let root = qdisc.read().map_err(|e| format!("{}: {e}", options.dev))?;
    root.rate.ok_or_else(|| {
        format!(
            "{}'s root qdisc is {}, not tbf: give the link's rate with --rate",
            options.dev, root.kind
        )
    })
}

/// Attaches the program to `options.dev` and runs the control loop until
/// `stop` is set; then detaches, and returns the program's counters over
/// every class. Returns an error (after detaching) when a step fails.
pub fn run(options: &Options, stop: &AtomicBool) -> Result<ClassCounters, String> {
    let mut qdisc = QdiscReader::new(&options.dev).map_err(|e| format!("{}: {e}", options.dev))?;
    let capacity = capacity(options, &mut qdisc)?;
    let l3 = tc::link_header(&options.dev)?;
    let prog = tc::attach(&options.dev)?;
    let result = Maps::open(prog)
        .map_err(|e| format!("the program's maps: {e}"))
        .and_then(|maps| control_loop(options, &maps, &mut qdisc, (capacity, l3), stop));
    let detached = tc::detach(&options.dev);
    detached.and(result)
}

/// Steps until `stop`; `link` is the capacity (bytes per second) and the
/// link header's length.
fn control_loop(
    options: &Options,
    maps: &Maps,
    qdisc: &mut QdiscReader,
    (capacity, l3): (f64, u8),
    stop: &AtomicBool,
) -> Result<ClassCounters, String> {
    realtime();
    let mut control = match options.ecnq_class {
        Some(_) => ControlLoop::ecnq_only(),
        None => ControlLoop::default(),
    };
    let mut class = (options.ecnq_class).map(|c| (c.classid, ClassCapacity::new(capacity, c.rate)));
    let mut reader = FlowReader::default();
    let start = Instant::now();
    let mut next = start;
    let mut next_stats = start;
    let step_error = |e: std::io::Error| format!("control loop: {e}");
    while !stop.load(Ordering::Relaxed) {
        next += period();
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let flows = reader.read(maps).map_err(step_error)?;
        let flights = maps.flights().map_err(step_error)?;
        let now = start.elapsed();
        // The root's figures for the stats line; erc's queue and capacity
        // are its class's where there is one.
        let (queue, backlog, erc_capacity) = match &mut class {
            Some((classid, split)) => {
                let (root, leaf) = qdisc.read_with_leaf(*classid).map_err(step_error)?;
                let others = root.bytes.saturating_sub(leaf.bytes);
                (root, leaf.backlog, split.at(now, others))
            }
            None => {
                let root = qdisc.read().map_err(step_error)?;
                let backlog = root.backlog;
                (root, backlog, capacity)
            }
        };
        let index = control.step(now, &flows, backlog, erc_capacity);
        let expires_ns = monotonic_ns() + lease().as_nanos() as u64;
        let control_state = Control {
            expires_ns,
            index,
            l3,
            ready: true,
            ecnq_class: class.as_ref().map_or(0, |(classid, _)| *classid),
            codes: control.codes(),
            starts: control.start_codes(now, erc_capacity, flights),
        };
        maps.set_control(control_state).map_err(step_error)?;
        if let Some(every) = options.stats_every.filter(|_| Instant::now() >= next_stats) {
            next_stats += every;
            let classes = maps.all_classes().map_err(step_error)?;
            // The queue's figures under the names of `ecnq-shim --stats`
            // (`dir`, `queue_bytes`, `departure_bytes`, `arrivals`,
            // `drops_overflow`), so that `ecnq-perf testbed --router bpf`
            // reads them as a shim's (tests/testbed.rs,
            // kernel_router_meets_the_erc_goals).
            println!(
                "{{\"t\":{:.3},\"dir\":\"up\",\"index\":{index},\"share_mbit\":{:.3},\"flows\":{},\"queue_bytes\":{},\"departure_bytes\":{},\"arrivals\":{},\"drops_overflow\":{},\"packets\":{},\"marked\":{}}}",
                start.elapsed().as_secs_f64(),
                control.share() * 8e-6,
                control.flows(),
                queue.backlog,
                queue.bytes,
                queue.packets + queue.drops,
                queue.drops,
                classes.packets,
                classes.marked
            );
        }
    }
    // Marks end with the loop: the index is withdrawn, not left to expire.
    maps.set_control(Control::default()).map_err(step_error)?;
    maps.all_classes().map_err(step_error)
}

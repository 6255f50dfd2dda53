//! `ecnq-shim tun`: the shim as a router hop, through two TUN devices.
//!
//! Each direction is one thread that reads its device, drives its link
//! ([`super::pump::Driver`]) and writes into the other device: no hand-over
//! between threads on the packet path.
//!
//! The router's policy routes send traffic from the left side into the `up`
//! device and traffic from the right side into the `down` device. The shim
//! reads `up`, passes each packet through the up link, and writes it into
//! `down`, where the kernel routes it on by destination (and the reverse).
//! The testbed sets the routes up; rp_filter must be 0 in the router's
//! namespace, since packets re-enter through a device their source is not
//! routed to.
//!
//! With offload the devices carry virtio-net headers: UDP GSO super-packets
//! are split into datagrams before marking (each marked on its own), partial
//! checksums are completed, and writes are coalesced again (GRO never merges
//! packets whose TOS differs).

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use ecnq::PacketMarks;
use tun_rs::{DeviceBuilder, GROTable, SyncDevice, IDEAL_BATCH_SIZE, VIRTIO_NET_HDR_LEN};

use super::pump::{Driver, Egress};
use crate::link::classify::{
    classify, corrupt_udp, remarked_tos, rewrite, Classified, PassReason, Verdict,
};
use crate::link::{Corruption, Direction, Link, LinkPacket};
use crate::observe::{LinkSnapshot, Observers};

/// Room in front of each packet for the virtio-net header a write may need.
const HEADROOM: usize = VIRTIO_NET_HDR_LEN;
/// How often an idle forwarding thread checks whether to stop.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// TUN mode configuration.
#[derive(Clone, Debug)]
pub struct TunConfig {
    /// Device the router sends left→right traffic into.
    pub up_device: String,
    /// Device the router sends right→left traffic into.
    pub down_device: String,
    /// MTU of both devices.
    pub mtu: u16,
    /// Use virtio-net headers (GSO/GRO, checksum offload) when the kernel offers them.
    pub offload: bool,
    /// Transmit queue length of the devices (the kernel's default, 500, drops
    /// bursts before the shim sees them).
    pub tx_queue_len: u32,
    /// Left → right.
    pub up: Direction,
    /// Right → left.
    pub down: Direction,
    /// Seed of loss, jitter, reordering and duplication.
    pub seed: u64,
}

/// A packet read from a TUN device.
#[derive(Clone, Debug)]
pub struct TunPacket {
    /// `HEADROOM` bytes, then the IP packet.
    buf: Vec<u8>,
    classified: Result<Classified, PassReason>,
}

impl TunPacket {
    /// Classifies the IP packet in `buf`, which holds `HEADROOM` bytes, then
    /// the packet (the buffer is kept: no copy).
    pub fn new(buf: Vec<u8>) -> TunPacket {
        let classified = match classify(buf.get(HEADROOM..).unwrap_or_default()) {
            Verdict::Udp(c) | Verdict::Tcp(c) => Ok(c),
            Verdict::Pass(reason) => Err(reason),
        };
        TunPacket { buf, classified }
    }

    /// The IP packet (empty if the buffer is shorter than the headroom).
    pub fn packet(&self) -> &[u8] {
        self.buf.get(HEADROOM..).unwrap_or_default()
    }
}

impl LinkPacket for TunPacket {
    fn wire_len(&self) -> u32 {
        self.packet().len() as u32
    }

    fn marks(&self) -> Result<PacketMarks, PassReason> {
        self.classified.map(|c| c.marks)
    }

    fn set_marks(&mut self, marks: &PacketMarks) {
        if let Ok(c) = self.classified.as_mut() {
            rewrite(&mut self.buf[HEADROOM..], c, marks);
            c.tos = remarked_tos(c.tos, marks);
            c.marks = *marks;
        }
    }

    fn corrupt(&mut self, hit: Corruption) -> bool {
        match &self.classified {
            Ok(c) => corrupt_udp(&mut self.buf[HEADROOM..], c, hit),
            Err(_) => false,
        }
    }
}

/// Room of a write buffer: tun-rs coalesces datagrams into a buffer only
/// when it holds twice the headroom plus the whole super-packet (at most
/// 64 KiB), and never grows one itself.
const WRITE_CAPACITY: usize = 2 * HEADROOM + 65_535;

/// Spare packet buffers kept for the reader: a few batches' worth.
const SPARE_BUFFERS: usize = 4 * IDEAL_BATCH_SIZE;

/// Buffers of one direction's egress: write buffers with room for a
/// super-packet, and packet buffers given back for the reader to reuse.
#[derive(Debug, Default)]
struct Buffers {
    writes: Vec<Vec<u8>>,
    spare: Vec<Vec<u8>>,
}

impl Buffers {
    /// Copies each packet of `chunk` into a write buffer, so that GRO can
    /// append the datagrams that follow it (a write per batch and flow
    /// instead of a write per datagram); the packets' own buffers become
    /// spare. Returns the write buffers, one per packet.
    fn stage(&mut self, chunk: &mut [TunPacket]) -> &mut [Vec<u8>] {
        if self.writes.len() < chunk.len() {
            self.writes
                .resize_with(chunk.len(), || Vec::with_capacity(WRITE_CAPACITY));
        }
        for (write, packet) in self.writes.iter_mut().zip(chunk.iter_mut()) {
            write.clear();
            write.extend_from_slice(&packet.buf);
            if self.spare.len() < SPARE_BUFFERS {
                self.spare.push(std::mem::take(&mut packet.buf));
            }
        }
        &mut self.writes[..chunk.len()]
    }

    /// A buffer of `len` bytes for the reader, reused when one is spare.
    fn buffer(&mut self, len: usize) -> Vec<u8> {
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.resize(len, 0);
        buf
    }
}

/// Writes released packets into a TUN device, coalesced when offloading.
struct TunEgress {
    device: Arc<SyncDevice>,
    gro: GROTable,
    buffers: Buffers,
}

impl Egress<TunPacket> for TunEgress {
    fn send_batch(&mut self, batch: &mut Vec<TunPacket>) -> u64 {
        let mut failed = 0;
        for chunk in batch.chunks_mut(IDEAL_BATCH_SIZE) {
            let writes = self.buffers.stage(chunk);
            if self
                .device
                .send_multiple(&mut self.gro, writes, HEADROOM)
                .is_err()
            {
                failed += chunk.len() as u64;
            }
        }
        failed
    }

    fn ip_image(&self, packet: &TunPacket, out: &mut Vec<u8>) -> bool {
        out.clear();
        out.extend_from_slice(packet.packet());
        true
    }
}

/// Opens a TUN device as the shim uses it.
fn open_device(name: &str, config: &TunConfig) -> io::Result<SyncDevice> {
    let device = DeviceBuilder::new()
        .name(name)
        .mtu(config.mtu)
        .offload(config.offload)
        .tx_queue_len(config.tx_queue_len)
        .enable(true)
        .build_sync()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot open TUN device {name}: {e}")))?;
    // Reads drain the device until it would block; writes to a TUN device never block.
    device.set_nonblocking(true)?;
    Ok(device)
}

/// Final figures of a TUN run.
#[derive(Clone, Debug)]
pub struct TunReport {
    /// Left → right.
    pub up: LinkSnapshot,
    /// Right → left.
    pub down: LinkSnapshot,
    /// Whether UDP GSO was negotiated on the devices.
    pub udp_gso: bool,
}

/// A running TUN shim: one thread per direction, each reading its input
/// device, driving its link and writing into the other device.
#[derive(Debug)]
pub struct TunShim {
    up: thread::JoinHandle<LinkSnapshot>,
    down: thread::JoinHandle<LinkSnapshot>,
    stop: Arc<AtomicBool>,
    udp_gso: bool,
}

impl TunShim {
    /// Creates the devices and starts forwarding.
    pub fn start(config: &TunConfig, observers: Observers) -> io::Result<TunShim> {
        let up_dev = Arc::new(open_device(&config.up_device, config)?);
        let down_dev = Arc::new(open_device(&config.down_device, config)?);
        let udp_gso = up_dev.udp_gso() && down_dev.udp_gso();
        let epoch = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let direction = |name: &'static str,
                         d: &Direction,
                         seed,
                         input: &Arc<SyncDevice>,
                         output: &Arc<SyncDevice>| {
            let link = Link::new(
                d.spec.clone(),
                d.router.clone(),
                d.queue,
                seed,
                epoch.elapsed(),
            );
            let egress = TunEgress {
                device: output.clone(),
                gro: GROTable::default(),
                buffers: Buffers::default(),
            };
            let driver = Driver::new(name, link, egress, epoch, observers.clone());
            let (input, stop, mtu) = (input.clone(), stop.clone(), usize::from(config.mtu));
            thread::Builder::new()
                .name(format!("link-{name}"))
                .spawn(move || forward(&input, driver, mtu, &stop))
        };
        let up = direction("up", &config.up, config.seed, &up_dev, &down_dev)?;
        let down = direction(
            "down",
            &config.down,
            config.seed.wrapping_add(1),
            &down_dev,
            &up_dev,
        )?;
        Ok(TunShim {
            up,
            down,
            stop,
            udp_gso,
        })
    }

    /// Whether both devices negotiated UDP GSO.
    pub fn udp_gso(&self) -> bool {
        self.udp_gso
    }

    /// Stops forwarding; returns the final counters.
    pub fn stop(self) -> io::Result<TunReport> {
        self.stop.store(true, Ordering::Relaxed);
        let join = |h: thread::JoinHandle<LinkSnapshot>| {
            h.join()
                .map_err(|_| io::Error::other("a forwarding thread panicked"))
        };
        Ok(TunReport {
            up: join(self.up)?,
            down: join(self.down)?,
            udp_gso: self.udp_gso,
        })
    }
}

/// Nice value of the forwarding threads: a router's departures should not
/// wait behind batch work on a busy host.
const FORWARDING_NICE: i32 = -10;

/// Timer slack of the forwarding threads, in nanoseconds (the kernel's
/// default, 50 µs, would stretch every sleep by up to that much).
const TIMER_SLACK_NS: libc::c_ulong = 1_000;

/// Under load, a forwarding thread whose last wake-up found at least
/// [`BUSY_READS`] packets sleeps this long and then reads what gathered,
/// instead of being woken by the next packet: one wake-up per pause rather
/// than one per packet or two, the way a network card coalesces interrupts.
/// A packet then waits at most this much longer in the device (its arrival
/// is stamped when it is read). The forwarding bench
/// (`router-shim/benches/forwarding.rs`) shows the CPU per packet it saves.
const BATCH_PAUSE: Duration = Duration::from_micros(50);

/// Packets one wake-up must find for the next wait to be a [`BATCH_PAUSE`]
/// (four within a pause: about 80 000 packets/s).
const BUSY_READS: usize = 4;

/// Best effort (the priority needs CAP_SYS_NICE, which TUN mode has as
/// root): raises this thread's scheduling priority to [`FORWARDING_NICE`] and
/// lowers its timer slack to [`TIMER_SLACK_NS`].
fn tune_thread() {
    // SAFETY: gettid has no preconditions; setpriority on our own thread id;
    // PR_SET_TIMERSLACK takes a value and affects this thread only.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, FORWARDING_NICE);
        libc::prctl(libc::PR_SET_TIMERSLACK, TIMER_SLACK_NS);
    }
}

/// What a wait on a device found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Readiness {
    Readable,
    TimedOut,
    /// The device reports an error or hang-up: it is gone.
    Gone,
}

/// Waits until `device` is readable or `timeout` passes (nanosecond
/// resolution, unlike poll's milliseconds).
fn wait_readable(device: &SyncDevice, timeout: Duration) -> Readiness {
    let mut pfd = libc::pollfd {
        fd: device.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: one valid pollfd and timespec for the duration of the call.
    let ready = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    if ready <= 0 {
        Readiness::TimedOut // or EINTR: the caller simply loops
    } else if pfd.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
        Readiness::Gone
    } else {
        Readiness::Readable
    }
}

/// How a forwarding thread waits before its next reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    /// Packets are still waiting: read on at once.
    None,
    /// Busy: sleep for [`BATCH_PAUSE`].
    Pause,
    /// Quiet: sleep until a packet arrives.
    Poll,
}

/// One direction: read every packet waiting on `input` (up to a batch),
/// enqueue, release what is due into the other device, wait for the next
/// packet or departure. Returns the final snapshot when told to stop or
/// when the device goes away.
fn forward(
    input: &SyncDevice,
    mut driver: Driver<TunPacket, TunEgress>,
    mtu: usize,
    stop: &AtomicBool,
) -> LinkSnapshot {
    tune_thread();
    let mut reader = Reader::new(mtu);
    let mut wait = Wait::Poll;
    while !stop.load(Ordering::Relaxed) {
        driver.release();
        match wait_for_input(input, &mut driver, wait) {
            Readiness::Readable => {}
            Readiness::TimedOut => continue,
            Readiness::Gone => break,
        }
        match reader.read_batch(input, &mut driver) {
            Some(next) => wait = next,
            None => break,
        }
    }
    driver.finish()
}

/// Waits as `wait` says, at most until the driver has something to do or
/// it is time to check for a stop.
fn wait_for_input(
    input: &SyncDevice,
    driver: &mut Driver<TunPacket, TunEgress>,
    wait: Wait,
) -> Readiness {
    let timeout = driver.timeout().min(STOP_CHECK);
    // A wait that ends by its timeout shows whether the thread stalled
    // (one that ends on a readable device cannot: it reads as on time).
    let waited = driver.now();
    match wait {
        Wait::None => Readiness::Readable,
        Wait::Pause => {
            let pause = BATCH_PAUSE.min(timeout);
            thread::sleep(pause);
            driver.resumed(waited + pause);
            Readiness::Readable
        }
        Wait::Poll => {
            let ready = wait_readable(input, timeout);
            if ready == Readiness::TimedOut {
                driver.resumed(waited + timeout);
            }
            ready
        }
    }
}

/// A forwarding thread's read buffers.
struct Reader {
    /// A GSO super-packet as read, before it is split.
    original: Vec<u8>,
    /// Where the packets land: each read lands in the buffer the packet
    /// keeps through the link.
    bufs: Vec<Vec<u8>>,
    sizes: Vec<usize>,
    /// Room of a packet buffer: the headroom and an MTU.
    len: usize,
}

impl Reader {
    fn new(mtu: usize) -> Reader {
        // Segments of a GSO packet are at most MTU-sized; plain reads fit too.
        let len = HEADROOM + mtu.max(1280);
        Reader {
            original: vec![0u8; VIRTIO_NET_HDR_LEN + 65_535],
            bufs: vec![vec![0u8; len]; IDEAL_BATCH_SIZE],
            sizes: vec![0usize; IDEAL_BATCH_SIZE],
            len,
        }
    }

    /// Reads what waits on `input` (up to a batch of reads) into the link.
    /// Returns how to wait before the next reads; None if the device is
    /// gone.
    fn read_batch(
        &mut self,
        input: &SyncDevice,
        driver: &mut Driver<TunPacket, TunEgress>,
    ) -> Option<Wait> {
        let mut read = 0;
        for _ in 0..IDEAL_BATCH_SIZE {
            let n = match input.recv_multiple(
                &mut self.original,
                &mut self.bufs,
                &mut self.sizes,
                HEADROOM,
            ) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Some(if read >= BUSY_READS {
                        Wait::Pause
                    } else {
                        Wait::Poll
                    });
                }
                // The device is gone.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EBADF | libc::EBADFD | libc::ENODEV)
                    ) =>
                {
                    return None;
                }
                // Interrupted, or a packet the offload layer cannot split: lost, like a bad frame.
                Err(_) => continue,
            };
            read += n;
            // Stamped per read, never earlier: a packet that arrived while
            // this thread was descheduled mid-batch must not leave early.
            let at = driver.now();
            for (buf, &size) in self.bufs.iter_mut().zip(&self.sizes).take(n) {
                let spare = driver.egress_mut().buffers.buffer(self.len);
                let mut packet = std::mem::replace(buf, spare);
                packet.truncate(HEADROOM + size);
                driver.enqueue(at, TunPacket::new(packet));
            }
        }
        Some(Wait::None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::build::udp4;
    use crate::wire::Ipv4Packet;
    use ecnq::{Ecn, SchemeTag};

    /// A packet as the reader hands it over: headroom, then `ip`.
    fn read(ip: &[u8]) -> TunPacket {
        let mut buf = vec![0; HEADROOM];
        buf.extend_from_slice(ip);
        TunPacket::new(buf)
    }

    #[test]
    fn tun_packet_rewrites_its_bytes() {
        let tos = SchemeTag::new(1).tos(Ecn::Ect1);
        let mut p = read(&udp4([10, 0, 0, 1], [10, 0, 0, 2], (5, 6), tos, b"abc"));
        assert_eq!(p.wire_len(), 31);
        let mut marks = p.marks().unwrap();
        marks.ecn = Ecn::Ce;
        p.set_marks(&marks);
        let ip = Ipv4Packet::new_checked(p.packet()).unwrap();
        assert_eq!(ip.tos(), SchemeTag::new(1).tos(Ecn::Ce));
        assert!(ip.verify_checksum());
        assert_eq!(p.marks().unwrap().ecn, Ecn::Ce);
        // A second rewrite starts from the new byte.
        marks.ecn = Ecn::Ect0;
        p.set_marks(&marks);
        assert_eq!(
            Ipv4Packet::new_checked(p.packet()).unwrap().tos(),
            SchemeTag::new(1).tos(Ecn::Ect0)
        );
        assert!(Ipv4Packet::new_checked(p.packet())
            .unwrap()
            .verify_checksum());
    }

    /// A datagram with TOS byte `tos` and a valid UDP checksum (GRO merges only those).
    fn datagram(tos: u8, payload: &[u8]) -> TunPacket {
        let mut ip = udp4([10, 0, 0, 1], [10, 0, 0, 2], (5, 6), tos, payload);
        let mut covered = vec![10, 0, 0, 1, 10, 0, 0, 2, 0, 17];
        covered.extend_from_slice(&((ip.len() - 20) as u16).to_be_bytes());
        covered.extend_from_slice(&ip[20..]);
        let sum = crate::wire::checksum::compute(&covered);
        ip[26..28].copy_from_slice(&sum.to_be_bytes());
        read(&ip)
    }

    #[test]
    fn staged_writes_coalesce_by_tos() {
        // Five datagrams marked one way, then five marked another: what
        // send_multiple does before writing merges each run into one
        // super-packet, and never the two runs.
        let payload = [7u8; 100];
        let (a, b) = (
            SchemeTag::new(1).tos(Ecn::Ect1),
            SchemeTag::new(1).tos(Ecn::Ce),
        );
        let mut batch: Vec<_> = (0..10)
            .map(|i| datagram(if i < 5 { a } else { b }, &payload))
            .collect();
        let mut buffers = Buffers::default();
        let writes = buffers.stage(&mut batch);
        GROTable::default()
            .apply_gro(writes, HEADROOM, true)
            .unwrap();
        let super_packet = HEADROOM + 28 + 5 * payload.len();
        assert_eq!(writes[0].len(), super_packet);
        assert_eq!(writes[5].len(), super_packet);
        assert_eq!(
            Ipv4Packet::new_checked(&writes[0][HEADROOM..])
                .unwrap()
                .tos(),
            a
        );
        assert_eq!(
            Ipv4Packet::new_checked(&writes[5][HEADROOM..])
                .unwrap()
                .tos(),
            b
        );
        // The packets' own buffers went back to the reader.
        assert_eq!(buffers.spare.len(), 10);
        assert_eq!(buffers.buffer(1500).len(), 1500);
        assert_eq!(buffers.spare.len(), 9);
    }

    #[test]
    fn tun_packet_passes_non_udp() {
        let mut raw = udp4([10, 0, 0, 1], [10, 0, 0, 2], (5, 6), 0x02, b"abc");
        raw[9] = 1; // ICMP
        let p = read(&raw);
        assert_eq!(p.marks(), Err(PassReason::NotUdp));
    }
}

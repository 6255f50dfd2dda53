//! `ecnq-shim tun`: the shim as a router hop, through two TUN devices.
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
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use ecnq::PacketMarks;
use tun_rs::{DeviceBuilder, GROTable, SyncDevice, IDEAL_BATCH_SIZE, VIRTIO_NET_HDR_LEN};

use crate::classify::{classify, rewrite, Classified, PassReason, Verdict};
use crate::link::{Link, LinkPacket};
use crate::pump::{Egress, LinkMsg, LinkThread, Observers};
use crate::relay::Direction;
use crate::stats::LinkSnapshot;

/// Room in front of each packet for the virtio-net header a write may need.
const HEADROOM: usize = VIRTIO_NET_HDR_LEN;
/// How often a blocked reader checks whether to stop.
const READ_POLL_MS: i32 = 100;

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
    /// Copies and classifies an IP packet.
    pub fn new(packet: &[u8]) -> TunPacket {
        let mut buf = Vec::with_capacity(HEADROOM + packet.len());
        buf.resize(HEADROOM, 0);
        buf.extend_from_slice(packet);
        let classified = match classify(packet) {
            Verdict::Udp(c) => Ok(c),
            Verdict::Pass(reason) => Err(reason),
        };
        TunPacket { buf, classified }
    }

    /// The IP packet.
    pub fn packet(&self) -> &[u8] {
        &self.buf[HEADROOM..]
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
            c.tos = crate::classify::remarked_tos(c.tos, marks);
            c.marks = *marks;
        }
    }
}

/// Writes released packets into a TUN device, coalesced when offloading.
struct TunEgress {
    device: Arc<SyncDevice>,
    gro: GROTable,
    bufs: Vec<Vec<u8>>,
}

impl Egress<TunPacket> for TunEgress {
    fn send_batch(&mut self, batch: &mut Vec<TunPacket>) -> u64 {
        let mut failed = 0;
        for chunk in batch.chunks_mut(IDEAL_BATCH_SIZE) {
            self.bufs.clear();
            self.bufs
                .extend(chunk.iter_mut().map(|p| std::mem::take(&mut p.buf)));
            if self
                .device
                .send_multiple(&mut self.gro, &mut self.bufs, HEADROOM)
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
    DeviceBuilder::new()
        .name(name)
        .mtu(config.mtu)
        .offload(config.offload)
        .tx_queue_len(config.tx_queue_len)
        .enable(true)
        .build_sync()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot open TUN device {name}: {e}")))
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

/// A running TUN shim.
#[derive(Debug)]
pub struct TunShim {
    up: LinkThread<TunPacket>,
    down: LinkThread<TunPacket>,
    readers: Vec<thread::JoinHandle<()>>,
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
        let link = |d: &Direction, seed| Link::new(d.spec, d.router.clone(), seed, epoch.elapsed());
        let egress = |device: &Arc<SyncDevice>| TunEgress {
            device: device.clone(),
            gro: GROTable::default(),
            bufs: Vec::with_capacity(IDEAL_BATCH_SIZE),
        };
        let up = LinkThread::spawn(
            "up",
            link(&config.up, config.seed),
            egress(&down_dev),
            epoch,
            observers.clone(),
        )?;
        let down = LinkThread::spawn(
            "down",
            link(&config.down, config.seed.wrapping_add(1)),
            egress(&up_dev),
            epoch,
            observers,
        )?;
        let stop = Arc::new(AtomicBool::new(false));
        let reader = |device: Arc<SyncDevice>, tx, name: &str| {
            let stop = stop.clone();
            let mtu = usize::from(config.mtu);
            thread::Builder::new()
                .name(format!("read-{name}"))
                .spawn(move || read_loop(&device, mtu, &tx, epoch, &stop))
        };
        let readers = vec![
            reader(up_dev, up.sender(), "up")?,
            reader(down_dev, down.sender(), "down")?,
        ];
        Ok(TunShim {
            up,
            down,
            readers,
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
        for reader in self.readers {
            let _ = reader.join();
        }
        Ok(TunReport {
            up: self.up.stop()?,
            down: self.down.stop()?,
            udp_gso: self.udp_gso,
        })
    }
}

/// Reads batches from a device into a link until told to stop (or the device fails).
fn read_loop(
    device: &SyncDevice,
    mtu: usize,
    tx: &SyncSender<LinkMsg<TunPacket>>,
    epoch: Instant,
    stop: &AtomicBool,
) {
    let mut original = vec![0u8; VIRTIO_NET_HDR_LEN + 65_535];
    // Segments of a GSO packet are at most MTU-sized; plain reads fit too.
    let mut bufs = vec![vec![0u8; HEADROOM + mtu.max(1280)]; IDEAL_BATCH_SIZE];
    let mut sizes = vec![0usize; IDEAL_BATCH_SIZE];
    while !stop.load(Ordering::Relaxed) {
        let mut pfd = libc::pollfd {
            fd: device.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        if unsafe { libc::poll(&mut pfd, 1, READ_POLL_MS) } <= 0 {
            continue;
        }
        let n = match device.recv_multiple(&mut original, &mut bufs, &mut sizes, HEADROOM) {
            Ok(n) => n,
            // The device is gone.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EBADF | libc::EBADFD | libc::ENODEV)
                ) =>
            {
                return
            }
            // Interrupted, or a packet the offload layer cannot split: lost, like a bad frame.
            Err(_) => continue,
        };
        let at = epoch.elapsed();
        for (buf, &size) in bufs.iter().zip(&sizes).take(n) {
            let packet = TunPacket::new(&buf[HEADROOM..HEADROOM + size]);
            if tx.send(LinkMsg::Packet(at, packet)).is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::build::udp4;
    use crate::wire::Ipv4Packet;
    use ecnq::{Ecn, SchemeTag};

    #[test]
    fn tun_packet_rewrites_its_bytes() {
        let tos = SchemeTag::new(1).tos(Ecn::Ect1);
        let mut p = TunPacket::new(&udp4([10, 0, 0, 1], [10, 0, 0, 2], (5, 6), tos, b"abc"));
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

    #[test]
    fn tun_packet_passes_non_udp() {
        let mut raw = udp4([10, 0, 0, 1], [10, 0, 0, 2], (5, 6), 0x02, b"abc");
        raw[9] = 6;
        let p = TunPacket::new(&raw);
        assert_eq!(p.marks(), Err(PassReason::NotUdp));
    }
}

//! A pcap file of what leaves the shim (`--pcap FILE`, raw IP link type,
//! read by tshark), in the pcap-file crate's encoding.

use std::fs::File;
use std::io::{self, Write};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use pcap_file::pcap::{PcapHeader, PcapPacket};
use pcap_file::{DataLink, Endianness, PcapError};

/// Bytes of each packet kept: the format's usual snapshot length.
const SNAPLEN: u32 = 65_535;

/// A pcap file of packets as they leave the shim, shared by its links.
pub struct PcapWriter {
    /// The encoder, writing into `pending`, and the file.
    out: Mutex<(pcap_file::pcap::PcapWriter<Pending>, File)>,
    pending: Pending,
}

/// What the encoder wrote and the file has not: each batch of packets
/// goes to the file in one write, so the file is whole between batches.
#[derive(Clone, Default)]
struct Pending(Arc<Mutex<Vec<u8>>>);

impl Pending {
    fn bytes(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Write for Pending {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn io_error(e: PcapError) -> io::Error {
    match e {
        PcapError::IoError(e) => e,
        other => io::Error::other(other.to_string()),
    }
}

impl PcapWriter {
    /// Creates `path` and writes the pcap header: microsecond timestamps,
    /// little-endian, raw IPv4/IPv6 packets.
    pub fn create(path: &std::path::Path) -> io::Result<PcapWriter> {
        let mut file = File::create(path)?;
        let pending = Pending::default();
        let header = PcapHeader {
            snaplen: SNAPLEN,
            datalink: DataLink::RAW,
            endianness: Endianness::Little,
            ..PcapHeader::default()
        };
        let encoder =
            pcap_file::pcap::PcapWriter::with_header(pending.clone(), header).map_err(io_error)?;
        file.write_all(&std::mem::take(&mut *pending.bytes()))?;
        Ok(PcapWriter {
            out: Mutex::new((encoder, file)),
            pending,
        })
    }

    /// Appends packets (raw IP), stamped with the current wall-clock time.
    pub fn write_all<'a>(&self, packets: impl IntoIterator<Item = &'a [u8]>) -> io::Result<()> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        let (encoder, file) = &mut *out;
        for packet in packets {
            let kept = &packet[..packet.len().min(SNAPLEN as usize)];
            let len = u32::try_from(packet.len()).unwrap_or(u32::MAX);
            encoder
                .write_packet(&PcapPacket::new(now, len, kept))
                .map_err(io_error)?;
        }
        let batch = std::mem::take(&mut *self.pending.bytes());
        file.write_all(&batch)
    }
}

impl std::fmt::Debug for PcapWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PcapWriter")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each batch is in the file when `write_all` returns, in the classic
    /// layout (24-byte header, 16 bytes before each packet); a packet over
    /// the snapshot length keeps its first 65 535 bytes and its length.
    #[test]
    fn pcap_layout() {
        let path = std::env::temp_dir().join(format!("ecnq-shim-{}.pcap", std::process::id()));
        let pcap = PcapWriter::create(&path).unwrap();
        pcap.write_all([&[0x45u8; 20][..], &[0x60; 48][..]])
            .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 24 + 16 + 20 + 16 + 48);
        assert_eq!(&bytes[..4], &0xa1b2_c3d4u32.to_le_bytes());
        // Link type 101: raw IPv4/IPv6.
        assert_eq!(u32::from_le_bytes(bytes[20..24].try_into().unwrap()), 101);
        assert_eq!(u32::from_le_bytes(bytes[32..36].try_into().unwrap()), 20);
        assert_eq!(bytes[40], 0x45);
        pcap.write_all([&vec![0x45u8; 70_000][..]]).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let at = 24 + 16 + 20 + 16 + 48;
        assert_eq!(bytes.len(), at + 16 + 65_535);
        let field = |i: usize| u32::from_le_bytes(bytes[at + i..at + i + 4].try_into().unwrap());
        assert_eq!((field(8), field(12)), (65_535, 70_000));
    }
}

//! A pcap file of what leaves the shim (`--pcap FILE`, raw IP link type,
//! read by tshark).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// pcap link type for raw IPv4/IPv6 packets.
const LINKTYPE_RAW: u32 = 101;
/// Bytes of each packet kept.
const SNAPLEN: u32 = 65_535;

/// A pcap file of packets as they leave the shim, shared by its links.
pub struct PcapWriter {
    out: Mutex<BufWriter<File>>,
}

impl PcapWriter {
    /// Creates `path` and writes the pcap header.
    pub fn create(path: &std::path::Path) -> io::Result<PcapWriter> {
        let mut out = BufWriter::new(File::create(path)?);
        // Magic (µs timestamps), version 2.4, zone 0, sigfigs 0, snaplen, link type.
        out.write_all(&0xa1b2_c3d4u32.to_le_bytes())?;
        out.write_all(&2u16.to_le_bytes())?;
        out.write_all(&4u16.to_le_bytes())?;
        out.write_all(&[0; 8])?;
        out.write_all(&SNAPLEN.to_le_bytes())?;
        out.write_all(&LINKTYPE_RAW.to_le_bytes())?;
        out.flush()?;
        Ok(PcapWriter {
            out: Mutex::new(out),
        })
    }

    /// Appends packets (raw IP), stamped with the current wall-clock time.
    pub fn write_all<'a>(&self, packets: impl IntoIterator<Item = &'a [u8]>) -> io::Result<()> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        for packet in packets {
            let len = packet.len() as u32;
            let kept = len.min(SNAPLEN);
            out.write_all(&(now.as_secs() as u32).to_le_bytes())?;
            out.write_all(&now.subsec_micros().to_le_bytes())?;
            out.write_all(&kept.to_le_bytes())?;
            out.write_all(&len.to_le_bytes())?;
            out.write_all(&packet[..kept as usize])?;
        }
        out.flush()
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

    #[test]
    fn pcap_layout() {
        let path = std::env::temp_dir().join(format!("ecnq-shim-{}.pcap", std::process::id()));
        let pcap = PcapWriter::create(&path).unwrap();
        pcap.write_all([&[0x45u8; 20][..], &[0x60; 48][..]])
            .unwrap();
        drop(pcap);
        let bytes = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(bytes.len(), 24 + 16 + 20 + 16 + 48);
        assert_eq!(&bytes[..4], &0xa1b2_c3d4u32.to_le_bytes());
        assert_eq!(
            u32::from_le_bytes(bytes[20..24].try_into().unwrap()),
            LINKTYPE_RAW
        );
        assert_eq!(u32::from_le_bytes(bytes[32..36].try_into().unwrap()), 20);
        assert_eq!(bytes[40], 0x45);
    }
}

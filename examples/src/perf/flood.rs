//! A flood of fake newcomers on the real stack: a stream of short UDP
//! "flows", each a few packets from a new source port, tagged and
//! ECN-marked as a fresh sender of a scheme marks its packets, that never
//! answer anything. Flow `k` starts `k` periods after the flood, a period
//! being one flow's bits over the stream's rate, so the stream offers its
//! rate whatever the network does. It is the simulator's
//! `[[newcomer_flood]]` (`erc-fake-newcomers`) for the relay: issue 54's
//! abuse test, where a router that hands every newcomer a share is
//! abused by it (`fake_newcomers_take_no_more_than_they_send` in
//! tests/e2e.rs).

use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::Duration;

use ecnq::tos_io::send_with_tos;
use ecnq::{Scheme, SchemeTag};
use tokio::time::Instant;

use super::report::rate;

/// Bytes of an IPv4 header without options (RFC 791 §3.1) and a UDP
/// header (RFC 768): what a packet's size counts beyond its payload, as
/// the relay counts a datagram's wire length.
const IPV4_UDP_HEADERS: u32 = 28;

/// Packets per fake flow in issue 54's stream: about the ten packets an
/// erc newcomer needs to read its index, and a few more.
pub const PACKETS: u32 = 12;

/// Bytes per packet in issue 54's stream.
pub const SIZE: u32 = 300;

/// What a flood sends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FloodSpec {
    /// The stream's rate, bits per second of IP packets.
    pub rate: f64,
    /// Packets per fake flow, sent back to back.
    pub packets: u32,
    /// Bytes per packet: the IP packet (IPv4 and UDP headers included).
    pub size: u32,
    /// The scheme whose DSCP tag and ECN codepoint the packets carry (a
    /// fresh sender's: erc's is ECT(0)).
    pub scheme: Scheme,
    /// Loopback addresses the flows take turns at: 127.0.0.1 up to
    /// 127.0.0.`sources`, as hosts of a botnet or spoofed sources would
    /// (a relay limits the sessions of one address).
    pub sources: u8,
}

impl FloodSpec {
    /// A flood at `rate` bit/s of erc-tagged fake flows of [`PACKETS`]
    /// packets of [`SIZE`] bytes from 127.0.0.1: the stream issue 54
    /// measured.
    pub fn new(rate: f64) -> FloodSpec {
        FloodSpec {
            rate,
            packets: PACKETS,
            size: SIZE,
            scheme: Scheme::Erc,
            sources: 1,
        }
    }

    /// Checks the ranges: a rate of 1 kbit/s to 10 Gbit/s, at least one
    /// packet and one source, packets of headers and a byte up to 1500
    /// bytes (an Ethernet MTU).
    pub fn validate(&self) -> Result<(), String> {
        if !(self.rate.is_finite() && (1e3..=1e10).contains(&self.rate)) {
            return Err(format!(
                "a flood's rate must be 1 kbit/s to 10 Gbit/s, got {} bit/s",
                self.rate
            ));
        }
        if self.packets == 0 || self.sources == 0 {
            return Err("a flood needs at least one packet per flow and one source".into());
        }
        if !(IPV4_UDP_HEADERS + 1..=1500).contains(&self.size) {
            return Err(format!(
                "a flood's packets must be {} to 1500 bytes, got {}",
                IPV4_UDP_HEADERS + 1,
                self.size
            ));
        }
        Ok(())
    }

    /// Time between fake flows' starts: one flow's bits over the rate.
    pub fn period(&self) -> Duration {
        Duration::from_secs_f64(f64::from(self.packets) * f64::from(self.size) * 8.0 / self.rate)
    }

    /// The TOS byte of every packet: the scheme's DSCP tag and the
    /// codepoint its senders start with.
    pub fn tos(&self) -> u8 {
        let wire = self.scheme.wire();
        SchemeTag::new(wire.id()).tos(wire.base_ecn())
    }

    /// Sends fake flows to `to` (an IPv4 address) until `stop` completes;
    /// returns what was sent. Each flow binds a fresh socket (a new source
    /// port), sends its packets and closes it.
    pub async fn send(
        &self,
        to: SocketAddr,
        stop: impl Future<Output = ()>,
    ) -> Result<FloodSent, String> {
        self.validate()?;
        if !to.is_ipv4() {
            return Err(format!("a flood sends from 127.0.0.x: {to} is not IPv4"));
        }
        // All zeros: without QUIC's fixed bit a QUIC endpoint behind the
        // relay discards the datagram unanswered (RFC 9000 §17.2, §17.3.1).
        let payload = vec![0u8; (self.size - IPV4_UDP_HEADERS) as usize];
        let (tos, period) = (self.tos(), self.period());
        let start = Instant::now();
        let mut sent = FloodSent::default();
        tokio::pin!(stop);
        loop {
            let due = start + period.mul_f64(sent.flows as f64);
            tokio::select! {
                biased;
                () = &mut stop => break,
                () = tokio::time::sleep_until(due) => {}
            }
            let source = Ipv4Addr::new(127, 0, 0, 1 + (sent.flows % u64::from(self.sources)) as u8);
            let socket = UdpSocket::bind((source, 0))
                .map_err(|e| format!("cannot bind a flood socket on {source}: {e}"))?;
            for _ in 0..self.packets {
                send_with_tos(&socket, &payload, Some(to), tos, false)
                    .map_err(|e| format!("a flood packet to {to} failed: {e}"))?;
                sent.packets += 1;
                sent.bytes += u64::from(self.size);
            }
            sent.flows += 1;
        }
        sent.seconds = start.elapsed().as_secs_f64();
        Ok(sent)
    }
}

/// What a flood sent.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FloodSent {
    /// Fake flows (source ports).
    pub flows: u64,
    /// Packets.
    pub packets: u64,
    /// Bytes of IP packets.
    pub bytes: u64,
    /// Seconds it ran.
    pub seconds: f64,
}

impl FloodSent {
    /// The rate it sent at, bit/s (0 if it never ran).
    pub fn rate(&self) -> f64 {
        rate(self.bytes, self.seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ecnq::tos_io::{enable_recv_tos, recv_with_tos, set_buffers};
    use ecnq::Ecn;
    use std::collections::HashSet;

    /// A 0.2 s flood at 1 Mbit/s of 12-packet flows from two addresses
    /// reaches a loopback socket as it was sent: the flows a 29 ms period
    /// gives, each from its own source port, the sources taking turns,
    /// every packet 272 bytes of payload carrying erc's tag and ECT(0).
    #[tokio::test]
    async fn a_flood_sends_its_flows_from_new_ports_with_the_scheme_tag() {
        let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_recv_tos(&receiver, false).unwrap();
        set_buffers(&receiver, 1 << 20);
        let spec = FloodSpec {
            sources: 2,
            ..FloodSpec::new(1e6)
        };
        assert_eq!(spec.period(), Duration::from_micros(28_800));
        let stop = tokio::time::sleep(Duration::from_millis(200));
        let sent = spec
            .send(receiver.local_addr().unwrap(), stop)
            .await
            .unwrap();
        // Flows at 0, 28.8, …, 172.8 ms: one more if the stop ran late,
        // one less if the host stalled the test past a flow's start.
        assert!((6..=8).contains(&sent.flows), "{sent:?}");
        assert_eq!(sent.packets, sent.flows * 12);
        assert_eq!(sent.bytes, sent.packets * 300);

        let mut buf = [0u8; 2048];
        let mut ports = HashSet::new();
        let mut sources = HashSet::new();
        for _ in 0..sent.packets {
            let meta = recv_with_tos(&receiver, &mut buf).unwrap();
            assert_eq!(meta.len, 272);
            let tos = meta.tos.expect("the kernel reports the TOS byte");
            assert_eq!(
                SchemeTag::from_tos(tos),
                SchemeTag::new(Scheme::Erc.wire().id())
            );
            assert_eq!(Ecn::from_tos(tos), Ecn::Ect0);
            ports.insert(meta.from);
            sources.insert(meta.from.ip());
        }
        assert!(recv_with_tos(&receiver, &mut buf).is_err(), "nothing more");
        assert_eq!(ports.len() as u64, sent.flows);
        assert_eq!(sources.len(), 2);
    }

    #[test]
    fn a_flood_outside_its_ranges_is_refused() {
        let bad = [
            FloodSpec::new(0.0),
            FloodSpec::new(f64::NAN),
            FloodSpec {
                packets: 0,
                ..FloodSpec::new(1e6)
            },
            FloodSpec {
                size: 28,
                ..FloodSpec::new(1e6)
            },
            FloodSpec {
                sources: 0,
                ..FloodSpec::new(1e6)
            },
        ];
        for spec in bad {
            assert!(spec.validate().is_err(), "{spec:?}");
        }
        assert_eq!(FloodSpec::new(1e6).validate(), Ok(()));
    }
}

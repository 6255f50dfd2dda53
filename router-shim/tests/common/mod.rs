//! Helpers shared by the integration tests.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use ecnq_shim::tos_socket::{recv_with_tos, send_with_tos};

/// A datagram as a test receiver saw it.
// Each test binary reads the fields it needs.
#[allow(dead_code)]
#[derive(Clone, Debug)]
pub struct Received {
    pub at: Instant,
    pub len: usize,
    pub tos: u8,
    pub from: SocketAddr,
    pub payload: Vec<u8>,
}

/// Receives until `idle` passes with nothing (or `max` datagrams).
pub fn receive_all(socket: &UdpSocket, idle: Duration, max: usize) -> Vec<Received> {
    socket.set_nonblocking(false).unwrap();
    socket.set_read_timeout(Some(idle)).unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65_536];
    let mut peek = [0u8; 1];
    while out.len() < max {
        match socket.peek_from(&mut peek) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break, // idle for `idle`
        }
        let meta = recv_with_tos(socket, &mut buf).unwrap();
        out.push(Received {
            at: Instant::now(),
            len: meta.len,
            tos: meta.tos,
            from: meta.from,
            payload: buf[..meta.len].to_vec(),
        });
    }
    out
}

/// Sends one IPv4 datagram with a TOS byte.
pub fn send(socket: &UdpSocket, to: SocketAddr, payload: &[u8], tos: u8) {
    send_with_tos(socket, payload, Some(to), tos, false).unwrap();
}

/// The rate (bit/s, `wire` bytes per packet) at which `got` arrived in its
/// steady state: between the 10th and the 90th percentile packet, so the
/// start (queue filling) and a late wake-up of a starved thread at the very
/// end do not count; bursts in between average out.
pub fn steady_rate(got: &[Received], wire: f64) -> f64 {
    assert!(got.len() >= 20, "too few packets to measure: {}", got.len());
    let (a, b) = (got.len() / 10, got.len() * 9 / 10);
    let span = got[b].at - got[a].at;
    (b - a) as f64 * wire * 8.0 / span.as_secs_f64()
}

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
    while out.len() < max && socket.peek_from(&mut peek).is_ok() {
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

//! Test helpers: endpoints on loopback, bulk transfers with integrity
//! checks, and a remarking UDP relay that reads every packet's TOS byte from
//! the wire with a plain socket.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use ecnq::quic::{CongestionControl, Connection, Endpoint, Options, SelfSigned};
use ecnq::signal::PacketMarks;
use ecnq::tos_io::{enable_recv_tos, recv_with_tos, send_with_tos, sent_as_ipv6};
use ecnq::{Ecn, SchemeTag};

/// Deterministic test data (xorshift64*), so the receiver can check every byte.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

pub fn options(cc: CongestionControl) -> Options {
    Options::new(cc).alpn(&[b"ecnq-test"])
}

/// A server on `server_bind` and a client on an unspecified address of the same family.
pub fn endpoints(
    client_cc: CongestionControl,
    server_cc: CongestionControl,
    server_bind: &str,
) -> (Endpoint, Endpoint) {
    let cert = SelfSigned::new(&["localhost"]).unwrap();
    let bind: SocketAddr = server_bind.parse().unwrap();
    let server = Endpoint::server(bind, cert.identity(), options(server_cc)).unwrap();
    let client_bind: SocketAddr = if bind.is_ipv4() {
        "0.0.0.0:0".parse().unwrap()
    } else {
        "[::]:0".parse().unwrap()
    };
    let client = Endpoint::client(client_bind, cert.roots(), options(client_cc)).unwrap();
    (client, server)
}

/// Connects `client` to `target` (the server, or a relay in front of it).
pub async fn connect(
    client: &Endpoint,
    server: &Endpoint,
    target: SocketAddr,
) -> (Connection, Connection) {
    let (c, s) = tokio::join!(client.connect(target, "localhost"), server.accept());
    (c.unwrap(), s.unwrap().unwrap())
}

/// Sends `len` bytes from `sender` to `receiver` on one stream and checks
/// every byte on arrival.
pub async fn transfer(sender: &Connection, receiver: &Connection, len: usize, seed: u64) {
    let data = pattern(len, seed);
    let send = async {
        let mut stream = sender.open_uni().await.unwrap();
        stream.write_all(&data).await.unwrap();
        stream.finish().unwrap();
        stream.stopped().await.unwrap();
    };
    let recv = async {
        let mut stream = receiver.accept_uni().await.unwrap();
        stream.read_to_end(len + 1).await.unwrap()
    };
    let ((), received) = tokio::join!(send, recv);
    assert_eq!(received.len(), len, "length");
    assert!(received == data, "payload corrupted");
}

/// Direction through the relay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    ToServer,
    ToClient,
}

type Remark = dyn Fn(Dir, u8) -> u8 + Send + Sync;
type Mangle = dyn Fn(Dir, &mut [u8]) + Send + Sync;

/// A UDP relay on 127.0.0.1 between one client and a server: it reads each
/// packet's TOS byte (IP_RECVTOS), may rewrite it, and forwards the packet
/// with the (new) TOS byte (IP_TOS control message).
pub struct Relay {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<(Dir, u8)>>>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Relay {
    pub fn start(
        server: SocketAddr,
        remark: impl Fn(Dir, u8) -> u8 + Send + Sync + 'static,
    ) -> Relay {
        Relay::start_with(server, remark, |_, _| {})
    }

    /// [`Relay::start`] that also lets `mangle` rewrite each datagram.
    pub fn start_with(
        server: SocketAddr,
        remark: impl Fn(Dir, u8) -> u8 + Send + Sync + 'static,
        mangle: impl Fn(Dir, &mut [u8]) + Send + Sync + 'static,
    ) -> Relay {
        let front = UdpSocket::bind("127.0.0.1:0").unwrap();
        let back = UdpSocket::bind("127.0.0.1:0").unwrap();
        for s in [&front, &back] {
            enable_recv_tos(s, false).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        }
        let addr = front.local_addr().unwrap();
        let (front, back) = (Arc::new(front), Arc::new(back));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let client = Arc::new(Mutex::new(None::<SocketAddr>));
        let remark: Arc<Remark> = Arc::new(remark);
        let mangle: Arc<Mangle> = Arc::new(mangle);
        let mut threads = Vec::new();
        for dir in [Dir::ToServer, Dir::ToClient] {
            let (from, to) = match dir {
                Dir::ToServer => (front.clone(), back.clone()),
                Dir::ToClient => (back.clone(), front.clone()),
            };
            let (seen, stop, client, remark, mangle) = (
                seen.clone(),
                stop.clone(),
                client.clone(),
                remark.clone(),
                mangle.clone(),
            );
            threads.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                while !stop.load(Ordering::Relaxed) {
                    let Ok((len, src, tos)) = recv_blocking(&from, &mut buf) else {
                        continue;
                    };
                    let dst = match dir {
                        Dir::ToServer => {
                            *client.lock().unwrap() = Some(src);
                            server
                        }
                        Dir::ToClient => match *client.lock().unwrap() {
                            Some(c) => c,
                            None => continue,
                        },
                    };
                    seen.lock().unwrap().push((dir, tos));
                    let tos = remark(dir, tos);
                    mangle(dir, &mut buf[..len]);
                    let _ = send_with_tos(&*to, &buf[..len], Some(dst), tos, sent_as_ipv6(dst));
                }
            }));
        }
        Relay {
            addr,
            seen,
            stop,
            threads,
        }
    }

    /// The TOS bytes of the packets seen in one direction, in arrival order.
    pub fn tos(&self, dir: Dir) -> Vec<u8> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .filter(|(d, _)| *d == dir)
            .map(|(_, t)| *t)
            .collect()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// What an ecnq router with nothing to say does to a TOS byte: it raises a
/// presence probe (a tagged Not-ECT packet of a scheme whose base codepoint
/// is ECT, an MCP packet with the probe bit) and leaves everything else
/// alone.
pub fn raise_probes(tos: u8) -> u8 {
    let mut marks = PacketMarks {
        ecn: Ecn::from_tos(tos),
        tag: SchemeTag::from_tos(tos),
        hash: 0,
        flow: 0,
    };
    let before = marks;
    marks.tag.wire().raise_probe(&mut marks);
    if marks == before {
        tos
    } else {
        marks.tag.tos(marks.ecn)
    }
}

/// A relay that stands for an ecnq router at low load ([`raise_probes`]).
pub fn router_relay(server: SocketAddr) -> Relay {
    Relay::start(server, |_, tos| raise_probes(tos))
}

/// A plain UDP socket on `bind` that reports the TOS / traffic class of what
/// it receives.
pub fn tos_reading_socket(bind: &str) -> UdpSocket {
    let socket = UdpSocket::bind(bind).unwrap();
    enable_recv_tos(&socket, socket.local_addr().unwrap().is_ipv6()).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    socket
}

/// Receives one datagram; returns its length and TOS / traffic-class byte.
pub fn recv_tos(socket: &UdpSocket) -> (usize, u8) {
    let mut buf = vec![0u8; 65536];
    let (len, _, tos) = recv_blocking(socket, &mut buf).unwrap();
    (len, tos)
}

/// Waits for a datagram as long as the socket's read timeout allows, then
/// receives it: length, sender and TOS byte (an error if it has none).
fn recv_blocking(socket: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, u8)> {
    socket.peek(&mut [0u8; 1])?;
    let meta = recv_with_tos(socket, buf)?;
    let tos = meta
        .tos
        .ok_or_else(|| io::Error::other("no TOS control message"))?;
    Ok((meta.len, meta.from, tos))
}

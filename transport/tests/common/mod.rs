//! Test helpers: endpoints on loopback, bulk transfers with integrity
//! checks, and a remarking UDP relay that reads every packet's TOS byte from
//! the wire with a plain socket.

use std::io;
use std::mem;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use ecnq::quic::{CongestionControl, Connection, Endpoint, Options, SelfSigned};
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
        let front = UdpSocket::bind("127.0.0.1:0").unwrap();
        let back = UdpSocket::bind("127.0.0.1:0").unwrap();
        for s in [&front, &back] {
            set_int(s, libc::IPPROTO_IP, libc::IP_RECVTOS, 1).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        }
        let addr = front.local_addr().unwrap();
        let (front, back) = (Arc::new(front), Arc::new(back));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let client = Arc::new(Mutex::new(None::<SocketAddr>));
        let remark: Arc<Remark> = Arc::new(remark);
        let mut threads = Vec::new();
        for dir in [Dir::ToServer, Dir::ToClient] {
            let (from, to) = match dir {
                Dir::ToServer => (front.clone(), back.clone()),
                Dir::ToClient => (back.clone(), front.clone()),
            };
            let (seen, stop, client, remark) =
                (seen.clone(), stop.clone(), client.clone(), remark.clone());
            threads.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                while !stop.load(Ordering::Relaxed) {
                    let Ok((len, src, tos)) = recv_with_tos(&from, &mut buf) else {
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
                    let _ = send_with_tos(&to, &buf[..len], dst, remark(dir, tos));
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
/// presence probe (a tagged Not-ECT packet of a scheme that probes) to the
/// scheme's base codepoint, and leaves everything else alone.
pub fn raise_probes(tos: u8) -> u8 {
    let (ecn, tag) = (Ecn::from_tos(tos), SchemeTag::from_tos(tos));
    if ecn == Ecn::NotEct && tag.wire().sends_probes() {
        tag.tos(tag.wire().base_ecn())
    } else {
        tos
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
    if socket.local_addr().unwrap().is_ipv4() {
        set_int(&socket, libc::IPPROTO_IP, libc::IP_RECVTOS, 1).unwrap();
    } else {
        set_int(&socket, libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS, 1).unwrap();
    }
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    socket
}

/// Receives one datagram; returns its length and TOS / traffic-class byte.
pub fn recv_tos(socket: &UdpSocket) -> (usize, u8) {
    let mut buf = vec![0u8; 65536];
    let (len, _, tos) = recv_with_tos(socket, &mut buf).unwrap();
    (len, tos)
}

fn set_int(s: &UdpSocket, level: i32, name: i32, value: libc::c_int) -> io::Result<()> {
    // SAFETY: a valid socket and a c_int option value.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as _,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[repr(C, align(8))]
struct Control([u8; 128]);

fn recv_with_tos(s: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, u8)> {
    let mut name: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = Control([0; 128]);
    let mut hdr: libc::msghdr = unsafe { mem::zeroed() };
    hdr.msg_name = (&mut name as *mut libc::sockaddr_storage).cast();
    hdr.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as _;
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    hdr.msg_control = control.0.as_mut_ptr().cast();
    hdr.msg_controllen = 128;
    // SAFETY: all pointers are to live buffers of the given sizes.
    let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut hdr, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut tos = None;
    // SAFETY: the kernel wrote well-formed cmsgs.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&hdr);
        while !c.is_null() {
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::IPPROTO_IP, libc::IP_TOS) => tos = Some(*libc::CMSG_DATA(c)),
                (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) => {
                    tos = Some(libc::CMSG_DATA(c).cast::<libc::c_int>().read_unaligned() as u8)
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(&hdr, c);
        }
    }
    let addr = unsafe { socket2::SockAddr::new(name, hdr.msg_namelen) }
        .as_socket()
        .unwrap();
    let tos = tos.ok_or_else(|| io::Error::other("no TOS control message"))?;
    Ok((n as usize, addr, tos))
}

fn send_with_tos(s: &UdpSocket, data: &[u8], dst: SocketAddr, tos: u8) -> io::Result<()> {
    let name = socket2::SockAddr::from(dst);
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let mut control = Control([0; 128]);
    let mut hdr: libc::msghdr = unsafe { mem::zeroed() };
    hdr.msg_name = name.as_ptr() as *mut libc::c_void;
    hdr.msg_namelen = name.len();
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    hdr.msg_control = control.0.as_mut_ptr().cast();
    // SAFETY: one int-sized cmsg in a 128-byte aligned buffer.
    unsafe {
        hdr.msg_controllen = libc::CMSG_SPACE(mem::size_of::<libc::c_int>() as _) as _;
        let c = libc::CMSG_FIRSTHDR(&hdr);
        (*c).cmsg_level = libc::IPPROTO_IP;
        (*c).cmsg_type = libc::IP_TOS;
        (*c).cmsg_len = libc::CMSG_LEN(mem::size_of::<libc::c_int>() as _) as _;
        libc::CMSG_DATA(c)
            .cast::<libc::c_int>()
            .write_unaligned(libc::c_int::from(tos));
        if libc::sendmsg(s.as_raw_fd(), &hdr, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

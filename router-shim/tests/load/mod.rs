//! Load against an `ecnq-shim relay` subprocess, shared by `tests/flood.rs`
//! and `benches/soak.rs`: the shim with its metrics endpoint, an echo
//! server behind it, paced senders of numbered datagrams, tallies of what
//! came through, and what the kernel and `/proc` say about the process.

// Each of the two uses part of it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use ecnq::tos_io::{enable_recv_tos, recv_with_tos, send_with_tos, set_buffers};

/// The shim binary Cargo built for this test or bench.
const BIN: &str = env!("CARGO_BIN_EXE_ecnq-shim");

/// The first bytes of every numbered datagram (no garbage has them by chance).
const MAGIC: [u8; 8] = *b"ecnqLOAD";
/// Magic, flow number (u32), sequence number (u64).
pub const HEADER: usize = 20;
/// Socket buffers asked for by the load's sockets.
const BUFFER: i32 = 8 << 20;

type Result<T> = std::result::Result<T, String>;

/// A running `ecnq-shim relay` with `--metrics`; its stderr is collected.
pub struct Shim {
    child: Child,
    /// Where clients send.
    pub listen: SocketAddr,
    metrics: SocketAddr,
    stderr: Option<JoinHandle<String>>,
}

/// How the shim ended.
pub struct Exit {
    /// It exited with status 0 on SIGTERM.
    pub clean: bool,
    /// Its final counters (JSON lines).
    pub stdout: String,
    /// Everything it wrote to stderr.
    pub stderr: String,
}

impl Exit {
    /// Panic messages in stderr.
    pub fn panics(&self) -> usize {
        self.stderr.matches("panicked").count()
    }
}

impl Shim {
    /// Starts a relay on 127.0.0.1 toward `target` with `args` added
    /// (`--link ...` and the like); returns once it listens.
    pub fn start(target: SocketAddr, args: &[&str]) -> Result<Shim> {
        let mut child = Command::new(BIN)
            .args([
                "relay",
                "--listen",
                "127.0.0.1:0",
                "--metrics",
                "127.0.0.1:0",
            ])
            .args(["--to", &target.to_string()])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {BIN}: {e}"))?;
        let mut lines = BufReader::new(child.stderr.take().ok_or("no stderr")?);
        let mut banner = String::new();
        let after = |text: &str, marker: &str, end: char| -> Option<SocketAddr> {
            let rest = text.split(marker).nth(1)?;
            rest.split(end).next()?.trim().parse().ok()
        };
        let (mut metrics, mut listen) = (None, None);
        while listen.is_none() {
            let mut line = String::new();
            if lines.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                let _ = child.wait();
                return Err(format!("the shim exited before listening: {banner}"));
            }
            metrics = metrics.or_else(|| after(&line, "metrics on http://", '/'));
            listen = after(&line, "listening on ", ',');
            banner += &line;
        }
        let stderr = thread::spawn(move || {
            let mut rest = String::new();
            let _ = lines.read_to_string(&mut rest);
            banner + &rest
        });
        Ok(Shim {
            child,
            listen: listen.ok_or("no listening address")?,
            metrics: metrics.ok_or("no metrics address in the banner")?,
            stderr: Some(stderr),
        })
    }

    /// Scrapes the metrics endpoint.
    pub fn metrics(&self) -> Result<Metrics> {
        let mut stream = TcpStream::connect_timeout(&self.metrics, Duration::from_secs(2))
            .map_err(|e| format!("metrics: {e}"))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .map_err(|e| e.to_string())?;
        stream
            .write_all(b"GET /metrics HTTP/1.0\r\n\r\n")
            .map_err(|e| format!("metrics: {e}"))?;
        let mut text = String::new();
        stream
            .read_to_string(&mut text)
            .map_err(|e| format!("metrics: {e}"))?;
        Ok(Metrics::parse(&text))
    }

    /// Resident memory, KiB (`VmRSS`).
    pub fn rss_kib(&self) -> Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .map_err(|e| format!("the shim's status: {e}"))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| "no VmRSS".to_owned())
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM, then waits for the final counters.
    pub fn stop(mut self) -> Result<Exit> {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let mut stdout = String::new();
        if let Some(mut out) = self.child.stdout.take() {
            let _ = out.read_to_string(&mut stdout);
        }
        let status = self.child.wait().map_err(|e| e.to_string())?;
        let stderr = self
            .stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        Ok(Exit {
            clean: status.success(),
            stdout,
            stderr,
        })
    }
}

impl Drop for Shim {
    fn drop(&mut self) {
        // Not stopped (an error on the way): do not leave it running.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One scrape: series (`name{labels}`) and their values.
#[derive(Clone, Default)]
pub struct Metrics(HashMap<String, f64>);

impl Metrics {
    fn parse(text: &str) -> Metrics {
        let body = text.split("\r\n\r\n").nth(1).unwrap_or(text);
        Metrics(
            body.lines()
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| {
                    let (series, value) = l.rsplit_once(' ')?;
                    Some((series.to_owned(), value.parse().ok()?))
                })
                .collect(),
        )
    }

    /// The sum of every series of metric `name` (`ecnq_shim_` left out)
    /// whose labels contain `labels`; 0 if there is none.
    pub fn sum(&self, name: &str, labels: &str) -> u64 {
        let name = format!("ecnq_shim_{name}");
        self.0
            .iter()
            .filter(|(series, _)| {
                let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
                metric == name && rest.contains(labels)
            })
            .map(|(_, v)| *v as u64)
            .sum()
    }
}

/// Packets the kernel dropped at the UDP socket bound to `addr` (IPv4):
/// its receive buffer was full. From `/proc/net/udp`; 0 if not listed.
pub fn kernel_drops(addr: SocketAddr) -> u64 {
    let SocketAddr::V4(v4) = addr else {
        return 0;
    };
    let local = format!(
        "{:08X}:{:04X}",
        u32::from_le_bytes(v4.ip().octets()),
        v4.port()
    );
    std::fs::read_to_string("/proc/net/udp")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some(local.as_str()))
        .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
        .sum()
}

/// A UDP socket on `ip` (port 0 for any) with large buffers and TOS
/// reporting.
pub fn socket(addr: SocketAddr) -> Result<UdpSocket> {
    let s = UdpSocket::bind(addr).map_err(|e| format!("bind {addr}: {e}"))?;
    enable_recv_tos(&s, false).map_err(|e| e.to_string())?;
    set_buffers(&s, BUFFER);
    Ok(s)
}

/// A numbered datagram of `len` bytes (at least [`HEADER`]).
pub fn numbered(flow: u32, seq: u64, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len.max(HEADER)];
    p[..8].copy_from_slice(&MAGIC);
    p[8..12].copy_from_slice(&flow.to_be_bytes());
    p[12..20].copy_from_slice(&seq.to_be_bytes());
    p
}

fn number_of(payload: &[u8]) -> Option<(u32, u64)> {
    if payload.len() < HEADER || payload[..8] != MAGIC {
        return None;
    }
    let flow = u32::from_be_bytes(payload[8..12].try_into().ok()?);
    let seq = u64::from_be_bytes(payload[12..20].try_into().ok()?);
    Some((flow, seq))
}

/// Which numbered datagrams arrived, per flow, and from where.
#[derive(Default)]
pub struct Tally(Mutex<Vec<Seen>>);

#[derive(Default, Clone)]
struct Seen {
    bits: Vec<u64>,
    from: Vec<SocketAddr>,
}

impl Tally {
    fn note(&self, flow: u32, seq: u64, from: SocketAddr) {
        let mut flows = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let flow = flow as usize;
        if flows.len() <= flow {
            flows.resize(flow + 1, Seen::default());
        }
        let seen = &mut flows[flow];
        let word = (seq / 64) as usize;
        if seen.bits.len() <= word {
            seen.bits.resize(word + 1, 0);
        }
        seen.bits[word] |= 1 << (seq % 64);
        if !seen.from.contains(&from) {
            seen.from.push(from);
        }
    }

    /// Distinct sequence numbers of `flow` in `seqs` that arrived.
    pub fn count(&self, flow: u32, seqs: std::ops::Range<u64>) -> u64 {
        let flows = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let Some(seen) = flows.get(flow as usize) else {
            return 0;
        };
        seqs.filter(|s| {
            seen.bits
                .get((s / 64) as usize)
                .is_some_and(|w| w & (1 << (s % 64)) != 0)
        })
        .count() as u64
    }

    /// Distinct datagrams of all flows that arrived.
    pub fn total(&self) -> u64 {
        let flows = self.0.lock().unwrap_or_else(|p| p.into_inner());
        flows
            .iter()
            .flat_map(|s| &s.bits)
            .map(|w| u64::from(w.count_ones()))
            .sum()
    }

    /// The addresses `flow`'s datagrams came from.
    pub fn sources(&self, flow: u32) -> Vec<SocketAddr> {
        let flows = self.0.lock().unwrap_or_else(|p| p.into_inner());
        flows
            .get(flow as usize)
            .map(|s| s.from.clone())
            .unwrap_or_default()
    }
}

/// A thread reading a set of sockets until stopped: it notes the numbered
/// datagrams in its tally and, as an echo server, sends them back where
/// they came from with the TOS byte they arrived with.
pub struct Receiver {
    /// What arrived.
    pub tally: Arc<Tally>,
    /// Datagrams read, numbered or not.
    pub datagrams: Arc<std::sync::atomic::AtomicU64>,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

impl Receiver {
    /// Starts reading `sockets`; `echo` sends numbered datagrams back.
    pub fn start(sockets: Vec<UdpSocket>, echo: bool) -> Result<Receiver> {
        for s in &sockets {
            s.set_nonblocking(true).map_err(|e| e.to_string())?;
        }
        let tally = Arc::new(Tally::default());
        let datagrams = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (t, d, s) = (tally.clone(), datagrams.clone(), stop.clone());
        let handle = thread::spawn(move || {
            let mut fds: Vec<libc::pollfd> = sockets
                .iter()
                .map(|s| libc::pollfd {
                    fd: s.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            let mut buf = vec![0u8; 65_536];
            while !s.load(Ordering::Relaxed) {
                // SAFETY: poll(2) on descriptors this thread's sockets own.
                let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 100) };
                if ready <= 0 {
                    continue;
                }
                for (fd, socket) in fds.iter_mut().zip(&sockets) {
                    if fd.revents == 0 {
                        continue;
                    }
                    fd.revents = 0;
                    while let Ok(meta) = recv_with_tos(socket, &mut buf) {
                        d.fetch_add(1, Ordering::Relaxed);
                        let payload = &buf[..meta.len];
                        if let Some((flow, seq)) = number_of(payload) {
                            t.note(flow, seq, meta.from);
                            if echo {
                                let _ = send_with_tos(
                                    socket,
                                    payload,
                                    Some(meta.from),
                                    meta.tos.unwrap_or(0),
                                    false,
                                );
                            }
                        }
                    }
                }
                if fds.len() > 1 {
                    // Many sockets: let datagrams gather rather than poll
                    // them all for each one.
                    thread::sleep(Duration::from_millis(1));
                }
            }
        });
        Ok(Receiver {
            tally,
            datagrams,
            stop,
            handle,
        })
    }

    /// Stops the thread.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.handle.join();
    }
}

/// Sends at `pps` datagrams per second from now until `stop` says so:
/// `send(k)` sends the k-th. Returns how many it sent.
pub fn paced(pps: f64, stop: impl Fn() -> bool, mut send: impl FnMut(u64)) -> u64 {
    let start = Instant::now();
    let mut sent = 0u64;
    while !stop() {
        let due = (start.elapsed().as_secs_f64() * pps) as u64;
        while sent < due {
            send(sent);
            sent += 1;
        }
        thread::sleep(Duration::from_micros(500));
    }
    sent
}

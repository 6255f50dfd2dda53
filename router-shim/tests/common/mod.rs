//! Helpers shared by the integration tests; each test binary uses those it
//! needs.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use ecnq::tos_io::{recv_with_tos, send_with_tos};
use ecnq::{Ecn, SchemeTag};

/// A datagram as a test receiver saw it.
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
            tos: meta.tos.expect("the socket reports the TOS byte"),
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

/// Sends 200 datagrams 2 ms apart from `sender` to `to`, each stamped with
/// its send time, while `receiver` (where they end up) takes them in;
/// returns each one's one-way delay in milliseconds, smallest first.
pub fn one_way_delays_ms(sender: &UdpSocket, to: SocketAddr, receiver: UdpSocket) -> Vec<f64> {
    const COUNT: usize = 200;
    let epoch = Instant::now();
    let rx = thread::spawn(move || receive_all(&receiver, Duration::from_millis(500), COUNT));
    for _ in 0..COUNT {
        let nanos = epoch.elapsed().as_nanos() as u64;
        send(sender, to, &nanos.to_be_bytes(), 0);
        thread::sleep(Duration::from_millis(2));
    }
    let got = rx.join().unwrap();
    assert_eq!(got.len(), COUNT);
    let mut delays: Vec<f64> = got
        .iter()
        .map(|r| {
            let sent = u64::from_be_bytes(r.payload[..8].try_into().unwrap());
            (r.at - epoch).as_secs_f64() * 1e3 - sent as f64 / 1e6
        })
        .collect();
    delays.sort_by(f64::total_cmp);
    delays
}

/// Checks the marks of an overloaded bottleneck on datagrams whose first
/// payload byte names their kind: `v` (tagged `vcp`) keeps its tag and goes
/// from low load (ECT(1)) to overload (CE); `c` (untagged ECT) waits in the
/// classic queue, where CoDel marks CE once its packets have waited over
/// 5 ms for 100 ms; `n` (Not-ECT) is never marked.
pub fn assert_overload_marks(got: &[Received], vcp: SchemeTag) {
    let of = |kind: u8| got.iter().filter(move |r| r.payload[0] == kind);
    assert!(of(b'v').all(|r| SchemeTag::from_tos(r.tos) == vcp));
    assert_eq!(Ecn::from_tos(of(b'v').next().unwrap().tos), Ecn::Ect1);
    assert_eq!(Ecn::from_tos(of(b'v').next_back().unwrap().tos), Ecn::Ce);
    assert!(of(b'c').any(|r| r.tos == SchemeTag::UNTAGGED.tos(Ecn::Ce)));
    assert!(of(b'n').all(|r| r.tos == 0));
}

/// The rate (bit/s, `wire` bytes per packet) at which `got` left a link
/// configured for `nominal` bit/s, judged from the lower envelope of the
/// arrival times. Scheduling noise on a shared host only ever makes the
/// receiver late, never early, so in two stretches (10-30 % and 70-90 % of
/// the packets) the lower decile of each arrival time, less its nominal
/// departure time, marks where the link's schedule was. A link off by x %
/// drifts by x % of the time between the stretches; the start (queue
/// filling) and the end (a starved thread waking late) do not count.
pub fn steady_rate(got: &[Received], wire: f64, nominal: f64) -> f64 {
    assert!(got.len() >= 50, "too few packets to measure: {}", got.len());
    let spacing = wire * 8.0 / nominal;
    let first = got[0].at;
    let lower_decile = |from: usize, to: usize| {
        let mut behind_schedule: Vec<f64> = (from..to)
            .map(|i| (got[i].at - first).as_secs_f64() - i as f64 * spacing)
            .collect();
        behind_schedule.sort_by(f64::total_cmp);
        behind_schedule[behind_schedule.len() / 10]
    };
    let n = got.len();
    let early = lower_decile(n / 10, n * 3 / 10);
    let late = lower_decile(n * 7 / 10, n * 9 / 10);
    let drift_per_packet = (late - early) / (n * 6 / 10) as f64;
    wire * 8.0 / (spacing + drift_per_packet)
}

/// Starts `ecnq-shim relay` as `command` says, with stdout and stderr
/// piped; returns it and the address it listens on, read from its banner
/// ("ecnq-shim relay: listening on ADDR, forwarding to ...").
pub fn start_relay(command: &mut Command) -> (Child, SocketAddr) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut banner = String::new();
    BufReader::new(child.stderr.as_mut().unwrap())
        .read_line(&mut banner)
        .unwrap();
    let addr: SocketAddr = banner
        .split("listening on ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {banner:?}"));
    (child, addr)
}

//! A loopback testbed with nothing to set up: an ecnq perf server behind a
//! chain of in-process relay shims (link emulation, metering, re-marking by
//! DSCP tag), and flows that arrive and leave on a schedule. The demo and
//! the end-to-end tests run on it.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ecnq::quic::{CongestionControl, Endpoint, Options};
use ecnq::router::bottleneck::{Class, Discipline};
use ecnq::schemes::registry::FORMULAS;
use ecnq::Scheme;
use ecnq_shim::io::relay::{sessions_within_fd_limit, Relay, RelayConfig};
use ecnq_shim::io::sessions::SessionLimits;
use ecnq_shim::link::spec::LinkSpec;
use ecnq_shim::link::{router_config, Direction};
use ecnq_shim::observe::Observers;
use ecnq_shim::observe::{SessionCounters, StatsSink};
use rustls::RootCertStore;
use serde::Serialize;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::client::{self, ClientConfig, StreamRun};
use super::flood::{FloodSent, FloodSpec};
use super::host::StealMeter;
use super::proto::{self, TestRequest};
use super::report::{rate, StreamInterval};

use ecnq::statistics::{convergence_time, jain_index, percentile, FlowSeries, SojournHistogram};

/// A flow of a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Flow {
    /// Its sender's congestion control.
    pub cc: CongestionControl,
    /// When it starts, seconds after the run starts.
    pub offset: f64,
    /// How long it sends.
    pub seconds: f64,
}

/// A flood of fake newcomers beside a run's flows ([`FloodSpec`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Flood {
    /// What it sends.
    pub spec: FloodSpec,
    /// When it starts, seconds after the run starts.
    pub offset: f64,
    /// How long it sends.
    pub seconds: f64,
}

impl Flood {
    /// Sends it to `entry` on the schedule of a run that started at `start`.
    fn spawn(&self, entry: SocketAddr, start: Instant) -> JoinHandle<Result<FloodSent, String>> {
        let (spec, at) = (self.spec, start + Duration::from_secs_f64(self.offset));
        let end = at + Duration::from_secs_f64(self.seconds);
        tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            spec.send(entry, tokio::time::sleep_until(end)).await
        })
    }
}

/// The server side of the bed.
pub struct LoopbackBed {
    server: SocketAddr,
    roots: RootCertStore,
    serving: JoinHandle<()>,
}

impl LoopbackBed {
    /// Starts a perf server on 127.0.0.1 running `server_cc` when it sends.
    /// An ecnq scheme there makes the server an ecnq peer (it tags its
    /// packets and reports feedback); `NewReno`/`Cubic`/`Bbr` make it a
    /// vanilla peer, for fallback tests.
    pub async fn start(server_cc: CongestionControl) -> Result<LoopbackBed, String> {
        LoopbackBed::start_at("127.0.0.1:0".parse().expect("literal"), server_cc).await
    }

    /// Like [`LoopbackBed::start`], bound to `bind` (a testbed host's address).
    pub async fn start_at(
        bind: SocketAddr,
        server_cc: CongestionControl,
    ) -> Result<LoopbackBed, String> {
        let (identity, _) = proto::self_signed(&["localhost".to_owned()])?;
        let mut roots = RootCertStore::empty();
        roots.add_parsable_certificates(identity.chain.iter().cloned());
        let options = Options::new(server_cc).alpn(&[proto::ALPN]);
        let endpoint = Endpoint::server(bind, identity, options)
            .map_err(|e| format!("cannot start the server on {bind}: {e}"))?;
        let server = endpoint.local_addr().map_err(|e| e.to_string())?;
        let serving = tokio::spawn(super::server::serve(
            endpoint,
            false,
            None,
            std::future::pending(),
            |_| {},
        ));
        Ok(LoopbackBed {
            server,
            roots,
            serving,
        })
    }

    /// A perf server on plain quinn, for uploads: its own socket, no DSCP
    /// tag, no reports, only the ACK-ECN counts of any QUIC receiver. What
    /// an ecnq sender meets on a peer that does not run ecnq.
    pub async fn vanilla() -> Result<LoopbackBed, String> {
        let (identity, _) = proto::self_signed(&["localhost".to_owned()])?;
        let mut roots = RootCertStore::empty();
        roots.add_parsable_certificates(identity.chain.iter().cloned());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut crypto = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| format!("TLS 1.3: {e}"))?
            .with_no_client_auth()
            .with_single_cert(identity.chain, identity.key)
            .map_err(|e| format!("the server's certificate: {e}"))?;
        crypto.alpn_protocols = vec![proto::ALPN.to_vec()];
        let quic = quinn::crypto::rustls::QuicServerConfig::try_from(crypto)
            .map_err(|e| format!("QUIC crypto: {e}"))?;
        let bind: SocketAddr = "127.0.0.1:0".parse().expect("literal");
        let endpoint =
            quinn::Endpoint::server(quinn::ServerConfig::with_crypto(Arc::new(quic)), bind)
                .map_err(|e| format!("cannot start the vanilla server on {bind}: {e}"))?;
        let server = endpoint.local_addr().map_err(|e| e.to_string())?;
        let serving = tokio::spawn(async move {
            while let Some(incoming) = endpoint.accept().await {
                tokio::spawn(receive_upload(incoming));
            }
        });
        Ok(LoopbackBed {
            server,
            roots,
            serving,
        })
    }

    /// An ecnq server (VCP when it sends).
    pub async fn ecnq() -> Result<LoopbackBed, String> {
        LoopbackBed::start(CongestionControl::Ecnq(Scheme::Vcp)).await
    }

    /// The server's address.
    pub fn server(&self) -> SocketAddr {
        self.server
    }

    /// Roots that trust the server.
    pub fn roots(&self) -> &RootCertStore {
        &self.roots
    }

    /// Runs `flows` through relays in series, one per link of `links` (the
    /// first link is nearest the clients; a [`LinkSpec`] for both
    /// directions alike, a [`RelayLink`] for one each).
    pub async fn run(
        &self,
        flows: &[Flow],
        links: &[impl Clone + Into<RelayLink>],
    ) -> Result<RunResult, String> {
        self.run_configured(flows, links, &|_, _| {}, None).await
    }

    /// Like [`LoopbackBed::run`], with each flow's client set up by
    /// `configure` (given the flow's index), e.g. to pause it, and a
    /// `flood` of fake newcomers sent into the first relay beside them.
    pub async fn run_configured(
        &self,
        flows: &[Flow],
        links: &[impl Clone + Into<RelayLink>],
        configure: &(dyn Fn(usize, &mut ClientConfig) + Sync),
        flood: Option<&Flood>,
    ) -> Result<RunResult, String> {
        let chain = RelayChain::start(links, self.server)?;
        let steal = StealMeter::start();
        let start = Instant::now();
        let flooding = flood.map(|flood| flood.spawn(chain.entry, start));
        let mut tasks = Vec::new();
        for (i, flow) in flows.iter().enumerate() {
            let mut config = self.client_config(chain.entry, flow.cc, flow.seconds);
            configure(i, &mut config);
            let at = start + Duration::from_secs_f64(flow.offset);
            let end = at + Duration::from_secs_f64(flow.seconds);
            tasks.push(tokio::spawn(async move {
                tokio::time::sleep_until(at).await;
                client::run_scheduled(&config, i as u32 + 1, end).await
            }));
        }
        let mut runs = Vec::new();
        for task in tasks {
            runs.push(task.await.map_err(|e| format!("a flow failed: {e}"))??);
        }
        let flood = match flooding {
            Some(task) => Some(task.await.map_err(|e| format!("the flood failed: {e}"))??),
            None => None,
        };
        let elapsed = start.elapsed().as_secs_f64();
        let links = chain.stop().await;
        let mut result = RunResult::new(flows, runs, elapsed, links);
        result.host_steal = steal.fraction();
        result.flood = flood;
        Ok(result)
    }

    /// A client of this bed's server reached through `entry`.
    pub fn client_config(
        &self,
        entry: SocketAddr,
        cc: CongestionControl,
        seconds: f64,
    ) -> ClientConfig {
        client_config(entry, &self.roots, cc, seconds)
    }
}

/// How often a run's flows sample their rates.
pub const FLOW_INTERVAL: Duration = Duration::from_millis(250);

/// A client that sends to `server` for `seconds` with `cc`, sampling every
/// [`FLOW_INTERVAL`], trusting `roots` for the name `localhost`.
pub fn client_config(
    server: SocketAddr,
    roots: &RootCertStore,
    cc: CongestionControl,
    seconds: f64,
) -> ClientConfig {
    ClientConfig {
        server,
        server_name: "localhost".into(),
        roots: roots.clone(),
        cc,
        request: TestRequest {
            version: 1,
            reverse: false,
            seconds,
            bytes: 0,
        },
        interval: FLOW_INTERVAL,
        qlog: None,
        pause: None,
        send_window: None,
        ack_every: None,
    }
}

impl Drop for LoopbackBed {
    fn drop(&mut self) {
        self.serving.abort();
    }
}

/// One relay's link, a spec per direction.
#[derive(Clone, Debug, PartialEq)]
pub struct RelayLink {
    /// Client to server (the shim's [`UP`]): what the clients send.
    pub to_server: LinkSpec,
    /// Server to client ([`DOWN`]): what the server sends back.
    pub to_client: LinkSpec,
}

impl From<LinkSpec> for RelayLink {
    /// Both directions alike.
    fn from(spec: LinkSpec) -> RelayLink {
        RelayLink {
            to_server: spec.clone(),
            to_client: spec,
        }
    }
}

impl RelayLink {
    /// The spec of direction `dir` ([`UP`] or [`DOWN`]).
    pub fn spec(&self, dir: &str) -> &LinkSpec {
        match dir {
            DOWN => &self.to_client,
            _ => &self.to_server,
        }
    }
}

/// Relays in series in this process, each with its own stats.
pub struct RelayChain {
    /// Where clients send: the first relay.
    pub entry: SocketAddr,
    relays: Vec<(
        JoinHandle<SessionCounters>,
        tokio::sync::oneshot::Sender<()>,
        Lines,
        RelayLink,
    )>,
}

impl RelayChain {
    /// Binds one relay per link, last first, so each knows the next hop.
    pub fn start(
        links: &[impl Clone + Into<RelayLink>],
        target: SocketAddr,
    ) -> Result<RelayChain, String> {
        let mut next = target;
        let mut relays = Vec::new();
        for link in links.iter().rev() {
            let link: RelayLink = link.clone().into();
            let (relay, lines) = bind_relay(&link, next)?;
            next = relay.local_addr().map_err(|e| e.to_string())?;
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let task = tokio::spawn(async move {
                let report = relay.run(async {
                    let _ = stopped.await;
                });
                report.await.map(|r| r.sessions).unwrap_or_default()
            });
            relays.push((task, stop, lines, link));
        }
        relays.reverse();
        Ok(RelayChain {
            entry: next,
            relays,
        })
    }

    /// Stops every relay; returns each link's client-to-server series and
    /// its relay's session counters, in path order.
    pub async fn stop(self) -> Vec<LinkSeries> {
        self.stop_direction(UP).await
    }

    /// Like [`RelayChain::stop`], with the series of direction `dir`
    /// ([`UP`], client to server, or [`DOWN`]).
    pub async fn stop_direction(self, dir: &str) -> Vec<LinkSeries> {
        let mut out = Vec::new();
        for (task, stop, lines, link) in self.relays {
            let _ = stop.send(());
            let sessions = task.await.unwrap_or_default();
            out.push(LinkSeries {
                sessions,
                ..LinkSeries::parse_direction(&lines.text(), link.spec(dir), dir)
            });
        }
        out
    }
}

/// The vanilla server's side of one upload: the request, the data to its
/// end (or its sender's time-up reset), then the result.
async fn receive_upload(incoming: quinn::Incoming) -> Result<(), String> {
    let connection = incoming.await.map_err(|e| e.to_string())?;
    let (mut control_send, mut control_recv) =
        connection.accept_bi().await.map_err(|e| e.to_string())?;
    control_recv
        .read_to_end(proto::MAX_CONTROL)
        .await
        .map_err(|e| e.to_string())?;
    let mut data = connection.accept_uni().await.map_err(|e| e.to_string())?;
    let (bytes, seconds) = super::pump::receive_all(&mut data, &AtomicU64::new(0)).await?;
    let result = proto::TestResult { bytes, seconds };
    control_send
        .write_all(&proto::encode(&result))
        .await
        .map_err(|e| e.to_string())?;
    control_send.finish().map_err(|e| e.to_string())?;
    connection.closed().await;
    Ok(())
}

/// Binds a relay for `link` toward `target` on an ephemeral loopback port,
/// with its stats collected in memory and the session limits of the
/// shim's command line: its defaults, at most as many sessions as the
/// open-file limit leaves sockets for.
fn bind_relay(link: &RelayLink, target: SocketAddr) -> Result<(Relay, Lines), String> {
    let (sessions, _) = sessions_within_fd_limit(SessionLimits::default())
        .map_err(|e| format!("cannot read the open-file limit: {e}"))?;
    let direction = |spec: &LinkSpec| Direction {
        spec: spec.clone(),
        router: router_config(spec),
        queue: Discipline::default(),
    };
    let config = RelayConfig {
        listen: "127.0.0.1:0".parse().expect("literal"),
        target,
        up: direction(&link.to_server),
        down: direction(&link.to_client),
        seed: 1,
        sessions,
    };
    let lines = Lines::default();
    let observers = Observers {
        stats: Some(Arc::new(StatsSink::new(Box::new(lines.clone())))),
        interval: Duration::from_millis(50),
        ..Observers::default()
    };
    let relay = Relay::bind(config, observers).map_err(|e| format!("cannot start a relay: {e}"))?;
    Ok((relay, lines))
}

/// A relay's stats lines, collected in memory.
#[derive(Clone, Default)]
pub struct Lines(Arc<Mutex<Vec<u8>>>);

impl Lines {
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Flows sample every 250 ms on their own clocks: samples this close count
/// as simultaneous.
pub const SAMPLE_WINDOW: f64 = 0.15;

/// A flow's sending rate on the wire, on the run's clock.
fn sending_rate(intervals: &[StreamInterval], offset: f64) -> Vec<(f64, f64)> {
    intervals
        .iter()
        .map(|i| (offset + i.end, rate(i.wire_bytes, i.seconds)))
        .collect()
}

/// One sample of one direction of a link.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinkSample {
    /// Seconds since the relay started.
    pub t: f64,
    /// Queue in bytes.
    pub queue_bytes: f64,
    /// Cumulative bytes that left the link.
    pub departure_bytes: f64,
    /// Cumulative packets offered.
    pub arrivals: f64,
    /// Cumulative packets dropped: overflow, emulated loss, the classic
    /// queue's AQM and the policer.
    pub drops: f64,
    /// Cumulative packets dropped during emulated outages (`blackhole`).
    pub blackholed: f64,
    /// Cumulative packets corrupted on the emulated link.
    pub corrupted: f64,
    /// Cumulative packets reordered on the emulated link.
    pub reordered: f64,
    /// Load figures of the last interval, one per formula in
    /// [`FORMULAS`] order.
    pub load: [f64; FORMULAS.len()],
    /// Cumulative measurement intervals the relay disregarded because it
    /// was stalled.
    pub intervals_disregarded: f64,
    /// Bytes waiting in the ecnq, the classic and the L4S queue.
    pub class_queue_bytes: [f64; 3],
    /// The sojourns of the packets that left each queue so far (empty
    /// where the shim reported none).
    pub class_sojourn_hist: [SojournHistogram; 3],
    /// Cumulative bytes the link could carry (the capacity in force);
    /// `None` where the stats do not say.
    pub capacity_bytes: Option<f64>,
}

/// The shim's name (`dir` in its stats) of a link's client-to-server direction.
pub const UP: &str = "up";
/// The shim's name of a link's server-to-client direction.
pub const DOWN: &str = "down";

/// One direction of a link (client to server unless parsed otherwise) as
/// its relay reported it.
#[derive(Clone, Debug, Default)]
pub struct LinkSeries {
    /// Samples every 50 ms.
    pub samples: Vec<LinkSample>,
    /// Link rate, bit/s; a varying link's nominal rate (a schedule's
    /// first step, a trace's mean).
    pub capacity_bps: f64,
    /// Whether the link's capacity changes over time (a trace or a
    /// schedule).
    pub varies: bool,
    /// Buffer in bytes (for packet limits: 1500-byte packets).
    pub buffer_bytes: f64,
    /// What the link's relay did with client sessions (none where the
    /// series was parsed from stats alone).
    pub sessions: SessionCounters,
}

impl LinkSeries {
    /// The `up` lines of a shim's `--stats` output (other lines are skipped)
    /// for a link of `spec`.
    pub fn parse(text: &str, spec: &LinkSpec) -> LinkSeries {
        LinkSeries::parse_direction(text, spec, UP)
    }

    /// The lines of direction `dir` ([`UP`] or [`DOWN`]) of a shim's
    /// `--stats` output for a link of `spec`.
    pub fn parse_direction(text: &str, spec: &LinkSpec, dir: &str) -> LinkSeries {
        let capacity_bps = spec.rate.unwrap_or(u64::MAX) as f64;
        let buffer_bytes = match spec.limit {
            ecnq_shim::link::spec::Limit::Bytes(b) => b as f64,
            ecnq_shim::link::spec::Limit::Packets(p) => p as f64 * 1500.0,
        };
        let samples = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["dir"] == dir)
            .map(|v| {
                let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
                LinkSample {
                    t: f("t"),
                    queue_bytes: f("queue_bytes"),
                    departure_bytes: f("departure_bytes"),
                    arrivals: f("arrivals"),
                    drops: f("drops_overflow")
                        + f("drops_loss")
                        + f("drops_aqm")
                        + f("drops_policed"),
                    blackholed: f("drops_blackhole"),
                    corrupted: f("corrupted"),
                    reordered: f("reordered"),
                    load: FORMULAS.map(|formula| f(&format!("load_{}", formula.name))),
                    intervals_disregarded: f("intervals_disregarded"),
                    class_queue_bytes: Class::ALL
                        .map(|class| f(&format!("queue_{}_bytes", class.name()))),
                    class_sojourn_hist: Class::ALL.map(|class| {
                        let hist = &v[format!("sojourn_{}_hist", class.name())];
                        (!hist.is_null())
                            .then(|| hist.to_string().parse().ok())
                            .flatten()
                            .unwrap_or_default()
                    }),
                    capacity_bytes: v["capacity_bytes"].as_f64(),
                }
            })
            .collect();
        LinkSeries {
            samples,
            capacity_bps,
            varies: spec.varies.is_some(),
            buffer_bytes,
            sessions: SessionCounters::default(),
        }
    }

    /// The series from its first sample on: times and counters counted
    /// from that sample (for stats of a shim that ran before the run).
    pub fn rebased(mut self) -> LinkSeries {
        if let Some(first) = self.samples.first().cloned() {
            for s in &mut self.samples {
                s.t -= first.t;
                s.departure_bytes -= first.departure_bytes;
                s.arrivals -= first.arrivals;
                s.drops -= first.drops;
                s.intervals_disregarded -= first.intervals_disregarded;
                s.capacity_bytes = s
                    .capacity_bytes
                    .zip(first.capacity_bytes)
                    .map(|(b, a)| b - a);
            }
        }
        self
    }

    fn between(&self, from: f64, to: f64) -> impl Iterator<Item = &LinkSample> {
        self.samples
            .iter()
            .filter(move |s| s.t >= from && s.t <= to)
    }

    /// Departures between two times over the bytes the link could carry
    /// then: the shim's count of the capacity in force where the stats
    /// have it, else the link rate over the span.
    pub fn utilization(&self, from: f64, to: f64) -> f64 {
        let mut window = self.between(from, to);
        let (Some(first), Some(last)) = (window.next(), window.last()) else {
            return 0.0;
        };
        let could = self.capacity_between(first, last);
        if could <= 0.0 {
            return 0.0;
        }
        (last.departure_bytes - first.departure_bytes) / could
    }

    /// Bytes the link could carry from sample `a` to the later `b`.
    fn capacity_between(&self, a: &LinkSample, b: &LinkSample) -> f64 {
        match (a.capacity_bytes, b.capacity_bytes) {
            (Some(a), Some(b)) => b - a,
            _ => self.capacity_bps / 8.0 * (b.t - a.t),
        }
    }

    /// The capacity in force over time, Mbit/s: what the link could carry
    /// over spans of at least `window` seconds, at each span's end.
    pub fn capacity_mbit(&self, window: f64) -> Vec<(f64, f64)> {
        let mut points = Vec::new();
        let mut from = self.samples.first();
        for s in &self.samples {
            if let Some(a) = from.filter(|a| s.t - a.t >= window) {
                points.push((s.t, self.capacity_between(a, s) * 8.0 / (s.t - a.t) / 1e6));
                from = Some(s);
            }
        }
        points
    }

    /// Packets dropped from the start until `t` (the last sample by then).
    pub fn drops_by(&self, t: f64) -> f64 {
        (self.samples.iter())
            .take_while(|s| s.t <= t)
            .last()
            .map_or(0.0, |s| s.drops)
    }

    /// Queueing delay samples (ms) between two times: the queue at the
    /// link rate, approximate where the capacity varies (a varying link's
    /// sojourns are exact: [`LinkSeries::queue_delay_ms`]).
    pub fn queue_ms(&self, from: f64, to: f64) -> Vec<f64> {
        self.between(from, to)
            .map(|s| s.queue_bytes * 8.0 / self.capacity_bps * 1e3)
            .collect()
    }

    /// One queue's samples (ms at the link rate, as the simulator counts
    /// them) between two times.
    pub fn class_queue_ms(&self, class: Class, from: f64, to: f64) -> Vec<f64> {
        self.between(from, to)
            .map(|s| s.class_queue_bytes[class as usize] * 8.0 / self.capacity_bps * 1e3)
            .collect()
    }

    /// The sojourns of the packets that left one queue between the first
    /// and the last stats line between two times (the difference of their
    /// cumulative histograms); empty if there are fewer than two.
    pub fn class_sojourn_hist(&self, class: Class, from: f64, to: f64) -> SojournHistogram {
        let c = class as usize;
        let mut window = self.between(from, to);
        match (window.next(), window.last()) {
            (Some(first), Some(last)) => {
                last.class_sojourn_hist[c].since(&first.class_sojourn_hist[c])
            }
            _ => SojournHistogram::new(),
        }
    }

    /// The 99th percentile of the sojourns of the packets that left one
    /// queue between two times (see [`LinkSeries::class_sojourn_hist`]),
    /// ms, by packet: the upper edge of its 0.1 ms bucket. None if no
    /// packet left it then.
    pub fn class_sojourn_p99_ms(&self, class: Class, from: f64, to: f64) -> Option<f64> {
        self.class_sojourn_hist(class, from, to).percentile_ms(99.0)
    }

    /// The sojourns of the packets that left any queue between two times
    /// (see [`LinkSeries::class_sojourn_hist`]).
    pub fn sojourn_hist(&self, from: f64, to: f64) -> SojournHistogram {
        let mut all = SojournHistogram::new();
        for class in Class::ALL {
            all += &self.class_sojourn_hist(class, from, to);
        }
        all
    }

    /// Percentiles `ps` of the queueing delay between two times, ms (0
    /// where nothing was measured): on a fixed link of the queue sampled
    /// every 50 ms at its rate; on a varying one, where a queue's bytes
    /// have no one delay, of the packets' sojourns.
    pub fn queue_delay_ms<const N: usize>(&self, from: f64, to: f64, ps: [f64; N]) -> [f64; N] {
        if self.varies {
            let sojourns = self.sojourn_hist(from, to);
            return ps.map(|p| sojourns.percentile_ms(p).unwrap_or(0.0));
        }
        let queue = self.queue_ms(from, to);
        ps.map(|p| percentile(&queue, p).unwrap_or(0.0))
    }

    /// Queue samples (bytes) between two times.
    pub fn queue_bytes(&self, from: f64, to: f64) -> Vec<f64> {
        self.between(from, to).map(|s| s.queue_bytes).collect()
    }

    /// Dropped over offered packets, over the whole run.
    pub fn loss(&self) -> f64 {
        match self.samples.last() {
            Some(s) if s.arrivals > 0.0 => s.drops / s.arrivals,
            _ => 0.0,
        }
    }
}

/// What a run produced.
pub struct RunResult {
    /// Seconds from the first flow's start to the last flow's end, its
    /// wind-down included (the last data and the server's result).
    pub elapsed: f64,
    /// The flows as scheduled.
    pub flows: Vec<Flow>,
    /// Each flow's client-side record; None for a flow whose handshake never
    /// got through.
    pub runs: Vec<Option<StreamRun>>,
    /// Each flow's sending rate over time.
    pub series: Vec<FlowSeries>,
    /// Each link, in path order.
    pub links: Vec<LinkSeries>,
    /// The fraction of the machine's CPU time the host took during the run
    /// (steal, see [`super::host`]); `None` where unknown.
    pub host_steal: Option<f64>,
    /// What the run's flood of fake newcomers sent, if it had one.
    pub flood: Option<FloodSent>,
}

/// One row of a comparison.
#[derive(Clone, Debug, Serialize)]
pub struct RunSummary {
    /// Run name.
    pub name: String,
    /// Flows' goodput summed, Mbit/s (bytes the server received over the
    /// span judged).
    pub goodput_mbit: f64,
    /// Bottleneck departures over what it could carry during the run.
    pub utilization: f64,
    /// Whether the bottleneck's capacity changed over time (a trace or a
    /// schedule): the queue figures are then the packets' sojourns
    /// ([`LinkSeries::queue_delay_ms`]).
    pub capacity_varies: bool,
    /// Queueing delay at the bottleneck, median, ms.
    pub queue_p50_ms: f64,
    /// 95th percentile.
    pub queue_p95_ms: f64,
    /// 99th percentile.
    pub queue_p99_ms: f64,
    /// Packets dropped at the bottleneck over packets offered.
    pub loss: f64,
    /// Jain's index over the flows' sending rates in the last third of the run.
    pub jain: f64,
    /// Seconds from the last flow's arrival until it reached 80 % of its fair
    /// share (the EVCP paper's definition, 20 % tolerance); None if never.
    pub converge_s: Option<f64>,
    /// Per flow: controller and goodput in Mbit/s.
    pub flows: Vec<(String, f64)>,
    /// Flows (numbered from 1) whose handshake never got through.
    pub unjoined: Vec<usize>,
    /// The fraction of the machine's CPU time the host took during the run
    /// (steal, see [`super::host`]); `None` where unknown.
    pub host_steal: Option<f64>,
}

/// Each flow's total from its client run (none for a flow that never got
/// in), as a run's summary counts it.
pub fn flow_totals(flows: &[Flow], runs: &[Option<StreamRun>]) -> Vec<FlowTotal> {
    flows
        .iter()
        .zip(runs)
        .map(|(f, r)| FlowTotal {
            label: f.cc.to_string(),
            seconds: f.seconds,
            received: r.as_ref().map_or(0, |r| r.peer_result.bytes),
            joined: r.is_some(),
        })
        .collect()
}

impl RunResult {
    /// The record of `flows` whose client runs came back as `runs`, after
    /// `elapsed` seconds, through `links`.
    pub fn new(
        flows: &[Flow],
        runs: Vec<Option<StreamRun>>,
        elapsed: f64,
        links: Vec<LinkSeries>,
    ) -> Self {
        let series = flows
            .iter()
            .zip(&runs)
            .map(|(flow, run)| FlowSeries {
                start: flow.offset,
                samples: run
                    .as_ref()
                    .map(|r| sending_rate(&r.intervals, flow.offset))
                    .unwrap_or_default(),
            })
            .collect();
        RunResult {
            elapsed,
            flows: flows.to_vec(),
            runs,
            series,
            links,
            host_steal: None,
            flood: None,
        }
    }

    /// Flow `i`'s goodput from `from` to `to` seconds into the run, Mbit/s:
    /// the bytes its sender wrote in its sampling intervals that lie
    /// within that span (give or take [`SAMPLE_WINDOW`]), over their
    /// length; 0 for a flow that never got in. A greedy writer waits at
    /// quinn's send window, so from its first second on what it writes
    /// over a span is what the receiver acknowledged.
    pub fn goodput_mbit(&self, i: usize, from: f64, to: f64) -> f64 {
        let offset = self.flows[i].offset;
        let within = (self.runs[i].iter())
            .flat_map(|r| &r.intervals)
            .filter(|v| {
                offset + v.start >= from - SAMPLE_WINDOW && offset + v.end <= to + SAMPLE_WINDOW
            });
        let (bytes, seconds) = within.fold((0, 0.0), |(b, s), v| (b + v.bytes, s + v.seconds));
        rate(bytes, seconds) / 1e6
    }

    /// Seconds from the run's start until its last flow was scheduled to
    /// stop, at most [`RunResult::elapsed`].
    pub fn scheduled(&self) -> f64 {
        (self.flows.iter())
            .map(|f| f.offset + f.seconds)
            .fold(0.0, f64::max)
            .min(self.elapsed)
    }

    /// The figures of the run, judged at link `bottleneck` over the time
    /// its flows were scheduled to send: the wind-down after it takes a
    /// few tens of milliseconds on a fixed link, but tens of seconds where
    /// the link fades under a flow's last packets, and would count as
    /// capacity left unused.
    pub fn summary(&self, name: &str, bottleneck: usize) -> RunSummary {
        let empty = LinkSeries::default();
        let flows = flow_totals(&self.flows, &self.runs);
        summarize(
            name,
            &flows,
            &self.series,
            self.links.get(bottleneck).unwrap_or(&empty),
            self.scheduled(),
            self.host_steal,
        )
    }
}

/// Each flow's samples up to its scheduled end: later ones cover its
/// wind-down (the last data draining, waiting for the result) and would make
/// a flow look converged next to a partner that is stopping too.
fn while_scheduled(flows: &[FlowTotal], series: &[FlowSeries]) -> Vec<FlowSeries> {
    series
        .iter()
        .zip(flows)
        .map(|(s, f)| FlowSeries {
            start: s.start,
            samples: s
                .samples
                .iter()
                .copied()
                .filter(|&(t, _)| t <= s.start + f.seconds + SAMPLE_WINDOW / 3.0)
                .collect(),
        })
        .collect()
}

/// What one flow of a run delivered.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowTotal {
    /// Its congestion control, as the table shows it.
    pub label: String,
    /// How long it was scheduled to send.
    pub seconds: f64,
    /// Bytes its receiver got.
    pub received: u64,
    /// Whether it got in at all (its handshake went through).
    pub joined: bool,
}

/// The table row of a run of `flows` (their sending rates in `series`),
/// judged at the bottleneck `link` over its first `end` seconds (its
/// queue and loss over all of it), while the host took `host_steal` of
/// the CPU time.
pub fn summarize(
    name: &str,
    flows: &[FlowTotal],
    series: &[FlowSeries],
    link: &LinkSeries,
    end: f64,
    host_steal: Option<f64>,
) -> RunSummary {
    let tail_from = end * 2.0 / 3.0;
    let tail: Vec<f64> = series
        .iter()
        .map(|s| {
            s.samples
                .iter()
                .filter(|(t, _)| *t > tail_from)
                .map(|(_, r)| r)
                .sum::<f64>()
        })
        .collect();
    // The queue over the whole run: packets the flows sent that wait out
    // a fade leave after the flows' end.
    let [queue_p50_ms, queue_p95_ms, queue_p99_ms] =
        link.queue_delay_ms(0.0, f64::INFINITY, [50.0, 95.0, 99.0]);
    RunSummary {
        name: name.to_owned(),
        goodput_mbit: flows.iter().map(|f| f.received as f64 * 8.0).sum::<f64>() / end / 1e6,
        utilization: link.utilization(0.0, end),
        capacity_varies: link.varies,
        queue_p50_ms,
        queue_p95_ms,
        queue_p99_ms,
        loss: link.loss(),
        jain: jain_index(&tail),
        converge_s: convergence_time(
            &while_scheduled(flows, series),
            series.len().saturating_sub(1),
            0.2,
            SAMPLE_WINDOW,
        ),
        flows: flows
            .iter()
            .map(|f| (f.label.clone(), f.received as f64 * 8.0 / f.seconds / 1e6))
            .collect(),
        unjoined: (1..=flows.len())
            .filter(|&n| !flows[n - 1].joined)
            .collect(),
        host_steal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wind_down_samples_do_not_make_a_flow_converge() {
        let flow = |seconds| FlowTotal {
            label: "vcp".into(),
            seconds,
            received: 1_000_000,
            joined: true,
        };
        let flows = [flow(10.0), flow(6.0)];
        // The late flow stays at a tenth of the early one's rate while both
        // send; after their scheduled ends both wind down and look alike.
        let series = [
            FlowSeries {
                start: 0.0,
                samples: vec![(9.0, 10e6), (10.0, 10e6), (10.3, 0.5e6)],
            },
            FlowSeries {
                start: 4.0,
                samples: vec![(9.05, 1e6), (10.0, 1e6), (10.35, 0.5e6)],
            },
        ];
        let link = LinkSeries::default();
        assert_eq!(convergence_time(&series, 1, 0.2, SAMPLE_WINDOW), Some(6.35));
        let row = summarize("vcp", &flows, &series, &link, 10.4, None);
        assert_eq!(row.converge_s, None);
        assert_eq!(row.flows.len(), 2);
        assert!(row.unjoined.is_empty());
    }

    #[test]
    fn a_class_sojourn_percentile_counts_the_packets_of_the_window() {
        let spec: LinkSpec = "rate 10mbit".parse().unwrap();
        let line = |t: f64, ecnq: &str| {
            format!("{{\"t\":{t},\"dir\":\"up\",\"departures_ecnq\":0{ecnq}}}")
        };
        let text = [
            // Before the window: 100 packets waited 20 ms.
            line(0.0, ",\"sojourn_ecnq_hist\":[[200,100]]"),
            // In it: 98 more packets at 0.1 ms, one at 1 ms, one at 3 ms.
            line(0.05, ",\"sojourn_ecnq_hist\":[[1,50],[200,100]]"),
            line(
                0.10,
                ",\"sojourn_ecnq_hist\":[[1,98],[10,1],[30,1],[200,100]]",
            ),
            // After it: one at 50 ms.
            line(
                0.15,
                ",\"sojourn_ecnq_hist\":[[1,98],[10,1],[30,1],[200,100],[500,1]]",
            ),
            "{\"t\":0.12,\"dir\":\"down\",\"sojourn_ecnq_hist\":[[900,5]]}".to_string(),
        ]
        .join("\n");
        let series = LinkSeries::parse(&text, &spec);
        // The other direction's line is the down series' only one.
        let down = LinkSeries::parse_direction(&text, &spec, DOWN);
        assert_eq!(series.samples.len(), 4);
        assert_eq!(down.samples.len(), 1);
        assert_eq!(down.class_sojourn_hist(Class::Ecnq, 0.0, 1.0).count(), 0);
        assert_eq!(down.samples[0].class_sojourn_hist[0].count(), 5);
        let p = |p: f64, from: f64, to: f64| {
            (series.class_sojourn_hist(Class::Ecnq, from, to)).percentile_ms(p)
        };
        assert_eq!(
            series.class_sojourn_hist(Class::Ecnq, 0.0, 0.1).count(),
            100
        );
        // Per packet, the upper edge of the 0.1 ms bucket.
        assert_eq!(p(98.0, 0.0, 0.1), Some(0.2));
        assert_eq!(
            series.class_sojourn_p99_ms(Class::Ecnq, 0.0, 0.1),
            Some(1.1)
        );
        assert_eq!(p(100.0, 0.0, 0.1), Some(3.1));
        // From the second line on, 50 packets: their p99 is the 3 ms one.
        assert_eq!(
            series.class_sojourn_p99_ms(Class::Ecnq, 0.01, 0.1),
            Some(3.1)
        );
        assert_eq!(p(100.0, 0.0, 1.0), Some(50.1));
        // One line, no queue that reported, no packets: nothing.
        assert_eq!(series.class_sojourn_p99_ms(Class::Ecnq, 0.0, 0.01), None);
        assert_eq!(series.class_sojourn_p99_ms(Class::Classic, 0.0, 1.0), None);
        assert_eq!(series.class_sojourn_p99_ms(Class::Ecnq, 0.1, 0.11), None);
    }

    /// A link that steps from 8 to 2 Mbit/s at 1 s, busy throughout: full
    /// against what it could carry, a quarter short against its first
    /// step; its queue figures are its packets' sojourns.
    #[test]
    fn a_varying_link_is_judged_against_the_capacity_in_force() {
        let spec: LinkSpec = "schedule 0s:8mbit,1s:2mbit".parse().unwrap();
        // Bytes carried by t: 1 Mbyte/s to 1 s, 0.25 Mbyte/s after.
        let carried = |t: f64| t.min(1.0) * 1e6 + (t - 1.0).max(0.0) * 0.25e6;
        let stats = |counted: bool| {
            let line = |i: u32| {
                let t = f64::from(i) * 0.05;
                let mut v = serde_json::json!({
                    "t": t,
                    "dir": "up",
                    "departure_bytes": carried(t),
                    "queue_bytes": 50_000,
                    "sojourn_ecnq_hist": [[10, i * 5]],
                    "sojourn_classic_hist": [[300, u8::from(t >= 1.0)]],
                });
                if counted {
                    v["capacity_bytes"] = carried(t).into();
                }
                v.to_string()
            };
            (0..=40).map(line).collect::<Vec<_>>().join("\n")
        };
        let series = LinkSeries::parse(&stats(true), &spec);
        assert!(series.varies);
        assert!((series.utilization(0.0, 2.0) - 1.0).abs() < 1e-9);
        assert!((series.utilization(1.0, 2.0) - 1.0).abs() < 1e-9);
        let capacity = series.capacity_mbit(0.25);
        assert_eq!(capacity.len(), 8);
        assert!((capacity[0].1 - 8.0).abs() < 1e-6 && (capacity[7].1 - 2.0).abs() < 1e-6);
        // Rebased from 1 s on, the counter starts at zero too.
        let later = LinkSeries {
            samples: series.samples[20..].to_vec(),
            ..series.clone()
        }
        .rebased();
        assert_eq!(later.samples[0].capacity_bytes, Some(0.0));
        assert!((later.utilization(0.0, 1.0) - 1.0).abs() < 1e-9);
        // 200 packets waited 1.1 ms, one 30.1 ms: not the queue's 50 or 200 ms.
        assert_eq!(series.queue_delay_ms(0.0, 2.0, [50.0, 100.0]), [1.1, 30.1]);
        // Stats without the counter: the first step's rate over the span.
        let series = LinkSeries::parse(&stats(false), &spec);
        assert!((series.utilization(0.0, 2.0) - 0.625).abs() < 1e-9);
        // A fixed link's delay is its sampled queue at its rate: 50 ms.
        let fixed = LinkSeries::parse(&stats(false), &"rate 8mbit".parse().unwrap());
        assert_eq!(fixed.queue_delay_ms(0.0, 2.0, [50.0]), [50.0]);
    }

    /// A run whose wind-down took 19 s beyond its 30 s, with the link
    /// busy while the flows sent and idle after: judged over the 30 s,
    /// but for the packets that waited 5 s and left after it.
    #[test]
    fn a_run_is_judged_while_its_flows_were_scheduled() {
        let sample = |t: f64| {
            let waits = format!(
                "[[10,{}],[50000,{}]]",
                t.min(30.0) * 10.0,
                (t - 30.0).max(0.0)
            );
            let mut s = LinkSample {
                t,
                departure_bytes: t.min(30.0) * 1e6,
                capacity_bytes: Some(t * 1e6),
                ..LinkSample::default()
            };
            s.class_sojourn_hist[0] = waits.parse().unwrap();
            s
        };
        let link = LinkSeries {
            samples: (0..=49).map(|t| sample(f64::from(t))).collect(),
            varies: true,
            ..LinkSeries::default()
        };
        let flows = [Flow {
            cc: CongestionControl::Cubic,
            offset: 10.0,
            seconds: 20.0,
        }];
        let result = RunResult::new(&flows, vec![None], 49.4, vec![link]);
        assert_eq!(result.scheduled(), 30.0);
        let row = result.summary("cubic", 0);
        assert!((row.utilization - 1.0).abs() < 1e-9);
        // 19 of 319 packets.
        assert_eq!((row.queue_p50_ms, row.queue_p99_ms), (1.1, 5000.1));
        let cut_short = RunResult::new(&flows, vec![None], 25.0, Vec::new());
        assert_eq!(cut_short.scheduled(), 25.0);
    }

    #[test]
    fn a_relay_link_gives_each_direction_its_spec() {
        let data: LinkSpec = "rate 20mbit delay 10ms".parse().unwrap();
        let acks: LinkSpec = "delay 25ms".parse().unwrap();
        let both = RelayLink::from(data.clone());
        assert_eq!((both.spec(UP), both.spec(DOWN)), (&data, &data));
        let link = RelayLink {
            to_server: data.clone(),
            to_client: acks.clone(),
        };
        assert_eq!((link.spec(UP), link.spec(DOWN)), (&data, &acks));
    }

    #[test]
    fn a_flow_that_never_got_in_is_named_and_counts_as_nothing() {
        let flows = [
            FlowTotal {
                label: "bbr".into(),
                seconds: 10.0,
                received: 50_000_000,
                joined: true,
            },
            FlowTotal {
                label: "bbr".into(),
                seconds: 6.0,
                received: 0,
                joined: false,
            },
        ];
        let series = [
            FlowSeries {
                start: 0.0,
                samples: vec![(8.0, 40e6), (9.0, 40e6)],
            },
            FlowSeries {
                start: 4.0,
                samples: vec![],
            },
        ];
        let row = summarize("bbr", &flows, &series, &LinkSeries::default(), 10.0, None);
        assert_eq!(row.unjoined, vec![2]);
        assert_eq!(row.flows[1].1, 0.0);
        assert!((row.jain - 0.5).abs() < 1e-9, "Jain {}", row.jain);
        assert_eq!(row.converge_s, None);
    }
}

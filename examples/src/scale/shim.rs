//! The in-process relay-mode shim of a run, and its own memory per session.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ecnq::router::bottleneck::Discipline;
use ecnq_shim::io::relay::{Relay, RelayConfig, RelayReport};
use ecnq_shim::io::sessions::SessionLimits;
use ecnq_shim::link::spec::LinkSpec;
use ecnq_shim::link::{router_config, Direction, LinkCounters};
use ecnq_shim::observe::Observers;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::config::ScaleConfig;
use super::endpoints::localhost;
use super::process::{drain, prepare, Probe};
use super::report::ShimSessions;

/// An in-process relay-mode shim, running until stopped.
pub(super) struct ShimRun {
    pub(super) entry: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<io::Result<RelayReport>>,
}

impl ShimRun {
    /// A relay toward `target` with room for `sessions` clients, all from
    /// 127.0.0.1 (so the per-source limit is the whole table), and sessions
    /// that outlive any phase of the run.
    pub(super) fn start(
        link: &LinkSpec,
        target: SocketAddr,
        sessions: usize,
    ) -> Result<ShimRun, String> {
        let direction = Direction {
            spec: link.clone(),
            router: router_config(link),
            queue: Discipline::default(),
        };
        let config = RelayConfig {
            listen: localhost(),
            target,
            up: direction.clone(),
            down: direction,
            seed: 1,
            sessions: relay_limits(sessions),
        };
        let relay = Relay::bind(config, Observers::default())
            .map_err(|e| format!("cannot start the relay: {e}"))?;
        let entry = relay
            .local_addr()
            .map_err(|e| format!("relay address: {e}"))?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(relay.run(async {
            let _ = stopped.await;
        }));
        Ok(ShimRun { entry, stop, task })
    }

    pub(super) async fn stop(self) -> Result<RelayReport, String> {
        let _ = self.stop.send(());
        self.task
            .await
            .map_err(|e| format!("the relay failed: {e}"))?
            .map_err(|e| format!("the relay failed: {e}"))
    }
}

/// The relay's session limits for a run of `sessions` clients.
fn relay_limits(sessions: usize) -> SessionLimits {
    SessionLimits {
        max: sessions,
        per_source: sessions,
        idle: Duration::from_secs(3600),
    }
}

/// Packets a link dropped, all causes (as the perf harness counts them).
pub(super) fn drops(c: &LinkCounters) -> u64 {
    c.drops_overflow + c.drops_loss + c.drops_aqm + c.drops_policed + c.drops_blackhole
}

/// The shim's memory per session: a relay like the runs' toward a plain
/// UDP sink, one datagram from each of `connections` plain UDP clients,
/// resident set before and after every session opened.
pub async fn shim_sessions(
    config: &ScaleConfig,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<ShimSessions, String> {
    prepare(config)?;
    let n = config.connections;
    progress(&format!(
        "shim: opening {n} relay sessions from plain UDP clients"
    ));
    let sink = tokio::net::UdpSocket::bind(localhost())
        .await
        .map_err(|e| format!("sink: {e}"))?;
    let target = sink.local_addr().map_err(|e| format!("sink: {e}"))?;
    let shim = ShimRun::start(&config.link, target, n)?;
    // Let the relay's threads and buffers settle before the baseline.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = Probe::take(true);
    let clients = (0..n)
        .map(|_| std::net::UdpSocket::bind(localhost()))
        .collect::<io::Result<Vec<_>>>()
        .map_err(|e| format!("client socket: {e}"))?;
    let mut seen = vec![false; n];
    let mut missing = n;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = [0u8; 16];
    while missing > 0 && Instant::now() < deadline {
        for (i, client) in clients.iter().enumerate().filter(|(i, _)| !seen[*i]) {
            // A datagram lost to a full queue is sent again next round.
            let _ = client.send_to(&(i as u32).to_be_bytes(), shim.entry);
        }
        let round = tokio::time::sleep(Duration::from_millis(200));
        tokio::pin!(round);
        loop {
            tokio::select! {
                received = sink.recv(&mut buf) => {
                    let i = received.ok().filter(|&len| len == 4).map(|_| {
                        u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize
                    });
                    if let Some(seen) = i.and_then(|i| seen.get_mut(i)).filter(|s| !**s) {
                        *seen = true;
                        missing -= 1;
                    }
                    if missing == 0 {
                        break;
                    }
                }
                () = &mut round => break,
            }
        }
    }
    let after = Probe::take(true);
    drop(clients);
    let report = shim.stop().await?;
    drain().await;
    let per_session = match (before.rss, after.rss) {
        (Some(b), Some(a)) if report.sessions.opened > 0 => {
            Some((a as f64 - b as f64) / report.sessions.opened as f64)
        }
        _ => None,
    };
    Ok(ShimSessions {
        opened: report.sessions.opened,
        wanted: n,
        per_session,
    })
}

//! A whole bench: the runs in order, each stack's run, and the bench's
//! child processes.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ecnq::quic::SelfSigned;
use tokio::sync::watch;

use super::clients::{await_downloads, join_clients, start_clients, Clients, Counters, Phase};
use super::config::{ScaleConfig, Stack};
use super::endpoints::Server;
use super::process::{drain, prepare, udp_receive_buffer_drops, Probe};
use super::report::{ScaleReport, StackReport};
use super::shim::{drops, shim_sessions, ShimRun};

/// The runs with the baseline, in this order: the machine's load changes
/// during a bench, so each stack runs once early and once late and their
/// means are compared.
const ORDER: [Stack; 4] = [Stack::Vanilla, Stack::Ecnq, Stack::Ecnq, Stack::Vanilla];

/// The stacks to run, in order.
pub fn order(config: &ScaleConfig) -> &'static [Stack] {
    if config.baseline {
        &ORDER
    } else {
        &[Stack::Ecnq]
    }
}

/// What a run prints before its progress lines.
pub fn run_name(config: &ScaleConfig, index: usize, stack: Stack) -> String {
    format!("run {}/{}, {stack}", index + 1, order(config).len())
}

/// Runs everything in this process: the shim's session memory, then each
/// stack of [`order`]. The bench runs each stack in a fresh process instead
/// ([`run_child`]): in one process the resident set per connection grows
/// from run to run whatever the stack, most likely as the heap fragments.
/// `progress` gets a line now and then during long phases.
pub async fn run(
    config: &ScaleConfig,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<ScaleReport, String> {
    let shim = shim_sessions(config, progress).await?;
    let mut runs = Vec::new();
    for (i, &stack) in order(config).iter().enumerate() {
        let name = run_name(config, i, stack);
        let progress = |line: &str| progress(&format!("{name}: {line}"));
        runs.push(run_stack(stack, config, &progress).await?);
    }
    Ok(ScaleReport {
        config: config.clone(),
        shim,
        runs,
    })
}

/// What a bench's child process does (`--only STACK`): runs `stack` and
/// prints its figures as one JSON line on stdout, for [`run_child`].
pub async fn run_only(
    stack: Stack,
    config: &ScaleConfig,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<(), String> {
    let report = run_stack(stack, config, progress).await?;
    let line = serde_json::to_string(&report).map_err(|e| e.to_string())?;
    println!("{line}");
    Ok(())
}

/// Runs `exe ARGS --only STACK` (the bench itself) and reads the figures
/// it prints; its progress goes to this process's stderr.
pub fn run_child(exe: &Path, args: &[String], stack: Stack) -> Result<StackReport, String> {
    let output = std::process::Command::new(exe)
        .args(args)
        .args(["--only", stack.name()])
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    if !output.status.success() {
        return Err(format!("the {stack} run failed ({})", output.status));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).map_err(|e| format!("the {stack} run printed no figures: {e}"))
}

/// One stack's run: server and relay (if `config.relay`) up, handshakes in batches, every
/// download at once, then every connection closed.
pub async fn run_stack(
    stack: Stack,
    config: &ScaleConfig,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<StackReport, String> {
    prepare(config)?;
    let cert = &SelfSigned::new(&["localhost"]).map_err(|e| e.to_string())?;
    let n = config.connections;
    let server = Server::start(stack, cert)?;
    let shim = match config.relay {
        true => Some(ShimRun::start(&config.link, server.addr, n)?),
        false => None,
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let base = Probe::take(true);
    let buffer_drops_before = udp_receive_buffer_drops();
    let (phase_tx, phase_rx) = watch::channel(Phase::Connect);
    let clients = Arc::new(Clients {
        stack,
        entry: shim.as_ref().map_or(server.addr, |shim| shim.entry),
        roots: cert.roots(),
        bytes: config.bytes,
        phase: phase_rx,
        counters: Counters::default(),
    });
    let counters = &clients.counters;

    let started = Instant::now();
    let tasks = start_clients(&clients, config, started, progress).await;
    let handshake_time = started.elapsed();
    let opened = Counters::get(&counters.connected);
    let open = Probe::take(true);

    let transfer = transfer(counters, opened, &phase_tx, buffer_drops_before, progress).await;
    let server_packets = server.packets();
    let feedback_senders = server.feedback_senders.load(Ordering::Relaxed);

    progress(&format!("closing {opened} connections"));
    let closing = Instant::now();
    let _ = phase_tx.send(Phase::Close);
    let (completed, failures, packets) = join_clients(tasks, server_packets).await?;
    server.stop().await;
    let relay = match shim {
        Some(shim) => Some(shim.stop().await?),
        None => None,
    };
    let relay = relay.as_ref();
    drop(clients);
    let drained = drain().await.then(|| closing.elapsed());
    Ok(StackReport {
        stack,
        connections: n,
        opened,
        completed,
        failed: failures.len(),
        first_failure: failures.into_iter().next(),
        bytes_verified: completed as u64 * config.bytes,
        handshake_time,
        transfer_time: transfer.done.at - transfer.go.at,
        transfer_cpu: transfer.cpu(),
        rss_base: base.rss,
        rss_open: open.rss,
        rss_peak: transfer.peak,
        rss_after: transfer.after.rss,
        drained,
        buffer_drops: transfer.buffer_drops,
        packets_sent: packets.sent,
        packets_lost: packets.lost,
        shim_arrivals: relay.map_or(0, |r| r.up.counters.arrivals + r.down.counters.arrivals),
        shim_drops: relay.map_or(0, |r| drops(&r.up.counters) + drops(&r.down.counters)),
        sessions_opened: relay.map_or(0, |r| r.sessions.opened),
        sessions_refused: relay.map_or(0, |r| r.sessions.refused()),
        sessions_evicted: relay.map_or(0, |r| r.sessions.evicted),
        feedback_senders,
    })
}

/// What the transfer phase measured.
struct Transfer {
    /// At the start signal.
    go: Probe,
    /// When the downloads settled.
    done: Probe,
    /// The highest resident set between the two (sampled, not trimmed).
    peak: Option<u64>,
    /// Right after `done`, trimmed.
    after: Probe,
    /// Receive-buffer drops from the base to the end of the transfer.
    buffer_drops: Option<u64>,
}

impl Transfer {
    /// Process CPU time from the start signal to the downloads settled.
    fn cpu(&self) -> Option<Duration> {
        match (self.go.cpu, self.done.cpu) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        }
    }
}

/// The transfer phase: sends the start signal, waits for the `opened`
/// connections' downloads and measures, counting the receive-buffer drops
/// from `buffer_drops_before` (taken at the base) on.
async fn transfer(
    counters: &Counters,
    opened: usize,
    phase: &watch::Sender<Phase>,
    buffer_drops_before: Option<u64>,
    progress: &(dyn Fn(&str) + Sync),
) -> Transfer {
    let go = Probe::take(false);
    let _ = phase.send(Phase::Transfer);
    let peak = await_downloads(counters, opened, go, progress).await;
    let done = Probe::take(false);
    let buffer_drops = udp_receive_buffer_drops()
        .zip(buffer_drops_before)
        .map(|(after, before)| after.saturating_sub(before));
    let after = Probe::take(true);
    Transfer {
        go,
        done,
        peak,
        after,
        buffer_drops,
    }
}

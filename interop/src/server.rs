//! The runner's server: hq-interop (HTTP/3 in the `http3` case) on UDP
//! 443, Retry when the test case is `retry`, 0-RTT and resumption always
//! available.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::signal::unix::{signal, SignalKind};

use crate::contract::{Config, TestCase};
use crate::{hq, http3, tls, Hooks, Stack, Summary};

/// Summaries of the live connections, printed when a connection ends or,
/// for those still open, when the server is stopped (some clients exit
/// without closing, and the runner stops the server with SIGTERM).
#[derive(Clone, Default)]
struct Live(Arc<Mutex<HashMap<usize, LiveConnection>>>);

/// A live connection's peer and summary.
type LiveConnection = (SocketAddr, Box<dyn Summary>);

impl Live {
    fn insert(&self, id: usize, remote: SocketAddr, summary: Box<dyn Summary>) {
        if let Ok(mut live) = self.0.lock() {
            live.insert(id, (remote, summary));
        }
    }

    fn report(&self, name: &str, id: Option<usize>) {
        let Ok(mut live) = self.0.lock() else { return };
        let ended: Vec<_> = match id {
            Some(id) => live.remove(&id).into_iter().collect(),
            None => live.drain().map(|(_, v)| v).collect(),
        };
        for (remote, summary) in ended {
            let line = summary.line();
            if !line.is_empty() {
                eprintln!("{name}: connection from {remote}: {line}");
            }
        }
    }
}

/// Serves until SIGTERM or SIGINT (the runner stops the server when the
/// client is done).
pub async fn run(stack: &dyn Stack, config: &Config) -> Result<(), String> {
    let live = Live::default();
    let mut terminate =
        signal(SignalKind::terminate()).map_err(|e| format!("cannot watch SIGTERM: {e}"))?;
    let mut interrupt =
        signal(SignalKind::interrupt()).map_err(|e| format!("cannot watch SIGINT: {e}"))?;
    tokio::select! {
        result = serve(stack, config, live.clone()) => result,
        _ = terminate.recv() => {
            live.report(stack.name(), None);
            Ok(())
        }
        _ = interrupt.recv() => {
            live.report(stack.name(), None);
            Ok(())
        }
    }
}

async fn serve(stack: &dyn Stack, config: &Config, live: Live) -> Result<(), String> {
    let crypto = tls::server_crypto(&config.certs, &config.keylog, config.testcase.alpn())?;
    let (endpoint, hooks) = stack.bind(
        config.listen,
        Some(server_config(crypto.clone(), config, None)),
    )?;
    eprintln!(
        "{}: serving {} on {} ({})",
        stack.name(),
        config.www.display(),
        config.listen,
        config.testcase
    );
    let retry = config.testcase == TestCase::Retry;
    while let Some(incoming) = endpoint.accept().await {
        if retry && !incoming.remote_address_validated() {
            if let Err(e) = incoming.retry() {
                eprintln!("{}: retry failed: {e}", stack.name());
            }
            continue;
        }
        let name = stack.name();
        let root = config.www.clone();
        let crypto = crypto.clone();
        let hooks: Arc<dyn Hooks> = hooks.clone();
        let config = config.clone();
        let live = live.clone();
        tokio::spawn(async move {
            let remote = incoming.remote_address();
            let mut transport = quinn::TransportConfig::default();
            config.testcase.tune(&mut transport);
            let pending = match hooks.prepare(remote, false, &mut transport) {
                Ok(p) => p,
                Err(e) => {
                    // In practice: this address already has a connection, so
                    // the Initial is a stray copy with a damaged connection ID
                    // (corruption). Answering it with CONNECTION_REFUSED would
                    // start a second server handshake; stay silent.
                    incoming.ignore();
                    return eprintln!("{name}: ignored {remote}: {e}");
                }
            };
            let crypto = pending.server_crypto(crypto);
            let per_connection = server_config(crypto, &config, Some(transport));
            let connecting = match incoming.accept_with(Arc::new(per_connection)) {
                Ok(c) => c,
                Err(e) => {
                    pending.abandon();
                    return eprintln!("{name}: refused {remote}: {e}");
                }
            };
            // Take 0-RTT streams as soon as they arrive (0.5-RTT answers),
            // except in http3, whose server opens its control and QPACK
            // streams at once: opened before the handshake completes, they
            // never went out on ecnq's socket to quic-go's client, and the
            // connection stalled until its idle timeout (vanilla quinn's
            // socket sends them).
            let attempt = if config.testcase == TestCase::Http3 {
                Err(connecting)
            } else {
                connecting.into_0rtt()
            };
            let conn = match attempt {
                Ok((conn, _accepted)) => conn,
                Err(connecting) => match connecting.await {
                    Ok(conn) => conn,
                    Err(e) => {
                        pending.abandon();
                        return eprintln!("{name}: handshake with {remote} failed: {e}");
                    }
                },
            };
            let id = conn.stable_id();
            live.insert(id, remote, pending.attach(&conn));
            if config.testcase == TestCase::Http3 {
                http3::serve_connection(conn, root).await;
            } else {
                hq::serve_connection(conn, root).await;
            }
            live.report(name, Some(id));
        });
    }
    Ok(())
}

fn server_config(
    crypto: Arc<dyn quinn::crypto::ServerConfig>,
    config: &Config,
    transport: Option<quinn::TransportConfig>,
) -> quinn::ServerConfig {
    let mut server = quinn::ServerConfig::with_crypto(crypto);
    let transport = transport.unwrap_or_else(|| {
        let mut t = quinn::TransportConfig::default();
        config.testcase.tune(&mut t);
        t
    });
    server.transport_config(Arc::new(transport));
    server
}

//! The runner's server: hq-interop on UDP 443, Retry when the test case is
//! `retry`, 0-RTT and resumption always available.

use std::sync::Arc;

use quinn::crypto::rustls::QuicServerConfig;

use crate::contract::{Config, TestCase};
use crate::{hq, tls, Hooks, Stack};

/// Serves until killed (the runner stops the server when the client is done).
pub async fn run(stack: &dyn Stack, config: &Config) -> Result<(), String> {
    let crypto = tls::server_crypto(&config.certs, &config.keylog)?;
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
        tokio::spawn(async move {
            let remote = incoming.remote_address();
            let mut transport = quinn::TransportConfig::default();
            config.testcase.tune(&mut transport);
            let pending = match hooks.prepare(remote, false, &mut transport) {
                Ok(p) => p,
                Err(e) => {
                    incoming.refuse();
                    return eprintln!("{name}: refused {remote}: {e}");
                }
            };
            let per_connection = server_config(crypto, &config, Some(transport));
            let connecting = match incoming.accept_with(Arc::new(per_connection)) {
                Ok(c) => c,
                Err(e) => {
                    pending.abandon();
                    return eprintln!("{name}: refused {remote}: {e}");
                }
            };
            // Take 0-RTT streams as soon as they arrive (0.5-RTT answers).
            let conn = match connecting.into_0rtt() {
                Ok((conn, _accepted)) => conn,
                Err(connecting) => match connecting.await {
                    Ok(conn) => conn,
                    Err(e) => {
                        pending.abandon();
                        return eprintln!("{name}: handshake with {remote} failed: {e}");
                    }
                },
            };
            let summary = pending.attach(&conn);
            hq::serve_connection(conn, root).await;
            let line = summary.line();
            if !line.is_empty() {
                eprintln!("{name}: connection from {remote}: {line}");
            }
        });
    }
    Ok(())
}

fn server_config(
    crypto: Arc<QuicServerConfig>,
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

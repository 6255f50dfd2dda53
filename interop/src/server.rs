//! The runner's server: hq-interop on UDP 443, Retry when the test case is
//! `retry`, 0-RTT and resumption always available.

use std::sync::Arc;

use crate::contract::{Config, TestCase};
use crate::{hq, tls, Stack};

/// Serves until killed (the runner stops the server when the client is done).
pub async fn run(stack: &Stack, config: &Config) -> Result<(), String> {
    let crypto = tls::server_crypto(&config.certs, &config.keylog)?;
    let mut server_config = quinn::ServerConfig::with_crypto(crypto);
    server_config.transport_config(Arc::new(stack.transport_config(config.testcase)));
    let endpoint = quinn::Endpoint::server(server_config, config.listen)
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    eprintln!(
        "{}: serving {} on {} ({})",
        stack.name,
        config.www.display(),
        config.listen,
        config.testcase
    );
    let retry = config.testcase == TestCase::Retry;
    while let Some(incoming) = endpoint.accept().await {
        if retry && !incoming.remote_address_validated() {
            if let Err(e) = incoming.retry() {
                eprintln!("{}: retry failed: {e}", stack.name);
            }
            continue;
        }
        let root = config.www.clone();
        let name = stack.name;
        tokio::spawn(async move {
            let connecting = match incoming.accept() {
                Ok(c) => c,
                Err(e) => return eprintln!("{name}: refused: {e}"),
            };
            // Take 0-RTT streams as soon as they arrive (0.5-RTT answers).
            let conn = match connecting.into_0rtt() {
                Ok((conn, _accepted)) => conn,
                Err(connecting) => match connecting.await {
                    Ok(conn) => conn,
                    Err(e) => return eprintln!("{name}: handshake failed: {e}"),
                },
            };
            hq::serve_connection(conn, root).await;
        });
    }
    Ok(())
}

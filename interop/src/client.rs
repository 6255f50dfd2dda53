//! The runner's client: fetch every URL of `REQUESTS` into the downloads
//! directory, over as many connections as the test case calls for.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use quinn::{Connection, Endpoint, VarInt};
use tokio::task::JoinSet;

use crate::contract::{Config, Request, TestCase};
use crate::{hq, tls, Stack};

/// Fetches all requests as `config.testcase` prescribes.
pub async fn run(stack: &Stack, config: &Config) -> Result<(), String> {
    let first = config
        .requests
        .first()
        .ok_or("no requests given (REQUESTS is empty)")?;
    let server = resolve(first).await?;
    let bind: SocketAddr = if server.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let mut endpoint =
        Endpoint::client(bind).map_err(|e| format!("cannot bind a UDP socket: {e}"))?;
    let crypto = tls::client_crypto(&config.keylog, config.testcase == TestCase::Chacha20)?;
    let mut client_config = quinn::ClientConfig::new(crypto);
    client_config.transport_config(Arc::new(stack.transport_config(config.testcase)));
    endpoint.set_default_client_config(client_config);

    let result = fetch_per_testcase(&endpoint, server, config).await;
    endpoint.close(VarInt::from_u32(0), b"done");
    endpoint.wait_idle().await;
    result
}

async fn fetch_per_testcase(
    endpoint: &Endpoint,
    server: SocketAddr,
    config: &Config,
) -> Result<(), String> {
    let host = &config.requests[0].host;
    let paths: Vec<String> = config.requests.iter().map(|r| r.path.clone()).collect();
    match config.testcase {
        TestCase::Resumption | TestCase::ZeroRtt => {
            // The first file on a full handshake, which leaves a session
            // ticket; the rest on a resumed connection (with 0-RTT data).
            let conn = connect(endpoint, server, host).await?;
            fetch_all(&conn, &paths[..1], &config.downloads, false).await?;
            conn.close(VarInt::from_u32(0), b"done");
            let conn = if config.testcase == TestCase::ZeroRtt {
                connect_0rtt(endpoint, server, host).await?
            } else {
                connect(endpoint, server, host).await?
            };
            fetch_all(&conn, &paths[1..], &config.downloads, false).await?;
            conn.close(VarInt::from_u32(0), b"done");
        }
        t if t.connection_per_request() => {
            for path in &paths {
                let conn = connect(endpoint, server, host).await?;
                fetch_all(&conn, std::slice::from_ref(path), &config.downloads, false).await?;
                conn.close(VarInt::from_u32(0), b"done");
            }
        }
        t => {
            let conn = connect(endpoint, server, host).await?;
            let key_update = t == TestCase::KeyUpdate;
            fetch_all(&conn, &paths, &config.downloads, key_update).await?;
            conn.close(VarInt::from_u32(0), b"done");
        }
    }
    Ok(())
}

async fn resolve(request: &Request) -> Result<SocketAddr, String> {
    tokio::net::lookup_host((request.host.as_str(), request.port))
        .await
        .map_err(|e| format!("cannot resolve {}: {e}", request.host))?
        .next()
        .ok_or_else(|| format!("{} has no address", request.host))
}

async fn connect(
    endpoint: &Endpoint,
    server: SocketAddr,
    host: &str,
) -> Result<Connection, String> {
    endpoint
        .connect(server, host)
        .map_err(|e| format!("cannot connect to {server}: {e}"))?
        .await
        .map_err(|e| format!("handshake with {server} failed: {e}"))
}

/// A resumed connection whose first requests go out as 0-RTT data; an error
/// if the client holds no ticket that allows early data.
async fn connect_0rtt(
    endpoint: &Endpoint,
    server: SocketAddr,
    host: &str,
) -> Result<Connection, String> {
    let connecting = endpoint
        .connect(server, host)
        .map_err(|e| format!("cannot connect to {server}: {e}"))?;
    match connecting.into_0rtt() {
        Ok((conn, _accepted)) => Ok(conn),
        Err(_) => Err(format!(
            "no 0-RTT possible with {server} (no usable session ticket)"
        )),
    }
}

/// Fetches `paths` concurrently on `conn`. With `key_update`, forces a key
/// update once the first response bytes arrive: by then the server's
/// HANDSHAKE_DONE has come too, so the handshake is confirmed (RFC 9001 §6).
async fn fetch_all(
    conn: &Connection,
    paths: &[String],
    downloads: &std::path::Path,
    key_update: bool,
) -> Result<(), String> {
    let mut tasks = JoinSet::new();
    for (i, path) in paths.iter().enumerate() {
        let conn = conn.clone();
        let path = path.clone();
        let downloads: PathBuf = downloads.to_path_buf();
        let update = key_update && i == 0;
        tasks.spawn(async move {
            let trigger = conn.clone();
            let force = move || trigger.force_key_update();
            let on_data: Option<&(dyn Fn() + Sync)> = if update { Some(&force) } else { None };
            hq::fetch(&conn, &path, &downloads, on_data).await
        });
    }
    let mut first_error = None;
    while let Some(joined) = tasks.join_next().await {
        let outcome = joined
            .map_err(|e| format!("request task failed: {e}"))
            .and_then(|r| r);
        if let Err(e) = outcome {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

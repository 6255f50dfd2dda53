//! The runner's client: fetch every URL of `REQUESTS` into the downloads
//! directory, over as many connections as the test case calls for.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use quinn::crypto::rustls::QuicClientConfig;
use quinn::{Connection, Endpoint, VarInt};

use crate::contract::{Config, Request, TestCase};
use crate::{hq, http3, tls, Stack, Summary};

/// One client connection: its own endpoint (so every connection has its own
/// UDP port, as a fresh client process would) and the stack's summary.
struct Link {
    endpoint: Endpoint,
    conn: Connection,
    summary: Box<dyn Summary>,
}

impl Link {
    async fn close(self, name: &str) {
        self.conn.close(VarInt::from_u32(0), b"done");
        self.endpoint.wait_idle().await;
        let line = self.summary.line();
        if !line.is_empty() {
            eprintln!(
                "{name}: connection to {}: {line}",
                self.conn.remote_address()
            );
        }
    }
}

/// Connects, fetches and closes as the test case prescribes.
struct Client<'a> {
    stack: &'a dyn Stack,
    config: &'a Config,
    crypto: Arc<QuicClientConfig>,
    server: SocketAddr,
}

/// Fetches all requests as `config.testcase` prescribes.
pub async fn run(stack: &dyn Stack, config: &Config) -> Result<(), String> {
    let first = config
        .requests
        .first()
        .ok_or("no requests given (REQUESTS is empty)")?;
    let client = Client {
        stack,
        config,
        // One TLS configuration for every connection: its session cache
        // carries the ticket from the first connection to the resumed one.
        crypto: tls::client_crypto(
            &config.keylog,
            config.testcase.alpn(),
            config.testcase == TestCase::Chacha20,
        )?,
        server: resolve(first).await?,
    };
    client.fetch_per_testcase().await
}

impl Client<'_> {
    async fn fetch_per_testcase(&self) -> Result<(), String> {
        let paths: Vec<String> = self
            .config
            .requests
            .iter()
            .map(|r| r.path.clone())
            .collect();
        let downloads = &self.config.downloads;
        let name = self.stack.name();
        match self.config.testcase {
            TestCase::Resumption | TestCase::ZeroRtt => {
                // The first file on a full handshake, which leaves a session
                // ticket; the rest on a resumed connection (with 0-RTT data).
                let link = self.connect(false).await?;
                hq::fetch_all(&link.conn, &paths[..1], downloads, false).await?;
                link.close(name).await;
                let link = self
                    .connect(self.config.testcase == TestCase::ZeroRtt)
                    .await?;
                hq::fetch_all(&link.conn, &paths[1..], downloads, false).await?;
                link.close(name).await;
            }
            TestCase::Http3 => {
                let link = self.connect(false).await?;
                let authority = self.config.requests[0].authority();
                http3::fetch_all(&link.conn, &authority, &paths, downloads).await?;
                link.close(name).await;
            }
            t if t.connection_per_request() => {
                for path in &paths {
                    let link = self.connect(false).await?;
                    hq::fetch_all(&link.conn, std::slice::from_ref(path), downloads, false).await?;
                    link.close(name).await;
                }
            }
            t => {
                let link = self.connect(false).await?;
                hq::fetch_all(&link.conn, &paths, downloads, t == TestCase::KeyUpdate).await?;
                link.close(name).await;
            }
        }
        Ok(())
    }

    /// A new connection on a new endpoint. With `zero_rtt` the requests go
    /// out as 0-RTT data, and it is an error if no session ticket allows it.
    async fn connect(&self, zero_rtt: bool) -> Result<Link, String> {
        let server = self.server;
        let bind: SocketAddr = if server.is_ipv4() {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let (endpoint, hooks) = self.stack.bind(bind, None)?;
        let mut transport = quinn::TransportConfig::default();
        self.config.testcase.tune(&mut transport);
        let pending = hooks.prepare(server, true, &mut transport)?;
        let mut client_config =
            quinn::ClientConfig::new(pending.client_crypto(self.crypto.clone()));
        client_config.transport_config(Arc::new(transport));
        let host = &self.config.requests[0].host;
        let connecting = match endpoint.connect_with(client_config, server, host) {
            Ok(c) => c,
            Err(e) => {
                pending.abandon();
                return Err(format!("cannot connect to {server}: {e}"));
            }
        };
        let established = if zero_rtt {
            connecting
                .into_0rtt()
                .map(|(conn, _accepted)| conn)
                .map_err(|_| format!("no 0-RTT possible with {server} (no usable session ticket)"))
        } else {
            connecting
                .await
                .map_err(|e| format!("handshake with {server} failed: {e}"))
        };
        match established {
            Ok(conn) => {
                let summary = pending.attach(&conn);
                Ok(Link {
                    endpoint,
                    conn,
                    summary,
                })
            }
            Err(e) => {
                pending.abandon();
                Err(e)
            }
        }
    }
}

async fn resolve(request: &Request) -> Result<SocketAddr, String> {
    tokio::net::lookup_host((request.host.as_str(), request.port))
        .await
        .map_err(|e| format!("cannot resolve {}: {e}", request.host))?
        .next()
        .ok_or_else(|| format!("{} has no address", request.host))
}

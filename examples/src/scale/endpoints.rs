//! The QUIC ends of a run, vanilla quinn or ecnq: their configurations,
//! the server endpoint and the connections of either stack.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ecnq::quic::{CongestionControl, Endpoint, Options, SelfSigned};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::RootCertStore;
use tokio::task::JoinHandle;

use super::config::Stack;
use super::download::serve_download;

/// The application protocol both ends agree on.
const ALPN: &[u8] = b"ecnq-scale";

/// Clients keep their connections alive while the others are still
/// handshaking (quinn's idle timeout is 30 s).
pub(super) const KEEP_ALIVE: Duration = Duration::from_secs(5);
/// Concurrent `accept` calls on the ecnq server: its `accept` returns
/// after the handshake, so one caller would take handshakes one by one.
const ACCEPTORS: usize = 64;

/// A connection of either stack.
pub(super) enum Conn {
    Ecnq(ecnq::quic::Connection),
    Vanilla(quinn::Connection),
}

impl Conn {
    pub(super) fn quinn(&self) -> &quinn::Connection {
        match self {
            Conn::Ecnq(c) => c.quinn(),
            Conn::Vanilla(c) => c,
        }
    }

    /// Whether its sender runs on router feedback (never for vanilla).
    fn uses_feedback(&self) -> bool {
        matches!(self, Conn::Ecnq(c) if c.congestion_stats().uses_feedback())
    }
}

/// quinn's counters of one connection that the report sums.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Packets {
    pub(super) sent: u64,
    pub(super) lost: u64,
}

impl Packets {
    pub(super) fn of(connection: &quinn::Connection) -> Packets {
        let path = connection.stats().path;
        Packets {
            sent: path.sent_packets,
            lost: path.lost_packets,
        }
    }

    pub(super) fn add(self, other: Packets) -> Packets {
        Packets {
            sent: self.sent + other.sent,
            lost: self.lost + other.lost,
        }
    }
}

/// quinn's Cubic with the clients' keep-alive, for the vanilla run.
fn vanilla_transport() -> quinn::TransportConfig {
    let mut transport = quinn::TransportConfig::default();
    transport.congestion_controller_factory(Arc::new(quinn::congestion::CubicConfig::default()));
    transport.keep_alive_interval(Some(KEEP_ALIVE));
    transport
}

/// The ring provider, TLS 1.3 only, as ecnq's endpoints use.
fn tls_provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn vanilla_server_config(cert: &SelfSigned) -> Result<quinn::ServerConfig, String> {
    let identity = cert.identity();
    let mut tls = rustls::ServerConfig::builder_with_provider(tls_provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .and_then(|b| {
            b.with_no_client_auth()
                .with_single_cert(identity.chain, identity.key)
        })
        .map_err(|e| format!("server TLS: {e}"))?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = QuicServerConfig::try_from(tls).map_err(|e| format!("server TLS: {e}"))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(vanilla_transport()));
    Ok(config)
}

/// A client configuration per client endpoint, as ecnq's `Endpoint::client`
/// builds one per endpoint, so the two runs hold the same.
pub(super) fn vanilla_client_config(roots: RootCertStore) -> Result<quinn::ClientConfig, String> {
    let mut tls = rustls::ClientConfig::builder_with_provider(tls_provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| format!("client TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = QuicClientConfig::try_from(tls).map_err(|e| format!("client TLS: {e}"))?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(Arc::new(vanilla_transport()));
    Ok(config)
}

pub(super) fn ecnq_options() -> Options {
    Options::new(CongestionControl::DEFAULT).alpn(&[ALPN])
}

pub(super) fn localhost() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// The one server endpoint of a run and the connections it accepted.
pub(super) struct Server {
    endpoint: ServerEndpoint,
    pub(super) addr: SocketAddr,
    connections: Arc<Mutex<Vec<Arc<Conn>>>>,
    /// Connections whose sender ran on router feedback at the end of its
    /// download (all data acknowledged).
    pub(super) feedback_senders: Arc<AtomicUsize>,
    acceptors: Vec<JoinHandle<()>>,
}

enum ServerEndpoint {
    Ecnq(Arc<Endpoint>),
    Vanilla(quinn::Endpoint),
}

impl Server {
    pub(super) fn start(stack: Stack, cert: &SelfSigned) -> Result<Server, String> {
        let connections = Arc::new(Mutex::new(Vec::new()));
        let feedback_senders = Arc::new(AtomicUsize::new(0));
        let serve = {
            let (connections, feedback_senders) = (connections.clone(), feedback_senders.clone());
            move |conn: Conn| {
                let conn = Arc::new(conn);
                lock(&connections).push(conn.clone());
                let feedback_senders = feedback_senders.clone();
                tokio::spawn(async move {
                    // A failed download shows at its client.
                    if serve_download(conn.quinn()).await.is_ok() && conn.uses_feedback() {
                        feedback_senders.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        };
        let (endpoint, acceptors) = match stack {
            Stack::Ecnq => {
                let endpoint = Endpoint::server(localhost(), cert.identity(), ecnq_options())
                    .map_err(|e| format!("cannot start the ecnq server: {e}"))?;
                let endpoint = Arc::new(endpoint);
                let acceptors = (0..ACCEPTORS)
                    .map(|_| {
                        let (endpoint, serve) = (endpoint.clone(), serve.clone());
                        tokio::spawn(async move {
                            while let Some(accepted) = endpoint.accept().await {
                                if let Ok(conn) = accepted {
                                    serve(Conn::Ecnq(conn));
                                }
                            }
                        })
                    })
                    .collect();
                (ServerEndpoint::Ecnq(endpoint), acceptors)
            }
            Stack::Vanilla => {
                let endpoint = quinn::Endpoint::server(vanilla_server_config(cert)?, localhost())
                    .map_err(|e| format!("cannot start the quinn server: {e}"))?;
                let accepting = endpoint.clone();
                let acceptor = tokio::spawn(async move {
                    while let Some(incoming) = accepting.accept().await {
                        let serve = serve.clone();
                        tokio::spawn(async move {
                            if let Ok(conn) = incoming.await {
                                serve(Conn::Vanilla(conn));
                            }
                        });
                    }
                });
                (ServerEndpoint::Vanilla(endpoint), vec![acceptor])
            }
        };
        let addr = match &endpoint {
            ServerEndpoint::Ecnq(e) => e.local_addr(),
            ServerEndpoint::Vanilla(e) => e.local_addr(),
        }
        .map_err(|e| format!("server address: {e}"))?;
        Ok(Server {
            endpoint,
            addr,
            connections,
            feedback_senders,
            acceptors,
        })
    }

    /// Packets the server's connections sent and lost.
    pub(super) fn packets(&self) -> Packets {
        lock(&self.connections)
            .iter()
            .map(|c| Packets::of(c.quinn()))
            .fold(Packets::default(), Packets::add)
    }

    pub(super) async fn stop(self) {
        for acceptor in &self.acceptors {
            acceptor.abort();
        }
        let quinn = match &self.endpoint {
            ServerEndpoint::Ecnq(e) => e.quinn(),
            ServerEndpoint::Vanilla(e) => e,
        };
        quinn.close(0u32.into(), b"done");
        let _ = tokio::time::timeout(Duration::from_secs(2), quinn.wait_idle()).await;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

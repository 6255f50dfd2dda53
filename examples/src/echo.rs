//! An echo server and client on the application's own quinn endpoints, with
//! ecnq plugged in (the second way in, see `ecnq::quic`): ecnq's socket
//! under each endpoint, and per connection ecnq's congestion controller,
//! crypto wrapper and feedback tasks. Streams are echoed back whole;
//! application datagrams are echoed as datagrams, beside ecnq's own
//! feedback reports.
//!
//! `ecnq-echo` runs it on loopback; the end-to-end tests run it through a
//! relay shim.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ecnq::quic::{CongestionControl, CongestionStats, Connection, EcnSocket, Identity};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};

/// The ALPN protocol of the echo service.
pub const ALPN: &[u8] = b"ecnq-echo";

/// A quinn endpoint on an ecnq socket. The socket's endpoint configuration
/// carries ecnq's connection ID generator.
fn endpoint(
    bind: SocketAddr,
    cc: CongestionControl,
    server: Option<quinn::ServerConfig>,
) -> Result<(quinn::Endpoint, Arc<EcnSocket>), String> {
    let socket = EcnSocket::bind(bind, cc).map_err(|e| format!("cannot bind {bind}: {e}"))?;
    let endpoint = socket
        .quinn_endpoint(server)
        .map_err(|e| format!("cannot start an endpoint on {bind}: {e}"))?;
    Ok((endpoint, socket))
}

/// The echo server.
pub struct EchoServer {
    endpoint: quinn::Endpoint,
    socket: Arc<EcnSocket>,
    crypto: Arc<QuicServerConfig>,
    cc: CongestionControl,
}

impl EchoServer {
    /// A server on `bind` presenting `identity`, running `cc` toward its clients.
    pub fn bind(
        bind: SocketAddr,
        identity: Identity,
        cc: CongestionControl,
    ) -> Result<EchoServer, String> {
        let mut tls = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(identity.chain, identity.key)
            .map_err(|e| format!("bad certificate: {e}"))?;
        tls.alpn_protocols = vec![ALPN.to_vec()];
        let crypto = Arc::new(QuicServerConfig::try_from(tls).map_err(|e| e.to_string())?);
        // quinn hands out incoming connections only with a default server
        // configuration; each one is accepted with its own below.
        let default = quinn::ServerConfig::with_crypto(crypto.clone());
        let (endpoint, socket) = endpoint(bind, cc, Some(default))?;
        Ok(EchoServer {
            endpoint,
            socket,
            crypto,
            cc,
        })
    }

    /// The address clients connect to.
    pub fn local_addr(&self) -> Result<SocketAddr, String> {
        self.endpoint.local_addr().map_err(|e| e.to_string())
    }

    /// Accepts the next connection with ecnq wired in: its own controller,
    /// crypto wrapper and feedback tasks. `None` once the endpoint closed.
    pub async fn accept(&self) -> Option<Result<Connection, String>> {
        let incoming = self.endpoint.accept().await?;
        let prepared = self.socket.prepare(incoming.remote_address(), self.cc);
        let mut transport = quinn::TransportConfig::default();
        prepared.configure(&mut transport);
        let crypto = prepared.server_crypto(self.crypto.clone());
        let mut config = quinn::ServerConfig::with_crypto(crypto);
        config.transport_config(Arc::new(transport));
        let connecting = prepared.accept(incoming, Arc::new(config));
        Some(match connecting {
            Ok(connecting) => match connecting.await {
                Ok(connection) => Ok(prepared.attach(connection)),
                Err(e) => {
                    prepared.abandon();
                    Err(format!("handshake failed: {e}"))
                }
            },
            Err(e) => {
                prepared.abandon();
                Err(format!("cannot accept: {e}"))
            }
        })
    }

    /// Echoes every connection, each in its own task, until the endpoint
    /// closes.
    pub async fn serve(&self) {
        while let Some(accepted) = self.accept().await {
            match accepted {
                Ok(connection) => {
                    tokio::spawn(async move { echo(&connection).await });
                }
                Err(e) => eprintln!("echo server: {e}"),
            }
        }
    }

    /// Closes the endpoint.
    pub fn close(&self) {
        self.endpoint.close(0u32.into(), b"done");
    }
}

/// Echoes a connection's streams and application datagrams until it
/// closes.
pub async fn echo(connection: &Connection) {
    loop {
        tokio::select! {
            stream = connection.accept_bi() => match stream {
                Ok((send, recv)) => {
                    tokio::spawn(echo_stream(send, recv));
                }
                Err(_) => return,
            },
            datagram = connection.read_datagram() => match datagram {
                // A datagram that does not fit any more is dropped, as
                // datagrams may be.
                Ok(datagram) => {
                    let _ = connection.send_datagram(datagram);
                }
                Err(_) => return,
            },
        }
    }
}

/// Writes back what a stream brings, until its end.
async fn echo_stream(mut send: quinn::SendStream, mut recv: quinn::RecvStream) {
    while let Ok(Some(chunk)) = recv.read_chunk(usize::MAX, true).await {
        if send.write_all(&chunk.bytes).await.is_err() {
            return;
        }
    }
    let _ = send.finish();
}

/// What one echo client run did.
#[derive(Clone, Debug)]
pub struct EchoRun {
    /// Stream bytes sent and echoed back intact.
    pub bytes: usize,
    /// Application datagrams sent.
    pub datagrams_sent: u32,
    /// Application datagrams echoed back intact.
    pub datagrams_echoed: u32,
    /// How long the stream echo took.
    pub elapsed: Duration,
    /// The client's congestion stats at the end.
    pub stats: CongestionStats,
}

/// Connects to `server` from a new endpoint on `bind`, with ecnq wired in,
/// sends `bytes` on a stream and `datagrams` application datagrams, and
/// checks that everything comes back intact.
pub async fn client(
    bind: SocketAddr,
    server: SocketAddr,
    roots: rustls::RootCertStore,
    cc: CongestionControl,
    bytes: usize,
    datagrams: u32,
) -> Result<EchoRun, String> {
    let (endpoint, socket) = endpoint(bind, cc, None)?;
    let mut tls = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = Arc::new(QuicClientConfig::try_from(tls).map_err(|e| e.to_string())?);
    let prepared = socket.prepare(server, cc);
    let mut transport = quinn::TransportConfig::default();
    prepared.configure(&mut transport);
    let mut config = quinn::ClientConfig::new(prepared.client_crypto(crypto));
    config.transport_config(Arc::new(transport));
    let connecting = match prepared.connect(&endpoint, config, server, "localhost") {
        Ok(connecting) => connecting.await.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let connection = match connecting {
        Ok(connection) => prepared.attach(connection),
        Err(e) => {
            prepared.abandon();
            return Err(format!("cannot connect to {server}: {e}"));
        }
    };
    let started = tokio::time::Instant::now();
    let (streamed, echoed) = tokio::join!(
        echo_bytes(&connection, bytes),
        echo_datagrams(&connection, datagrams)
    );
    let elapsed = streamed?;
    let stats = connection.congestion_stats();
    connection.close(0u32.into(), b"done");
    endpoint.wait_idle().await;
    Ok(EchoRun {
        bytes,
        datagrams_sent: datagrams,
        datagrams_echoed: echoed,
        elapsed: elapsed.duration_since(started),
        stats,
    })
}

/// Sends `len` bytes of a pattern on a stream and checks the echo; returns
/// when it ended.
async fn echo_bytes(connection: &Connection, len: usize) -> Result<tokio::time::Instant, String> {
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let (mut send, mut recv) = connection.open_bi().await.map_err(|e| e.to_string())?;
    let write = async {
        send.write_all(&data).await.map_err(|e| e.to_string())?;
        send.finish().map_err(|e| e.to_string())
    };
    let read = async { recv.read_to_end(len + 1).await.map_err(|e| e.to_string()) };
    let (written, echoed) = tokio::join!(write, read);
    written?;
    if echoed? != data {
        return Err("the echo differs from what was sent".into());
    }
    Ok(tokio::time::Instant::now())
}

/// Sends `count` numbered datagrams, 2 ms apart, and counts the intact
/// echoes that come back by a second after the last.
async fn echo_datagrams(connection: &Connection, count: u32) -> u32 {
    let datagram = |n: u32| {
        let mut bytes = n.to_be_bytes().repeat(64);
        bytes.extend_from_slice(b"ecnq echo");
        Bytes::from(bytes)
    };
    let send = async {
        for n in 0..count {
            let _ = connection.send_datagram(datagram(n));
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    let mut seen = vec![false; count as usize];
    let receive = async {
        while seen.iter().any(|s| !s) {
            match connection.read_datagram().await {
                Ok(d) if d.len() >= 4 => {
                    let n = u32::from_be_bytes([d[0], d[1], d[2], d[3]]);
                    if n < count && d == datagram(n) {
                        seen[n as usize] = true;
                    }
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    };
    let deadline = Duration::from_millis(2) * count + Duration::from_secs(1);
    let ((), _) = tokio::join!(send, tokio::time::timeout(deadline, receive));
    seen.iter().filter(|s| **s).count() as u32
}

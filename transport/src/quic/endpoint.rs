//! [`Endpoint`]: a quinn endpoint on an [`EcnSocket`], with one transport
//! configuration per connection wired to that connection's feedback.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::TransportConfig;

use super::congestion::CongestionControl;
use super::connection::{Connection, Prepared};
use super::socket::EcnSocket;
use super::tls::{self, Identity};
use super::Error;

/// Per-stream flow-control credit ecnq gives its peers: 8 MiB, enough for
/// about 330 Mbit/s at a 200 ms round trip. quinn's default (1.25 MB) caps
/// one stream at 50 Mbit/s on such a path, whatever the congestion
/// controller allows. quinn's send window (10 MB) already exceeds it.
/// A [`TransportHook`] can change it.
///
/// An application that reads a stream in order over a lossy path should
/// know one limit of quinn: a stream whose buffer holds more than 1024
/// separate pieces (data received beyond holes not yet repaired) ends the
/// connection with "too many gaps in stream buffer", and a loss burst across
/// a window this large can leave that many holes. Reading with
/// `read_chunk(_, false)` where order does not matter, or a smaller window,
/// avoids it.
pub const STREAM_RECEIVE_WINDOW: u32 = 8 << 20;

/// A hook that adjusts each connection's `TransportConfig` after ecnq's
/// flow-control default (ecnq sets the congestion controller after it runs).
pub type TransportHook = Arc<dyn Fn(&mut TransportConfig) + Send + Sync>;

/// How an [`Endpoint`] runs its connections.
#[derive(Clone)]
pub struct Options {
    /// The congestion controller of every connection's sending direction.
    pub cc: CongestionControl,
    /// TLS ALPN protocols, in preference order (none by default).
    pub alpn: Vec<Vec<u8>>,
    /// Adjusts each connection's transport parameters.
    pub transport: Option<TransportHook>,
    /// Writes one qlog file per connection into this directory (feature `qlog`).
    #[cfg(feature = "qlog")]
    pub qlog_dir: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("cc", &self.cc)
            .field("alpn", &self.alpn)
            .finish_non_exhaustive()
    }
}

impl Options {
    /// Options for `cc`, nothing else set.
    pub fn new(cc: CongestionControl) -> Options {
        Options {
            cc,
            alpn: Vec::new(),
            transport: None,
            #[cfg(feature = "qlog")]
            qlog_dir: None,
        }
    }

    /// Sets the ALPN protocols.
    pub fn alpn(mut self, protocols: &[&[u8]]) -> Options {
        self.alpn = protocols.iter().map(|p| p.to_vec()).collect();
        self
    }

    /// Sets a hook that adjusts each connection's transport parameters.
    pub fn transport(
        mut self,
        hook: impl Fn(&mut TransportConfig) + Send + Sync + 'static,
    ) -> Options {
        self.transport = Some(Arc::new(hook));
        self
    }

    /// Writes qlog traces, one file per connection, into `dir` (made, with
    /// its parents, when the endpoint is).
    #[cfg(feature = "qlog")]
    pub fn qlog_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Options {
        self.qlog_dir = Some(dir.into());
        self
    }

    fn transport_config(
        &self,
        prepared: &Prepared,
        remote: SocketAddr,
    ) -> Result<TransportConfig, Error> {
        let mut transport = TransportConfig::default();
        transport.stream_receive_window(STREAM_RECEIVE_WINDOW.into());
        if let Some(hook) = &self.transport {
            hook(&mut transport);
        }
        prepared.configure(&mut transport);
        self.qlog(&mut transport, prepared, remote)?;
        Ok(transport)
    }

    /// One qlog file for the connection, which quinn and the connection's
    /// session both write into, timed from the session's epoch.
    #[cfg(feature = "qlog")]
    fn qlog(
        &self,
        transport: &mut TransportConfig,
        prepared: &Prepared,
        remote: SocketAddr,
    ) -> Result<(), Error> {
        let Some(dir) = &self.qlog_dir else {
            return Ok(());
        };
        let name = format!(
            "ecnq-{}-{}-{}.qlog",
            self.cc,
            remote.to_string().replace([':', '[', ']'], "_"),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros())
        );
        let epoch = prepared.peer().epoch();
        let file = super::qlog::QlogFile::create(&dir.join(name), epoch).map_err(Error::Io)?;
        let mut config = quinn::QlogConfig::default();
        config
            .writer(file.quinn_writer())
            .title(Some(format!("ecnq {}", self.cc)))
            .start_time(epoch);
        transport.qlog_stream(config.into_stream());
        prepared.peer().log_to(file);
        Ok(())
    }

    #[cfg(not(feature = "qlog"))]
    fn qlog(
        &self,
        _transport: &mut TransportConfig,
        _prepared: &Prepared,
        _remote: SocketAddr,
    ) -> Result<(), Error> {
        Ok(())
    }
}

/// An incoming connection whose handshake is under way
/// ([`Endpoint::incoming`]).
pub struct Accepting {
    /// Its registration and its handshake, or why the endpoint refused it.
    state: Result<(Prepared, Result<quinn::Connecting, Error>), Error>,
}

impl Accepting {
    /// Waits for the handshake: the connection, or why it failed.
    pub async fn finish(self) -> Result<Connection, Error> {
        let (prepared, handshake) = self.state?;
        let handshake = match handshake {
            Ok(connecting) => connecting.await.map_err(Error::Connection),
            Err(e) => Err(e),
        };
        prepared.settle(handshake)
    }
}

/// An ecnq QUIC endpoint: [`Endpoint::client`] or [`Endpoint::server`], then
/// [`Endpoint::connect`] / [`Endpoint::accept`], then plain quinn streams.
pub struct Endpoint {
    inner: quinn::Endpoint,
    /// The current socket ([`Endpoint::rebind`] replaces it).
    socket: Mutex<Arc<EcnSocket>>,
    client: Option<Arc<QuicClientConfig>>,
    server: Option<Arc<QuicServerConfig>>,
    options: Options,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("socket", &self.socket)
            .field("client", &self.client.is_some())
            .field("server", &self.server.is_some())
            .field("options", &self.options)
            .finish()
    }
}

impl Endpoint {
    /// A client endpoint bound to `bind` (`[::]:0` for dual-stack) that
    /// verifies servers against `roots`.
    pub fn client(
        bind: SocketAddr,
        roots: rustls::RootCertStore,
        options: Options,
    ) -> Result<Endpoint, Error> {
        let client = tls::client_crypto(roots, &options.alpn)?;
        Endpoint::new(bind, Some(client), None, options)
    }

    /// A server endpoint bound to `bind` presenting `identity`. It can open
    /// connections too once [`Endpoint::with_roots`] gave it trust roots.
    pub fn server(
        bind: SocketAddr,
        identity: Identity,
        options: Options,
    ) -> Result<Endpoint, Error> {
        let server = tls::server_crypto(identity, &options.alpn)?;
        Endpoint::new(bind, None, Some(server), options)
    }

    /// Lets this endpoint open connections, verifying servers against `roots`.
    pub fn with_roots(mut self, roots: rustls::RootCertStore) -> Result<Endpoint, Error> {
        self.client = Some(tls::client_crypto(roots, &self.options.alpn)?);
        Ok(self)
    }

    fn new(
        bind: SocketAddr,
        client: Option<Arc<QuicClientConfig>>,
        server: Option<Arc<QuicServerConfig>>,
        options: Options,
    ) -> Result<Endpoint, Error> {
        // Here rather than at each connection, whose handshake would fail.
        #[cfg(feature = "qlog")]
        if let Some(dir) = &options.qlog_dir {
            std::fs::create_dir_all(dir).map_err(|e| {
                Error::Io(std::io::Error::new(
                    e.kind(),
                    format!("cannot make the qlog directory {}: {e}", dir.display()),
                ))
            })?;
        }
        let socket = EcnSocket::bind(bind, options.cc).map_err(Error::Io)?;
        let default_server = server
            .clone()
            .map(|crypto| quinn::ServerConfig::with_crypto(crypto));
        let inner = socket.quinn_endpoint(default_server).map_err(Error::Io)?;
        Ok(Endpoint {
            inner,
            socket: Mutex::new(socket),
            client,
            server,
            options,
        })
    }

    /// Connects to `addr`, verifying that its certificate is valid for `server_name`.
    pub async fn connect(&self, addr: SocketAddr, server_name: &str) -> Result<Connection, Error> {
        let crypto = self.client.clone().ok_or(Error::NoClientConfig)?;
        let prepared = self.socket().prepare(addr, self.options.cc);
        let mut config = quinn::ClientConfig::new(prepared.client_crypto(crypto));
        let result = async {
            config.transport_config(Arc::new(self.options.transport_config(&prepared, addr)?));
            let connecting = prepared
                .connect(&self.inner, config, addr, server_name)
                .map_err(Error::Connect)?;
            connecting.await.map_err(Error::Connection)
        }
        .await;
        prepared.settle(result)
    }

    /// Accepts the next incoming connection and waits for its handshake;
    /// `None` once the endpoint is closed. A server that must not hold the
    /// next client back for a round trip takes [`Endpoint::incoming`].
    pub async fn accept(&self) -> Option<Result<Connection, Error>> {
        Some(self.incoming().await?.finish().await)
    }

    /// The next incoming connection, its handshake under way; `None` once
    /// the endpoint is closed. [`Accepting::finish`] waits for it, so a
    /// server that spawns that wait takes its next client at once rather
    /// than a round trip later (a flash crowd's handshakes overlap:
    /// tests/web.rs `the_file_server_takes_a_crowds_handshakes_at_once`).
    pub async fn incoming(&self) -> Option<Accepting> {
        let incoming = self.inner.accept().await?;
        let Some(crypto) = self.server.clone() else {
            incoming.refuse();
            return Some(Accepting {
                state: Err(Error::NoServerConfig),
            });
        };
        let remote = incoming.remote_address();
        let prepared = self.socket().prepare(remote, self.options.cc);
        let mut config = quinn::ServerConfig::with_crypto(prepared.server_crypto(crypto));
        let handshake = self
            .options
            .transport_config(&prepared, remote)
            .and_then(|transport| {
                config.transport_config(Arc::new(transport));
                (prepared.accept(incoming, Arc::new(config))).map_err(Error::Connection)
            });
        Some(Accepting {
            state: Ok((prepared, handshake)),
        })
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// The current socket, for its counters.
    pub fn socket(&self) -> Arc<EcnSocket> {
        self.socket
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Moves the endpoint to a new UDP socket bound to `bind`, as a client
    /// does when its network changes. Its connections migrate to the new
    /// address (quinn's `rebind`) and keep their congestion state and
    /// feedback.
    pub fn rebind(&self, bind: SocketAddr) -> Result<(), Error> {
        let mut socket = self.socket.lock().unwrap_or_else(|e| e.into_inner());
        let rebound = socket.rebound(bind)?;
        self.inner.rebind_abstract(rebound.clone())?;
        *socket = rebound;
        Ok(())
    }

    /// The underlying quinn endpoint.
    pub fn quinn(&self) -> &quinn::Endpoint {
        &self.inner
    }

    /// Closes every connection.
    pub fn close(&self, code: quinn::VarInt, reason: &[u8]) {
        self.inner.close(code, reason)
    }

    /// Waits until every connection has been closed and drained.
    pub async fn wait_idle(&self) {
        self.inner.wait_idle().await
    }
}

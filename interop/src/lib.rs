//! The quic-interop-runner contract on quinn: the environment and paths an
//! endpoint is given ([`contract`]), TLS set-up with NSS key logs ([`tls`]),
//! HTTP/0.9 over QUIC (`hq-interop`, [`hq`]), HTTP/3 for the `http3` case
//! ([`http3`]), and the per-test-case client and
//! server behaviour ([`client`], [`server`]).
//!
//! The QUIC stack under it is a [`Stack`]: vanilla quinn for our quinn peer
//! ([`Vanilla`]), ecnq's socket and congestion controllers for `ecnq-interop`.

pub mod cli;
pub mod client;
pub mod contract;
pub mod hq;
pub mod http3;
pub mod server;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

/// A QUIC stack built on quinn: how it binds endpoints and what it adds to
/// each connection.
pub trait Stack: Send + Sync + 'static {
    /// Program name shown in `--help` and errors.
    fn name(&self) -> &'static str;
    /// One line saying what this endpoint is, for `--help`.
    fn about(&self) -> &'static str;
    /// Command-line options of this stack, besides the runner's.
    fn args(&self) -> Vec<clap::Arg> {
        Vec::new()
    }
    /// Takes this stack's options from the parsed command line.
    fn configure(&mut self, _matches: &clap::ArgMatches) -> Result<(), String> {
        Ok(())
    }
    /// What to print instead of running, if one of this stack's options
    /// asks for a listing (ecnq's `--list-schemes`).
    fn listing(&self, _matches: &clap::ArgMatches) -> Option<String> {
        None
    }
    /// A quinn endpoint on `bind`, with `server` as its default server
    /// configuration if given, and the hooks of its connections.
    fn bind(
        &self,
        bind: SocketAddr,
        server: Option<quinn::ServerConfig>,
    ) -> Result<(quinn::Endpoint, Arc<dyn Hooks>), String>;
}

/// Per-connection additions of a [`Stack`].
pub trait Hooks: Send + Sync {
    /// Called before the handshake with `remote` (`outgoing` for connections
    /// this endpoint opens): may adjust the connection's transport.
    fn prepare(
        &self,
        remote: SocketAddr,
        outgoing: bool,
        transport: &mut quinn::TransportConfig,
    ) -> Result<Box<dyn Pending>, String>;
}

/// A connection prepared by [`Hooks::prepare`], not yet established.
pub trait Pending: Send {
    /// The client crypto configuration of this connection: ecnq's packet
    /// keys see every packet number and ACK frame (what a sender needs to
    /// read its peer's ACK-ECN counts) and every connection ID.
    fn client_crypto(
        &self,
        crypto: Arc<dyn quinn::crypto::ClientConfig>,
    ) -> Arc<dyn quinn::crypto::ClientConfig> {
        crypto
    }
    /// [`Pending::client_crypto`] for a connection this end accepts.
    fn server_crypto(
        &self,
        crypto: Arc<dyn quinn::crypto::ServerConfig>,
    ) -> Arc<dyn quinn::crypto::ServerConfig> {
        crypto
    }
    /// The handshake succeeded: returns what to report when it ends.
    fn attach(self: Box<Self>, connection: &quinn::Connection) -> Box<dyn Summary>;
    /// The handshake failed.
    fn abandon(self: Box<Self>);
}

/// Describes a connection's congestion control for the logs.
pub trait Summary: Send + Sync {
    /// One line (empty: nothing to say).
    fn line(&self) -> String;
}

/// Vanilla quinn from crates.io: a plain UDP socket (quinn-udp sets ECT(0)
/// and reads ECN), quinn's default controller (Cubic), nothing per connection.
pub struct Vanilla {
    pub name: &'static str,
    pub about: &'static str,
}

impl Stack for Vanilla {
    fn name(&self) -> &'static str {
        self.name
    }

    fn about(&self) -> &'static str {
        self.about
    }

    fn bind(
        &self,
        bind: SocketAddr,
        server: Option<quinn::ServerConfig>,
    ) -> Result<(quinn::Endpoint, Arc<dyn Hooks>), String> {
        let socket =
            std::net::UdpSocket::bind(bind).map_err(|e| format!("cannot bind UDP {bind}: {e}"))?;
        let endpoint = quinn::Endpoint::new(
            quinn::EndpointConfig::default(),
            server,
            socket,
            Arc::new(quinn::TokioRuntime),
        )
        .map_err(|e| format!("cannot start an endpoint on {bind}: {e}"))?;
        Ok((endpoint, Arc::new(NoHooks)))
    }
}

struct NoHooks;

impl Hooks for NoHooks {
    fn prepare(
        &self,
        _remote: SocketAddr,
        _outgoing: bool,
        _transport: &mut quinn::TransportConfig,
    ) -> Result<Box<dyn Pending>, String> {
        Ok(Box::new(NoHooks))
    }
}

impl Pending for NoHooks {
    fn attach(self: Box<Self>, _connection: &quinn::Connection) -> Box<dyn Summary> {
        self
    }

    fn abandon(self: Box<Self>) {}
}

impl Summary for NoHooks {
    fn line(&self) -> String {
        String::new()
    }
}

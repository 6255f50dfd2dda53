//! The QUIC integration (feature `quic`): ecnq's congestion control inside
//! quinn connections (docs/design.md §3).
//!
//! * [`EcnSocket`] writes the whole TOS / traffic-class byte per packet (the
//!   scheme's ECN codepoint + its DSCP tag) with GSO, and reads it back on
//!   every receive with GRO, handing each packet's marks to the decoder of
//!   the connection it belongs to.
//! * A congestion controller per connection runs the scheme's
//!   [`Law`](crate::Law) inside quinn; quinn's NewReno, Cubic and BBR are
//!   available through the same [`CongestionControl`] choice.
//! * The receiver sends its decoder's estimate back in QUIC DATAGRAM frames
//!   ([`report`]); application datagrams keep working.
//! * With a peer that does not run ecnq (its packets carry no DSCP tag), or
//!   when its reports stop, the sender falls back to the core's Cubic law and
//!   says so in [`CongestionStats::mode`]; when reports return, the scheme's
//!   law takes over again.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ecnq::quic::Error> {
//! use ecnq::quic::{CongestionControl, Endpoint, Options, SelfSigned};
//! use ecnq::Scheme;
//!
//! let cert = SelfSigned::new(&["localhost"])?;
//! let options = Options::new(CongestionControl::Ecnq(Scheme::Erc));
//! let server = Endpoint::server("[::1]:0".parse().unwrap(), cert.identity(), options.clone())?;
//! let client = Endpoint::client("[::]:0".parse().unwrap(), cert.roots(), options)?;
//! let addr = server.local_addr()?;
//! let (connection, _) = tokio::join!(client.connect(addr, "localhost"), server.accept());
//! let connection = connection?;
//! let (mut send, _recv) = connection.open_bi().await?;
//! send.write_all(b"hello").await.unwrap();
//! println!("{:?}", connection.congestion_stats());
//! # Ok(()) }
//! ```
//!
//! # Two ways in
//!
//! 1. ecnq's [`Endpoint`], as above: it wires the socket, the controller,
//!    the feedback reports and the connection IDs itself.
//! 2. Your own `quinn::Endpoint`, with ecnq's pieces plugged in:
//!    * the socket: [`EcnSocket::bind`], then
//!      [`EcnSocket::quinn_endpoint`] (or hand it to
//!      `quinn::Endpoint::new_with_abstract_socket` yourself with
//!      [`EcnSocket::endpoint_config`]: quinn's defaults plus ecnq's
//!      connection IDs, which let the socket tell connections apart);
//!    * per connection, [`EcnSocket::prepare`] gives a [`Prepared`]:
//!      [`Prepared::configure`] puts the scheme's quinn `ControllerFactory`
//!      into the `TransportConfig`, [`Prepared::client_crypto`] /
//!      [`Prepared::server_crypto`] wrap the TLS configuration,
//!      [`Prepared::connect`] / [`Prepared::accept`] start the connection,
//!      and [`Prepared::attach`] starts the feedback reports and returns a
//!      [`Connection`]. Send and read application datagrams through it, not
//!      through quinn, which would hand you ecnq's reports.
//!
//!    `examples/src/echo.rs` is a whole echo server and client built this
//!    way (`cargo run -p ecnq-examples --bin ecnq-echo`). A server accepts
//!    like this (the client side is on [`Prepared`]):
//!
//! ```no_run
//! # async fn demo(crypto: std::sync::Arc<quinn::crypto::rustls::QuicServerConfig>)
//! #     -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use ecnq::quic::{CongestionControl, EcnSocket};
//!
//! let cc = CongestionControl::DEFAULT;
//! let socket = EcnSocket::bind("[::]:4433".parse()?, cc)?;
//! let endpoint = socket.quinn_endpoint(Some(quinn::ServerConfig::with_crypto(crypto.clone())))?;
//! while let Some(incoming) = endpoint.accept().await {
//!     let prepared = socket.prepare(incoming.remote_address(), cc);
//!     let mut transport = quinn::TransportConfig::default();
//!     prepared.configure(&mut transport);
//!     let mut config = quinn::ServerConfig::with_crypto(prepared.server_crypto(crypto.clone()));
//!     config.transport_config(Arc::new(transport));
//!     let connection = prepared.accept(incoming, Arc::new(config))?.await?;
//!     let connection = prepared.attach(connection);
//!     tokio::spawn(async move {
//!         while let Ok(datagram) = connection.read_datagram().await {
//!             let _ = connection.send_datagram(datagram);
//!         }
//!     });
//! }
//! # Ok(()) }
//! ```
//!
//! # Limits
//!
//! * The socket finds a packet's connection by its destination connection
//!   ID: any number of connections may share a remote address, and a
//!   connection that migrates (NAT rebinding, [`Endpoint::rebind`]) keeps
//!   its decoder state and feedback. ecnq issues the IDs (quinn's
//!   `EndpointConfig` from [`EcnSocket::endpoint_config`]); with other IDs,
//!   or without [`Prepared::client_crypto`] / [`Prepared::server_crypto`],
//!   connections are told apart by remote address.
//! * A peer is known to run ecnq by the DSCP tag of its packets. An ecnq peer
//!   whose own controller uses no router feedback (classic, or quinn's)
//!   sends untagged packets and looks like a vanilla peer.
//! * Application datagrams must not start with [`report::MAGIC`].

use std::fmt;

mod cid;
mod congestion;
mod connection;
mod controller;
mod demux;
mod endpoint;
pub mod header;
mod peer;
#[cfg(feature = "qlog")]
mod qlog;
mod socket;
mod tap;
mod tls;

pub use crate::session::report;
pub use crate::session::PeerMode;
pub use congestion::{CongestionControl, UnknownController};
pub use connection::{CongestionStats, Connection, DatagramError, Prepared, StatsHandle};
pub use controller::EcnqControllerFactory;
pub use endpoint::{Accepting, Endpoint, Options, TransportHook, STREAM_RECEIVE_WINDOW};
pub use socket::{EcnSocket, SocketStats};
pub use tls::{Identity, SelfSigned};

/// What can go wrong setting up an ecnq endpoint or connection.
#[derive(Debug)]
pub enum Error {
    /// A socket or file operation failed.
    Io(std::io::Error),
    /// TLS configuration was refused.
    Tls(rustls::Error),
    /// A certificate could not be made or used.
    Certificate(String),
    /// This endpoint has no client configuration.
    NoClientConfig,
    /// This endpoint has no server configuration.
    NoServerConfig,
    /// quinn refused to start the connection.
    Connect(quinn::ConnectError),
    /// The connection failed.
    Connection(quinn::ConnectionError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "I/O error: {e}"),
            Error::Tls(e) => write!(f, "TLS configuration error: {e}"),
            Error::Certificate(e) => write!(f, "certificate error: {e}"),
            Error::NoClientConfig => {
                f.write_str("this endpoint cannot open connections (no trust roots)")
            }
            Error::NoServerConfig => {
                f.write_str("this endpoint cannot accept connections (no certificate)")
            }
            Error::Connect(e) => write!(f, "cannot connect: {e}"),
            Error::Connection(e) => write!(f, "connection failed: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<quinn::ConnectionError> for Error {
    fn from(e: quinn::ConnectionError) -> Error {
        Error::Connection(e)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Io(e)
    }
}

//! The quic-interop-runner contract on quinn: the environment and paths an
//! endpoint is given ([`contract`]), TLS set-up with NSS key logs ([`tls`]),
//! HTTP/0.9 over QUIC (`hq-interop`, [`hq`]), and the per-test-case client and
//! server behaviour ([`client`], [`server`]).
//!
//! The stack under it is a [`Stack`]: vanilla quinn for our quinn peer, the
//! ecnq congestion controllers for `ecnq-interop`.

pub mod cli;
pub mod client;
pub mod contract;
pub mod hq;
pub mod server;
pub mod tls;

use std::sync::Arc;

/// Adjusts a connection's transport parameters for one stack (for example its
/// congestion controller).
pub type TransportHook = Arc<dyn Fn(&mut quinn::TransportConfig) + Send + Sync>;

/// What distinguishes one QUIC stack built on quinn from another.
#[derive(Clone)]
pub struct Stack {
    /// Program name shown in `--help` and errors.
    pub name: &'static str,
    /// One line saying what this endpoint is, for `--help`.
    pub about: &'static str,
    /// Applied to every connection's transport parameters.
    pub transport: Option<TransportHook>,
}

impl Stack {
    /// quinn's defaults for everything: NewReno-family Cubic, ECT(0).
    pub fn vanilla(name: &'static str, about: &'static str) -> Stack {
        Stack {
            name,
            about,
            transport: None,
        }
    }

    /// A transport configuration for `testcase` with this stack's hook applied.
    pub fn transport_config(&self, testcase: contract::TestCase) -> quinn::TransportConfig {
        let mut config = quinn::TransportConfig::default();
        testcase.tune(&mut config);
        if let Some(hook) = &self.transport {
            hook(&mut config);
        }
        config
    }
}

//! ecnq-interop: the quic-interop-runner endpoint of ecnq. Its connections
//! run on ecnq's socket (TOS byte per packet: scheme ECN codepoint and DSCP
//! tag) with an ecnq congestion controller. Against a peer that does not run
//! ecnq (its packets carry no scheme tag) the controller falls back to
//! classic NewReno with ECT(0), i.e. plain QUIC; between ecnq ends router
//! feedback drives the scheme chosen with --cc / ECNQ_CC.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Arg, ArgAction, ArgMatches};
use ecnq::quic::{CongestionControl, EcnSocket, Prepared};
use ecnq::Scheme;
use ecnq_interop::{cli, Hooks, Pending, Stack, Summary};

/// The ecnq stack: one [`EcnSocket`] per endpoint, an ecnq controller and
/// feedback reports per connection.
struct Ecnq {
    cc: CongestionControl,
}

impl Stack for Ecnq {
    fn name(&self) -> &'static str {
        "ecnq-interop"
    }

    fn about(&self) -> &'static str {
        "ecnq's interop endpoint: hq-interop over ecnq congestion control (plain QUIC with \
         classic NewReno toward other stacks)"
    }

    fn args(&self) -> Vec<Arg> {
        vec![
            Arg::new("cc")
                .long("cc")
                .value_name("CONTROLLER")
                .help(format!(
                    "Congestion controller [env: ECNQ_CC] [default: {}]:\n{}",
                    CongestionControl::DEFAULT,
                    CongestionControl::help()
                )),
            Arg::new("list-schemes")
                .long("list-schemes")
                .action(ArgAction::SetTrue)
                .help(
                    "Print the name of every ecnq scheme, one a line, and exit \
                     (interop/run-matrix runs each as ecnq-<scheme>)",
                ),
        ]
    }

    fn listing(&self, matches: &ArgMatches) -> Option<String> {
        matches
            .get_flag("list-schemes")
            .then(|| Scheme::ALL.map(Scheme::name).join("\n"))
    }

    fn configure(&mut self, matches: &ArgMatches) -> Result<(), String> {
        let name = matches
            .get_one::<String>("cc")
            .cloned()
            .or_else(|| std::env::var("ECNQ_CC").ok())
            .filter(|v| !v.is_empty());
        if let Some(name) = name {
            self.cc = name.parse().map_err(|e| format!("{e}"))?;
        }
        Ok(())
    }

    fn bind(
        &self,
        bind: SocketAddr,
        server: Option<quinn::ServerConfig>,
    ) -> Result<(quinn::Endpoint, Arc<dyn Hooks>), String> {
        let socket =
            EcnSocket::bind(bind, self.cc).map_err(|e| format!("cannot bind UDP {bind}: {e}"))?;
        let endpoint = socket
            .quinn_endpoint(server)
            .map_err(|e| format!("cannot start an endpoint on {bind}: {e}"))?;
        Ok((
            endpoint,
            Arc::new(EcnqHooks {
                socket,
                cc: self.cc,
            }),
        ))
    }
}

struct EcnqHooks {
    socket: Arc<EcnSocket>,
    cc: CongestionControl,
}

impl Hooks for EcnqHooks {
    fn prepare(
        &self,
        remote: SocketAddr,
        _outgoing: bool,
        transport: &mut quinn::TransportConfig,
    ) -> Result<Box<dyn Pending>, String> {
        // Incoming connections use the socket's controller too: their
        // handshake packets were already counted under it.
        let prepared = self.socket.prepare(remote, self.cc);
        prepared.configure(transport);
        Ok(Box::new(EcnqPending(prepared)))
    }
}

struct EcnqPending(Prepared);

impl Pending for EcnqPending {
    fn client_crypto(
        &self,
        crypto: Arc<dyn quinn::crypto::ClientConfig>,
    ) -> Arc<dyn quinn::crypto::ClientConfig> {
        self.0.client_crypto(crypto)
    }

    fn server_crypto(
        &self,
        crypto: Arc<dyn quinn::crypto::ServerConfig>,
    ) -> Arc<dyn quinn::crypto::ServerConfig> {
        self.0.server_crypto(crypto)
    }

    fn attach(self: Box<Self>, connection: &quinn::Connection) -> Box<dyn Summary> {
        Box::new(EcnqSummary(self.0.attach(connection.clone())))
    }

    fn abandon(self: Box<Self>) {
        self.0.abandon()
    }
}

struct EcnqSummary(ecnq::quic::Connection);

impl Summary for EcnqSummary {
    /// The run-matrix reads `mode=` to judge scheme-level interop: `Ecnq`
    /// between ecnq ends, a classic mode with other stacks.
    fn line(&self) -> String {
        let s = self.0.congestion_stats();
        format!(
            "ecnq cc={} mode={:?} feedback={} reports_sent={} reports_received={} \
             reports_rejected={} ack_frames_read={} decreases={} ecn_received={:?}",
            s.controller,
            s.mode,
            s.uses_feedback(),
            s.reports_sent,
            s.reports_received,
            s.reports_rejected,
            s.ack_frames_read,
            s.decreases,
            s.ecn_received
        )
    }
}

fn main() -> ExitCode {
    cli::main(&mut Ecnq {
        cc: CongestionControl::DEFAULT,
    })
}

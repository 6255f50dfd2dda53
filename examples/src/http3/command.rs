//! `ecnq-perf h3-server` and `ecnq-perf h3-get`: the command lines of the
//! HTTP/3 file server and client.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use ecnq::quic::CongestionControl;
use ecnq::units::Size;

use super::client::{self, GetConfig, Target};
use super::server::{FileServer, ServerConfig};
use crate::perf::{client::mode_name, output, proto};

/// Options of `ecnq-perf h3-server`.
#[derive(Args, Debug, Clone)]
#[command(after_help = CHROMIUM_HELP)]
pub struct ServerArgs {
    /// The directory whose files are served (a directory's index.html for
    /// its own path); nothing outside it is, symbolic links included.
    #[arg(long, value_name = "DIR")]
    pub root: PathBuf,
    /// Address and UDP port to listen on.
    #[arg(long, default_value = "[::]:4433", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Congestion control of the server's sending direction [default: erc].
    #[arg(long, default_value_t = CongestionControl::DEFAULT, value_parser = cc_arg, long_help = format!("Congestion control of the server's sending direction:\n{}", CongestionControl::help()))]
    pub cc: CongestionControl,
    /// Certificate chain (PEM); default a fresh self-signed one for
    /// localhost, 127.0.0.1 and ::1, stored like `ecnq-perf -s` stores its
    /// own.
    #[arg(long, requires = "key", value_name = "FILE")]
    pub cert: Option<PathBuf>,
    /// Private key (PEM).
    #[arg(long, requires = "cert", value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Bytes written to a connection and not yet acknowledged at most
    /// (k, m, g: powers of 1024). A connection's goodput counts a response
    /// as done once written, so it reads high by at most this much.
    #[arg(long, default_value = "2m", value_name = "SIZE", value_parser = size_arg)]
    pub send_window: u64,
    /// Serve Prometheus metrics over HTTP on ADDR (host:port):
    /// ecnq_connections{cc,mode}, the open connections by congestion
    /// control and mode (EcnqAckCounts for clients read through their
    /// ACK-ECN counts, ClassicNoEcnCounts, …), and
    /// ecnq_connections_closed_total{cc,mode}, the ended ones.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// Write one qlog file per connection into this directory: quinn's
    /// events and ecnq's (`ecnq:mode_updated` names the feedback the
    /// sender runs on, `ecnq:decrease` its law's cuts).
    #[arg(long, value_name = "DIR")]
    pub qlog: Option<PathBuf>,
}

/// How to point Chromium at the server, under `h3-server --help`.
const CHROMIUM_HELP: &str = "Chromium, with HTTP/3 from the first request and the printed hash \
    trusted: chromium --enable-quic --origin-to-force-quic-on=localhost:4433 \
    --host-resolver-rules='MAP localhost 127.0.0.1' --ignore-certificate-errors-spki-list=HASH \
    https://localhost:4433/";

/// Options of `ecnq-perf h3-get`.
#[derive(Args, Debug, Clone)]
pub struct GetArgs {
    /// https:// URLs on one server, fetched at once on one connection.
    #[arg(required = true, value_name = "URL", value_parser = target_arg)]
    pub urls: Vec<Target>,
    /// Save each body below this directory, by its URL path.
    #[arg(short = 'o', long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Connect to this address instead of the URLs' host (e.g. a relay
    /// shim in front of the server).
    #[arg(long, value_name = "ADDR")]
    pub connect: Option<SocketAddr>,
    /// Trust this certificate (PEM). Default: the one an `ecnq-perf
    /// h3-server` on this machine left for the address connected to.
    #[arg(long, value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// Name the server's certificate must be valid for [default: the URLs' host].
    #[arg(long, value_name = "NAME")]
    pub server_name: Option<String>,
    /// Congestion control of the client's sending direction (requests and
    /// acknowledgements).
    #[arg(long, default_value_t = CongestionControl::DEFAULT, value_parser = cc_arg)]
    pub cc: CongestionControl,
}

fn cc_arg(s: &str) -> Result<CongestionControl, String> {
    s.parse::<CongestionControl>().map_err(|e| e.to_string())
}

fn size_arg(s: &str) -> Result<u64, String> {
    match s.parse::<Size>().map_err(|e| e.to_string())?.bytes() {
        0 => Err(format!("`{s}` must be at least 1 byte")),
        bytes => Ok(bytes),
    }
}

fn target_arg(s: &str) -> Result<Target, String> {
    s.parse()
}

/// Names a self-signed certificate is made for.
const SELF_SIGNED_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Runs the server until Ctrl-C or SIGTERM.
pub async fn run_server(args: ServerArgs) -> Result<(), String> {
    let (identity, self_signed) = match (&args.cert, &args.key) {
        (Some(cert), Some(key)) => (proto::load_identity(cert, key)?, None),
        _ => {
            let names = SELF_SIGNED_NAMES.map(String::from);
            let (identity, pem) = proto::self_signed(&names)?;
            (identity, Some(pem))
        }
    };
    let server = FileServer::bind(ServerConfig {
        listen: args.listen,
        identity,
        cc: args.cc,
        root: args.root.clone(),
        send_window: args.send_window,
        qlog: args.qlog.clone(),
    })?;
    let server = match crate::metrics::serve_if_asked(args.metrics)? {
        Some(board) => server.track_on(board),
        None => server,
    };
    let local = server.local_addr()?;
    if let Some(pem) = self_signed {
        let path = proto::store_cert(&proto::cert_dir(), local, &pem)?;
        println!(
            "Self-signed certificate for {} in {}",
            SELF_SIGNED_NAMES.join(", "),
            path.display()
        );
    }
    println!(
        "Serving {} over HTTP/3 on {local} (congestion control {} when sending)",
        args.root.display(),
        args.cc
    );
    println!(
        "Certificate SPKI SHA-256 (Chromium's --ignore-certificate-errors-spki-list): {}",
        server.spki_sha256()
    );
    server
        .serve(ecnq_shim::shutdown_signal(), |served| match served {
            Ok(s) => println!(
                "[{}] {} requests ({} not found), {} in {:.2} s = {} ({}, mode {:?}, {}){}",
                s.peer,
                s.answers.len(),
                s.not_found(),
                output::bytes(s.bytes()),
                s.seconds(),
                output::bits_per_second(s.goodput_bps()),
                s.stats.controller,
                s.stats.mode,
                mode_name(&s.stats),
                s.error.map_or(String::new(), |e| format!("; ended: {e}")),
            ),
            Err(e) => eprintln!("ecnq-perf: {e}"),
        })
        .await;
    Ok(())
}

/// Fetches the URLs; fails unless every response is a 2xx.
pub async fn run_get(args: GetArgs) -> Result<(), String> {
    let first = &args.urls[0];
    if let Some(other) = args
        .urls
        .iter()
        .find(|t| (&t.host, t.port) != (&first.host, first.port))
    {
        return Err(format!(
            "all URLs must name one server: {} and {} do not",
            first.uri, other.uri
        ));
    }
    let server = match args.connect {
        Some(addr) => addr,
        None => tokio::net::lookup_host((first.host.as_str(), first.port))
            .await
            .map_err(|e| format!("cannot resolve {}: {e}", first.host))?
            .next()
            .ok_or_else(|| format!("{} has no address", first.host))?,
    };
    let ca = match &args.ca {
        Some(ca) => ca.clone(),
        None => proto::find_cert(&proto::cert_dir(), server)?,
    };
    let config = GetConfig {
        server,
        server_name: args.server_name.clone().unwrap_or(first.host.clone()),
        roots: proto::load_roots(&ca)?,
        cc: args.cc,
        output: args.output.clone(),
    };
    let run = client::get(&config, &args.urls).await?;
    for f in &run.fetched {
        println!(
            "{} {} {} in {:.2} s = {}{}",
            f.status.as_u16(),
            f.uri,
            output::bytes(f.bytes),
            f.seconds,
            output::bits_per_second(f.bytes as f64 * 8.0 / f.seconds.max(1e-9)),
            f.saved
                .as_ref()
                .map_or(String::new(), |p| format!(" -> {}", p.display())),
        );
    }
    println!(
        "{} responses from {server}, {} in {:.2} s = {} (handshake {:.0} ms; client {} mode {})",
        run.fetched.len(),
        output::bytes(run.bytes()),
        run.seconds,
        output::bits_per_second(run.goodput_bps()),
        run.handshake_seconds * 1e3,
        run.stats.controller,
        mode_name(&run.stats),
    );
    let failed = run
        .fetched
        .iter()
        .filter(|f| !f.status.is_success())
        .count();
    if failed > 0 {
        return Err(format!(
            "{failed} of {} responses were not 2xx",
            run.fetched.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_send_window_default_is_the_servers() {
        assert_eq!(size_arg("2m"), Ok(super::super::server::SEND_WINDOW));
        assert!(size_arg("0").is_err());
    }
}

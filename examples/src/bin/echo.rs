//! ecnq in an application's own quinn endpoints: an echo server and client
//! in one process on loopback. Each endpoint is a plain `quinn::Endpoint`
//! on ecnq's socket; each connection gets ecnq's congestion controller,
//! crypto wrapper and feedback tasks (see `ecnq_examples::echo`). The
//! client echoes a stream and application datagrams, beside ecnq's
//! feedback reports, and prints what came back and its congestion stats.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use ecnq::quic::{CongestionControl, SelfSigned};
use ecnq_examples::echo::{self, EchoServer};

/// Echo a stream and application datagrams between two quinn endpoints
/// that run ecnq's congestion control, on loopback.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Congestion controller of both ends [default: erc].
    #[arg(long, default_value_t = CongestionControl::DEFAULT, long_help = format!("Congestion controller of both ends:\n{}", CongestionControl::help()))]
    cc: CongestionControl,

    /// Megabytes the client sends on a stream and reads back.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=4096))]
    mbytes: u32,

    /// Application datagrams the client sends and reads back.
    #[arg(long, default_value_t = 20)]
    datagrams: u32,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: &Args) -> Result<(), String> {
    let cert = SelfSigned::new(&["localhost"]).map_err(|e| e.to_string())?;
    let localhost: SocketAddr = "[::1]:0".parse().expect("literal");
    let server = EchoServer::bind(localhost, cert.identity(), args.cc)?;
    let addr = server.local_addr()?;
    let bytes = args.mbytes as usize * (1 << 20);
    let client = echo::client(
        localhost,
        addr,
        cert.roots(),
        args.cc,
        bytes,
        args.datagrams,
    );
    let (run, served) = tokio::join!(client, async {
        let connection = server.accept().await.ok_or("server closed")??;
        echo::echo(&connection).await;
        Ok::<_, String>(connection.congestion_stats())
    });
    let (run, served) = (run?, served?);
    println!(
        "echoed {} MB in {:.2} s ({:.0} Mbit/s each way), {}/{} datagrams",
        args.mbytes,
        run.elapsed.as_secs_f64(),
        bytes as f64 * 8.0 / run.elapsed.as_secs_f64() / 1e6,
        run.datagrams_echoed,
        run.datagrams_sent
    );
    for (side, stats) in [("client", &run.stats), ("server", &served)] {
        println!(
            "{side}: cc={} mode={} reports sent={} received={} rejected={}",
            stats.controller,
            stats.mode.name(),
            stats.reports_sent,
            stats.reports_received,
            stats.reports_rejected
        );
    }
    server.close();
    Ok(())
}

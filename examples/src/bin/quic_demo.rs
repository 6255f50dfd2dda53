//! ecnq over QUIC on loopback: a server and a client in one process, a bulk
//! transfer with the congestion controller you choose, application
//! datagrams beside it, and both ends' congestion stats at the end.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Instant;

use bytes::Bytes;
use clap::Parser;
use ecnq::quic::{CongestionControl, CongestionStats, Endpoint, Options, SelfSigned};

/// Move data between an ecnq client and server on loopback and print what
/// their congestion controllers did. Without a router in between, the ecnq
/// schemes see no congestion (load codes stay at their base value); put the
/// ecnq router shim between them to see them react.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Congestion controller of both ends [default: erc].
    #[arg(long, default_value_t = CongestionControl::DEFAULT, long_help = format!("Congestion controller of both ends:\n{}", CongestionControl::help()))]
    cc: CongestionControl,

    /// Megabytes the client sends to the server.
    #[arg(long, default_value_t = 32)]
    mbytes: usize,

    /// Application datagrams each way, sent during the transfer.
    #[arg(long, default_value_t = 10)]
    datagrams: u32,

    /// Use IPv4 (127.0.0.1) instead of IPv6 (::1).
    #[arg(long)]
    ipv4: bool,

    /// Log ecnq's decisions (mode changes, decreases, fallback).
    #[arg(short, long)]
    verbose: bool,

    /// Write one qlog file per connection into this directory.
    #[cfg(feature = "qlog")]
    #[arg(long)]
    qlog_dir: Option<std::path::PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.mbytes == 0 || args.mbytes > 64 * 1024 {
        eprintln!("error: --mbytes must be between 1 and 65536");
        return ExitCode::FAILURE;
    }
    if args.verbose {
        tracing_subscriber::fmt()
            .with_max_level(tracing_subscriber::filter::LevelFilter::DEBUG)
            .init();
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let cert = SelfSigned::new(&["localhost"])?;
    #[allow(unused_mut)]
    let mut options = Options::new(args.cc).alpn(&[b"ecnq-demo"]);
    #[cfg(feature = "qlog")]
    if let Some(dir) = &args.qlog_dir {
        options = options.qlog_dir(dir);
    }
    let (server_bind, client_bind): (SocketAddr, SocketAddr) = if args.ipv4 {
        ("127.0.0.1:0".parse()?, "0.0.0.0:0".parse()?)
    } else {
        ("[::1]:0".parse()?, "[::]:0".parse()?)
    };
    let server = Endpoint::server(server_bind, cert.identity(), options.clone())?;
    let client = Endpoint::client(client_bind, cert.roots(), options)?;
    let addr = server.local_addr()?;
    println!("{} server on {addr}", args.cc);

    let (client_side, server_side) =
        tokio::join!(client.connect(addr, "localhost"), server.accept());
    let client_side = client_side?;
    let server_side = server_side.ok_or("server endpoint closed")??;

    let len = args.mbytes << 20;
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let started = Instant::now();
    let send = async {
        let mut stream = client_side.open_uni().await?;
        stream.write_all(&data).await?;
        stream.finish()?;
        stream.stopped().await?;
        Ok::<_, Box<dyn std::error::Error>>(())
    };
    let receive = async {
        let mut stream = server_side.accept_uni().await?;
        let received = stream.read_to_end(len + 1).await?;
        Ok::<_, Box<dyn std::error::Error>>(received)
    };
    let datagrams = async {
        let mut echoed = 0;
        for i in 0..args.datagrams {
            client_side.send_datagram(Bytes::from(format!("datagram {i}")))?;
            let got = server_side.read_datagram().await?;
            server_side.send_datagram(got)?;
            if client_side.read_datagram().await? == format!("datagram {i}").as_bytes() {
                echoed += 1;
            }
        }
        Ok::<_, Box<dyn std::error::Error>>(echoed)
    };
    let (sent, received, echoed) = tokio::join!(send, receive, datagrams);
    sent?;
    let received = received?;
    let elapsed = started.elapsed();
    if received != data {
        return Err("the received data differ from what was sent".into());
    }
    println!(
        "moved {} MiB intact in {:.3} s: {:.1} Mbit/s; {}/{} datagrams echoed",
        args.mbytes,
        elapsed.as_secs_f64(),
        len as f64 * 8.0 / elapsed.as_secs_f64() / 1e6,
        echoed?,
        args.datagrams
    );
    print_stats("client (sender)", &client_side.congestion_stats());
    print_stats("server (receiver)", &server_side.congestion_stats());
    client_side.close(0u32.into(), b"done");
    client.wait_idle().await;
    Ok(())
}

fn print_stats(who: &str, s: &CongestionStats) {
    let law = s.law_mode.map_or("-".to_owned(), |m| m.to_string());
    let load = |f: Option<ecnq::Feedback>| {
        f.map_or("-".to_owned(), |f| {
            format!("level {} (ρ ≤ {})", f.level, f.load)
        })
    };
    println!("{who}:");
    println!(
        "  controller {}  mode {}  law {}  window {} B  rate {:.1} Mbit/s  srtt {:?}",
        s.controller,
        s.mode.name(),
        law,
        s.window,
        s.rate * 8.0 / 1e6,
        s.srtt
    );
    println!(
        "  path load (peer's report) {}  our estimate of the peer's path {}",
        load(s.path_load),
        load(s.local_estimate)
    );
    println!(
        "  reports sent {} received {} rejected {}  decreases {}",
        s.reports_sent, s.reports_received, s.reports_rejected, s.decreases
    );
    let [not_ect, ect1, ect0, ce] = s.ecn_received;
    println!("  received codepoints: not-ect {not_ect}  ect(1) {ect1}  ect(0) {ect0}  ce {ce}");
}

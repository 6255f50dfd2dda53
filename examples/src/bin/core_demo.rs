//! A scripted multi-router decode: the sans-IO core at work with no network.
//!
//! Three routers in series each measure their own output link for one
//! interval (fed with enough traffic to reach the load you give), then a flow
//! of every scheme crosses them. The receiver's decoder reports what it
//! learned — the most congested link — and the sender's law reacts.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use ecnq::wire::hash::fmix32;
use ecnq::{
    Ecn, LawConfig, MarkingMode, PacketMarks, RouterConfig, RouterLink, RttSample, Scheme, FORMULAS,
};

/// Show how a receiver learns the most congested of several routers, for
/// every ecnq scheme, and how each sender reacts.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Load factor (VCP's ρ) of each router on the path, in order, as
    /// fractions of capacity: e.g. `0.55,1.12,0.9`.
    #[arg(long, value_delimiter = ',', default_value = "0.55,1.12,0.9")]
    loads: Vec<f64>,

    /// Packets of the demo flow sent across the path.
    #[arg(long, default_value_t = 400)]
    packets: u32,

    /// Link capacity of every router, in Mbit/s.
    #[arg(long, default_value_t = 20.0)]
    mbit: f64,

    /// Round-trip time the sender sees, in milliseconds.
    #[arg(long, default_value_t = 100)]
    rtt_ms: u64,
}

const MS: Duration = Duration::from_millis(1);
const MSS: u64 = 1200;

fn main() -> ExitCode {
    let args = Args::parse();
    if args.loads.is_empty()
        || args
            .loads
            .iter()
            .any(|l| !l.is_finite() || *l < 0.0 || *l > 100.0)
    {
        eprintln!(
            "error: --loads needs one or more load factors between 0 and 100, e.g. 0.55,1.12,0.9"
        );
        return ExitCode::FAILURE;
    }
    if !(args.mbit.is_finite() && args.mbit > 0.0) || args.packets == 0 {
        eprintln!("error: --mbit must be positive and --packets at least 1");
        return ExitCode::FAILURE;
    }
    let capacity = args.mbit * 1e6 / 8.0;
    let routers = loaded_routers(&args.loads, capacity);

    println!(
        "Path of {} routers at {} Mbit/s, one measurement interval (200 ms) each:",
        routers.len(),
        args.mbit
    );
    let mut header = format!("  {:<8}", "router");
    for f in &FORMULAS {
        let title = format!("{} {}", f.name.to_uppercase(), f.symbol);
        header += &format!(" {title:>10}");
    }
    println!("{header}");
    for (i, r) in routers.iter().enumerate() {
        let mut row = format!("  R{:<7}", i + 1);
        for (_, load) in r.meter().load().iter() {
            row += &format!(" {:>10}", load.to_string());
        }
        println!("{row}");
    }
    println!();
    println!(
        "{:<6} {:>18} {:>18}   {:<28}",
        "scheme", "decoded after R1", "after whole path", "sender reaction (from 100 packets)"
    );
    for scheme in Scheme::router_assisted() {
        // Fresh routers for every scheme: markers keep per-flow state.
        let mut path = loaded_routers(&args.loads, capacity);
        let after_first = decode(scheme, &mut path[..1], args.packets);
        let mut path = loaded_routers(&args.loads, capacity);
        let after_all = decode(scheme, &mut path, args.packets);
        let reaction = react(scheme, after_all.0, Duration::from_millis(args.rtt_ms));
        println!(
            "{:<6} {:>18} {:>18}   {}",
            scheme.name(),
            after_first.1,
            after_all.1,
            reaction
        );
    }
    ExitCode::SUCCESS
}

/// Routers whose last completed interval carried the given VCP load factor.
fn loaded_routers(loads: &[f64], capacity: f64) -> Vec<RouterLink> {
    loads
        .iter()
        .map(|&rho| {
            let mut cfg = RouterConfig::new(capacity, 1 << 20);
            cfg.mode = MarkingMode::Auto;
            let gamma = cfg.meter.formulas.vcp.gamma;
            let mut link = RouterLink::new(cfg, Duration::ZERO);
            // λ = ρ·γ·C·t_p bytes in the first interval, as 1200-byte packets.
            let mut bytes = (rho * gamma * capacity * 0.2) as u64;
            let mut background = PacketMarks {
                ecn: Ecn::NotEct,
                tag: Default::default(),
                hash: 0,
                flow: 0,
            };
            while bytes > 0 {
                let len = bytes.min(MSS) as u32;
                link.on_arrival(MS, len, &mut background);
                bytes -= u64::from(len);
            }
            link.advance(MS * 200);
            link
        })
        .collect()
}

/// Sends `packets` of one flow of `scheme` across `path`; returns the
/// receiver's estimate as feedback and as text.
fn decode(scheme: Scheme, path: &mut [RouterLink], packets: u32) -> (ecnq::Feedback, String) {
    let wire = scheme.wire();
    let mut decoder = wire
        .decoder()
        .expect("router-assisted schemes have decoders");
    let law = scheme.law(LawConfig::with_mss(MSS));
    for i in 0..packets {
        let now = MS * 201 + Duration::from_micros(u64::from(i));
        let mut pkt = PacketMarks {
            // Senders start from the scheme's base codepoint.
            ecn: wire.base_ecn(),
            tag: law.tag(),
            hash: fmix32(i),
            flow: 7,
        };
        for router in path.iter_mut() {
            router.on_arrival(now, MSS as u32, &mut pkt);
        }
        decoder.on_packet(now, pkt.ecn, pkt.tag, pkt.hash);
    }
    let fb = decoder.estimate(MS * 300);
    let text = format!("level {} (≤{})", fb.level, fb.load);
    (fb, text)
}

/// What a sender with a 100-packet window does on this feedback.
fn react(scheme: Scheme, feedback: ecnq::Feedback, rtt: Duration) -> String {
    let mut config = LawConfig::with_mss(MSS);
    config.initial_window = 100 * MSS;
    let mut law = scheme.law(config);
    let rtt = RttSample::uniform(rtt);
    let before = law.window();
    law.on_feedback(MS, feedback, &rtt);
    law.on_ack(MS * 2, law.window(), &rtt);
    let after = law.window();
    let change = after as f64 / before as f64;
    match law.pacing_rate() {
        Some(rate) => format!("{}: rate {:.0} kbit/s", law.mode(), rate * 8.0 / 1e3),
        None => format!("{}: window ×{change:.3} ({before} → {after} B)", law.mode()),
    }
}

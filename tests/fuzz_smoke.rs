//! A short, deterministic run of every fuzz target on stable Rust, for CI
//! machines without nightly or cargo-fuzz: each target's own body
//! (`fuzz/src/lib.rs`, included below) gets its seeds and `ROUNDS` inputs
//! made from them by seeded random mutation, and some purely random ones.
//! A failing input is printed before the panic goes on.
//!
//! `FUZZ_SMOKE_ROUNDS=N` changes the number of inputs per target.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use ecnq::quic::report::Repr;
use ecnq::signal::Feedback;
use ecnq::{LoadFactor, Scheme};

#[path = "../fuzz/src/lib.rs"]
mod targets;

/// Inputs per target unless `FUZZ_SMOKE_ROUNDS` says otherwise.
const ROUNDS: usize = 50_000;

/// xorshift64*: small, seeded, the same sequence everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Words a text mutation may insert: the parsers' keywords, units,
/// separators and edge numbers.
const TOKENS: &[&str] = &[
    " ",
    "\n",
    "=",
    "%",
    ".",
    "-",
    "\"",
    "[",
    "]",
    "[[flows]]",
    "[[links]]",
    "[[pareto]]",
    "0",
    "1",
    "1e308",
    "4294967296",
    "18446744073709551616",
    "0.0000001",
    "ns",
    "us",
    "ms",
    "s",
    "bit",
    "mbit",
    "tbit",
    "gbps",
    "kb",
    "gb",
    "rate",
    "delay",
    "loss",
    "corrupt",
    "gemodel",
    "maxrun",
    "reorder",
    "duplicate",
    "limit",
    "blackhole",
    "count",
    "duration",
    "scheme",
    "rtt",
    "path",
    "buffer",
    "bdp",
    "links.0.rate",
    "flows.0.count",
];

/// One random change: a byte set, a bit flipped, bytes inserted, removed or
/// repeated, a token inserted, or a piece of another seed spliced in.
fn mutate(rng: &mut Rng, input: &mut Vec<u8>, seeds: &[Vec<u8>]) {
    let at = rng.below(input.len() + 1);
    match rng.below(7) {
        0 if !input.is_empty() => {
            let i = rng.below(input.len());
            input[i] = rng.next() as u8;
        }
        1 if !input.is_empty() => {
            let i = rng.below(input.len());
            input[i] ^= 1 << rng.below(8);
        }
        2 => {
            let n = 1 + rng.below(8);
            input.splice(at..at, rng.bytes(n));
        }
        3 if at < input.len() => {
            let end = (at + 1 + rng.below(16)).min(input.len());
            input.drain(at..end);
        }
        4 if at < input.len() => {
            let end = (at + 1 + rng.below(16)).min(input.len());
            let piece = input[at..end].to_vec();
            input.splice(at..at, piece);
        }
        5 => {
            let token = TOKENS[rng.below(TOKENS.len())].as_bytes();
            input.splice(at..at, token.iter().copied());
        }
        _ => {
            let other = &seeds[rng.below(seeds.len())];
            let from = rng.below(other.len());
            let end = (from + 1 + rng.below(64)).min(other.len());
            input.splice(at..at, other[from..end].iter().copied());
        }
    }
}

/// Runs `target` on its seeds and `rounds` derived inputs; returns how many
/// inputs it ran. A panic prints the input (seed, round, hex) first.
fn smoke(name: &str, target: targets::Target, seeds: &[Vec<u8>], rounds: usize) -> usize {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ name.len() as u64);
    let run = |round: usize, input: &[u8]| {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| target(input))) {
            let hex: String = input.iter().map(|b| format!("{b:02x}")).collect();
            eprintln!(
                "fuzz target {name} failed at round {round} on {} bytes:\n  text: {:?}\n  hex: {hex}",
                input.len(),
                String::from_utf8_lossy(input)
            );
            resume_unwind(panic);
        }
    };
    for seed in seeds {
        run(0, seed);
    }
    for round in 1..=rounds {
        let input = if round % 10 == 0 {
            let n = rng.below(256);
            rng.bytes(n)
        } else {
            let mut input = seeds[rng.below(seeds.len())].clone();
            for _ in 0..1 + rng.below(8) {
                mutate(&mut rng, &mut input, seeds);
            }
            input
        };
        run(round, &input);
    }
    seeds.len() + rounds
}

/// An IPv4 and an IPv6 UDP packet carrying a QUIC-like payload, the first
/// byte of each choosing the marks (the target's convention).
fn packet_seeds() -> Vec<Vec<u8>> {
    let payload = [0xC3, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0x40, 0x20];
    let udp_len = 8 + payload.len();
    let mut v4 = vec![
        0x45,
        0x06,
        0,
        (20 + udp_len) as u8,
        0,
        0,
        0x40,
        0,
        64,
        17,
        0,
        0,
    ];
    v4.extend([127, 0, 0, 1, 127, 0, 0, 2]);
    let sum = v4
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum::<u32>();
    let sum = !((sum & 0xFFFF) + (sum >> 16)) as u16;
    v4[10..12].copy_from_slice(&sum.to_be_bytes());
    let mut v6 = vec![0x60, 0x10, 0, 0, 0, udp_len as u8, 17, 64];
    v6.extend([0; 15]);
    v6.push(1);
    v6.extend([0; 15]);
    v6.push(1);
    let udp = [
        [0x11, 0x51, 0x11, 0x52, 0, udp_len as u8, 0, 0].as_slice(),
        &payload,
    ]
    .concat();
    [v4, v6]
        .into_iter()
        .enumerate()
        .map(|(choice, ip)| [&[choice as u8 | 0x5][..], &ip, &udp].concat())
        .collect()
}

/// Valid reports of several schemes, alone and as a datagram stream (a
/// scheme byte, then length-prefixed reports).
fn report_seeds() -> Vec<Vec<u8>> {
    let report = |scheme: Scheme, sequence: u32, level: u16, load: f64| {
        Repr {
            scheme: scheme.wire(),
            sequence,
            feedback: Feedback {
                level,
                load: LoadFactor::new(load),
                fairing: sequence % 2 == 1,
            },
            counts: [sequence.into(), 2, 3, 4].map(|c: u64| c * 100),
            unraised_probes: u64::from(sequence),
        }
        .to_bytes()
    };
    let mut seeds = vec![
        report(Scheme::Vcp, 1, 2, 1.2),
        report(Scheme::Mcp, 7, 3, 0.5),
        report(Scheme::Bmcc, u32::MAX, 9000, 0.9),
    ];
    let mut stream = vec![Scheme::Vcp.wire().id()];
    for sequence in [1, 2, 2, 5, 4] {
        let one = report(Scheme::Vcp, sequence, 1, 0.8);
        stream.push(one.len() as u8);
        stream.extend(one);
    }
    seeds.push(stream);
    seeds
}

/// The simulator's own scenario files, and one with `--set` edits.
fn scenario_seeds() -> Vec<Vec<u8>> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../sim/scenarios");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("sim/scenarios")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    let mut seeds: Vec<Vec<u8>> = files
        .iter()
        .map(|p| std::fs::read(p).expect("scenario file"))
        .collect();
    assert!(seeds.len() >= 10, "scenarios missing from {dir}");
    let mut edited = seeds[0].clone();
    edited.extend(b"\n%%\nlinks.0.rate=5mbit\nflows.0.count=3\nduration=\"2s\"");
    seeds.push(edited);
    // Found by fuzzing: `2 * delay` and `packets * mss` overflowed.
    let link = |delay: &str, buffer: &str| {
        format!(
            "title = \"t\"\nscheme = \"vcp\"\nduration = \"10s\"\nbdp_rtt = \"100ms\"\n\
             [[links]]\nname = \"L\"\nrate = \"10Mbit\"\ndelay = \"{delay}\"\nbuffer = \"{buffer}\"\n\
             [[flows]]\ncount = 2\n"
        )
        .into_bytes()
    };
    seeds.push(link("1e30s", "1bdp"));
    seeds.push(link("10ms", "1e30pkt"));
    // Found by fuzzing: a path's delays overflowed their sum.
    seeds.push(
        b"title = \"t\"\nscheme = \"vcp\"\nduration = \"10s\"\n\
          [[links]]\nname = \"A\"\nrate = \"4Mbit\"\ndelay = \"1e30s\"\nbuffer = \"100pkt\"\n\
          [[links]]\nname = \"B\"\nrate = \"4Mbit\"\ndelay = \"1e30s\"\nbuffer = \"100pkt\"\n\
          [[flows]]\npath = [\"A\", \"B\"]\nrtt = \"2s\"\n"
            .to_vec(),
    );
    seeds
}

fn spec_seeds() -> Vec<Vec<u8>> {
    [
        "rate 20mbit delay 20ms 2ms loss 0.5% reorder 1% duplicate 0.1% limit 100",
        "rate 10mbit delay 15ms limit 25 loss 30% maxrun 4",
        "loss gemodel 1% 25% 50% 0.5% corrupt gemodel 2% blackhole 100ms 30ms",
        "corrupt 2% maxrun 4 blackhole 5s 2s 1 limit 64kb rate 2kbit",
        "delay 1500ns 250ns reorder 5 duplicate 0.5 limit 3mb",
        // Found by fuzzing: a sub-microsecond delay displayed as `0us`.
        "rate 1bit delay 0.4us",
        // Words other tools read otherwise, refused.
        "rate 2kbps delay 40",
        "",
    ]
    .map(|s| s.as_bytes().to_vec())
    .to_vec()
}

/// The targets this file runs, one test each.
const TESTED: [&str; 4] = [
    "parse_classify_rewrite",
    "feedback_report",
    "scenario",
    "link_spec",
];

#[test]
fn every_fuzz_target_has_a_test() {
    let names: Vec<&str> = targets::TARGETS.iter().map(|t| t.0).collect();
    assert_eq!(names, TESTED);
}

/// Runs the target called `name` on `seeds` and the inputs made from them.
fn smoke_target(name: &str, seeds: &[Vec<u8>]) {
    let rounds = match std::env::var("FUZZ_SMOKE_ROUNDS") {
        Ok(n) => n
            .parse()
            .unwrap_or_else(|_| panic!("FUZZ_SMOKE_ROUNDS must be a whole number, got {n:?}")),
        Err(_) => ROUNDS,
    };
    let (_, target) = targets::TARGETS
        .into_iter()
        .find(|t| t.0 == name)
        .unwrap_or_else(|| panic!("no fuzz target {name}"));
    let start = std::time::Instant::now();
    let ran = smoke(name, target, seeds, rounds);
    eprintln!("{name}: {ran} inputs in {:.2?}", start.elapsed());
}

#[test]
fn parse_classify_rewrite() {
    smoke_target(TESTED[0], &packet_seeds());
}

#[test]
fn feedback_report() {
    smoke_target(TESTED[1], &report_seeds());
}

/// Its seeds include the huge times and buffers that overflowed
/// `Scenario::build` (`2 * delay`, `packets * mss`) before it saturated.
#[test]
fn scenario() {
    smoke_target(TESTED[2], &scenario_seeds());
}

/// Its seeds include the sub-microsecond time that displayed as `0us`
/// and re-parsed as no delay, before times were shown exactly.
#[test]
fn link_spec() {
    smoke_target(TESTED[3], &spec_seeds());
}

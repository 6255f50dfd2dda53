//! End to end: `ecnq-perf web`'s web mix and video clients on the real
//! stack, a few seconds each, through the relay shim on loopback.

use ecnq_examples::http3::web::{self, Completion, WebArgs};
use ecnq_examples::perf::parse_args;

fn args(words: &[&str]) -> WebArgs {
    parse_args("web", words).expect("valid options")
}

/// A short web mix for erc and Cubic: every file arrives whole, the size
/// classes add up to all files, and the link carried some of them and no
/// more than it could. With quic-go's client installed, it takes every
/// other file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_file_of_a_short_web_mix_arrives_whole() {
    let clients = match web::QuicGo::find() {
        Ok(_) => "ecnq,quic-go",
        Err(why) => {
            eprintln!("{why}: ecnq's client alone");
            "ecnq"
        }
    };
    let words = [
        "--duration",
        "3",
        "--load",
        "0.3",
        "--max-size",
        "2000000b",
        "--cc",
        "erc,cubic",
        "--clients",
        clients,
    ];
    let (mix, runs) = web::measure(&args(&words)).await.expect("the runs");
    assert!(mix.fetches.len() >= 3, "{:?}", mix.fetches);
    for (run, row) in &runs {
        for (i, (outcome, &planned)) in run.outcomes.iter().zip(&run.planned).enumerate() {
            assert_eq!(
                outcome.bytes, planned,
                "{}: file {i}: {outcome:?}",
                row.name
            );
            assert!(outcome.seconds.is_some_and(|s| s > 0.0), "{outcome:?}");
        }
        assert_eq!(row.finished, mix.fetches.len(), "{row:?}");
        let Completion::Web(classes) = &row.completion else {
            panic!("a web mix's row has size classes: {row:?}");
        };
        let by_class: usize = classes[1..].iter().map(|c| c.flows).sum();
        assert_eq!((classes[0].flows, by_class), (row.finished, row.finished));
        let by_client: usize = row.by_client.iter().map(|(_, c)| c.flows).sum();
        let clients = clients.split(',').count();
        assert_eq!(row.by_client.len(), if clients > 1 { clients } else { 0 });
        assert!(
            row.by_client.is_empty() || by_client == row.finished,
            "{row:?}"
        );
        // No file can beat processor sharing by more than a fifth: it
        // pays the same handshake and the link's rate, and at best half a
        // round trip less (its last byte is counted on arrival, the
        // reference's at its ACK's).
        assert!(classes[0].mean_x.is_some_and(|x| x > 0.8), "{row:?}");
        assert!(row.utilization > 0.0 && row.utilization <= 1.0, "{row:?}");
        assert!(row.queue_ms[0] <= row.queue_ms[2], "{row:?}");
    }
}

/// Two video clients for three chunks each: every chunk arrives whole and
/// is counted, late or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_chunk_of_a_short_video_run_arrives_whole() {
    let words = [
        "--duration",
        "6",
        "--dash",
        "2",
        "--bitrate",
        "1mbit",
        "--cc",
        "erc",
    ];
    let (mix, runs) = web::measure(&args(&words)).await.expect("the run");
    assert_eq!(mix.video, Some((2, 250_000)));
    let (run, row) = &runs[0];
    assert_eq!(run.planned, vec![250_000; 6]);
    assert!(
        run.outcomes.iter().all(|o| o.bytes == 250_000),
        "{:?}",
        run.outcomes
    );
    assert_eq!(row.finished, 6, "{row:?}");
    let Completion::Video { mean_s, .. } = row.completion else {
        panic!("a video run's row has chunks: {row:?}");
    };
    // A 250 kB chunk alone at 10 Mbit/s takes 0.2 s and two round trips.
    assert!(mean_s.is_some_and(|s| s > 0.2), "{row:?}");
}

/// A flash crowd of downloads on the real stack: 30 clients within 10 ms
/// through the relay's erc router, the server's flight one datagram
/// (short) or three (long, as on the internet). With three, the router's
/// start code reaches the server: most connections read two cleared
/// datagrams (42 of 50 and 57 of 100 in `ecnq-perf web --flash`), which a
/// router writes only into a surge of flights, so the handshakes must
/// overlap (a server that took one handshake per round trip read none);
/// with one, no connection can read two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_flight_carries_the_start_code() {
    let words = [
        "--flash",
        "30",
        "--rate",
        "20mbit",
        "--duration",
        "3",
        "--cc",
        "erc",
        "--flight",
        "short,long",
    ];
    let (mix, runs) = web::measure(&args(&words)).await.expect("the runs");
    assert_eq!(mix.fetches.len(), 30);
    assert!(
        mix.fetches.iter().all(|f| f.start < 0.010),
        "{:?}",
        mix.fetches
    );
    let [(short, _), (long, _)] = &runs[..] else {
        panic!("one run per flight: {}", runs.len());
    };
    for run in [short, long] {
        assert!(
            (run.outcomes.iter().zip(&run.planned)).all(|(o, &p)| o.bytes == p),
            "{:?}",
            run.outcomes
        );
    }
    eprintln!(
        "start codes read, short flight {:?}, long {:?}",
        short.start_codes, long.start_codes
    );
    assert_eq!(short.start_codes[2..], [0, 0], "{:?}", short.start_codes);
    assert!(long.start_codes[2] >= 10, "{:?}", long.start_codes);
}

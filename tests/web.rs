//! End to end: `ecnq-perf web`'s web mix and video clients on the real
//! stack, a few seconds each, through the relay shim on loopback.

use std::time::Instant;

use ecnq::quic::CongestionControl;
use ecnq_examples::http3::client::{GetConfig, Session};
use ecnq_examples::http3::server::{FileServer, ServerConfig, SEND_WINDOW};
use ecnq_examples::http3::web::{self, Completion, WebArgs};
use ecnq_examples::perf::loopback::RelayChain;
use ecnq_examples::perf::parse_args;
use ecnq_examples::perf::proto::self_signed;
use rustls::RootCertStore;

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

/// The file server takes a crowd's handshakes at once: ten clients
/// connecting together through a 200 ms path all finish their handshakes
/// within a second. A server that waited for each handshake before taking
/// the next client let one through per round trip, two seconds for ten;
/// a flash crowd on the real stack was then a trickle, and erc's router
/// never saw the surge its start code answers (0 of 50 connections read a
/// code of 2 in `ecnq-perf web --flash 50`, 42 of 50 since).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_server_takes_a_crowds_handshakes_at_once() {
    const CLIENTS: usize = 10;
    let words = ["--flash", "10", "--rtt", "200ms", "--duration", "3"];
    let mix = args(&words).mix().expect("the crowd");
    let www = tempfile::tempdir().expect("a directory");
    let (identity, _) = self_signed(&["localhost".to_owned()]).expect("an identity");
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(identity.chain.iter().cloned());
    let server = FileServer::bind(ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        identity,
        cc: CongestionControl::Cubic,
        root: www.path().to_owned(),
        send_window: SEND_WINDOW,
        qlog: None,
    })
    .expect("the server");
    let chain = RelayChain::start(
        std::slice::from_ref(&mix.link),
        server.local_addr().unwrap(),
    )
    .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        server.serve(shutdown, |_| {}).await;
    });
    let config = GetConfig {
        server: chain.entry,
        server_name: "localhost".into(),
        roots,
        cc: CongestionControl::Cubic,
        output: None,
    };
    let start = Instant::now();
    let clients = (0..CLIENTS).map(|_| {
        let config = config.clone();
        tokio::spawn(async move { Session::connect(&config).await })
    });
    let mut sessions = Vec::new();
    for client in clients.collect::<Vec<_>>() {
        sessions.push(client.await.unwrap().expect("a handshake"));
    }
    let all = start.elapsed().as_secs_f64();
    eprintln!("{CLIENTS} handshakes through a 200 ms path in {all:.2} s");
    assert!(all < 1.0, "{CLIENTS} handshakes took {all:.2} s");
    for session in sessions {
        session.close().await;
    }
    let _ = stop.send(());
    let _ = serving.await;
    chain.stop().await;
}

//! The second way in, end to end: an application's own quinn endpoints on
//! ecnq's socket, with ecnq's controller, crypto wrapper and feedback tasks
//! per connection (`ecnq_examples::echo`), running erc through a relay
//! shim that advertises its fair rate.

use ecnq::quic::{CongestionControl, PeerMode, SelfSigned};
use ecnq::Scheme;
use ecnq_examples::echo::{self, EchoServer};
use ecnq_examples::perf::loopback::RelayChain;
use ecnq_shim::link::spec::LinkSpec;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_quinn_endpoints_run_erc_through_the_shim() {
    let cc = CongestionControl::DEFAULT;
    assert_eq!(cc, CongestionControl::Ecnq(Scheme::Erc));
    let cert = SelfSigned::new(&["localhost"]).unwrap();
    let localhost = "127.0.0.1:0".parse().unwrap();
    let server = EchoServer::bind(localhost, cert.identity(), cc).unwrap();
    let link: LinkSpec = "rate 20mbit delay 10ms limit 100".parse().unwrap();
    let chain = RelayChain::start(&[link], server.local_addr().unwrap()).unwrap();
    let bytes = 2 << 20;
    let client = echo::client(localhost, chain.entry, cert.roots(), cc, bytes, 50);
    let (run, served) = tokio::join!(client, async {
        let connection = server.accept().await.unwrap().unwrap();
        echo::echo(&connection).await;
        connection.congestion_stats()
    });
    chain.stop().await;
    // The client checked every echoed byte.
    let run = run.unwrap();
    assert_eq!(run.bytes, bytes);
    assert!(run.datagrams_echoed >= 40, "{run:?}");
    for stats in [&run.stats, &served] {
        assert_eq!(stats.mode, PeerMode::Ecnq, "{stats:?}");
        assert!(stats.reports_received > 5, "{stats:?}");
        assert_eq!(stats.reports_rejected, 0, "{stats:?}");
        // The shim's advertised rate reached each sender's law.
        let load = stats.path_load.expect("a report");
        assert!(load.level > 0, "{stats:?}");
    }
}

//! `ecnq-perf -s`: accepts connections and runs each one's test.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use ecnq::quic::{CongestionStats, Connection, Endpoint};

use crate::metrics::ConnectionBoard;

use super::proto::{self, TestRequest, TestResult, MAX_CONTROL};
use super::pump::{self, Limit};

/// What the server tells its user about one finished test.
#[derive(Clone, Debug)]
pub struct Finished {
    /// The client.
    pub peer: std::net::SocketAddr,
    /// What was asked.
    pub request: TestRequest,
    /// What moved.
    pub result: TestResult,
    /// The connection's congestion control at the end.
    pub stats: CongestionStats,
}

/// The application close code of a server shutting down.
pub const SHUTDOWN: u32 = 0;
/// How long a shutting-down server waits for its clients to acknowledge.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Serves tests until the endpoint closes (or after one with `one_off`)
/// or `shutdown` completes: then every connection gets an application
/// close ([`SHUTDOWN`]), so clients stop at once instead of waiting out
/// the idle timeout. `report` is called for every finished test, `Err`
/// for a failed one. With a `board`, every connection is listed on it
/// while open (`--metrics`).
pub async fn serve<F>(
    endpoint: Endpoint,
    one_off: bool,
    board: Option<Arc<ConnectionBoard>>,
    shutdown: impl std::future::Future<Output = ()>,
    report: F,
) where
    F: Fn(Result<Finished, String>) + Send + Sync + 'static,
{
    let serving = accept(&endpoint, one_off, board, report);
    close_on(&endpoint, serving, shutdown).await;
}

/// Runs `serving` until it ends or `shutdown` completes; on shutdown every
/// connection of `endpoint` gets an application close ([`SHUTDOWN`]) and
/// up to `CLOSE_WAIT` (a second) to acknowledge it.
pub async fn close_on(
    endpoint: &Endpoint,
    serving: impl std::future::Future<Output = ()>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::select! {
        () = serving => {}
        () = shutdown => {
            endpoint.close(SHUTDOWN.into(), b"server shutting down");
            let _ = tokio::time::timeout(CLOSE_WAIT, endpoint.wait_idle()).await;
        }
    }
}

async fn accept<F>(
    endpoint: &Endpoint,
    one_off: bool,
    board: Option<Arc<ConnectionBoard>>,
    report: F,
) where
    F: Fn(Result<Finished, String>) + Send + Sync + 'static,
{
    let report = Arc::new(report);
    // Each handshake in the connection's own task: the next client's
    // starts at once, not a round trip later.
    while let Some(incoming) = endpoint.incoming().await {
        let (report, board) = (report.clone(), board.clone());
        let task = async move {
            match incoming.finish().await {
                Ok(connection) => {
                    let _tracked = board.map(|b| b.track(&connection));
                    report(run_test(connection).await)
                }
                Err(e) => report(Err(format!("handshake failed: {e}"))),
            }
        };
        if one_off {
            task.await;
            return;
        }
        tokio::spawn(task);
    }
}

async fn run_test(connection: Connection) -> Result<Finished, String> {
    let peer = connection.remote_address();
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("{peer}: {what}: {e}");
    let counter = AtomicU64::new(0);
    // The client's data stream is drained from the moment it opens, before
    // the request is read: a client sends its data right behind the
    // request, and a lost request packet (repaired a round trip later at
    // best, later still when acknowledgements are lost too) would otherwise
    // leave that data unread in quinn, which ends the connection once an
    // unread stream holds more than 1024 separate pieces ("too many gaps in
    // stream buffer").
    let upload = async {
        let mut recv = connection
            .accept_uni()
            .await
            .map_err(|e| fail("no data stream", &e))?;
        pump::receive_all(&mut recv, &counter).await
    };
    tokio::pin!(upload);
    let mut uploaded = None;
    let request = async {
        let (control_send, mut control_recv) = connection
            .accept_bi()
            .await
            .map_err(|e| fail("no control stream", &e))?;
        let bytes = control_recv
            .read_to_end(MAX_CONTROL)
            .await
            .map_err(|e| fail("bad control stream", &e))?;
        let request: TestRequest = proto::decode(&bytes).map_err(|e| format!("{peer}: {e}"))?;
        Ok::<_, String>((control_send, request))
    };
    tokio::pin!(request);
    let (mut control_send, request) = loop {
        tokio::select! {
            request = &mut request => break request?,
            done = &mut upload, if uploaded.is_none() => uploaded = Some(done),
        }
    };
    if request.version != 1 {
        return Err(format!(
            "{peer}: unsupported protocol version {}",
            request.version
        ));
    }
    let (bytes, seconds) = if request.reverse {
        let mut send = connection
            .open_uni()
            .await
            .map_err(|e| fail("cannot open the data stream", &e))?;
        pump::send_until(&mut send, Limit::of(&request), None, &counter).await?
    } else {
        match uploaded {
            Some(done) => done?,
            None => upload.await?,
        }
    };
    let result = TestResult { bytes, seconds };
    control_send
        .write_all(&proto::encode(&result))
        .await
        .map_err(|e| fail("cannot report", &e))?;
    control_send
        .finish()
        .map_err(|e| fail("cannot report", &e))?;
    let stats = connection.congestion_stats();
    // The client closes once it has the result.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), connection.closed()).await;
    Ok(Finished {
        peer,
        request,
        result,
        stats,
    })
}

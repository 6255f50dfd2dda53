//! The HTTP/3 client: GETs of URLs on one server, all at once on one
//! connection, each body counted and, if asked, saved.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use ecnq::quic::{CongestionControl, CongestionStats, Connection, Endpoint, Options};
use http::{Request, StatusCode, Uri};
use rustls::RootCertStore;
use tokio::io::AsyncWriteExt;
use tokio::task::JoinSet;

use super::{relative_path, ALPN};

/// H3_NO_ERROR (RFC 9114 §8.1): the code of a connection closed because
/// the client is done.
const H3_NO_ERROR: u32 = 0x100;
/// How long the client waits for the server to acknowledge its close.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// One `https://` URL, split as the client needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The URL as given.
    pub uri: Uri,
    /// Its host (an IPv6 literal without brackets).
    pub host: String,
    /// Its port, 443 if none is given.
    pub port: u16,
}

impl std::str::FromStr for Target {
    type Err = String;

    fn from_str(url: &str) -> Result<Target, String> {
        let uri: Uri = url
            .parse()
            .map_err(|e| format!("`{url}` is not a URL: {e}"))?;
        if uri.scheme_str() != Some("https") {
            return Err(format!(
                "`{url}` is not an https:// URL (HTTP/3 is always https)"
            ));
        }
        let authority = uri
            .authority()
            .ok_or_else(|| format!("`{url}` names no host"))?;
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        if host.is_empty() {
            return Err(format!("`{url}` names no host"));
        }
        Ok(Target {
            host: host.to_owned(),
            port: authority.port_u16().unwrap_or(443),
            uri,
        })
    }
}

/// Where the client connects and what it does with the bodies.
#[derive(Clone, Debug)]
pub struct GetConfig {
    /// The server's address.
    pub server: SocketAddr,
    /// The name its certificate must be valid for.
    pub server_name: String,
    /// Trust roots for its certificate.
    pub roots: RootCertStore,
    /// Congestion control of the client's sending direction.
    pub cc: CongestionControl,
    /// Where to save the bodies (by URL path); `None` counts them only.
    pub output: Option<PathBuf>,
}

/// One response.
#[derive(Clone, Debug)]
pub struct Fetched {
    /// The URL asked for.
    pub uri: Uri,
    /// The response status.
    pub status: StatusCode,
    /// Body bytes received.
    pub bytes: u64,
    /// Seconds from sending the request to the body's end.
    pub seconds: f64,
    /// Where the body went (2xx responses with `output` set).
    pub saved: Option<PathBuf>,
}

/// A whole download.
#[derive(Clone, Debug)]
pub struct GetRun {
    /// Every response, in the order the URLs were given.
    pub fetched: Vec<Fetched>,
    /// Seconds from the requests until the last body ended.
    pub seconds: f64,
    /// The handshake's duration.
    pub handshake_seconds: f64,
    /// The client's end of the connection (what it sent with), at the end.
    pub stats: CongestionStats,
}

impl GetRun {
    /// Body bytes over all responses.
    pub fn bytes(&self) -> u64 {
        self.fetched.iter().map(|f| f.bytes).sum()
    }

    /// [`GetRun::bytes`] over [`GetRun::seconds`], bit/s.
    pub fn goodput_bps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes() as f64 * 8.0 / self.seconds
        } else {
            0.0
        }
    }
}

type SendRequest = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// One HTTP/3 connection to a server, for GETs one after another or at
/// once (`h3-get`'s downloads, and the clients of `ecnq-perf web`).
pub struct Session {
    endpoint: Endpoint,
    connection: Connection,
    send: SendRequest,
    driving: tokio::task::JoinHandle<()>,
    /// The handshake's duration.
    pub handshake_seconds: f64,
}

impl Session {
    /// Connects to `config`'s server and sets up HTTP/3.
    pub async fn connect(config: &GetConfig) -> Result<Session, String> {
        let bind: SocketAddr = if config.server.is_ipv4() {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let options = Options::new(config.cc).alpn(&[ALPN]);
        let endpoint = Endpoint::client(bind, config.roots.clone(), options)
            .map_err(|e| format!("cannot start a client: {e}"))?;
        let started = Instant::now();
        let connection = endpoint
            .connect(config.server, &config.server_name)
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", config.server))?;
        let handshake_seconds = started.elapsed().as_secs_f64();
        let quic = h3_quinn::Connection::new(connection.quinn().clone());
        let (mut driver, send) = h3::client::new(quic)
            .await
            .map_err(|e| format!("HTTP/3 set-up with {} failed: {e}", config.server))?;
        let driving = tokio::spawn(async move {
            std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        Ok(Session {
            endpoint,
            connection,
            send,
            driving,
            handshake_seconds,
        })
    }

    /// GETs `uri`; a 2xx body is saved below `output` if given.
    pub async fn fetch(&self, uri: Uri, output: Option<&Path>) -> Result<Fetched, String> {
        fetch(self.send.clone(), uri, output).await
    }

    /// The client's end of the connection (what it sent with) now.
    pub fn stats(&self) -> CongestionStats {
        self.connection.congestion_stats()
    }

    /// UDP payload bytes the connection has received so far.
    pub fn received_bytes(&self) -> u64 {
        self.connection.quinn().stats().udp_rx.bytes
    }

    /// Closes the connection as done, waiting a little for the server to
    /// acknowledge it.
    pub async fn close(self) {
        self.connection.close(H3_NO_ERROR.into(), b"done");
        self.driving.abort();
        let _ = tokio::time::timeout(CLOSE_WAIT, self.endpoint.wait_idle()).await;
    }
}

/// Connects and GETs every target at once on one connection.
pub async fn get(config: &GetConfig, targets: &[Target]) -> Result<GetRun, String> {
    let session = Session::connect(config).await?;
    let requested = Instant::now();
    let output: Option<Arc<Path>> = config.output.as_deref().map(Arc::from);
    let mut tasks = JoinSet::new();
    for (i, target) in targets.iter().enumerate() {
        let (send, uri, output) = (session.send.clone(), target.uri.clone(), output.clone());
        tasks.spawn(async move { (i, fetch(send, uri, output.as_deref()).await) });
    }
    let mut fetched: Vec<Option<Fetched>> = vec![None; targets.len()];
    let mut first_error = None;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((i, Ok(f))) => fetched[i] = Some(f),
            Ok((_, Err(e))) => {
                first_error.get_or_insert(e);
            }
            Err(e) => {
                first_error.get_or_insert(format!("a request failed: {e}"));
            }
        }
    }
    let seconds = requested.elapsed().as_secs_f64();
    let (stats, handshake_seconds) = (session.stats(), session.handshake_seconds);
    session.close().await;
    if let Some(e) = first_error {
        return Err(e);
    }
    Ok(GetRun {
        fetched: fetched.into_iter().flatten().collect(),
        seconds,
        handshake_seconds,
        stats,
    })
}

/// One GET; a 2xx body is saved below `output` if given.
async fn fetch(mut send: SendRequest, uri: Uri, output: Option<&Path>) -> Result<Fetched, String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("{uri}: {what}: {e}");
    let start = Instant::now();
    let request = Request::get(uri.clone())
        .body(())
        .map_err(|e| fail("bad request", &e))?;
    let mut stream = send
        .send_request(request)
        .await
        .map_err(|e| fail("cannot send the request", &e))?;
    stream
        .finish()
        .await
        .map_err(|e| fail("cannot send the request", &e))?;
    let response = stream
        .recv_response()
        .await
        .map_err(|e| fail("no response", &e))?;
    let status = response.status();
    let (mut file, saved) = match output.filter(|_| status.is_success()) {
        Some(dir) => {
            let path = save_path(dir, uri.path()).map_err(|e| fail("cannot save", &e))?;
            let file = create(&path).await.map_err(|e| fail("cannot save", &e))?;
            (Some(file), Some(path))
        }
        None => (None, None),
    };
    let mut bytes = 0u64;
    while let Some(mut data) = stream
        .recv_data()
        .await
        .map_err(|e| fail("receiving the body", &e))?
    {
        while data.has_remaining() {
            let chunk = data.chunk();
            if let Some(file) = file.as_mut() {
                file.write_all(chunk)
                    .await
                    .map_err(|e| fail("cannot save", &e))?;
            }
            let n = chunk.len();
            bytes += n as u64;
            data.advance(n);
        }
    }
    if let Some(file) = file.as_mut() {
        file.flush().await.map_err(|e| fail("cannot save", &e))?;
    }
    Ok(Fetched {
        uri,
        status,
        bytes,
        seconds: start.elapsed().as_secs_f64(),
        saved,
    })
}

/// Where the body of `url_path` goes below `dir`: the same relative path
/// (`index.html` for a directory's), never outside `dir`.
pub fn save_path(dir: &Path, url_path: &str) -> Result<PathBuf, String> {
    let relative = relative_path(url_path)?;
    let mut path = dir.join(relative);
    if url_path.ends_with('/') || path == dir {
        path.push("index.html");
    }
    Ok(path)
}

async fn create(path: &Path) -> Result<tokio::fs::File, String> {
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    tokio::fs::File::create(path)
        .await
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_https_urls_with_a_host() {
        let t: Target = "https://localhost:4433/a/b.bin".parse().unwrap();
        assert_eq!((t.host.as_str(), t.port), ("localhost", 4433));
        assert_eq!(t.uri.path(), "/a/b.bin");
        let t: Target = "https://[::1]/x".parse().unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 443));
        for (bad, why) in [
            ("http://localhost/x", "not an https:// URL"),
            ("localhost/x", "not a URL"),
            ("https:///x", "not a URL"),
            ("https://a b/", "not a URL"),
        ] {
            let e = bad.parse::<Target>().unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn bodies_are_saved_below_the_output_directory() {
        let dir = Path::new("/out");
        assert_eq!(
            save_path(dir, "/a/b.bin").unwrap(),
            Path::new("/out/a/b.bin")
        );
        assert_eq!(save_path(dir, "/").unwrap(), Path::new("/out/index.html"));
        assert_eq!(
            save_path(dir, "/d/").unwrap(),
            Path::new("/out/d/index.html")
        );
        assert!(save_path(dir, "/../x").is_err());
    }
}

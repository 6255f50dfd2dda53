//! The HTTP/3 file server: GET and HEAD of the files below one directory,
//! each connection on ecnq's socket with the server's congestion control.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use ecnq::quic::{CongestionControl, CongestionStats, Connection, Endpoint, Identity, Options};
use http::{header, Method, Request, Response, StatusCode};
use tokio::io::AsyncReadExt;
use tokio::task::JoinSet;

use super::{relative_path, spki_sha256, ALPN, CHUNK};
use crate::metrics::ConnectionBoard;
use crate::perf::server::close_on;

/// The server's send window (quinn's `send_window`: bytes written to a
/// connection but not yet acknowledged). A response counts as served when
/// its last byte is written, so a connection's goodput reads high by at
/// most this much; quinn's default (10 MB) would be two seconds of a
/// 40 Mbit/s download. 2 MiB still allows 400 Mbit/s at a 40 ms round trip.
pub const SEND_WINDOW: u64 = 2 << 20;

/// What the server needs.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Address to bind.
    pub listen: SocketAddr,
    /// Certificate chain (leaf first) and key.
    pub identity: Identity,
    /// Congestion control of every connection's sending direction.
    pub cc: CongestionControl,
    /// The directory served.
    pub root: PathBuf,
    /// quinn's send window per connection, bytes (see [`SEND_WINDOW`]).
    pub send_window: u64,
    /// A qlog file per connection into this directory (needs the `qlog`
    /// feature: [`Options::qlog_dir`]).
    pub qlog: Option<PathBuf>,
}

/// One request a connection answered.
#[derive(Clone, Debug)]
pub struct Answer {
    /// The URL path asked for.
    pub path: String,
    /// The response's status.
    pub status: StatusCode,
    /// Body bytes sent.
    pub bytes: u64,
    /// When the request arrived.
    pub arrived: Instant,
    /// When its last body byte was written (see [`SEND_WINDOW`]); `None`
    /// if the response was cut off.
    pub done: Option<Instant>,
}

/// What one connection was served, when it ends.
#[derive(Clone, Debug)]
pub struct Served {
    /// The client.
    pub peer: SocketAddr,
    /// Every request answered, in the order they arrived.
    pub answers: Vec<Answer>,
    /// The connection's congestion control at the end.
    pub stats: CongestionStats,
    /// Why the connection ended, unless the client closed it cleanly.
    pub error: Option<String>,
}

impl Served {
    /// Response body bytes sent.
    pub fn bytes(&self) -> u64 {
        self.answers.iter().map(|a| a.bytes).sum()
    }

    /// Requests answered 404 (no such file, or a path leaving the root).
    pub fn not_found(&self) -> usize {
        (self.answers.iter())
            .filter(|a| a.status == StatusCode::NOT_FOUND)
            .count()
    }

    /// Seconds from the first request's arrival until the last body byte
    /// was written (see [`SEND_WINDOW`]).
    pub fn seconds(&self) -> f64 {
        let first = self.answers.iter().map(|a| a.arrived).min();
        let last = self.answers.iter().filter_map(|a| a.done).max();
        match (first, last) {
            (Some(first), Some(last)) => last.saturating_duration_since(first).as_secs_f64(),
            _ => 0.0,
        }
    }

    /// Body bytes over [`Served::seconds`], bit/s (0 before any byte).
    pub fn goodput_bps(&self) -> f64 {
        match self.seconds() {
            s if s > 0.0 => self.bytes() as f64 * 8.0 / s,
            _ => 0.0,
        }
    }
}

/// An HTTP/3 file server on an ecnq endpoint.
pub struct FileServer {
    endpoint: Endpoint,
    root: Arc<PathBuf>,
    spki: String,
    board: Option<Arc<ConnectionBoard>>,
}

impl FileServer {
    /// Binds the server. The root must be a directory.
    pub fn bind(config: ServerConfig) -> Result<FileServer, String> {
        let root = std::fs::canonicalize(&config.root)
            .map_err(|e| format!("cannot serve {}: {e}", config.root.display()))?;
        if !root.is_dir() {
            return Err(format!("{} is not a directory", config.root.display()));
        }
        let leaf = config
            .identity
            .chain
            .first()
            .ok_or("the certificate chain is empty")?;
        let spki = spki_sha256(leaf)?;
        let send_window = config.send_window;
        let mut options = Options::new(config.cc).alpn(&[ALPN]).transport(move |t| {
            t.send_window(send_window);
        });
        if let Some(dir) = config.qlog {
            options = options.qlog_dir(dir);
        }
        let endpoint = Endpoint::server(config.listen, config.identity, options)
            .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
        Ok(FileServer {
            endpoint,
            root: Arc::new(root),
            spki,
            board: None,
        })
    }

    /// Lists every connection on `board` while it is open
    /// (`h3-server --metrics`).
    pub fn track_on(mut self, board: Arc<ConnectionBoard>) -> FileServer {
        self.board = Some(board);
        self
    }

    /// The bound address.
    pub fn local_addr(&self) -> Result<SocketAddr, String> {
        self.endpoint.local_addr().map_err(|e| e.to_string())
    }

    /// The base64 SHA-256 of the certificate's public key ([`spki_sha256`]).
    pub fn spki_sha256(&self) -> &str {
        &self.spki
    }

    /// Serves until `shutdown` completes (then every connection is closed),
    /// calling `report` as each connection ends.
    pub async fn serve<F>(&self, shutdown: impl std::future::Future<Output = ()>, report: F)
    where
        F: Fn(Result<Served, String>) + Send + Sync + 'static,
    {
        let report = Arc::new(report);
        let accept = async {
            // Each handshake in a task of its own: the next client's
            // starts at once, not a round trip later.
            while let Some(incoming) = self.endpoint.incoming().await {
                let (report, root) = (report.clone(), self.root.clone());
                let board = self.board.clone();
                tokio::spawn(async move {
                    match incoming.finish().await {
                        Ok(connection) => {
                            let _tracked = board.map(|b| b.track(&connection));
                            report(Ok(serve_connection(connection, root).await))
                        }
                        Err(e) => report(Err(format!("handshake failed: {e}"))),
                    }
                });
            }
        };
        close_on(&self.endpoint, accept, shutdown).await;
    }
}

/// The answers of a connection's requests, as they finish.
type Answers = Arc<Mutex<Vec<Answer>>>;

type H3Stream = h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// Answers every request of `connection` until it ends.
async fn serve_connection(connection: Connection, root: Arc<PathBuf>) -> Served {
    let peer = connection.remote_address();
    let answers = Answers::default();
    let quic = h3_quinn::Connection::new(connection.quinn().clone());
    let error = match h3::server::Connection::<_, Bytes>::new(quic).await {
        Err(e) => Some(format!("HTTP/3 set-up failed: {e}")),
        Ok(mut h3) => {
            let mut requests = JoinSet::new();
            let ended = loop {
                match h3.accept().await {
                    Ok(Some(resolver)) => {
                        let (root, answers) = (root.clone(), answers.clone());
                        requests.spawn(async move {
                            let Ok((request, stream)) = resolver.resolve_request().await else {
                                return;
                            };
                            let answer = respond(request, stream, &root).await;
                            answers
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push(answer);
                        });
                    }
                    Ok(None) => break None,
                    Err(e) if e.is_h3_no_error() => break None,
                    Err(e) => break Some(e.to_string()),
                }
            };
            // Requests cut off by the connection's end fail on their own;
            // their errors say no more than `ended`.
            while requests.join_next().await.is_some() {}
            ended
        }
    };
    let mut answers = std::mem::take(&mut *answers.lock().unwrap_or_else(|e| e.into_inner()));
    answers.sort_by_key(|a| a.arrived);
    Served {
        peer,
        answers,
        stats: connection.congestion_stats(),
        error,
    }
}

/// Answers one request: the file with 200, 404 for a missing file or a path
/// leaving the root, 405 for a method other than GET and HEAD.
async fn respond(request: Request<()>, mut stream: H3Stream, root: &Path) -> Answer {
    let mut answer = Answer {
        path: request.uri().path().to_owned(),
        status: StatusCode::OK,
        bytes: 0,
        arrived: Instant::now(),
        done: None,
    };
    let head = request.method() == Method::HEAD;
    let sent = if !head && request.method() != Method::GET {
        answer.status = StatusCode::METHOD_NOT_ALLOWED;
        let response = Response::builder().header(header::ALLOW, "GET, HEAD");
        send_empty(&mut stream, response.status(answer.status)).await
    } else if let Some((mut file, len, path)) = open(root, &answer.path).await {
        let response = Response::builder()
            .status(answer.status)
            .header(header::CONTENT_TYPE, content_type(&path))
            .header(header::CONTENT_LENGTH, len);
        async {
            send_head(&mut stream, response).await?;
            if !head {
                copy(&mut file, &mut stream, &mut answer.bytes).await?;
            }
            stream.finish().await.map_err(|e| e.to_string())
        }
        .await
    } else {
        answer.status = StatusCode::NOT_FOUND;
        send_empty(&mut stream, Response::builder().status(answer.status)).await
    };
    if sent.is_ok() {
        answer.done = Some(Instant::now());
    }
    answer
}

/// Sends a file's bytes as DATA frames, counting them into `sent`.
async fn copy(
    file: &mut tokio::fs::File,
    stream: &mut H3Stream,
    sent: &mut u64,
) -> Result<(), String> {
    loop {
        let mut buf = BytesMut::zeroed(CHUNK);
        let n = file.read(&mut buf).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Ok(());
        }
        buf.truncate(n);
        stream
            .send_data(buf.freeze())
            .await
            .map_err(|e| e.to_string())?;
        *sent += n as u64;
    }
}

async fn send_head(stream: &mut H3Stream, response: http::response::Builder) -> Result<(), String> {
    let response = response.body(()).map_err(|e| e.to_string())?;
    stream
        .send_response(response)
        .await
        .map_err(|e| e.to_string())
}

async fn send_empty(
    stream: &mut H3Stream,
    response: http::response::Builder,
) -> Result<(), String> {
    send_head(stream, response.header(header::CONTENT_LENGTH, 0)).await?;
    stream.finish().await.map_err(|e| e.to_string())
}

/// The regular file `url_path` names below `root` (a directory's
/// `index.html`), opened, with its length; `None` if there is none or it
/// lies outside `root` once symbolic links are followed.
async fn open(root: &Path, url_path: &str) -> Option<(tokio::fs::File, u64, PathBuf)> {
    let mut path = root.join(relative_path(url_path).ok()?);
    if tokio::fs::metadata(&path).await.ok()?.is_dir() {
        path.push("index.html");
    }
    let real = tokio::fs::canonicalize(&path).await.ok()?;
    if !real.starts_with(root) {
        return None;
    }
    let file = tokio::fs::File::open(&real).await.ok()?;
    let meta = file.metadata().await.ok()?;
    meta.is_file().then_some((file, meta.len(), real))
}

/// The media type of a file, by its extension: the few a browser needs to
/// render a page, `application/octet-stream` for the rest.
fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("js") => "text/javascript",
        Some("css") => "text/css",
        Some("txt") => "text/plain; charset=utf-8",
        Some("json") => "application/json",
        Some("svg") => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

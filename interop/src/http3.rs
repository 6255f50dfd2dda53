//! HTTP/3 for the runner's `http3` case (the `h3` crate over quinn): the
//! server answers each GET with the file below the web root or a 404; the
//! client GETs every path at once on one connection and stores 200 bodies
//! in the downloads directory. Paths map to files as in [`hq::resolve`].

use std::path::{Path, PathBuf};

use bytes::{Buf, Bytes, BytesMut};
use http::{Request, Response, StatusCode};
use tokio::fs::File;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinSet;

use crate::hq;

/// Bytes read from disk per DATA frame.
const CHUNK: usize = 64 * 1024;

type ServerStream = h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// Serves every request of `conn` from `root` until it closes.
pub async fn serve_connection(conn: quinn::Connection, root: PathBuf) {
    let quic = h3_quinn::Connection::new(conn);
    let mut h3 = match h3::server::Connection::<_, Bytes>::new(quic).await {
        Ok(h3) => h3,
        Err(e) => return eprintln!("http3: set-up failed: {e}"),
    };
    while let Ok(Some(resolver)) = h3.accept().await {
        let root = root.clone();
        tokio::spawn(async move {
            let served = match resolver.resolve_request().await {
                Ok((request, stream)) => serve_request(request, stream, &root).await,
                Err(e) => Err(format!("bad request: {e}")),
            };
            if let Err(e) = served {
                eprintln!("http3: {e}");
            }
        });
    }
}

async fn serve_request(
    request: Request<()>,
    mut stream: ServerStream,
    root: &Path,
) -> Result<(), String> {
    let path = request.uri().path();
    let file = match hq::resolve(root, format!("GET {path}").as_bytes()) {
        Ok(p) => File::open(&p).await.ok(),
        Err(_) => None,
    };
    let status = if file.is_some() {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    };
    let response = Response::builder()
        .status(status)
        .body(())
        .map_err(|e| e.to_string())?;
    let fail = |e: h3::error::StreamError| format!("{path}: {e}");
    stream.send_response(response).await.map_err(fail)?;
    if let Some(mut file) = file {
        loop {
            let mut buf = BytesMut::zeroed(CHUNK);
            let n = file
                .read(&mut buf)
                .await
                .map_err(|e| format!("{path}: {e}"))?;
            if n == 0 {
                break;
            }
            buf.truncate(n);
            stream.send_data(buf.freeze()).await.map_err(fail)?;
        }
    }
    stream.finish().await.map_err(fail)
}

/// GETs `https://authority/path` for every path at once on `conn`, storing
/// each body as `downloads/<path>`; fails on the first error or non-200.
pub async fn fetch_all(
    conn: &quinn::Connection,
    authority: &str,
    paths: &[String],
    downloads: &Path,
) -> Result<(), String> {
    let quic = h3_quinn::Connection::new(conn.clone());
    let (mut driver, send) = h3::client::new(quic)
        .await
        .map_err(|e| format!("HTTP/3 set-up failed: {e}"))?;
    let driving = tokio::spawn(async move {
        std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    let mut tasks = JoinSet::new();
    for path in paths {
        let uri = format!("https://{authority}{path}");
        let target = hq::resolve(downloads, format!("GET {path}").as_bytes())?;
        tasks.spawn(fetch(send.clone(), uri, target));
    }
    drop(send);
    let done = hq::join_all(tasks).await;
    driving.abort();
    done
}

async fn fetch(
    mut send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    uri: String,
    target: PathBuf,
) -> Result<(), String> {
    let fail = |e: &dyn std::fmt::Display| format!("{uri}: {e}");
    let request = Request::get(uri.as_str()).body(()).map_err(|e| fail(&e))?;
    let mut stream = send.send_request(request).await.map_err(|e| fail(&e))?;
    stream.finish().await.map_err(|e| fail(&e))?;
    let response = stream.recv_response().await.map_err(|e| fail(&e))?;
    if response.status() != StatusCode::OK {
        return Err(fail(&response.status()));
    }
    if let Some(parent) = target.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| fail(&e))?;
    }
    let mut file = File::create(&target).await.map_err(|e| fail(&e))?;
    while let Some(mut data) = stream.recv_data().await.map_err(|e| fail(&e))? {
        while data.has_remaining() {
            let chunk = data.chunk();
            file.write_all(chunk).await.map_err(|e| fail(&e))?;
            let n = chunk.len();
            data.advance(n);
        }
    }
    file.flush().await.map_err(|e| fail(&e))
}

//! HTTP/0.9 over QUIC (`hq-interop`): the client sends `GET /path\r\n` on a
//! bidirectional stream and finishes it; the server answers with the file's
//! bytes and finishes, or resets the stream if there is no such file.

use std::path::{Component, Path, PathBuf};

use quinn::{Connection, RecvStream, SendStream, VarInt};
use tokio::fs::File;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinSet;

/// Longest request line the server reads.
const MAX_REQUEST: usize = 4096;
/// Bytes copied per read from disk or from the stream.
const CHUNK: usize = 64 * 1024;
/// Application error code on a reset stream (HTTP/0.9 has none; any value).
const NOT_FOUND: u32 = 0x10;

/// The file under `root` that a request line names, refusing any path that
/// would leave `root`.
pub fn resolve(root: &Path, request: &[u8]) -> Result<PathBuf, String> {
    let line = std::str::from_utf8(request).map_err(|_| "request is not UTF-8".to_string())?;
    let path = line
        .trim_end_matches(['\r', '\n'])
        .strip_prefix("GET ")
        .ok_or_else(|| format!("not a GET request: {line:?}"))?
        .trim();
    let relative = path.trim_start_matches('/');
    let mut out = root.to_path_buf();
    for part in Path::new(relative).components() {
        match part {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            _ => return Err(format!("path escapes the web root: {path:?}")),
        }
    }
    if out == root {
        return Err("request names no file".to_string());
    }
    Ok(out)
}

/// Serves every request stream of `conn` from `root` until it closes.
pub async fn serve_connection(conn: Connection, root: PathBuf) {
    while let Ok((send, recv)) = conn.accept_bi().await {
        let root = root.clone();
        tokio::spawn(async move {
            if let Err(e) = serve_stream(send, recv, &root).await {
                eprintln!("hq: {e}");
            }
        });
    }
}

async fn serve_stream(
    mut send: SendStream,
    mut recv: RecvStream,
    root: &Path,
) -> Result<(), String> {
    let request = recv
        .read_to_end(MAX_REQUEST)
        .await
        .map_err(|e| format!("reading request: {e}"))?;
    let path = match resolve(root, &request) {
        Ok(p) => p,
        Err(e) => {
            let _ = send.reset(VarInt::from_u32(NOT_FOUND));
            return Err(e);
        }
    };
    let mut file = match File::open(&path).await {
        Ok(f) => f,
        Err(e) => {
            let _ = send.reset(VarInt::from_u32(NOT_FOUND));
            return Err(format!("{}: {e}", path.display()));
        }
    };
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = file
            .read(&mut buf)
            .await
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        send.write_all(&buf[..n])
            .await
            .map_err(|e| format!("sending {}: {e}", path.display()))?;
    }
    send.finish().map_err(|e| format!("finishing: {e}"))?;
    // Wait until the peer has the data (or went away) so the connection is
    // not torn down under the stream.
    let _ = send.stopped().await;
    Ok(())
}

/// Writes a request for `path` on a new stream of `conn` and stores the
/// response as `downloads/<path>`. `on_data` runs once, when the first
/// response bytes arrive.
pub async fn fetch(
    conn: &Connection,
    path: &str,
    downloads: &Path,
    on_data: Option<&(dyn Fn() + Sync)>,
) -> Result<u64, String> {
    let target = resolve(downloads, format!("GET {path}").as_bytes())?;
    let (mut send, mut recv) = conn
        .open_bi()
        .await
        .map_err(|e| format!("opening a stream for {path}: {e}"))?;
    send.write_all(format!("GET {path}\r\n").as_bytes())
        .await
        .map_err(|e| format!("sending request {path}: {e}"))?;
    send.finish()
        .map_err(|e| format!("finishing request {path}: {e}"))?;
    if let Some(parent) = target.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    let mut file = File::create(&target)
        .await
        .map_err(|e| format!("{}: {e}", target.display()))?;
    let mut total = 0u64;
    let mut on_data = on_data;
    while let Some(chunk) = recv.read_chunk(CHUNK, true).await.map_err(|e| match e {
        // Say why the connection went away (timed out, reset, closed...).
        quinn::ReadError::ConnectionLost(cause) => format!("receiving {path}: {cause}"),
        e => format!("receiving {path}: {e}"),
    })? {
        if let Some(f) = on_data.take() {
            f();
        }
        total += chunk.bytes.len() as u64;
        file.write_all(&chunk.bytes)
            .await
            .map_err(|e| format!("{}: {e}", target.display()))?;
    }
    file.flush()
        .await
        .map_err(|e| format!("{}: {e}", target.display()))?;
    Ok(total)
}

/// Fetches `paths` concurrently on `conn`. With `key_update`, forces a key
/// update once the first response bytes arrive: by then the server's
/// HANDSHAKE_DONE has come too, so the handshake is confirmed (RFC 9001 §6).
pub async fn fetch_all(
    conn: &Connection,
    paths: &[String],
    downloads: &Path,
    key_update: bool,
) -> Result<(), String> {
    let mut tasks = JoinSet::new();
    for (i, path) in paths.iter().enumerate() {
        let conn = conn.clone();
        let path = path.clone();
        let downloads: PathBuf = downloads.to_path_buf();
        let update = key_update && i == 0;
        tasks.spawn(async move {
            let trigger = conn.clone();
            let force = move || trigger.force_key_update();
            let on_data: Option<&(dyn Fn() + Sync)> = if update { Some(&force) } else { None };
            fetch(&conn, &path, &downloads, on_data).await
        });
    }
    join_all(tasks).await
}

/// Waits for every request task; the first error, if any.
pub(crate) async fn join_all<T: 'static>(
    mut tasks: JoinSet<Result<T, String>>,
) -> Result<(), String> {
    let mut first_error = None;
    while let Some(joined) = tasks.join_next().await {
        let outcome = joined
            .map_err(|e| format!("request task failed: {e}"))
            .and_then(|r| r);
        if let Err(e) = outcome {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_plain_and_nested_paths() {
        let root = Path::new("/www");
        assert_eq!(
            resolve(root, b"GET /a.bin\r\n").unwrap(),
            Path::new("/www/a.bin")
        );
        assert_eq!(
            resolve(root, b"GET /d/b\r\n").unwrap(),
            Path::new("/www/d/b")
        );
        assert_eq!(resolve(root, b"GET /c").unwrap(), Path::new("/www/c"));
    }

    #[test]
    fn refuses_escapes_and_junk() {
        let root = Path::new("/www");
        assert!(resolve(root, b"GET /../etc/passwd\r\n").is_err());
        assert!(resolve(root, b"GET /\r\n").is_err());
        assert!(resolve(root, b"PUT /x\r\n").is_err());
        assert!(resolve(root, &[0xff, 0xfe]).is_err());
    }
}

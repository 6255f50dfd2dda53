//! Moving test bytes: one sender loop and one receiver loop, shared by the
//! client and the server (whichever side sends with or without `-R`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// How much to send.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// For this long (`-t`).
    Time(Duration),
    /// This many bytes (`-n`).
    Bytes(u64),
}

impl Limit {
    /// The limit a test request asks for.
    pub fn of(request: &super::proto::TestRequest) -> Limit {
        if request.bytes > 0 {
            Limit::Bytes(request.bytes)
        } else {
            Limit::Time(Duration::from_secs_f64(
                request.seconds.clamp(0.0, super::MAX_SECONDS),
            ))
        }
    }
}

/// Write and read size: small enough that interval counts stay smooth at low rates.
const CHUNK: usize = 16 * 1024;

/// The stream reset code a timed sender ends with: "time is up". Bytes it
/// wrote but the network has not yet carried are dropped rather than
/// drained, so a `-t` test ends on time even when flow control lets the
/// sender buffer many seconds of data on a slow path.
pub const TIME_UP: quinn::VarInt = quinn::VarInt::from_u32(0x7469);

/// Writes zeros to `send` until the limit, counting bytes into `counter` as
/// they are accepted, then finishes the stream (a byte limit) or resets it
/// with [`TIME_UP`] (a time limit). Returns bytes and seconds.
pub async fn send_until(
    send: &mut quinn::SendStream,
    limit: Limit,
    counter: &AtomicU64,
) -> Result<(u64, f64), String> {
    let buf = vec![0u8; CHUNK];
    let start = Instant::now();
    let deadline = match limit {
        Limit::Time(t) => Some(start + t),
        Limit::Bytes(_) => None,
    };
    let mut sent = 0u64;
    loop {
        let want = match limit {
            Limit::Bytes(total) if sent >= total => break,
            Limit::Bytes(total) => CHUNK.min((total - sent) as usize),
            Limit::Time(_) => CHUNK,
        };
        let write = send.write(&buf[..want]);
        let written = match deadline {
            Some(d) => match tokio::time::timeout_at(d, write).await {
                Ok(result) => result,
                Err(_) => break,
            },
            None => write.await,
        }
        .map_err(|e| match e {
            // quinn's message leaves out why the connection was lost.
            quinn::WriteError::ConnectionLost(why) => {
                format!("sending failed: connection lost: {why}")
            }
            e => format!("sending failed: {e}"),
        })?;
        sent += written as u64;
        counter.fetch_add(written as u64, Ordering::Relaxed);
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
    }
    match limit {
        Limit::Time(_) => send
            .reset(TIME_UP)
            .map_err(|e| format!("cannot end the data stream: {e}"))?,
        Limit::Bytes(_) => send
            .finish()
            .map_err(|e| format!("cannot finish the data stream: {e}"))?,
    }
    Ok((sent, start.elapsed().as_secs_f64()))
}

/// Reads `recv` to its end (or to a [`TIME_UP`] reset), counting bytes into
/// `counter`. Returns bytes and the seconds from the first to the last byte.
///
/// It reads out of order: test bytes need no order, and an in-order reader
/// leaves every piece that arrives behind a hole buffered in quinn until the
/// hole is repaired, a round trip later at best. quinn ends the connection
/// ("too many gaps in stream buffer") when a stream holds more than 1024
/// separate pieces, which a loss burst across an 8 MiB stream window can
/// produce; read out of order, pieces leave quinn as they arrive.
pub async fn receive_all(
    recv: &mut quinn::RecvStream,
    counter: &AtomicU64,
) -> Result<(u64, f64), String> {
    let mut received = 0u64;
    let mut first: Option<Instant> = None;
    loop {
        let n = match recv.read_chunk(CHUNK, false).await {
            Ok(Some(chunk)) => chunk.bytes.len(),
            Ok(None) => break,
            Err(quinn::ReadError::Reset(code)) if code == TIME_UP => break,
            Err(quinn::ReadError::ConnectionLost(why)) => {
                return Err(format!("receiving failed: connection lost: {why}"))
            }
            Err(e) => return Err(format!("receiving failed: {e}")),
        };
        first.get_or_insert_with(Instant::now);
        received += n as u64;
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }
    let seconds = first.map_or(0.0, |f| f.elapsed().as_secs_f64());
    Ok((received, seconds))
}

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

/// A span of a sender's time in which it writes nothing, as an
/// application with nothing to send (`--pause FROM..UNTIL`): seconds from
/// the start of its sending. Bytes it wrote before still go out; a send
/// window ([`super::client::ClientConfig::send_window`]) bounds them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pause {
    /// When the sender stops writing.
    pub from: Duration,
    /// When it writes again.
    pub until: Duration,
}

impl std::str::FromStr for Pause {
    type Err = String;

    /// `FROM..UNTIL` in seconds, `0 <= FROM < UNTIL <= 86400`, e.g. `10..12`.
    fn from_str(s: &str) -> Result<Pause, String> {
        let (from, until) = s
            .split_once("..")
            .ok_or_else(|| format!("`{s}` is not FROM..UNTIL in seconds, e.g. 10..12"))?;
        let seconds = |part: &str| match part.trim().parse::<f64>() {
            Ok(t) if t.is_finite() && (0.0..=super::MAX_SECONDS).contains(&t) => {
                Ok(Duration::from_secs_f64(t))
            }
            _ => Err(format!(
                "`{part}` in `{s}` is not a time from 0 to {} seconds",
                super::MAX_SECONDS
            )),
        };
        let (from, until) = (seconds(from)?, seconds(until)?);
        if until <= from {
            return Err(format!("`{s}`: the pause must end after it starts"));
        }
        Ok(Pause { from, until })
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
/// with [`TIME_UP`] (a time limit). Writes nothing during `pause` (a write
/// still waiting for room when it begins is given up). Returns bytes and
/// seconds.
pub async fn send_until(
    send: &mut quinn::SendStream,
    limit: Limit,
    pause: Option<Pause>,
    counter: &AtomicU64,
) -> Result<(u64, f64), String> {
    let buf = vec![0u8; CHUNK];
    let start = Instant::now();
    let deadline = match limit {
        Limit::Time(t) => Some(start + t),
        Limit::Bytes(_) => None,
    };
    let pause = pause.map(|p| (start + p.from, start + p.until));
    let mut sent = 0u64;
    loop {
        let want = match limit {
            Limit::Bytes(total) if sent >= total => break,
            Limit::Bytes(total) => CHUNK.min((total - sent) as usize),
            Limit::Time(_) => CHUNK,
        };
        let now = Instant::now();
        if let Some((_, until)) = pause.filter(|&(from, until)| (from..until).contains(&now)) {
            tokio::time::sleep_until(deadline.map_or(until, |d| d.min(until))).await;
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
        }
        // A write waits for room at most until the deadline or the pause.
        let now = Instant::now();
        let stop = [deadline, pause.map(|(from, _)| from)]
            .into_iter()
            .flatten()
            .filter(|&t| t > now)
            .min();
        let write = send.write(&buf[..want]);
        let written = match stop {
            Some(stop) => match tokio::time::timeout_at(stop, write).await {
                Ok(result) => result,
                Err(_) if deadline.is_some_and(|d| Instant::now() >= d) => break,
                Err(_) => continue,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_reads_from_until_in_seconds() {
        let secs = Duration::from_secs_f64;
        assert_eq!(
            "10..12".parse(),
            Ok(Pause {
                from: secs(10.0),
                until: secs(12.0)
            })
        );
        assert_eq!(
            "0..0.5".parse(),
            Ok(Pause {
                from: Duration::ZERO,
                until: secs(0.5)
            })
        );
        for (bad, message) in [
            ("10", "`10` is not FROM..UNTIL in seconds"),
            ("10-12", "`10-12` is not FROM..UNTIL"),
            (
                "x..12",
                "`x` in `x..12` is not a time from 0 to 86400 seconds",
            ),
            ("10..", "`` in `10..` is not a time"),
            ("-1..2", "`-1` in `-1..2`"),
            ("1..1e9", "`1e9` in `1..1e9`"),
            ("1..NaN", "`NaN` in `1..NaN`"),
            ("12..10", "`12..10`: the pause must end after it starts"),
            ("3..3", "`3..3`: the pause must end after it starts"),
        ] {
            let err = bad.parse::<Pause>().expect_err(bad);
            assert!(err.contains(message), "{bad}: {err}");
        }
    }
}

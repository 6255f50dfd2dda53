//! What each connection downloads: a request, then a pattern the server
//! writes and the client checks byte by byte.

use super::config::MAX_BYTES;

/// The server writes the pattern in pieces this large.
const CHUNK: usize = 16 << 10;

/// A request: connection number (u32) and bytes wanted (u64), big-endian.
const REQUEST_LEN: usize = 12;

/// The pattern's 8-byte word number `word` of connection `conn`: a hash of
/// both (splitmix64), so a byte at the wrong offset or on the wrong
/// connection shows.
fn pattern_word(conn: u32, word: u64) -> u64 {
    let mut z = (word ^ (u64::from(conn) << 40)).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Fills `buf` with connection `conn`'s pattern from byte `offset` on.
pub fn fill(conn: u32, offset: u64, buf: &mut [u8]) {
    let mut offset = offset;
    let mut rest = buf;
    while !rest.is_empty() {
        let word = pattern_word(conn, offset / 8).to_le_bytes();
        let skip = (offset % 8) as usize;
        let n = (8 - skip).min(rest.len());
        rest[..n].copy_from_slice(&word[skip..skip + n]);
        rest = &mut rest[n..];
        offset += n as u64;
    }
}

/// Checks a download, in order, against its connection's pattern.
#[derive(Debug)]
pub struct Checker {
    conn: u32,
    received: u64,
    expected: Vec<u8>,
}

impl Checker {
    /// A checker for connection `conn`'s download.
    pub fn new(conn: u32) -> Checker {
        Checker {
            conn,
            received: 0,
            expected: Vec::new(),
        }
    }

    /// Checks the next piece; names the first wrong byte.
    pub fn check(&mut self, piece: &[u8]) -> Result<(), String> {
        self.expected.resize(piece.len(), 0);
        fill(self.conn, self.received, &mut self.expected);
        if let Some(i) = piece.iter().zip(&self.expected).position(|(a, b)| a != b) {
            return Err(format!("byte {} is wrong", self.received + i as u64));
        }
        self.received += piece.len() as u64;
        Ok(())
    }

    /// Bytes checked so far.
    pub fn received(&self) -> u64 {
        self.received
    }
}

fn encode_request(conn: u32, bytes: u64) -> [u8; REQUEST_LEN] {
    let mut request = [0; REQUEST_LEN];
    request[..4].copy_from_slice(&conn.to_be_bytes());
    request[4..].copy_from_slice(&bytes.to_be_bytes());
    request
}

fn decode_request(request: &[u8]) -> Option<(u32, u64)> {
    let conn = u32::from_be_bytes(request.get(..4)?.try_into().ok()?);
    let bytes = u64::from_be_bytes(request.get(4..REQUEST_LEN)?.try_into().ok()?);
    (request.len() == REQUEST_LEN && bytes <= MAX_BYTES).then_some((conn, bytes))
}

/// Serves one download: reads the request, writes the pattern, waits
/// until the client acknowledged all of it.
pub(super) async fn serve_download(connection: &quinn::Connection) -> Result<(), String> {
    let (mut send, mut recv) = connection.accept_bi().await.map_err(|e| e.to_string())?;
    let request = recv
        .read_to_end(REQUEST_LEN)
        .await
        .map_err(|e| e.to_string())?;
    let (conn, bytes) = decode_request(&request).ok_or("bad request")?;
    let mut chunk = vec![0; CHUNK];
    let mut offset = 0;
    while offset < bytes {
        let n = (bytes - offset).min(CHUNK as u64) as usize;
        fill(conn, offset, &mut chunk[..n]);
        send.write_all(&chunk[..n])
            .await
            .map_err(|e| e.to_string())?;
        offset += n as u64;
    }
    send.finish().map_err(|e| e.to_string())?;
    match send.stopped().await {
        Ok(None) => Ok(()),
        Ok(Some(code)) => Err(format!("stopped by the client ({code})")),
        Err(e) => Err(e.to_string()),
    }
}

/// Downloads `bytes` on a new stream, checking every byte.
pub(super) async fn download(
    connection: &quinn::Connection,
    conn: u32,
    bytes: u64,
) -> Result<(), String> {
    let (mut send, mut recv) = connection.open_bi().await.map_err(|e| e.to_string())?;
    send.write_all(&encode_request(conn, bytes))
        .await
        .map_err(|e| e.to_string())?;
    send.finish().map_err(|e| e.to_string())?;
    let mut checker = Checker::new(conn);
    while let Some(chunk) = recv
        .read_chunk(usize::MAX, true)
        .await
        .map_err(|e| e.to_string())?
    {
        if checker.received() + chunk.bytes.len() as u64 > bytes {
            return Err(format!("more than the {bytes} bytes asked for"));
        }
        checker.check(&chunk.bytes)?;
    }
    match checker.received() {
        n if n == bytes => Ok(()),
        n => Err(format!("stream ended after {n} of {bytes} bytes")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checker_finds_a_wrong_byte_and_pieces_may_split_anywhere() {
        let mut data = vec![0; 1000];
        fill(7, 0, &mut data);
        let mut checker = Checker::new(7);
        for piece in [&data[..3], &data[3..11], &data[11..]] {
            checker.check(piece).unwrap();
        }
        assert_eq!(checker.received(), 1000);
        // Another connection's bytes are not this one's.
        let mut other = vec![0; 1000];
        fill(8, 0, &mut other);
        assert!(Checker::new(7).check(&other).is_err());
        data[500] ^= 1;
        let mut checker = Checker::new(7);
        assert_eq!(checker.check(&data).unwrap_err(), "byte 500 is wrong");
    }

    #[test]
    fn requests_round_trip_and_oversized_ones_are_refused() {
        assert_eq!(decode_request(&encode_request(3, 4096)), Some((3, 4096)));
        assert_eq!(decode_request(&encode_request(3, MAX_BYTES + 1)), None);
        assert_eq!(decode_request(&[0; 5]), None);
    }
}

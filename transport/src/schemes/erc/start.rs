//! The start code: a router clears some of the server's handshake flight's
//! ECT(0) codepoints to Not-ECT, each cleared datagram asking the server to
//! pace its initial window slower; the server counts them from its client's
//! ACK-ECN counts of the handshake's packet-number spaces (RFC 9000 §13.4:
//! Not-ECT is not counted), which every QUIC client sends. Routers only
//! clear, so the path carries its largest code. A flight with none cleared
//! (no erc router) or all cleared (a path that bleaches ECN) asks nothing.

/// The datagrams of a server's first flight that carry the code: three, the
/// most a server sends before its client's address is validated (RFC 9000
/// §8.1).
pub const START_CODE_DIGITS: u8 = 3;

/// How many halvings of the initial window's pace each cleared datagram
/// asks for. ecnq's own.
pub const START_CODE_STEP: u8 = 1;

/// The pace of the initial window, bytes per second, of a server whose
/// flight of `datagrams` came with `cleared` of them Not-ECT, where the
/// window over the handshake's round trip is `window_rate`; `None`: no
/// slow-down asked.
pub fn first_window_pace(cleared: u8, datagrams: u8, window_rate: f64) -> Option<f64> {
    if cleared == 0 || cleared >= datagrams {
        return None;
    }
    let halvings = i32::from(cleared) * i32::from(START_CODE_STEP);
    Some(window_rate / 2f64.powi(halvings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flight_with_none_or_all_cleared_asks_nothing() {
        assert_eq!(first_window_pace(0, START_CODE_DIGITS, 1e6), None);
        assert_eq!(
            first_window_pace(START_CODE_DIGITS, START_CODE_DIGITS, 1e6),
            None
        );
        let one = first_window_pace(1, START_CODE_DIGITS, 1e6).expect("a pace");
        let two = first_window_pace(2, START_CODE_DIGITS, 1e6).expect("a pace");
        assert!(two < one && one < 1e6, "{one} {two}");
    }
}

//! The start code: a router clears some of the server's handshake flight's
//! ECT(0) codepoints to Not-ECT, each cleared datagram asking the server to
//! pace its initial window slower; the server counts them from its client's
//! ACK-ECN counts of the handshake's packet-number spaces (RFC 9000 §13.4:
//! Not-ECT is not counted), which every QUIC client sends. Routers only
//! clear, so the path carries its largest code. A flight with none cleared
//! (no erc router) or all cleared (a path that bleaches ECN) asks nothing.

use std::time::Duration;

use crate::signal::{FirstPace, Law, RttSample};

/// The datagrams of a server's first flight that carry the code: three, the
/// most a server sends before its client's address is validated (RFC 9000
/// §8.1).
pub const START_CODE_DIGITS: u8 = 3;

/// How many halvings of the initial window's pace each cleared datagram
/// asks for. ecnq's own.
pub const START_CODE_STEP: u8 = 1;

/// The pace of the initial window of a server whose flight of `datagrams`
/// came with `cleared` of them Not-ECT, where the window over the
/// handshake's round trip is `window_rate` bytes per second; `None`: no
/// slow-down asked. A flight sent again (one of its datagrams was lost)
/// carries the chain's digits, not the code, so more datagrams than the
/// code's most may come cleared: read as the most, unless all came so (a
/// path that bleaches ECN; `a_flight_sent_again_reads_as_the_most_code`).
pub fn first_window_pace(cleared: u8, datagrams: u8, window_rate: f64) -> Option<FirstPace> {
    if cleared == 0 || cleared >= datagrams {
        return None;
    }
    let most = START_CODE_DIGITS - 1;
    let code = cleared.min(most);
    let halvings = i32::from(code) * i32::from(START_CODE_STEP);
    Some(FirstPace {
        rate: window_rate / 2f64.powi(halvings),
        most: code == most,
    })
}

/// Hands `law` the start code its server read at the end of a handshake of
/// round trip `rtt`: `cleared` of the flight's `datagrams`. The pace is the
/// law's window over that round trip, as [`first_window_pace`] slows it;
/// laws that do not read the code ignore it. The QUIC session and the
/// simulator both start a flow through here
/// (`a_start_code_paces_the_first_window`,
/// `a_flash_crowd_paces_its_initial_windows_to_the_start_code`).
pub fn start_with_code(
    law: &mut dyn Law,
    now: Duration,
    (cleared, datagrams): (u8, u8),
    rtt: &RttSample,
) {
    if rtt.smoothed.is_zero() {
        return;
    }
    let window_rate = law.window() as f64 / rtt.smoothed.as_secs_f64();
    if let Some(pace) = first_window_pace(cleared, datagrams, window_rate) {
        law.pace_first_window(now, pace, rtt);
    }
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
        assert!(two.rate < one.rate && one.rate < 1e6, "{one:?} {two:?}");
        assert!(two.most && !one.most, "{one:?} {two:?}");
    }

    #[test]
    fn a_flight_sent_again_reads_as_the_most_code() {
        let most = first_window_pace(START_CODE_DIGITS - 1, START_CODE_DIGITS, 1e6);
        let again = 2 * START_CODE_DIGITS;
        assert_eq!(first_window_pace(START_CODE_DIGITS, again, 1e6), most);
        assert_eq!(first_window_pace(again, again, 1e6), None);
    }
}

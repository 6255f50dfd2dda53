//! A connection's qlog trace (feature `qlog`): quinn's events and ecnq's in
//! one JSON-SEQ file (RFC 7464). The qlog main schema
//! (draft-ietf-quic-qlog-main-schema §5.4) lets an application log events
//! of its own namespace: ecnq's are `ecnq:mode_updated` (which feedback the
//! sender runs on, `EcnqAckCounts` beside `Ecnq`, or why it fell back),
//! `ecnq:law_mode_updated`, `ecnq:decrease`, `ecnq:law_replaced`,
//! `ecnq:scheme_resumed` and `ecnq:report_rejected`, their time counted
//! from the trace's reference time as quinn's are.
//!
//! quinn writes through [`QlogFile::quinn_writer`], which hands the file
//! whole records only, so an ecnq event, logged from whichever thread took
//! the session's lock, never lands inside one of quinn's.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use serde_json::{json, Value};

use crate::session::Event;

/// The record separator that opens every JSON-SEQ record (RFC 7464 §2.1).
const RECORD_SEPARATOR: u8 = 0x1e;

/// One connection's qlog file.
pub(crate) struct QlogFile {
    file: Mutex<BufWriter<File>>,
    /// The trace's reference time: quinn's events count from it too.
    start: Instant,
}

impl QlogFile {
    /// Creates the file at `path`, its events timed from `start`.
    pub fn create(path: &Path, start: Instant) -> io::Result<Arc<QlogFile>> {
        Ok(Arc::new(QlogFile {
            file: Mutex::new(BufWriter::new(File::create(path)?)),
            start,
        }))
    }

    /// The writer quinn's qlog stream writes through.
    pub fn quinn_writer(self: &Arc<Self>) -> Box<dyn Write + Send + Sync> {
        Box::new(Records {
            file: self.clone(),
            pending: Vec::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, BufWriter<File>> {
        self.file.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Logs `event`, which happened at `at`. A trace is a diagnostic: a
    /// write that fails is dropped, as quinn drops its own.
    pub fn log(&self, at: Instant, event: &Event) {
        let (name, data) = describe(event);
        let time = at.saturating_duration_since(self.start).as_secs_f64() * 1e3;
        let mut record = vec![RECORD_SEPARATOR];
        let written = serde_json::to_writer(
            &mut record,
            &json!({ "time": time, "name": name, "data": data }),
        );
        record.push(b'\n');
        if written.is_ok() {
            let _ = self.lock().write_all(&record);
        }
    }
}

impl Drop for QlogFile {
    fn drop(&mut self) {
        let _ = self.lock().flush();
    }
}

/// quinn's side of the file: whole records (each ends in a newline) go to
/// the file, the rest waits for its end.
struct Records {
    file: Arc<QlogFile>,
    pending: Vec<u8>,
}

impl Write for Records {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        if let Some(end) = self.pending.iter().rposition(|&b| b == b'\n') {
            self.file.lock().write_all(&self.pending[..=end])?;
            self.pending.drain(..=end);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.lock().flush()
    }
}

/// The qlog name and data of a session event. Modes are named by their
/// identifiers (`EcnqAckCounts`), with the words the logs use beside them.
fn describe(event: &Event) -> (&'static str, Value) {
    match *event {
        Event::ModeChanged { from, to } => (
            "ecnq:mode_updated",
            json!({
                "old": format!("{from:?}"),
                "new": format!("{to:?}"),
                "description": to.name(),
                "fallback": to.is_fallback(),
            }),
        ),
        Event::LawModeChanged {
            from,
            to,
            window,
            cause,
        } => (
            "ecnq:law_mode_updated",
            json!({ "old": from.name(), "new": to.name(), "window": window, "cause": cause.name() }),
        ),
        Event::Decrease {
            mode,
            from,
            to,
            cause,
        } => (
            "ecnq:decrease",
            json!({ "mode": mode.name(), "old": from, "new": to, "cause": cause.name() }),
        ),
        Event::LawReplaced { window, mode } => (
            "ecnq:law_replaced",
            json!({ "window": window, "mode": format!("{mode:?}") }),
        ),
        Event::SchemeResumed { scheme, window } => (
            "ecnq:scheme_resumed",
            json!({ "scheme": scheme.to_string(), "window": window }),
        ),
        Event::ReportRejected(error) => (
            "ecnq:report_rejected",
            json!({ "error": error.to_string() }),
        ),
        Event::ReportIgnored => (
            "ecnq:report_rejected",
            json!({ "error": "this connection runs no ecnq scheme" }),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::PeerMode;

    /// quinn's records, written in pieces, and ecnq's events between its
    /// writes: every record in the file is whole and parses.
    #[test]
    fn ecnq_events_never_split_quinns_records() {
        let path = std::env::temp_dir().join(format!("ecnq-qlog-unit-{}", std::process::id()));
        let start = Instant::now();
        let file = QlogFile::create(&path, start).unwrap();
        let mut quinn = file.quinn_writer();
        let event = Event::ModeChanged {
            from: PeerMode::Probing,
            to: PeerMode::EcnqAckCounts,
        };
        quinn.write_all(b"\x1e{\"time\":1.0,").unwrap();
        file.log(start, &event);
        quinn
            .write_all(b"\"name\":\"quic:packet_sent\"}\n")
            .unwrap();
        quinn.flush().unwrap();
        drop((quinn, file));
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let records: Vec<Value> = text
            .split('\x1e')
            .filter(|r| !r.is_empty())
            .map(|r| serde_json::from_str(r).unwrap())
            .collect();
        assert_eq!(records.len(), 2, "{text:?}");
        assert_eq!(records[0]["name"], "ecnq:mode_updated");
        assert_eq!(records[0]["data"]["new"], "EcnqAckCounts");
        assert_eq!(records[0]["data"]["fallback"], false);
        assert_eq!(records[1]["name"], "quic:packet_sent");
    }
}

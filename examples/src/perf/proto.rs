//! What an `ecnq-perf` client and server say to each other, and how they
//! trust each other.
//!
//! Each `-P` stream is its own QUIC connection (so each has its own
//! congestion controller, like iperf3's TCP streams). On it the client opens
//! one bidirectional control stream, writes a JSON [`TestRequest`] and
//! finishes its half. Data then flows on one unidirectional stream: client
//! to server, or server to client with `-R`. When the data stream is done
//! the server writes a JSON [`TestResult`] (what it sent or received) on the
//! control stream and finishes it.

use std::path::{Path, PathBuf};

use ecnq::quic::Identity;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::RootCertStore;
use serde::{Deserialize, Serialize};

/// The ALPN of the perf protocol.
pub const ALPN: &[u8] = b"ecnq-perf/1";
/// Default port, iperf3's.
pub const DEFAULT_PORT: u16 = 5201;
/// Largest control message accepted.
pub const MAX_CONTROL: usize = 4096;

/// What the client asks for.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestRequest {
    /// Protocol version, 1.
    pub version: u32,
    /// The server sends (`-R`).
    pub reverse: bool,
    /// Seconds to send for (`-t`); ignored when `bytes` is set.
    pub seconds: f64,
    /// Bytes to send (`-n`), 0 for a timed test.
    pub bytes: u64,
}

/// What the server reports at the end of a test.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    /// Bytes the server received (or sent, with `-R`).
    pub bytes: u64,
    /// Seconds from the first to the last byte.
    pub seconds: f64,
}

/// A control message as one JSON object.
pub fn encode<T: Serialize>(message: &T) -> Vec<u8> {
    serde_json::to_vec(message).expect("plain structs always serialize")
}

/// Parses a control message, with an error that says what was wrong.
pub fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("bad control message from the peer: {e}"))
}

/// Where a server that made its own certificate leaves it, so a client on
/// the same machine can trust it with no setup.
pub fn default_cert_path(port: u16) -> PathBuf {
    std::env::temp_dir().join(format!("ecnq-perf-{port}.pem"))
}

/// A fresh self-signed identity for `names`, and its certificate as PEM.
pub fn self_signed(names: &[String]) -> Result<(Identity, String), String> {
    let certified = rcgen::generate_simple_self_signed(names.to_vec())
        .map_err(|e| format!("cannot make a certificate: {e}"))?;
    let pem = certified.cert.pem();
    let key = PrivateKeyDer::try_from(certified.key_pair.serialize_der())
        .map_err(|e| format!("cannot use the generated key: {e}"))?;
    let identity = Identity {
        chain: vec![certified.cert.der().clone()],
        key,
    };
    Ok((identity, pem))
}

/// An identity from PEM files.
pub fn load_identity(cert: &Path, key: &Path) -> Result<Identity, String> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read certificates from {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("{} holds no certificate", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("cannot read a private key from {}: {e}", key.display()))?;
    Ok(Identity { chain, key })
}

/// Trust roots from a PEM file.
pub fn load_roots(ca: &Path) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(ca)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read certificates from {}: {e}", ca.display()))?;
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(format!("{} holds no usable certificate", ca.display()));
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_messages_round_trip_and_bad_ones_are_errors() {
        let req = TestRequest {
            version: 1,
            reverse: true,
            seconds: 2.5,
            bytes: 0,
        };
        assert_eq!(decode::<TestRequest>(&encode(&req)), Ok(req));
        let err = decode::<TestRequest>(b"{\"version\":1}").unwrap_err();
        assert!(err.contains("bad control message"), "{err}");
    }

    #[test]
    fn self_signed_certificates_load_back_as_roots() {
        let (_, pem) = self_signed(&["localhost".into()]).unwrap();
        let path = std::env::temp_dir().join(format!("ecnq-perf-test-{}.pem", std::process::id()));
        std::fs::write(&path, pem).unwrap();
        assert_eq!(load_roots(&path).unwrap().len(), 1);
        std::fs::write(&path, "junk").unwrap();
        assert!(load_roots(&path)
            .unwrap_err()
            .contains("no usable certificate"));
        std::fs::remove_file(&path).unwrap();
        assert!(load_roots(&path).unwrap_err().contains("cannot read"));
    }
}

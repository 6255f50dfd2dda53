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

use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
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

/// Where servers that made their own certificates leave them, so a client
/// on the same machine can trust one with no setup: a directory of this
/// user's in the temporary directory, `ecnq-perf-UID`.
pub fn cert_dir() -> PathBuf {
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    std::env::temp_dir().join(format!("ecnq-perf-{uid}"))
}

/// The certificate file of the server bound to `addr` in `dir`.
fn cert_file(dir: &Path, addr: SocketAddr) -> PathBuf {
    dir.join(format!("{}_{}.pem", addr.ip(), addr.port()))
}

/// Checks that `dir` is a directory (not a symlink) of this user's that
/// no one else may enter: anyone else could plant a certificate there.
fn check_private(dir: &Path) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    if !meta.file_type().is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(format!(
            "{} is not a private directory of this user's (mode 0700); remove it",
            dir.display()
        ));
    }
    Ok(())
}

/// Writes the certificate of a server bound to `local` into `dir`
/// (created 0700 if missing, refused if anyone else could write there),
/// as a new file: an old one of the same address (a server gone, as this
/// one holds the address now) is replaced, a symlink is never followed.
/// Returns the file's path.
pub fn store_cert(dir: &Path, local: SocketAddr, pem: &str) -> Result<PathBuf, String> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
    }
    check_private(dir)?;
    let path = cert_file(dir, local);
    let _ = std::fs::remove_file(&path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    file.write_all(pem.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// The certificate a server on this machine left in `dir` for `server`:
/// the one bound to that very address, else one bound to all addresses
/// at its port.
pub fn find_cert(dir: &Path, server: SocketAddr) -> Result<PathBuf, String> {
    check_private(dir).map_err(|e| format!("no certificate to trust (pass --ca FILE): {e}"))?;
    let any: [IpAddr; 2] = [Ipv6Addr::UNSPECIFIED.into(), Ipv4Addr::UNSPECIFIED.into()];
    std::iter::once(server.ip())
        .chain(any)
        .map(|ip| cert_file(dir, SocketAddr::new(ip, server.port())))
        .find(|path| path.is_file())
        .ok_or_else(|| {
            format!(
                "no certificate to trust: pass --ca FILE (no server on this machine left one for {server} in {})",
                dir.display()
            )
        })
}

/// A fresh self-signed identity for `names`, and its certificate as PEM.
pub fn self_signed(names: &[String]) -> Result<(Identity, String), String> {
    self_signed_of_size(names, 0)
}

/// A fresh self-signed identity for `names` whose certificate is at least
/// `at_least` bytes of DER, filled out with more names (as a server's
/// certificate for many hosts is), and its certificate as PEM: a server
/// flight as long as the internet's (`ecnq-perf web --flight long`).
pub fn self_signed_of_size(
    names: &[String],
    at_least: usize,
) -> Result<(Identity, String), String> {
    let mut names = names.to_vec();
    let certified = loop {
        let certified = rcgen::generate_simple_self_signed(names.clone())
            .map_err(|e| format!("cannot make a certificate: {e}"))?;
        let short = certified.cert.der().len();
        if short >= at_least {
            break certified;
        }
        // Each name of this form adds about its length and 2 bytes of DER.
        let more = (at_least - short).div_ceil(FILL_NAME_BYTES);
        let from = names.len();
        names.extend((from..from + more).map(|i| format!("h{i:05}.ecnq.invalid")));
    };
    let pem = certified.cert.pem();
    let key = PrivateKeyDer::try_from(certified.key_pair.serialize_der())
        .map_err(|e| format!("cannot use the generated key: {e}"))?;
    let identity = Identity {
        chain: vec![certified.cert.der().clone()],
        key,
    };
    Ok((identity, pem))
}

/// The DER bytes one name `hNNNNN.ecnq.invalid` adds to a certificate.
const FILL_NAME_BYTES: usize = 21;

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
    use std::os::unix::fs::PermissionsExt;

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

    /// A fresh directory path under the temporary directory, for one test.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ecnq-perf-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn certificates_live_in_a_private_directory() {
        let dir = scratch("certs");
        let any: SocketAddr = "[::]:5201".parse().unwrap();
        let lo: SocketAddr = "127.0.0.1:5202".parse().unwrap();
        let path = store_cert(&dir, any, "first").unwrap();
        store_cert(&dir, lo, "second").unwrap();
        let meta = std::fs::metadata(&dir).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        // A client finds the certificate of the server it names.
        let find = |to: &str| find_cert(&dir, to.parse().unwrap());
        assert_eq!(find("127.0.0.1:5201").unwrap(), path);
        assert_eq!(
            std::fs::read_to_string(find("127.0.0.1:5202").unwrap()).unwrap(),
            "second"
        );
        assert!(find("127.0.0.1:5203")
            .unwrap_err()
            .contains("no server on this machine"));
        // A symlink planted where the certificate goes is replaced, not followed.
        let target = dir.with_extension("target");
        std::fs::write(&target, "keep").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        store_cert(&dir, any, "third").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        assert!(!std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink());
        // A directory others may enter is refused.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(store_cert(&dir, any, "x")
            .unwrap_err()
            .contains("not a private directory"));
        assert!(find("127.0.0.1:5201")
            .unwrap_err()
            .contains("not a private directory"));
        std::fs::remove_dir_all(&dir).unwrap();
        // So is a symlink to a directory.
        let real = scratch("real");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&real)
            .unwrap();
        std::os::unix::fs::symlink(&real, &dir).unwrap();
        assert!(store_cert(&dir, any, "x")
            .unwrap_err()
            .contains("not a private directory"));
        for p in [&dir, &target] {
            std::fs::remove_file(p).unwrap();
        }
        std::fs::remove_dir(&real).unwrap();
    }

    #[test]
    fn a_certificate_can_be_made_as_long_as_asked() {
        let (short, _) = self_signed(&["localhost".into()]).unwrap();
        let (long, _) = self_signed_of_size(&["localhost".into()], 3000).unwrap();
        let len = |i: &Identity| i.chain[0].len();
        assert!(len(&short) < 1000, "{}", len(&short));
        assert!((3000..3100).contains(&len(&long)), "{}", len(&long));
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

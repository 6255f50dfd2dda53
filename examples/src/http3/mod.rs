//! HTTP/3 on ecnq: a file server ([`server`]) and a client that downloads
//! URLs ([`client`]), built on hyperium's `h3` over quinn connections of
//! ecnq's [`Endpoint`](ecnq::quic::Endpoint). Each connection's sending
//! direction runs the congestion controller chosen for its endpoint (erc
//! by default), exactly as `ecnq-perf`'s own protocol does, so a browser
//! or any HTTP/3 client gets ecnq from the server alone.
//!
//! `ecnq-perf h3-server` and `ecnq-perf h3-get` are the command lines;
//! `ecnq-perf web` ([`web`]) runs both through the relay shim as a
//! benchmark, and its `--flash` a flash crowd ([`web::flash`]).

pub mod client;
pub mod command;
pub mod server;
pub mod web;

use std::path::PathBuf;

use base64::Engine as _;
use rustls::pki_types::CertificateDer;

/// The ALPN token of HTTP/3 (RFC 9114 §3.1).
pub const ALPN: &[u8] = b"h3";

/// Bytes read from a file, or handed to the stream, at a time.
const CHUNK: usize = 64 * 1024;

/// The base64 of the SHA-256 of a certificate's SubjectPublicKeyInfo: what
/// Chromium's `--ignore-certificate-errors-spki-list` takes to trust that
/// certificate (the same as `openssl x509 -pubkey -noout | openssl pkey
/// -pubin -outform der | openssl dgst -sha256 -binary | base64`).
pub fn spki_sha256(cert: &CertificateDer<'_>) -> Result<String, String> {
    let parsed = webpki::EndEntityCert::try_from(cert)
        .map_err(|e| format!("cannot parse the certificate: {e:?}"))?;
    let spki = parsed.subject_public_key_info();
    let digest = ring::digest::digest(&ring::digest::SHA256, spki.as_ref());
    Ok(base64::engine::general_purpose::STANDARD.encode(digest.as_ref()))
}

/// The relative file path a URL path names: its segments percent-decoded
/// (RFC 3986 §2.1), empty and `.` segments skipped. A `..` segment, a
/// segment that decodes to one holding `/` or NUL, and a path that does not
/// start with `/` are refused, so the result never leaves the directory it
/// is joined to (a symbolic link still can: the server checks the file it
/// opens too). The empty path is the directory itself.
pub fn relative_path(path: &str) -> Result<PathBuf, String> {
    let rest = path
        .strip_prefix('/')
        .ok_or_else(|| format!("path {path:?} does not start with /"))?;
    let mut out = PathBuf::new();
    for segment in rest.split('/') {
        let decoded = percent_decode(segment).ok_or_else(|| format!("bad path {path:?}"))?;
        match decoded.as_str() {
            "" | "." => {}
            ".." => return Err(format!("path {path:?} leaves the root")),
            s if s.contains(['/', '\0']) => return Err(format!("bad path {path:?}")),
            s => out.push(s),
        }
    }
    Ok(out)
}

/// `%XX` escapes decoded; `None` for a bad escape or bytes that are not UTF-8.
fn percent_decode(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn url_paths_stay_below_the_root() {
        let ok = |p: &str| relative_path(p).unwrap();
        assert_eq!(ok("/a.bin"), Path::new("a.bin"));
        assert_eq!(ok("/d/./e//f"), Path::new("d/e/f"));
        assert_eq!(ok("/"), Path::new(""));
        assert_eq!(ok("/big%20file"), Path::new("big file"));
        for bad in [
            "/../etc/passwd",
            "/a/../../b",
            "/%2e%2e/secret",
            "/a%2f..%2fb",
            "/a%00b",
            "/bad%zz",
            "/cut%2",
            "/%ff",
            "relative",
        ] {
            assert!(relative_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_spki_hash_is_that_of_the_key_the_certificate_holds() {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let expected = base64::engine::general_purpose::STANDARD.encode(
            ring::digest::digest(&ring::digest::SHA256, &certified.key_pair.public_key_der())
                .as_ref(),
        );
        assert_eq!(spki_sha256(certified.cert.der()).unwrap(), expected);
        // 32 bytes in base64: 44 characters with one `=` of padding.
        assert_eq!(expected.len(), 44);
        let junk = CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01, 0x00]);
        assert!(spki_sha256(&junk).is_err());
    }
}

//! rustls set-up for the runner: certificates from the certs directory, NSS
//! key logs for tshark, the chacha20-only client, and a client that accepts
//! any server certificate (runner clients do not verify; the runner's
//! certificates are for names that only exist inside its network).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{ring, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// Writes TLS secrets in the NSS key log format (what `SSLKEYLOGFILE` means
/// to browsers and tshark), appending, one line per secret.
#[derive(Debug)]
pub struct KeyLogFile {
    file: Mutex<File>,
}

impl KeyLogFile {
    pub fn create(path: &Path) -> Result<KeyLogFile, String> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot open key log {}: {e}", path.display()))?;
        Ok(KeyLogFile {
            file: Mutex::new(file),
        })
    }
}

impl rustls::KeyLog for KeyLogFile {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        let mut line =
            String::with_capacity(label.len() + 2 * (client_random.len() + secret.len()) + 3);
        line.push_str(label);
        line.push(' ');
        for b in client_random {
            line.push_str(&format!("{b:02x}"));
        }
        line.push(' ');
        for b in secret {
            line.push_str(&format!("{b:02x}"));
        }
        line.push('\n');
        if let Ok(mut file) = self.file.lock() {
            // A failed key-log write must not break the connection.
            let _ = file.write_all(line.as_bytes());
        }
    }
}

fn key_log(path: &Option<PathBuf>) -> Result<Option<Arc<dyn rustls::KeyLog>>, String> {
    Ok(match path {
        Some(p) => Some(Arc::new(KeyLogFile::create(p)?)),
        None => None,
    })
}

/// The server's certificate chain (`cert.pem`) and key (`priv.key`).
pub fn load_identity(
    certs: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let cert_path = certs.join("cert.pem");
    let key_path = certs.join("priv.key");
    let chain = CertificateDer::pem_file_iter(&cert_path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read {}: {e}", cert_path.display()))?;
    if chain.is_empty() {
        return Err(format!("{} holds no certificate", cert_path.display()));
    }
    let key = PrivateKeyDer::from_pem_file(&key_path)
        .map_err(|e| format!("cannot read {}: {e}", key_path.display()))?;
    Ok((chain, key))
}

/// The server's QUIC TLS configuration: TLS 1.3, ALPN `alpn`, 0-RTT allowed
/// (quinn requires `max_early_data_size` to be 0 or `u32::MAX`).
pub fn server_crypto(
    certs: &Path,
    keylog: &Option<PathBuf>,
    alpn: &[u8],
) -> Result<Arc<QuicServerConfig>, String> {
    let (chain, key) = load_identity(certs)?;
    let mut config =
        rustls::ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| format!("TLS set-up: {e}"))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| format!("server certificate: {e}"))?;
    config.alpn_protocols = vec![alpn.to_vec()];
    config.max_early_data_size = u32::MAX;
    if let Some(log) = key_log(keylog)? {
        config.key_log = log;
    }
    let quic = QuicServerConfig::try_from(config).map_err(|e| format!("QUIC TLS: {e}"))?;
    Ok(Arc::new(quic))
}

/// The client's QUIC TLS configuration, offering ALPN `alpn`. With
/// `chacha20_only` the client offers only TLS_CHACHA20_POLY1305_SHA256
/// (Initial packets still use AES-128-GCM, as RFC 9001 §5.2 fixes).
pub fn client_crypto(
    keylog: &Option<PathBuf>,
    alpn: &[u8],
    chacha20_only: bool,
) -> Result<Arc<QuicClientConfig>, String> {
    let mut provider = ring::default_provider();
    let initial = ring::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .and_then(|s| s.quic_suite())
        .ok_or("ring lacks the QUIC initial cipher suite")?;
    if chacha20_only {
        provider
            .cipher_suites
            .retain(|s| s.suite() == rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256);
    }
    let algorithms = provider.signature_verification_algorithms;
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| format!("TLS set-up: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServerCert { algorithms }))
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    config.enable_early_data = true;
    if let Some(log) = key_log(keylog)? {
        config.key_log = log;
    }
    let quic = QuicClientConfig::with_initial(Arc::new(config), initial)
        .map_err(|e| format!("QUIC TLS: {e}"))?;
    Ok(Arc::new(quic))
}

/// Accepts any certificate chain but still checks the handshake signature,
/// so the server must hold the key of the certificate it sent.
#[derive(Debug)]
struct AnyServerCert {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

//! TLS for ecnq endpoints: rustls with the `ring` provider, TLS 1.3 only
//! (QUIC requires it), real certificate verification against the roots the
//! application trusts, and a self-signed helper for tests and demos.

use std::sync::Arc;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::RootCertStore;

use super::Error;

/// A server's certificate chain and private key.
#[derive(Debug)]
pub struct Identity {
    /// The certificate chain, leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The leaf certificate's private key.
    pub key: PrivateKeyDer<'static>,
}

impl Clone for Identity {
    fn clone(&self) -> Identity {
        Identity {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

/// A self-signed certificate for tests and demos: the server uses
/// [`SelfSigned::identity`], clients trust [`SelfSigned::roots`].
#[derive(Debug, Clone)]
pub struct SelfSigned {
    identity: Identity,
}

impl SelfSigned {
    /// A certificate for the given DNS names (or IP addresses, as text).
    pub fn new(names: &[&str]) -> Result<SelfSigned, Error> {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let certified = rcgen::generate_simple_self_signed(names)
            .map_err(|e| Error::Certificate(e.to_string()))?;
        Ok(SelfSigned {
            identity: Identity {
                chain: vec![certified.cert.der().clone()],
                key: PrivatePkcs8KeyDer::from(certified.key_pair.serialize_der()).into(),
            },
        })
    }

    /// The server side: certificate and key.
    pub fn identity(&self) -> Identity {
        self.identity.clone()
    }

    /// The client side: a root store that trusts exactly this certificate.
    pub fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        for cert in &self.identity.chain {
            // A certificate we just generated always parses.
            let _ = roots.add(cert.clone());
        }
        roots
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// QUIC client crypto verifying servers against `roots`.
pub(crate) fn client_crypto(
    roots: RootCertStore,
    alpn: &[Vec<u8>],
) -> Result<Arc<QuicClientConfig>, Error> {
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(Error::Tls)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.to_vec();
    let quic = QuicClientConfig::try_from(config).map_err(|e| Error::Certificate(e.to_string()))?;
    Ok(Arc::new(quic))
}

/// QUIC server crypto presenting `identity`.
pub(crate) fn server_crypto(
    identity: Identity,
    alpn: &[Vec<u8>],
) -> Result<Arc<QuicServerConfig>, Error> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(Error::Tls)?
        .with_no_client_auth()
        .with_single_cert(identity.chain, identity.key)
        .map_err(Error::Tls)?;
    config.alpn_protocols = alpn.to_vec();
    let quic = QuicServerConfig::try_from(config).map_err(|e| Error::Certificate(e.to_string()))?;
    Ok(Arc::new(quic))
}

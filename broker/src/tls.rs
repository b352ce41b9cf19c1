//! TLS on the broker's TCP port (rustls with the *ring* provider, through tokio-rustls), as
//! bunqueue serves it with `TLS_CERT_FILE` / `TLS_KEY_FILE`.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;

use crate::error::context;

/// A certificate and key the broker serves TLS with ([`BrokerConfig::tls`](crate::BrokerConfig::tls)).
///
/// Loaded and checked when built, so a missing file, a file without a certificate or a key
/// that does not match fails at start-up with the path, never at the first handshake. Clients
/// are not asked for a certificate. Cloning is cheap (the rustls configuration is shared).
///
/// ```no_run
/// use autobatch_broker::{BrokerConfig, BrokerTls};
/// let tls = BrokerTls::from_pem_files("/etc/bunqueue/server.pem", "/etc/bunqueue/server.key")?;
/// let config = BrokerConfig::default().tls(tls);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct BrokerTls {
    config: Arc<ServerConfig>,
    /// Where the certificate came from, for `Debug`.
    origin: String,
}

impl BrokerTls {
    /// Reads a PEM certificate chain (leaf first) and a PEM private key (PKCS#8, PKCS#1 or
    /// SEC1).
    ///
    /// ```no_run
    /// let tls = autobatch_broker::BrokerTls::from_pem_files("server.pem", "server.key")?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_pem_files(cert: impl AsRef<Path>, key: impl AsRef<Path>) -> io::Result<Self> {
        let (cert, key) = (cert.as_ref(), key.as_ref());
        let cert_pem = std::fs::read(cert).map_err(|e| {
            context(
                e,
                format_args!("cannot read the TLS certificate {}", cert.display()),
            )
        })?;
        let key_pem = std::fs::read(key)
            .map_err(|e| context(e, format_args!("cannot read the TLS key {}", key.display())))?;
        let mut tls = Self::build(&cert_pem, &key_pem, &cert.display().to_string())
            .map_err(|e| context(e, format_args!("TLS with {}", cert.display())))?;
        tls.origin = cert.display().to_string();
        Ok(tls)
    }

    /// The same from PEM text held in memory.
    ///
    /// ```no_run
    /// # let (cert_pem, key_pem) = (Vec::<u8>::new(), Vec::<u8>::new());
    /// let tls = autobatch_broker::BrokerTls::from_pem(&cert_pem, &key_pem)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_pem(cert: &[u8], key: &[u8]) -> io::Result<Self> {
        Self::build(cert, key, "inline PEM")
    }

    fn build(cert: &[u8], key: &[u8], origin: &str) -> io::Result<Self> {
        let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidInput, what);
        let certs = CertificateDer::pem_slice_iter(cert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("bad certificate PEM: {e}")))?;
        if certs.is_empty() {
            return Err(invalid("no certificate in the certificate PEM".into()));
        }
        let key =
            PrivateKeyDer::from_pem_slice(key).map_err(|e| invalid(format!("bad key PEM: {e}")))?;
        let config =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|e| invalid(e.to_string()))?
                .with_no_client_auth()
                .with_single_cert(certs, key)
                .map_err(|e| invalid(format!("certificate and key do not fit: {e}")))?;
        Ok(BrokerTls {
            config: Arc::new(config),
            origin: origin.into(),
        })
    }

    pub(crate) fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.clone())
    }
}

impl fmt::Debug for BrokerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerTls")
            .field("cert", &self.origin)
            .finish_non_exhaustive()
    }
}

/// Two settings are equal when they share one loaded configuration (clones of each other).
impl PartialEq for BrokerTls {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.config, &other.config)
    }
}

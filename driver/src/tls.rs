//! TLS for every runtime at once: the driver wraps whatever socket the [`Runtime`](crate::Runtime)
//! opens in [futures-rustls], which works over any futures-io stream. rustls only, with the
//! *ring* provider; no OpenSSL.
//!
//! [`TlsOptions`] is what users set; it is turned into a rustls `ClientConfig` once, by
//! `Client::connect`, so a bad CA file or key fails there with [`TlsErrorKind::Config`].
//! A handshake failure is classified into a [`TlsErrorKind`] the caller can match on.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_io::{AsyncRead, AsyncWrite};
use futures_rustls::TlsConnector;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

/// Which built-in trust anchors a TLS connection starts from, before any
/// [`TlsOptions::ca_file`] / [`TlsOptions::ca_pem`] is added.
///
/// ```
/// use autobatch_driver::{TlsOptions, TlsRoots};
/// let tls = TlsOptions::new().roots(TlsRoots::System);
/// assert_eq!(tls.root_source(), TlsRoots::System);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TlsRoots {
    /// Mozilla's root program, compiled in (the `webpki-roots` crate). The default: the same
    /// on every machine, nothing read from disk, and what bunqueue's TS client trusts too (bun
    /// ships Mozilla's roots).
    #[default]
    WebPki,
    /// The operating system's store, read at connect (the `rustls-native-certs` crate; on
    /// Linux the usual bundle files, `SSL_CERT_FILE` / `SSL_CERT_DIR` honoured).
    System,
    /// None: only the CAs added with [`TlsOptions::ca_file`] / [`TlsOptions::ca_pem`].
    None,
}

/// TLS settings of a connection ([`ClientOptions::tls`](crate::ClientOptions::tls)).
///
/// Built with [`TlsOptions::new`] and chained setters; its fields are private so that it can
/// grow. The default trusts Mozilla's roots ([`TlsRoots::WebPki`]), checks the certificate
/// against the host the client connects to, and sends no client certificate.
///
/// ```
/// use autobatch_driver::{ClientOptions, TlsOptions, TlsRoots};
///
/// // A server whose certificate comes from a private CA, reached by IP address but
/// // certified for its DNS name:
/// let tls = TlsOptions::new()
///     .roots(TlsRoots::None)
///     .ca_file("/etc/bunqueue/ca.pem")
///     .server_name("queue.internal");
/// let opts = ClientOptions::new("10.0.0.7", 6789).tls(tls);
/// assert!(opts.tls.is_some());
/// ```
#[derive(Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct TlsOptions {
    roots: TlsRoots,
    cas: Vec<Pem>,
    server_name: Option<String>,
    client_cert: Option<(Pem, Pem)>,
    accept_invalid_certs: bool,
}

/// PEM text, given inline or as a file read at connect.
#[derive(Clone, PartialEq, Eq)]
enum Pem {
    File(PathBuf),
    Inline(Vec<u8>),
}

impl Pem {
    fn bytes(&self) -> Result<std::borrow::Cow<'_, [u8]>, TlsError> {
        match self {
            Pem::Inline(b) => Ok(b.as_slice().into()),
            Pem::File(p) => std::fs::read(p)
                .map(Into::into)
                .map_err(|e| TlsError::config(format!("cannot read {}: {e}", p.display()))),
        }
    }

    fn describe(&self) -> String {
        match self {
            Pem::File(p) => p.display().to_string(),
            Pem::Inline(_) => "inline PEM".into(),
        }
    }
}

impl fmt::Debug for Pem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pem::File(p) => write!(f, "{}", p.display()),
            Pem::Inline(b) => write!(f, "<{} bytes of PEM>", b.len()),
        }
    }
}

impl fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The client key is never printed, only where it comes from.
        f.debug_struct("TlsOptions")
            .field("roots", &self.roots)
            .field("cas", &self.cas)
            .field("server_name", &self.server_name)
            .field("client_cert", &self.client_cert.as_ref().map(|(c, _)| c))
            .field("accept_invalid_certs", &self.accept_invalid_certs)
            .finish()
    }
}

impl TlsOptions {
    /// TLS with the defaults: Mozilla's roots, the connect host as the server name, no client
    /// certificate.
    ///
    /// ```
    /// use autobatch_driver::{TlsOptions, TlsRoots};
    /// assert_eq!(TlsOptions::new().root_source(), TlsRoots::WebPki);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Which built-in roots to trust ([`TlsRoots`]); CAs added with
    /// [`ca_file`](Self::ca_file) are trusted in addition.
    ///
    /// ```
    /// use autobatch_driver::{TlsOptions, TlsRoots};
    /// let only_mine = TlsOptions::new().roots(TlsRoots::None).ca_file("ca.pem");
    /// assert_eq!(only_mine.root_source(), TlsRoots::None);
    /// ```
    pub fn roots(mut self, roots: TlsRoots) -> Self {
        self.roots = roots;
        self
    }

    /// The built-in roots chosen with [`roots`](Self::roots).
    ///
    /// ```
    /// use autobatch_driver::{TlsOptions, TlsRoots};
    /// assert_eq!(TlsOptions::new().root_source(), TlsRoots::WebPki);
    /// ```
    pub fn root_source(&self) -> TlsRoots {
        self.roots
    }

    /// Also trusts every certificate in this PEM file (read at connect; a file that cannot be
    /// read or holds no certificate fails `connect` with [`TlsErrorKind::Config`]).
    ///
    /// ```
    /// let tls = autobatch_driver::TlsOptions::new().ca_file("/etc/bunqueue/ca.pem");
    /// # let _ = tls;
    /// ```
    pub fn ca_file(mut self, path: impl AsRef<Path>) -> Self {
        self.cas.push(Pem::File(path.as_ref().to_owned()));
        self
    }

    /// Also trusts every certificate in this PEM text.
    ///
    /// ```
    /// let pem = b"-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n";
    /// let tls = autobatch_driver::TlsOptions::new().ca_pem(pem.to_vec());
    /// # let _ = tls;
    /// ```
    pub fn ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.cas.push(Pem::Inline(pem.into()));
        self
    }

    /// The name the server's certificate must be valid for, instead of the host connected to
    /// (a DNS name or an IP address). It is also sent as SNI when it is a DNS name.
    ///
    /// ```
    /// let tls = autobatch_driver::TlsOptions::new().server_name("queue.internal");
    /// assert_eq!(tls.server_name_override(), Some("queue.internal"));
    /// ```
    pub fn server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }

    /// The override set with [`server_name`](Self::server_name), if any.
    ///
    /// ```
    /// assert_eq!(autobatch_driver::TlsOptions::new().server_name_override(), None);
    /// ```
    pub fn server_name_override(&self) -> Option<&str> {
        self.server_name.as_deref()
    }

    /// Presents a client certificate: its chain (leaf first) and its private key (PKCS#8,
    /// PKCS#1 or SEC1), both PEM files read at connect.
    ///
    /// ```
    /// let tls = autobatch_driver::TlsOptions::new()
    ///     .client_cert_files("/etc/bunqueue/client.pem", "/etc/bunqueue/client.key");
    /// # let _ = tls;
    /// ```
    pub fn client_cert_files(mut self, chain: impl AsRef<Path>, key: impl AsRef<Path>) -> Self {
        self.client_cert = Some((
            Pem::File(chain.as_ref().to_owned()),
            Pem::File(key.as_ref().to_owned()),
        ));
        self
    }

    /// Presents a client certificate given as PEM text: its chain (leaf first) and its key.
    ///
    /// ```
    /// # let (chain, key) = (Vec::<u8>::new(), Vec::<u8>::new());
    /// let tls = autobatch_driver::TlsOptions::new().client_cert_pem(chain, key);
    /// # let _ = tls;
    /// ```
    pub fn client_cert_pem(mut self, chain: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        self.client_cert = Some((Pem::Inline(chain.into()), Pem::Inline(key.into())));
        self
    }

    /// **Dangerous**: accepts any certificate the server presents — unknown issuer, wrong
    /// name, expired — so the connection is encrypted but not authenticated, and anyone on
    /// the path can impersonate the server. For throwaway test set-ups only (bunqueue's TS
    /// client calls it `rejectUnauthorized: false`). Default `false`.
    ///
    /// ```
    /// let tls = autobatch_driver::TlsOptions::new().danger_accept_invalid_certs(true);
    /// assert!(tls.accepts_invalid_certs());
    /// ```
    pub fn danger_accept_invalid_certs(mut self, accept: bool) -> Self {
        self.accept_invalid_certs = accept;
        self
    }

    /// Whether [`danger_accept_invalid_certs`](Self::danger_accept_invalid_certs) is on.
    ///
    /// ```
    /// assert!(!autobatch_driver::TlsOptions::new().accepts_invalid_certs());
    /// ```
    pub fn accepts_invalid_certs(&self) -> bool {
        self.accept_invalid_certs
    }

    /// Reads the files and builds the rustls configuration and the name to verify.
    pub(crate) fn connector(&self, host: &str) -> Result<Tls, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::config(e.to_string()))?;
        let builder = if self.accept_invalid_certs {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnything(provider)))
        } else {
            builder.with_root_certificates(self.root_store()?)
        };
        let config = match &self.client_cert {
            None => builder.with_no_client_auth(),
            Some((chain, key)) => {
                let certs = CertificateDer::pem_slice_iter(&chain.bytes()?)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| {
                        TlsError::config(format!("client certificate {}: {e}", chain.describe()))
                    })?;
                if certs.is_empty() {
                    return Err(TlsError::config(format!(
                        "client certificate {}: no certificate found",
                        chain.describe()
                    )));
                }
                let key = PrivateKeyDer::from_pem_slice(&key.bytes()?)
                    .map_err(|e| TlsError::config(format!("client key {}: {e}", key.describe())))?;
                builder
                    .with_client_auth_cert(certs, key)
                    .map_err(|e| TlsError::config(format!("client certificate: {e}")))?
            }
        };
        let name = self.server_name.as_deref().unwrap_or(host);
        let name = ServerName::try_from(name.trim_matches(|c| c == '[' || c == ']').to_owned())
            .map_err(|e| TlsError::config(format!("server name {name:?}: {e}")))?;
        Ok(Tls {
            connector: TlsConnector::from(Arc::new(config)),
            name,
        })
    }

    fn root_store(&self) -> Result<RootCertStore, TlsError> {
        let mut store = RootCertStore::empty();
        match self.roots {
            TlsRoots::WebPki => store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
            TlsRoots::System => {
                let found = rustls_native_certs::load_native_certs();
                for e in &found.errors {
                    tracing::debug!(error = %e, "skipping a system root");
                }
                let (added, _) = store.add_parsable_certificates(found.certs);
                if added == 0 && self.cas.is_empty() {
                    return Err(TlsError::config(
                        "no usable root certificate in the system store".into(),
                    ));
                }
            }
            TlsRoots::None => {}
        }
        for ca in &self.cas {
            let certs = CertificateDer::pem_slice_iter(&ca.bytes()?)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| TlsError::config(format!("CA {}: {e}", ca.describe())))?;
            if certs.is_empty() {
                return Err(TlsError::config(format!(
                    "CA {}: no certificate found",
                    ca.describe()
                )));
            }
            for cert in certs {
                store
                    .add(cert)
                    .map_err(|e| TlsError::config(format!("CA {}: {e}", ca.describe())))?;
            }
        }
        if store.is_empty() {
            return Err(TlsError::config(
                "no trusted root: TlsRoots::None needs a ca_file or ca_pem".into(),
            ));
        }
        Ok(store)
    }
}

/// What a connection needs to run the handshake: built once per client.
#[derive(Clone)]
pub(crate) struct Tls {
    connector: TlsConnector,
    name: ServerName<'static>,
}

impl Tls {
    /// Runs the handshake over `socket`; a failure comes back classified.
    pub(crate) async fn handshake<S>(&self, socket: S) -> Result<Stream<S>, TlsError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        self.connector
            .connect(self.name.clone(), socket)
            .await
            .map(|s| Stream::Tls(Box::new(s)))
            .map_err(TlsError::handshake)
    }
}

/// The connection the pump talks to: the runtime's socket, plain or wrapped in TLS.
pub(crate) enum Stream<S> {
    Plain(S),
    Tls(Box<futures_rustls::client::TlsStream<S>>),
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Stream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Stream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    /// For TLS: sends close_notify, flushes it, then closes the socket.
    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_close(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_close(cx),
        }
    }
}

/// Why TLS failed, as something to match on: [`TlsError::kind`].
///
/// ```
/// # async fn demo<R: autobatch_driver::Runtime + Default>() {
/// use autobatch_driver::{Client, ClientOptions, ConnectError, TlsErrorKind, TlsOptions};
/// let opts = ClientOptions::new("127.0.0.1", 6789).tls(TlsOptions::new());
/// match Client::<R>::connect(opts).await {
///     Err(ConnectError::Tls(e)) if e.kind() == TlsErrorKind::UnknownIssuer => {
///         eprintln!("the server's CA is not trusted: add it with TlsOptions::ca_file ({e})")
///     }
///     Err(e) => eprintln!("cannot connect: {e}"),
///     Ok(client) => client.close().await,
/// }
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsErrorKind {
    /// The server's certificate is not signed by a trusted CA (unknown issuer).
    UnknownIssuer,
    /// The server's certificate is not valid for the expected name (the host, or
    /// [`TlsOptions::server_name`]).
    NameMismatch,
    /// The server's certificate has expired.
    Expired,
    /// The server's certificate is not valid yet.
    NotYetValid,
    /// The server's certificate was revoked.
    Revoked,
    /// The server's certificate was refused for another reason (bad encoding, signature,
    /// purpose…).
    BadCertificate,
    /// The server ended the handshake with an alert (for example: it requires a client
    /// certificate, or refused ours).
    RejectedByServer,
    /// The handshake failed otherwise: the peer does not speak TLS, no common protocol
    /// version or cipher suite, the connection closed mid-handshake.
    Handshake,
    /// The TLS settings are unusable: a CA, certificate or key file that cannot be read or
    /// parsed, an invalid server name. Nothing was sent.
    Config,
}

impl fmt::Display for TlsErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TlsErrorKind::UnknownIssuer => "the server's certificate is not signed by a trusted CA",
            TlsErrorKind::NameMismatch => {
                "the server's certificate is not valid for the expected server name"
            }
            TlsErrorKind::Expired => "the server's certificate has expired",
            TlsErrorKind::NotYetValid => "the server's certificate is not valid yet",
            TlsErrorKind::Revoked => "the server's certificate was revoked",
            TlsErrorKind::BadCertificate => "the server's certificate was refused",
            TlsErrorKind::RejectedByServer => "the server rejected the handshake",
            TlsErrorKind::Handshake => "the TLS handshake failed",
            TlsErrorKind::Config => "invalid TLS settings",
        })
    }
}

/// A TLS failure: its [`kind`](Self::kind) to match on, and the underlying cause (rustls's
/// error or the I/O error) as its [`source`](std::error::Error::source).
///
/// ```
/// use autobatch_driver::{ConnectError, TlsErrorKind};
/// fn advice(e: &ConnectError) -> &'static str {
///     match e {
///         ConnectError::Tls(t) if t.kind() == TlsErrorKind::NameMismatch => "set TlsOptions::server_name",
///         ConnectError::Tls(t) if t.is_certificate_problem() => "check the CA",
///         _ => "",
///     }
/// }
/// # let _ = advice;
/// ```
#[derive(Debug)]
pub struct TlsError {
    kind: TlsErrorKind,
    detail: String,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.detail)
    }
}

impl std::error::Error for TlsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as _)
    }
}

impl TlsError {
    /// What went wrong, to match on.
    ///
    /// ```
    /// # fn f(e: autobatch_driver::TlsError) {
    /// if e.kind() == autobatch_driver::TlsErrorKind::UnknownIssuer { /* … */ }
    /// # }
    /// ```
    pub fn kind(&self) -> TlsErrorKind {
        self.kind
    }

    /// Whether the server's certificate was refused (issuer, name, validity, revocation or
    /// another certificate problem). Such a failure is not transient: retrying will not help.
    ///
    /// ```
    /// # fn f(e: autobatch_driver::TlsError) {
    /// assert!(!e.is_certificate_problem() || e.to_string().contains("certificate"));
    /// # }
    /// ```
    pub fn is_certificate_problem(&self) -> bool {
        matches!(
            self.kind,
            TlsErrorKind::UnknownIssuer
                | TlsErrorKind::NameMismatch
                | TlsErrorKind::Expired
                | TlsErrorKind::NotYetValid
                | TlsErrorKind::Revoked
                | TlsErrorKind::BadCertificate
        )
    }

    fn config(detail: String) -> Self {
        TlsError {
            kind: TlsErrorKind::Config,
            detail,
            source: None,
        }
    }

    /// Classifies a handshake's I/O error: futures-rustls carries rustls's error inside.
    fn handshake(e: io::Error) -> Self {
        let kind = match e.get_ref().and_then(|r| r.downcast_ref::<rustls::Error>()) {
            Some(rustls::Error::InvalidCertificate(c)) => certificate_kind(c),
            Some(rustls::Error::AlertReceived(_)) => TlsErrorKind::RejectedByServer,
            _ => TlsErrorKind::Handshake,
        };
        TlsError {
            kind,
            detail: e.to_string(),
            source: Some(Box::new(e)),
        }
    }
}

fn certificate_kind(e: &CertificateError) -> TlsErrorKind {
    match e {
        CertificateError::UnknownIssuer => TlsErrorKind::UnknownIssuer,
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            TlsErrorKind::NameMismatch
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            TlsErrorKind::Expired
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            TlsErrorKind::NotYetValid
        }
        CertificateError::Revoked => TlsErrorKind::Revoked,
        _ => TlsErrorKind::BadCertificate,
    }
}

/// The verifier behind [`TlsOptions::danger_accept_invalid_certs`]: any certificate is
/// accepted, but the handshake signatures are still checked (the peer holds the key of the
/// certificate it sent).
#[derive(Debug)]
struct AcceptAnything(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnything {
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
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_client_key() {
        let tls = TlsOptions::new().client_cert_pem("CHAIN", "-----BEGIN PRIVATE KEY----- secret");
        let shown = format!("{tls:?}");
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("bytes of PEM"), "{shown}");
    }

    #[test]
    fn settings_are_checked_when_the_connector_is_built() {
        let kind = |t: TlsOptions| t.connector("127.0.0.1").err().map(|e| e.kind());
        assert_eq!(kind(TlsOptions::new()), None);
        assert_eq!(
            kind(TlsOptions::new().roots(TlsRoots::None)),
            Some(TlsErrorKind::Config)
        );
        assert_eq!(
            kind(TlsOptions::new().server_name("no spaces allowed")),
            Some(TlsErrorKind::Config)
        );
        assert_eq!(
            kind(TlsOptions::new().ca_file("/nonexistent/ca.pem")),
            Some(TlsErrorKind::Config)
        );
        // Bracketed IPv6 hosts verify as the address.
        assert!(TlsOptions::new().connector("[::1]").is_ok());
        assert!(TlsOptions::new()
            .danger_accept_invalid_certs(true)
            .connector("h")
            .is_ok());
    }

    #[test]
    fn handshake_errors_are_classified() {
        let io = |e: rustls::Error| io::Error::new(io::ErrorKind::InvalidData, e);
        let cases = [
            (
                rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
                TlsErrorKind::UnknownIssuer,
            ),
            (
                rustls::Error::InvalidCertificate(CertificateError::NotValidForName),
                TlsErrorKind::NameMismatch,
            ),
            (
                rustls::Error::InvalidCertificate(CertificateError::Expired),
                TlsErrorKind::Expired,
            ),
            (
                rustls::Error::InvalidCertificate(CertificateError::BadSignature),
                TlsErrorKind::BadCertificate,
            ),
            (
                rustls::Error::AlertReceived(rustls::AlertDescription::CertificateRequired),
                TlsErrorKind::RejectedByServer,
            ),
            (rustls::Error::DecryptError, TlsErrorKind::Handshake),
        ];
        for (e, kind) in cases {
            let t = TlsError::handshake(io(e));
            assert_eq!(t.kind(), kind, "{t}");
            assert!(std::error::Error::source(&t).is_some());
        }
        let eof = TlsError::handshake(io::ErrorKind::UnexpectedEof.into());
        assert_eq!(eof.kind(), TlsErrorKind::Handshake);
        assert!(!eof.is_certificate_problem());
    }
}

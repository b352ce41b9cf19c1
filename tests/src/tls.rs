//! Certificates made at test time with rcgen: a CA, a server certificate it signs for
//! `localhost` and `127.0.0.1`, and a second CA that has nothing to do with them (for the
//! "wrong CA" tests). The PEM files live in a temporary directory owned by [`TestPki`], for
//! the servers (bunqueue reads `TLS_CERT_FILE` / `TLS_KEY_FILE`) and bunqueue's TS client
//! (`tls: { caFile }`).
//!
//! ```
//! let pki = autobatch_tests::TestPki::generate();
//! assert!(pki.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
//! assert!(pki.server_cert_path().exists());
//! ```

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};

/// The names the server certificate is valid for.
pub const SERVER_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

/// A throwaway public-key infrastructure; its files are removed when it is dropped.
#[derive(Debug)]
pub struct TestPki {
    ca_pem: String,
    other_ca_pem: String,
    server_cert_pem: String,
    server_key_pem: String,
    dir: tempfile::TempDir,
}

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key")).expect("CA cert")
}

impl TestPki {
    /// Generates the CAs and the server certificate and writes them as PEM files.
    pub fn generate() -> TestPki {
        let ca = ca("autobatch test CA");
        let other = ca_other();
        let key = KeyPair::generate().expect("server key");
        let mut params =
            CertificateParams::new(SERVER_NAMES.map(String::from).to_vec()).expect("server params");
        params
            .distinguished_name
            .push(DnType::CommonName, "autobatch test server");
        let cert = params.signed_by(&key, &ca).expect("server cert");
        let pki = TestPki {
            ca_pem: ca.pem(),
            other_ca_pem: other.pem(),
            // The chain a server presents: its own certificate (the CA is the trust anchor).
            server_cert_pem: cert.pem(),
            server_key_pem: key.serialize_pem(),
            dir: tempfile::Builder::new()
                .prefix("autobatch-pki-")
                .tempdir()
                .expect("temp dir"),
        };
        for (name, pem) in [
            ("ca.pem", &pki.ca_pem),
            ("other-ca.pem", &pki.other_ca_pem),
            ("server.pem", &pki.server_cert_pem),
            ("server.key", &pki.server_key_pem),
        ] {
            std::fs::write(pki.dir.path().join(name), pem).expect("write PEM");
        }
        // A binary's PKI lives in a static and is never dropped.
        crate::exit_cleanup::remove_at_exit(pki.dir.path());
        pki
    }

    /// The CA that signed the server certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// [`ca_pem`](Self::ca_pem)'s file.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A CA unrelated to the server certificate, PEM.
    pub fn other_ca_pem(&self) -> &str {
        &self.other_ca_pem
    }

    /// [`other_ca_pem`](Self::other_ca_pem)'s file.
    pub fn other_ca_path(&self) -> PathBuf {
        self.dir.path().join("other-ca.pem")
    }

    /// The server certificate, PEM.
    pub fn server_cert_pem(&self) -> &str {
        &self.server_cert_pem
    }

    /// [`server_cert_pem`](Self::server_cert_pem)'s file.
    pub fn server_cert_path(&self) -> PathBuf {
        self.dir.path().join("server.pem")
    }

    /// The server key, PEM (PKCS#8).
    pub fn server_key_pem(&self) -> &str {
        &self.server_key_pem
    }

    /// [`server_key_pem`](Self::server_key_pem)'s file.
    pub fn server_key_path(&self) -> PathBuf {
        self.dir.path().join("server.key")
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The embedded broker's TLS setting for the server certificate.
    pub fn broker_tls(&self) -> autobatch_broker::BrokerTls {
        autobatch_broker::BrokerTls::from_pem(
            self.server_cert_pem.as_bytes(),
            self.server_key_pem.as_bytes(),
        )
        .expect("broker TLS from the test PKI")
    }

    /// A rustls server configuration for the server certificate, for hand-made test servers.
    pub fn broker_tls_server_config(&self) -> std::sync::Arc<rustls::ServerConfig> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let certs = CertificateDer::pem_slice_iter(self.server_cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .expect("server cert PEM");
        let key = PrivateKeyDer::from_pem_slice(self.server_key_pem.as_bytes()).expect("key PEM");
        let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server config");
        std::sync::Arc::new(config)
    }

    /// What a bunqueue server needs to serve TLS with the server certificate.
    pub fn server_tls(&self) -> crate::server::ServerTls {
        crate::server::ServerTls {
            cert: self.server_cert_path(),
            key: self.server_key_path(),
            ca_pem: self.ca_pem.clone().into_bytes(),
        }
    }
}

fn ca_other() -> CertifiedIssuer<'static, KeyPair> {
    ca("an unrelated CA")
}

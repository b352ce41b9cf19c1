//! The broker serves TLS: `--tls-cert`/`--tls-key` or bunqueue's `TLS_CERT_FILE`/`TLS_KEY_FILE`,
//! checked with a blocking rustls client ([`RawClient::connect_tls`]) and certificates made at
//! test time ([`TestPki`]). Misconfigurations stop the binary at start-up with the reason.

mod common;

use autobatch_broker::{BrokerConfig, BrokerTls, EmbeddedBroker};
use autobatch_core::wire::{Command, Response};
use autobatch_tests::{RawClient, TestPki};
use common::{broker_command, spawn};

fn ping_tls(addr: std::net::SocketAddr, pki: &TestPki) {
    let mut c = RawClient::connect_tls(addr, pki.ca_pem().as_bytes(), None).expect("TLS connect");
    c.call(&Command::Ping).expect("Ping over TLS");
    let n = match c.call(&Command::Count { queue: "q".into() }) {
        Ok(Response::Count(n)) => n,
        other => panic!("Count over TLS: {other:?}"),
    };
    assert_eq!(n, 0);
}

#[test]
fn flags_serve_tls() {
    let pki = TestPki::generate();
    let mut cmd = broker_command();
    cmd.args(["--port", "0", "--tls-cert"])
        .arg(pki.server_cert_path())
        .arg("--tls-key")
        .arg(pki.server_key_path());
    let broker = spawn(cmd);
    ping_tls(broker.addr, &pki);
    // A plain client gets no bunqueue reply: the server expects a TLS ClientHello.
    let mut plain = RawClient::connect(broker.addr, None).unwrap();
    assert!(plain.call(&Command::Ping).is_err());
}

#[test]
fn bunqueue_env_vars_serve_tls() {
    let pki = TestPki::generate();
    let mut cmd = broker_command();
    cmd.args(["--port", "0"])
        .env("TLS_CERT_FILE", pki.server_cert_path())
        .env("TLS_KEY_FILE", pki.server_key_path());
    let broker = spawn(cmd);
    ping_tls(broker.addr, &pki);
}

#[test]
fn half_or_broken_tls_settings_stop_the_binary_with_the_reason() {
    let pki = TestPki::generate();
    let missing = pki.dir().join("missing.pem");
    let cases: Vec<(Vec<std::ffi::OsString>, String)> = vec![
        (
            vec!["--tls-cert".into(), pki.server_cert_path().into()],
            "TLS misconfigured: --tls-cert is set but --tls-key (TLS_KEY_FILE) is missing".into(),
        ),
        (
            vec!["--tls-key".into(), pki.server_key_path().into()],
            "TLS misconfigured: --tls-key is set but --tls-cert (TLS_CERT_FILE) is missing".into(),
        ),
        (
            vec![
                "--tls-cert".into(),
                missing.clone().into(),
                "--tls-key".into(),
                pki.server_key_path().into(),
            ],
            format!("cannot read the TLS certificate {}", missing.display()),
        ),
        (
            // A key that is not the certificate's.
            vec![
                "--tls-cert".into(),
                pki.server_cert_path().into(),
                "--tls-key".into(),
                pki.ca_path().into(),
            ],
            format!("TLS with {}: bad key PEM", pki.server_cert_path().display()),
        ),
    ];
    for (args, expected) in cases {
        let out = broker_command()
            .args(["--port", "0"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(&expected), "{args:?}: {stderr}");
    }
}

#[test]
fn library_config_serves_tls() {
    let pki = TestPki::generate();
    let tls = BrokerTls::from_pem(
        pki.server_cert_pem().as_bytes(),
        pki.server_key_pem().as_bytes(),
    )
    .unwrap();
    assert_eq!(tls, tls.clone());
    assert!(format!("{tls:?}").contains("inline PEM"));
    let broker = EmbeddedBroker::start(BrokerConfig::default().tls(tls)).unwrap();
    ping_tls(broker.addr(), &pki);
    // Several TLS connections at once, each served.
    let clients: Vec<_> = (0..4)
        .map(|_| RawClient::connect_tls(broker.addr(), pki.ca_pem().as_bytes(), None).unwrap())
        .collect();
    for mut c in clients {
        assert!(c.call(&Command::Ping).is_ok());
    }
    broker.stop().unwrap();
    // A certificate without its key, and a key that does not fit.
    assert!(BrokerTls::from_pem(pki.server_cert_pem().as_bytes(), b"").is_err());
    let other = TestPki::generate();
    let err = BrokerTls::from_pem(
        pki.server_cert_pem().as_bytes(),
        other.server_key_pem().as_bytes(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("do not fit"), "{err}");
}

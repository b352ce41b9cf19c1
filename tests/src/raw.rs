//! A tiny blocking client over `std::net::TcpStream` that speaks frames with
//! `autobatch_core::wire` directly: no session, no batching, no async runtime. Scenario tests
//! use it to check what really landed on the server through a connection that shares nothing
//! with the client under test. Over TLS it uses rustls's blocking `StreamOwned`, not the
//! driver's futures-rustls path.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use autobatch_core::wire::{
    write_frame, Command, FrameDecoder, Incoming, Job, JobCounts, Response, Value,
};

/// How long a raw request may take.
pub const RAW_TIMEOUT: Duration = Duration::from_secs(10);

fn tcp(addr: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&addr, RAW_TIMEOUT)?;
    stream.set_read_timeout(Some(RAW_TIMEOUT))?;
    stream.set_write_timeout(Some(RAW_TIMEOUT))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Plain TCP or rustls over it.
#[derive(Debug)]
enum RawStream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Read for RawStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            RawStream::Plain(s) => s.read(buf),
            RawStream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for RawStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            RawStream::Plain(s) => s.write(buf),
            RawStream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            RawStream::Plain(s) => s.flush(),
            RawStream::Tls(s) => s.flush(),
        }
    }
}

/// One blocking connection, one request at a time.
#[derive(Debug)]
pub struct RawClient {
    stream: RawStream,
    frames: FrameDecoder,
    next_req: u64,
}

impl RawClient {
    /// Connects to `addr`, authenticating with `token` first when given.
    pub fn connect(addr: SocketAddr, token: Option<&str>) -> io::Result<RawClient> {
        let stream = tcp(addr)?;
        Self::start(RawStream::Plain(stream), token)
    }

    /// Connects over TLS to `addr`, trusting only the CA certificates in `ca_pem` and
    /// checking the certificate against `addr`'s IP address; then authenticates like
    /// [`connect`](Self::connect).
    pub fn connect_tls(
        addr: SocketAddr,
        ca_pem: &[u8],
        token: Option<&str>,
    ) -> io::Result<RawClient> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, ServerName};
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            roots
                .add(cert.map_err(io::Error::other)?)
                .map_err(io::Error::other)?;
        }
        let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let conn = rustls::ClientConnection::new(
            std::sync::Arc::new(config),
            ServerName::IpAddress(addr.ip().into()),
        )
        .map_err(io::Error::other)?;
        let mut stream = rustls::StreamOwned::new(conn, tcp(addr)?);
        // Handshake now, so that a certificate problem shows here and not at the first call.
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock)?;
        }
        Self::start(RawStream::Tls(Box::new(stream)), token)
    }

    fn start(stream: RawStream, token: Option<&str>) -> io::Result<RawClient> {
        let mut c = RawClient {
            stream,
            frames: FrameDecoder::new(),
            next_req: 0,
        };
        if let Some(token) = token {
            c.call(&Command::Auth {
                token: token.to_owned(),
            })
            .map_err(|e| io::Error::new(io::ErrorKind::PermissionDenied, e))?;
        }
        Ok(c)
    }

    /// Sends `cmd` and returns its whole reply map, untyped: for fields the typed [`Response`]
    /// does not keep (a job's `stacktrace`, for example).
    pub fn call_value(&mut self, cmd: &Command) -> Result<Value, String> {
        let (reply, _) = self.exchange(cmd)?;
        Ok(reply)
    }

    /// Sends a hand-written command, `cmd` with `fields`, and returns its whole reply map
    /// (`ok: false` replies included): the independent check for typed operations, which
    /// shares none of their encoding.
    pub fn command(&mut self, cmd: &str, fields: &[(&str, Value)]) -> Result<Value, String> {
        let mut entries = vec![("cmd", Value::from(cmd))];
        entries.extend(fields.iter().cloned());
        self.call_value(&Command::Other {
            cmd: cmd.into(),
            body: Value::map(entries),
        })
    }

    /// Sends `cmd` and reads its reply: `Err` carries the server's error text (or an I/O or
    /// decoding problem).
    pub fn call(&mut self, cmd: &Command) -> Result<Response, String> {
        self.exchange(cmd)?.1
    }

    /// Sends `cmd`; returns its reply map and the typed reading of it.
    #[allow(clippy::type_complexity)]
    fn exchange(&mut self, cmd: &Command) -> Result<(Value, Result<Response, String>), String> {
        self.next_req += 1;
        let req = Value::Str(format!("raw-{}", self.next_req));
        let mut out = Vec::new();
        write_frame(&mut out, |buf| cmd.encode(Some(&req), buf)).map_err(|e| e.to_string())?;
        self.stream.write_all(&out).map_err(|e| e.to_string())?;
        self.stream.flush().map_err(|e| e.to_string())?;
        let mut buf = [0u8; 16 * 1024];
        loop {
            if let Some(body) = self.frames.next_frame().map_err(|e| e.to_string())? {
                let v = Value::decode(&body).map_err(|e| e.to_string())?;
                let Incoming::Reply(reply) =
                    Incoming::from_value(v.clone()).map_err(|e| e.to_string())?
                else {
                    continue;
                };
                if reply.req_id != req {
                    continue;
                }
                let typed = reply
                    .result
                    .clone()
                    .and_then(|()| reply.response(cmd.kind()).map_err(|e| e.to_string()));
                return Ok((v, typed));
            }
            let n = self.stream.read(&mut buf).map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("connection closed".into());
            }
            self.frames.extend(&buf[..n]);
        }
    }

    /// `Count` of `queue` (waiting + prioritized + delayed).
    pub fn count(&mut self, queue: &str) -> u64 {
        match self.call(&Command::Count {
            queue: queue.into(),
        }) {
            Ok(Response::Count(n)) => n,
            other => panic!("Count {queue}: {other:?}"),
        }
    }

    /// `GetJobCounts` of `queue`.
    pub fn counts(&mut self, queue: &str) -> JobCounts {
        match self.call(&Command::GetJobCounts {
            queue: queue.into(),
        }) {
            Ok(Response::Counts(c)) => c,
            other => panic!("GetJobCounts {queue}: {other:?}"),
        }
    }

    /// `GetState` of a job id.
    pub fn state(&mut self, id: &str) -> String {
        match self.call(&Command::GetState { id: id.into() }) {
            Ok(Response::State(s)) => s,
            other => panic!("GetState {id}: {other:?}"),
        }
    }

    /// The `stacktrace` GetJob reports for a job: `None` when absent or null.
    pub fn stacktrace(&mut self, id: &str) -> Option<Vec<String>> {
        let reply = self
            .call_value(&Command::GetJob { id: id.into() })
            .unwrap_or_else(|e| panic!("GetJob {id}: {e}"));
        let lines = reply.get("job")?.get("stacktrace")?.as_array()?;
        Some(
            lines
                .iter()
                .map(|l| l.as_str().unwrap_or_default().to_owned())
                .collect(),
        )
    }

    /// `GetJob`, `None` when the server does not know the id.
    pub fn job(&mut self, id: &str) -> Option<Job> {
        match self.call(&Command::GetJob { id: id.into() }) {
            Ok(Response::Job(j)) => Some(*j),
            Err(e) if e == "Job not found" => None,
            other => panic!("GetJob {id}: {other:?}"),
        }
    }
}

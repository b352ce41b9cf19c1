//! A loopback TCP proxy that counts bunqueue frames.

use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::msgpack::{scan_command, MAX_FRAME};

/// Key under which [`FrameCounts::by_cmd`] counts client frames whose payload is not a map with
/// a string `cmd`.
pub const UNPARSED_CMD: &str = "<unparsed>";

/// Counters kept by a [`CountingProxy`] since it started or since the last
/// [`reset`](CountingProxy::reset).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FrameCounts {
    /// Complete frames sent by clients to the server.
    pub c2s_frames: u64,
    /// Complete frames sent by the server to clients.
    pub s2c_frames: u64,
    /// Client frames per `cmd` (unparsable ones under [`UNPARSED_CMD`]).
    pub by_cmd: BTreeMap<String, u64>,
    /// Length of the `jobs` array of every `PUSHB`, in arrival order (across connections).
    pub pushb_items: Vec<usize>,
    /// Length of the `ids` array of every `ACKB`, in arrival order (across connections).
    pub ackb_items: Vec<usize>,
    /// Client connections accepted.
    pub connections: u64,
    /// Payload + header bytes from clients.
    pub c2s_bytes: u64,
    /// Payload + header bytes from the server.
    pub s2c_bytes: u64,
}

impl FrameCounts {
    /// Frames seen for `cmd` (0 if none).
    pub fn cmd(&self, cmd: &str) -> u64 {
        self.by_cmd.get(cmd).copied().unwrap_or(0)
    }

    /// Total jobs carried by `PUSHB` frames.
    pub fn pushb_total(&self) -> usize {
        self.pushb_items.iter().sum()
    }

    /// Total ids carried by `ACKB` frames.
    pub fn ackb_total(&self) -> usize {
        self.ackb_items.iter().sum()
    }
}

#[derive(Debug)]
struct Shared {
    counts: Mutex<FrameCounts>,
    /// Bumped by `cut_all`; every connection task watches it.
    cut: watch::Sender<u64>,
    /// Dropping or sending on this stops the accept loop.
    shutdown: watch::Sender<bool>,
    /// While `true`, nothing the server sends is forwarded to the clients (it waits in the
    /// proxy, counted).
    hold: watch::Sender<bool>,
}

impl Shared {
    fn counts(&self) -> MutexGuard<'_, FrameCounts> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A multi-connection loopback TCP proxy in front of a bunqueue server (or any peer speaking
/// the same framing) that forwards bytes unchanged and counts frames per direction and client
/// frames per command.
///
/// It runs on its own OS thread with its own current-thread tokio runtime, so it works the same
/// from synchronous tests and from tests written on any async runtime. A frame is counted as
/// soon as its last byte arrives at the proxy and before that byte is forwarded, so once a peer
/// has received a frame, [`snapshot`](Self::snapshot) includes it.
///
/// Dropping the proxy stops accepting and closes every proxied connection.
#[derive(Debug)]
pub struct CountingProxy {
    addr: SocketAddr,
    upstream: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CountingProxy {
    /// Listen on a free port of 127.0.0.1 and forward every accepted connection to
    /// `upstream`. Panics if the loopback listener cannot be bound or the thread cannot be
    /// spawned (see [`try_start`](Self::try_start)).
    pub fn start(upstream: SocketAddr) -> CountingProxy {
        Self::try_start(upstream).expect("start CountingProxy")
    }

    /// Like [`start`](Self::start), returning errors instead of panicking.
    pub fn try_start(upstream: SocketAddr) -> io::Result<CountingProxy> {
        let std_listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let (cut, _) = watch::channel(0u64);
        let (shutdown, _) = watch::channel(false);
        let (hold, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            counts: Mutex::new(FrameCounts::default()),
            cut,
            shutdown,
            hold,
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("counting-proxy-{}", addr.port()))
            .spawn(move || {
                rt.block_on(accept_loop(std_listener, upstream, thread_shared));
                // Dropping the runtime cancels every connection task, closing its sockets.
            })?;
        Ok(CountingProxy {
            addr,
            upstream,
            shared,
            thread: Some(thread),
        })
    }

    /// The address clients should connect to (127.0.0.1).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The upstream address every connection is forwarded to.
    pub fn upstream(&self) -> SocketAddr {
        self.upstream
    }

    /// A copy of the counters.
    pub fn snapshot(&self) -> FrameCounts {
        self.shared.counts().clone()
    }

    /// Zero every counter. Frames that are partly received keep their bytes and are counted
    /// when they complete.
    pub fn reset(&self) {
        *self.shared.counts() = FrameCounts::default();
    }

    /// Abruptly close every connection proxied so far: both sockets of each are reset (RST,
    /// `SO_LINGER` 0) without forwarding anything still buffered, as when the server goes away
    /// mid-conversation. New connections are still accepted and forwarded afterwards.
    ///
    /// Returns once the cut has been signalled; the sockets close a moment later on the proxy
    /// thread.
    pub fn cut_all(&self) {
        self.shared.cut.send_modify(|g| *g += 1);
    }

    /// Stop forwarding what the server sends, on every connection, until
    /// [`release_replies`](Self::release_replies): the client sees a slow server while what
    /// it sends still passes (and is counted). Frames from the server are still counted as
    /// they arrive.
    pub fn hold_replies(&self) {
        self.shared.hold.send_replace(true);
    }

    /// Forward what the server sent meanwhile, and everything after it, again.
    pub fn release_replies(&self) {
        self.shared.hold.send_replace(false);
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        let _ = self.shared.shutdown.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn accept_loop(
    std_listener: std::net::TcpListener,
    upstream: SocketAddr,
    shared: Arc<Shared>,
) {
    let listener = match TcpListener::from_std(std_listener) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("CountingProxy: cannot register listener: {e}");
            return;
        }
    };
    let mut shutdown = shared.shutdown.subscribe();
    loop {
        tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => return,
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    shared.counts().connections += 1;
                    tokio::spawn(proxy_connection(client, upstream, shared.clone()));
                }
                Err(e) => {
                    // EMFILE and the like: back off instead of spinning.
                    eprintln!("CountingProxy: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
}

async fn proxy_connection(client: TcpStream, upstream: SocketAddr, shared: Arc<Shared>) {
    // Subscribe before connecting upstream so a cut issued meanwhile still applies.
    let mut cut = shared.cut.subscribe();
    cut.borrow_and_update();
    let server = match TcpStream::connect(upstream).await {
        Ok(s) => s,
        Err(_) => {
            // Upstream is gone: reset the client, as a dead server would.
            reset(&client);
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let cut_now = tokio::select! {
        _ = cut.changed() => true,
        _ = async {
            tokio::try_join!(
                pump(&mut cr, &mut sw, Direction::ClientToServer, &shared),
                pump(&mut sr, &mut cw, Direction::ServerToClient, &shared),
            )
        } => false,
    };
    if cut_now {
        reset(cr.as_ref());
        reset(sr.as_ref());
    }
    // Dropping the halves closes both sockets (with RST after `reset`).
}

/// Make the next close of `s` send RST instead of FIN.
fn reset(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: valid fd owned by `s` for the duration of the call; option value is a linger.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    ClientToServer,
    ServerToClient,
}

/// Forward `from` → `to` until EOF (then half-close `to`) or an error, counting frames.
/// Frames after an oversized header (> 64 MiB) are forwarded but not counted.
async fn pump(
    from: &mut OwnedReadHalf,
    to: &mut OwnedWriteHalf,
    dir: Direction,
    shared: &Shared,
) -> io::Result<()> {
    let mut chunk = vec![0u8; 64 * 1024];
    let mut assembler = FrameAssembler::default();
    // After an oversized header the stream cannot be framed any more: keep forwarding bytes
    // unchanged (the server answers such a header itself) but stop counting.
    let mut counting = true;
    let mut hold = shared.hold.subscribe();
    loop {
        let n = from.read(&mut chunk).await?;
        if n == 0 {
            to.shutdown().await?;
            return Ok(());
        }
        if counting
            && assembler
                .push(&chunk[..n], |frame| record(shared, dir, frame))
                .is_err()
        {
            counting = false;
            assembler = FrameAssembler::default();
        }
        if dir == Direction::ServerToClient {
            // A dropped sender (the proxy going away) counts as released.
            let _ = hold.wait_for(|held| !*held).await;
        }
        to.write_all(&chunk[..n]).await?;
    }
}

fn record(shared: &Shared, dir: Direction, payload: &[u8]) {
    let mut c = shared.counts();
    let bytes = payload.len() as u64 + 4;
    match dir {
        Direction::ServerToClient => {
            c.s2c_frames += 1;
            c.s2c_bytes += bytes;
        }
        Direction::ClientToServer => {
            c.c2s_frames += 1;
            c.c2s_bytes += bytes;
            let info = scan_command(payload).unwrap_or_default();
            let cmd = info.cmd.unwrap_or_else(|| UNPARSED_CMD.to_owned());
            match cmd.as_str() {
                "PUSHB" => c.pushb_items.push(info.jobs_len.unwrap_or(0)),
                "ACKB" => c.ackb_items.push(info.ids_len.unwrap_or(0)),
                _ => {}
            }
            *c.by_cmd.entry(cmd).or_insert(0) += 1;
        }
    }
}

/// Reassembles length-prefixed frames from a byte stream.
#[derive(Debug, Default)]
struct FrameAssembler {
    buf: Vec<u8>,
    start: usize,
}

impl FrameAssembler {
    /// Append `bytes` and call `on_frame` with the payload of every frame completed by them.
    /// Errors on a header above the 64 MiB limit (past it the stream cannot be framed).
    fn push(&mut self, bytes: &[u8], mut on_frame: impl FnMut(&[u8])) -> io::Result<()> {
        self.buf.extend_from_slice(bytes);
        loop {
            let avail = &self.buf[self.start..];
            if avail.len() < 4 {
                break;
            }
            let n = u32::from_be_bytes([avail[0], avail[1], avail[2], avail[3]]) as usize;
            if n > MAX_FRAME {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("frame header announces {n} bytes, above the 64 MiB limit"),
                ));
            }
            if avail.len() < 4 + n {
                break;
            }
            on_frame(&avail[4..4 + n]);
            self.start += 4 + n;
        }
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start > 64 * 1024 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembler_handles_split_and_coalesced_frames() {
        let mut a = FrameAssembler::default();
        let mut got: Vec<Vec<u8>> = Vec::new();
        let mut stream = Vec::new();
        for p in [&b"abc"[..], b"", b"hello world"] {
            stream.extend_from_slice(&(p.len() as u32).to_be_bytes());
            stream.extend_from_slice(p);
        }
        // Byte by byte.
        for b in &stream {
            a.push(std::slice::from_ref(b), |f| got.push(f.to_vec()))
                .unwrap();
        }
        // All at once.
        a.push(&stream, |f| got.push(f.to_vec())).unwrap();
        let expect: Vec<Vec<u8>> = vec![b"abc".to_vec(), vec![], b"hello world".to_vec()];
        assert_eq!(got[..3], expect[..]);
        assert_eq!(got[3..], expect[..]);
        assert!(a.buf.is_empty());
    }

    #[test]
    fn assembler_rejects_oversized_header() {
        let mut a = FrameAssembler::default();
        let hdr = ((MAX_FRAME + 1) as u32).to_be_bytes();
        assert!(a.push(&hdr, |_| {}).is_err());
    }
}

//! A TCP stream on async-io's reactor, the one smol and async-std run on, that does not read
//! a socket it has just drained until the reactor says it is readable again.
//!
//! A reader of `async_io::Async` learns that a socket holds nothing more from a read that
//! fails (`EAGAIN`), and only then waits for readability. A sequential add pays that twice: the
//! read that drains the socket after its answer, and the read right after its next write,
//! when the next answer cannot be there yet. tokio's stream pays neither: it takes a read
//! shorter than the buffer as the end of what the socket held, and waits for readiness before
//! it reads again. [`AsyncIoStream`] does the same on async-io. A socket that became readable
//! in between is not missed: waiting registers interest, and the reactor reports a socket
//! that is readable when interest is registered.

use std::io::{self, IoSlice};
use std::net::{SocketAddr, TcpStream};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use async_io::Async;
use futures_io::{AsyncRead, AsyncWrite};

/// A connected TCP stream on async-io's reactor (see the module's docs), for a
/// [`Runtime::Socket`](crate::Runtime::Socket) on smol or async-std.
///
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// use autobatch_driver::async_io_stream::AsyncIoStream;
/// let addrs: Vec<std::net::SocketAddr> = vec!["127.0.0.1:6789".parse().unwrap()];
/// let stream = AsyncIoStream::connect(addrs).await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct AsyncIoStream {
    io: Async<TcpStream>,
    /// The last read was shorter than its buffer: the socket held no more.
    drained: bool,
}

impl AsyncIoStream {
    /// Connects to the first of `addrs` that accepts, with `TCP_NODELAY` set (the driver
    /// writes whole frames and batches itself); the last address's error when none does.
    pub async fn connect(addrs: impl IntoIterator<Item = SocketAddr>) -> io::Result<Self> {
        let mut last = io::Error::new(io::ErrorKind::InvalidInput, "no address to connect to");
        for addr in addrs {
            match Async::<TcpStream>::connect(addr).await {
                Ok(io) => {
                    io.get_ref().set_nodelay(true)?;
                    return Ok(AsyncIoStream { io, drained: false });
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}

impl AsyncRead for AsyncIoStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        if self.drained {
            ready!(self.io.poll_readable(cx))?;
            self.drained = false;
        }
        let n = ready!(Pin::new(&mut self.io).poll_read(cx, buf))?;
        self.drained = n < buf.len();
        Poll::Ready(Ok(n))
    }
}

impl AsyncWrite for AsyncIoStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_close(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::TcpListener;
    use std::sync::mpsc;
    use std::thread;

    use futures_util::io::AsyncReadExt;

    use super::AsyncIoStream;

    /// A peer that writes each chunk it is given, then closes.
    fn peer() -> (
        std::net::SocketAddr,
        mpsc::Sender<&'static [u8]>,
        thread::JoinHandle<()>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (chunks, to_write) = mpsc::channel::<&'static [u8]>();
        let writer = thread::spawn(move || {
            let (mut socket, _) = listener.accept().expect("accept");
            for chunk in to_write {
                socket.write_all(chunk).expect("write");
            }
        });
        (addr, chunks, writer)
    }

    /// Reads `len` bytes through a larger buffer, so that the last read drains the socket.
    async fn read_chunk(stream: &mut AsyncIoStream, len: usize) -> Vec<u8> {
        let mut buf = [0; 64];
        let mut got = Vec::new();
        while got.len() < len {
            let n = stream.read(&mut buf).await.expect("read");
            assert!(n > 0, "the stream ended early");
            got.extend_from_slice(&buf[..n]);
        }
        got
    }

    /// A read that drained the socket waits for readability before reading again; what
    /// arrives before that wait, during it, or as the end of the stream is read all the same.
    #[test]
    fn reads_what_arrives_after_the_socket_was_drained() {
        let (addr, chunks, writer) = peer();
        async_io::block_on(async {
            let mut stream = AsyncIoStream::connect([addr]).await.expect("connect");
            chunks.send(b"first").unwrap();
            assert_eq!(read_chunk(&mut stream, 5).await, b"first");
            // Drained; the next chunk is sent before the reader waits again.
            chunks.send(b"second").unwrap();
            assert_eq!(read_chunk(&mut stream, 6).await, b"second");
            // Drained again; this one is sent while the reader waits.
            let send_later = {
                let chunks = chunks.clone();
                thread::spawn(move || chunks.send(b"third").unwrap())
            };
            assert_eq!(read_chunk(&mut stream, 5).await, b"third");
            send_later.join().unwrap();
            drop(chunks);
            writer.join().unwrap();
            let mut buf = [0; 8];
            assert_eq!(
                stream.read(&mut buf).await.expect("end"),
                0,
                "the end of the stream"
            );
        });
    }

    /// A read that fills its buffer leaves the rest to the next read, at once.
    #[test]
    fn a_full_read_reads_on() {
        let (addr, chunks, writer) = peer();
        async_io::block_on(async {
            let mut stream = AsyncIoStream::connect([addr]).await.expect("connect");
            chunks.send(b"0123456789").unwrap();
            drop(chunks);
            writer.join().unwrap();
            let mut got = Vec::new();
            let mut buf = [0; 4];
            loop {
                let n = stream.read(&mut buf).await.expect("read");
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, b"0123456789");
        });
    }

    #[test]
    fn no_address_is_an_error_not_a_hang() {
        let err = async_io::block_on(AsyncIoStream::connect([])).expect_err("no address");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    }
}

//! The loopback floor under sequential adds: one small frame per round trip.
//!
//! A Ping frame (`{cmd:"Ping", reqId:"1"}`, 20 bytes on the wire) to the same server over a
//! plain blocking `std::net::TcpStream` with `TCP_NODELAY`; one write, then read the reply
//! frame into a reused buffer; no parsing beyond the length prefix. A sequential add cannot
//! beat this: it is the same round trip with a bigger frame and real work on both ends.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use autobatch_tests::msgpack::str_map_frame;

use crate::workload::{Cell, Contender, Pattern};

/// Sequential Ping round trips on one connection.
pub struct PingFloor {
    stream: TcpStream,
    frame: Vec<u8>,
    buf: Vec<u8>,
}

impl PingFloor {
    /// Connect to `addr`.
    pub fn connect(addr: SocketAddr) -> io::Result<PingFloor> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(PingFloor {
            stream,
            frame: str_map_frame(&[("cmd", "Ping"), ("reqId", "1")]),
            buf: Vec::with_capacity(256),
        })
    }

    fn round_trip(&mut self) -> io::Result<()> {
        self.stream.write_all(&self.frame)?;
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len)?;
        let n = u32::from_be_bytes(len) as usize;
        self.buf.resize(n, 0);
        self.stream.read_exact(&mut self.buf)
    }
}

impl Contender for PingFloor {
    fn id(&self) -> String {
        "floor".into()
    }

    fn label(&self) -> String {
        "ping-pong floor (std TcpStream, one Ping per round trip)".into()
    }

    fn applies(&self, pattern: Pattern) -> bool {
        pattern == Pattern::Seq
    }

    fn run(&mut self, cell: &Cell) -> io::Result<Duration> {
        for _ in 0..cell.warmup {
            self.round_trip()?;
        }
        let t0 = Instant::now();
        for _ in 0..cell.adds {
            self.round_trip()?;
        }
        Ok(t0.elapsed())
    }
}

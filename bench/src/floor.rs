//! The loopback floors under sequential adds.
//!
//! * [`PingFloor::ping`]: a Ping frame (`{cmd:"Ping", reqId:"1"}`, 20 bytes on the wire) to the
//!   same server over a plain blocking `std::net::TcpStream` with `TCP_NODELAY`; one write, then
//!   read the reply frame into a reused buffer; no parsing beyond the length prefix. A
//!   sequential add cannot beat this: it is the same round trip with a bigger frame and real
//!   work on both ends.
//! * [`PingFloor::push`]: the same loop sending one pre-encoded PUSH of the bench's job
//!   (`{name:"bench", i:0}`). It adds the server's cost of a PUSH to the floor, so the gap
//!   between it and a client's sequential adds is that client's own overhead.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use autobatch_tests::msgpack::{str_map_frame, Writer};

use crate::workload::{Cell, Contender, Pattern};

/// A blocking connection to `addr` as the raw contenders use it (the floors, the ceiling, the
/// client floor): `TCP_NODELAY`, so a frame leaves when written, and a read timeout, so a
/// server that stops answering fails the cell instead of hanging the bench.
pub fn blocking_stream(addr: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    Ok(stream)
}

/// Sequential round trips of one pre-encoded frame on one connection.
pub struct PingFloor {
    stream: TcpStream,
    push: bool,
    frame: Vec<u8>,
    buf: Vec<u8>,
}

impl PingFloor {
    /// Ping round trips to `addr`.
    pub fn ping(addr: SocketAddr) -> io::Result<PingFloor> {
        Self::connect(addr, false)
    }

    /// PUSH round trips to `addr` (one job each, into the cell's queue).
    pub fn push(addr: SocketAddr) -> io::Result<PingFloor> {
        Self::connect(addr, true)
    }

    fn connect(addr: SocketAddr, push: bool) -> io::Result<PingFloor> {
        let stream = crate::floor::blocking_stream(addr)?;
        Ok(PingFloor {
            stream,
            push,
            frame: str_map_frame(&[("cmd", "Ping"), ("reqId", "1")]),
            buf: Vec::with_capacity(256),
        })
    }

    /// `{cmd:"PUSH", queue, data:{name:"bench", i:0}, reqId:"1"}` as a frame.
    fn push_frame(queue: &str) -> Vec<u8> {
        let mut w = Writer::new();
        w.map(4).str("cmd").str("PUSH").str("queue").str(queue);
        w.str("data")
            .map(2)
            .str("name")
            .str("bench")
            .str("i")
            .uint(0);
        w.str("reqId").str("1");
        w.to_frame()
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
        if self.push { "floor-push" } else { "floor" }.into()
    }

    fn label(&self) -> String {
        if self.push {
            "raw PUSH ping-pong (std TcpStream, one pre-encoded PUSH per round trip)".into()
        } else {
            "ping-pong floor (std TcpStream, one Ping per round trip)".into()
        }
    }

    fn applies(&self, pattern: Pattern) -> bool {
        pattern == Pattern::Seq
    }

    fn run(&mut self, cell: &Cell) -> io::Result<Duration> {
        if self.push {
            self.frame = Self::push_frame(&cell.queue);
        }
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

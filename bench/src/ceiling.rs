//! The server's own ceiling for adds: what it takes when a client costs nothing.
//!
//! A plain blocking `std::net::TcpStream` sends pre-encoded `PUSHB` frames of
//! [`JOBS_PER_FRAME`] jobs (the bench's job, `{name:"bench", data:{i:0}}`), keeping
//! [`IN_FLIGHT`] frames unanswered at once, and reads the replies without parsing them beyond
//! the length prefix. No client can add faster through one connection than this loop, so each
//! concurrent cell of a client is reported as a share of the ceiling measured right beside it.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use autobatch_tests::msgpack::Writer;

use crate::workload::{Cell, Contender, Pattern};

/// Jobs per `PUSHB`: autobatch's and bunqueue's default batch size.
pub const JOBS_PER_FRAME: usize = 50;

/// `PUSHB` frames unanswered at once: autobatch's default `max_in_flight`.
pub const IN_FLIGHT: usize = 4;

/// Pre-encoded `PUSHB` round trips, [`IN_FLIGHT`] at a time, on one connection.
pub struct Ceiling {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Ceiling {
    /// Connects to `addr`.
    pub fn connect(addr: SocketAddr) -> io::Result<Ceiling> {
        let stream = crate::floor::blocking_stream(addr)?;
        Ok(Ceiling {
            stream,
            buf: Vec::with_capacity(4096),
        })
    }

    /// `{cmd:"PUSHB", queue, jobs:[n × {name:"bench", data:{i:0}}], reqId:"1"}` as a frame.
    fn pushb_frame(queue: &str, n: usize) -> Vec<u8> {
        let mut w = Writer::new();
        w.map(4).str("cmd").str("PUSHB").str("queue").str(queue);
        w.str("jobs").array(n as u32);
        for _ in 0..n {
            w.map(2).str("name").str("bench");
            w.str("data").map(1).str("i").uint(0);
        }
        w.str("reqId").str("1");
        w.to_frame()
    }

    fn read_reply(&mut self) -> io::Result<()> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len)?;
        self.buf.resize(u32::from_be_bytes(len) as usize, 0);
        self.stream.read_exact(&mut self.buf)
    }

    /// Adds `n` jobs to `queue`: full frames, then one short frame for the rest.
    fn adds(&mut self, queue: &str, n: usize) -> io::Result<()> {
        let full = Self::pushb_frame(queue, JOBS_PER_FRAME);
        let rest = Self::pushb_frame(queue, n % JOBS_PER_FRAME);
        let frames = n / JOBS_PER_FRAME + usize::from(n % JOBS_PER_FRAME > 0);
        let (mut sent, mut answered) = (0, 0);
        while answered < frames {
            while sent < frames && sent - answered < IN_FLIGHT {
                let last_short = sent == frames - 1 && n % JOBS_PER_FRAME > 0;
                self.stream
                    .write_all(if last_short { &rest } else { &full })?;
                sent += 1;
            }
            self.read_reply()?;
            answered += 1;
        }
        Ok(())
    }
}

impl Contender for Ceiling {
    fn id(&self) -> String {
        "ceiling".into()
    }

    fn label(&self) -> String {
        format!(
            "server ceiling (std TcpStream, pre-encoded PUSHB of {JOBS_PER_FRAME}, \
             {IN_FLIGHT} in flight)"
        )
    }

    fn applies(&self, pattern: Pattern) -> bool {
        pattern != Pattern::Seq
    }

    fn run(&mut self, cell: &Cell) -> io::Result<Duration> {
        self.adds(&cell.queue, cell.warmup)?;
        let t0 = Instant::now();
        self.adds(&cell.queue, cell.adds)?;
        Ok(t0.elapsed())
    }
}

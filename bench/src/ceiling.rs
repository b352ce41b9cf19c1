//! The server's own ceiling for adds: what it takes when a client costs nothing.
//!
//! A plain blocking `std::net::TcpStream` sends pre-encoded `PUSHB` frames of
//! [`JOBS_PER_FRAME`] jobs (the bench's job, `{name:"bench", data:{i:0}}`) and reads the
//! replies without parsing them beyond the length prefix, in one of two [`Shape`]s:
//! * **pipelined** ([`CEILING`]): [`IN_FLIGHT`] frames unanswered
//!   at once, always. No client can add faster through one connection than this loop, so each
//!   concurrent cell of a client is reported as a share of the ceiling measured right beside it.
//! * **in waves** ([`CEILING_WAVES`]): the cell's own waves,
//!   each wave's frames written at once and all answered before the next wave, as `join_all`
//!   does. A wave cannot start before the last one is answered, so the server idles for a
//!   turnaround per wave whatever the client: this is the most any client reaches with the
//!   pattern.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use autobatch_tests::msgpack::Writer;

use crate::report::ids::{CEILING, CEILING_WAVES};
use crate::workload::{waves, Cell, Contender, Pattern};

/// Jobs per `PUSHB`: autobatch's and bunqueue's default batch size.
pub const JOBS_PER_FRAME: usize = 50;

/// `PUSHB` frames unanswered at once: autobatch's default `max_in_flight`.
pub const IN_FLIGHT: usize = 4;

/// How the ceiling keeps its frames out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// [`IN_FLIGHT`] frames unanswered at all times.
    Pipelined,
    /// The cell's waves: a wave's frames out at once, the next wave when all are answered.
    Waves,
}

/// Pre-encoded `PUSHB` round trips on one connection, in a [`Shape`].
pub struct Ceiling {
    shape: Shape,
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Ceiling {
    /// Connects to `addr`.
    pub fn connect(addr: SocketAddr, shape: Shape) -> io::Result<Ceiling> {
        let stream = crate::floor::blocking_stream(addr)?;
        Ok(Ceiling {
            shape,
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

    /// Adds `n` jobs to `queue` in waves of `wave` adds (pipelined: one wave of all).
    fn adds(&mut self, queue: &str, n: usize, wave: usize) -> io::Result<()> {
        match self.shape {
            Shape::Pipelined => self.frames(queue, n, IN_FLIGHT),
            Shape::Waves => {
                for w in waves(n, wave) {
                    self.frames(queue, w, usize::MAX)?;
                }
                Ok(())
            }
        }
    }

    /// Adds `n` jobs to `queue`, full frames then one short frame for the rest, at most
    /// `window` frames unanswered at once; returns when all are answered.
    fn frames(&mut self, queue: &str, n: usize, window: usize) -> io::Result<()> {
        let full = Self::pushb_frame(queue, JOBS_PER_FRAME);
        let rest = Self::pushb_frame(queue, n % JOBS_PER_FRAME);
        let frames = n / JOBS_PER_FRAME + usize::from(n % JOBS_PER_FRAME > 0);
        let (mut sent, mut answered) = (0, 0);
        let mut out = Vec::new();
        while answered < frames {
            // Every frame the window lets out, in one write.
            out.clear();
            while sent < frames && sent - answered < window {
                let last_short = sent == frames - 1 && n % JOBS_PER_FRAME > 0;
                out.extend_from_slice(if last_short { &rest } else { &full });
                sent += 1;
            }
            if !out.is_empty() {
                self.stream.write_all(&out)?;
            }
            self.read_reply()?;
            answered += 1;
        }
        Ok(())
    }
}

impl Contender for Ceiling {
    fn id(&self) -> String {
        match self.shape {
            Shape::Pipelined => CEILING.into(),
            Shape::Waves => CEILING_WAVES.into(),
        }
    }

    fn label(&self) -> String {
        match self.shape {
            Shape::Pipelined => format!(
                "server ceiling (std TcpStream, pre-encoded PUSHB of {JOBS_PER_FRAME}, \
                 {IN_FLIGHT} in flight)"
            ),
            Shape::Waves => format!(
                "wave ceiling (std TcpStream, pre-encoded PUSHB of {JOBS_PER_FRAME}, the \
                 pattern's waves one after the other)"
            ),
        }
    }

    fn applies(&self, pattern: Pattern) -> bool {
        pattern != Pattern::Seq
    }

    fn run(&mut self, cell: &Cell) -> io::Result<Duration> {
        let wave = cell.pattern.wave();
        self.adds(&cell.queue, cell.warmup, wave)?;
        let t0 = Instant::now();
        self.adds(&cell.queue, cell.adds, wave)?;
        Ok(t0.elapsed())
    }
}

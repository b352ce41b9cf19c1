//! The server's own ceiling for adds: what it takes when a client costs nothing.
//!
//! A plain blocking `std::net::TcpStream` sends pre-encoded `PUSHB` frames of
//! [`JOBS_PER_FRAME`] jobs (the bench's job, `{name:"bench", data:{i:0}}`) and reads the
//! replies without parsing them beyond the length prefix, in one of two [`Shape`]s:
//! * **pipelined** ([`CEILING`]): [`IN_FLIGHT`] frames unanswered at once, always. No client
//!   can add faster through one connection than this loop, so each concurrent cell of a client
//!   is reported as a share of the ceiling measured right beside it.
//! * **in waves** ([`CEILING_WAVES`]): the cell's own waves, each wave's frames written at once
//!   and all answered before the next wave, as `join_all` does. A wave cannot start before the
//!   last one is answered, so the server idles for a turnaround per wave whatever the client:
//!   this is the most any client reaches with the pattern.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use autobatch_tests::msgpack::Writer;

use crate::ids::{CEILING, CEILING_WAVES};
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
    /// A reply's body, read and dropped.
    buf: Vec<u8>,
    /// The frames of one write.
    out: Vec<u8>,
}

impl Ceiling {
    /// Connects to `addr`.
    pub fn connect(addr: SocketAddr, shape: Shape) -> io::Result<Ceiling> {
        let stream = crate::floor::blocking_stream(addr)?;
        Ok(Ceiling {
            shape,
            stream,
            buf: Vec::with_capacity(4096),
            out: Vec::new(),
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

    /// Adds `n` jobs to `queue` in waves of `wave` adds (pipelined: one wave of all). Every
    /// frame is encoded before the first is sent, so the loop spends nothing per wave.
    fn adds(&mut self, queue: &str, n: usize, wave: usize) -> io::Result<()> {
        let (waves, window): (Vec<usize>, usize) = match self.shape {
            Shape::Pipelined => (vec![n], IN_FLIGHT),
            Shape::Waves => (waves(n, wave).collect(), usize::MAX),
        };
        let full = Self::pushb_frame(queue, JOBS_PER_FRAME);
        // The short last frame of each wave size (at most two: the waves and the last one).
        let mut short: Vec<(usize, Vec<u8>)> = Vec::new();
        for w in &waves {
            let k = w % JOBS_PER_FRAME;
            if k > 0 && !short.iter().any(|(j, _)| *j == k) {
                short.push((k, Self::pushb_frame(queue, k)));
            }
        }
        for w in waves {
            let rest = short
                .iter()
                .find(|(k, _)| *k == w % JOBS_PER_FRAME)
                .map(|(_, f)| f.as_slice());
            self.frames(w, window, &full, rest)?;
        }
        Ok(())
    }

    /// Sends `n` jobs as `full` frames and, when `n` is not a multiple of [`JOBS_PER_FRAME`],
    /// one `rest` frame, at most `window` unanswered at once; returns when all are answered.
    fn frames(
        &mut self,
        n: usize,
        window: usize,
        full: &[u8],
        rest: Option<&[u8]>,
    ) -> io::Result<()> {
        let frames = n.div_ceil(JOBS_PER_FRAME);
        let (mut sent, mut answered) = (0, 0);
        while answered < frames {
            // Every frame the window lets out, in one write.
            self.out.clear();
            while sent < frames && sent - answered < window {
                let last = sent == frames - 1;
                self.out
                    .extend_from_slice(if last { rest.unwrap_or(full) } else { full });
                sent += 1;
            }
            if !self.out.is_empty() {
                self.stream.write_all(&self.out)?;
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

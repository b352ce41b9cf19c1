//! The client floors: what any client must spend on each add, measured in the same run.
//!
//! The published client-CPU goal is about twice "the floor": encoding the jobs, decoding the
//! replies and the socket I/O of `PUSHB` frames of 50. A floor measured once is a poor
//! yardstick, since CPU times on a shared VM swing 2–3x between runs. So the bench measures it beside
//! every concurrent cell and the target is judged as a ratio to it.
//!
//! The loop does, per job, only what a client cannot avoid, through autobatch-core's public
//! client API and nothing of autobatch's session or driver: the bench's job (name `"bench"`,
//! data `{i}` from [`Data`] through [`Value::from_serialize`]) as a [`JobSpec`]; the jobs as
//! frames encoded by [`Command::encode`], written on one blocking `std::net::TcpStream`
//! (`TCP_NODELAY`); each read's replies decoded through a [`FrameDecoder`], [`Value::decode`],
//! [`Incoming::from_value`] and [`Reply::response`] into their ids as `String`s, counted
//! against the jobs sent; then the window refilled with one write. No async runtime, no
//! batcher, no validation, no channels. Its client CPU is this thread's CPU time over the timed
//! adds.
//!
//! Two framings, each the yardstick of one mode of autobatch ([`Framing`]):
//! * **batched** ([`CLIENT_FLOOR`]): `PUSHB` frames of [`JOBS_PER_FRAME`], [`IN_FLIGHT`]
//!   unanswered at once (as [`crate::ceiling`] does): the CPU any batching client must spend
//!   per add;
//! * **unbatched** ([`CLIENT_FLOOR_PUSH`]): one `PUSH` per job, [`PUSH_WINDOW`] unanswered at
//!   once (autobatch's and the official client's pipelining window): the floor of batching off
//!   when adds come faster than their replies.
//!
//! The reply decoder is core's public, generic one (a value tree, then the ids); autobatch's
//! session reads replies through a crate-private fast path instead, so on the decode side
//! this floor is, if anything, above what the session itself pays.
//!
//! [`Reply::response`]: autobatch_core::wire::Reply::response

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use autobatch_core::wire::{
    write_frame, Command, CommandKind, FrameDecoder, Incoming, JobSpec, Reply, Response, Value,
};

use crate::autobatch::Data;
use crate::ceiling::{IN_FLIGHT, JOBS_PER_FRAME};
use crate::cpu;
use crate::ids::{CLIENT_FLOOR, CLIENT_FLOOR_PUSH};
use crate::workload::{Cell, CellCost, Contender, Pattern};

/// Bytes asked of the socket per read: several 50-id replies (about 2 KiB each) at once.
const READ_CHUNK: usize = 64 * 1024;

/// Commands unanswered at once in the unbatched floor: autobatch's default
/// `max_in_flight_commands`, and the official client's window.
pub const PUSH_WINDOW: usize = 100;

/// The smallest wave the unbatched floor runs beside: ten windows' worth of adds.
pub const UNBATCHED_FLOOR_MIN_WAVE: usize = 10 * PUSH_WINDOW;

/// How a floor frames its jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `PUSHB` frames of [`JOBS_PER_FRAME`], [`IN_FLIGHT`] unanswered at once.
    Batched,
    /// One `PUSH` per job, [`PUSH_WINDOW`] unanswered at once.
    Unbatched,
}

impl Framing {
    /// Jobs in one frame, at most.
    fn jobs_per_frame(self) -> usize {
        match self {
            Framing::Batched => JOBS_PER_FRAME,
            Framing::Unbatched => 1,
        }
    }

    /// Whether the floor runs beside cells of `pattern`.
    fn applies(self, pattern: Pattern) -> bool {
        match self {
            Framing::Batched => pattern != Pattern::Seq,
            // Its window stays full only when a wave holds several windows' worth of adds;
            // smaller waves wait for their last reply, which is the pattern's cost, not the
            // client's.
            Framing::Unbatched => pattern.wave() >= UNBATCHED_FLOOR_MIN_WAVE,
        }
    }

    /// Frames unanswered at once, at most.
    fn window(self) -> usize {
        match self {
            Framing::Batched => IN_FLIGHT,
            Framing::Unbatched => PUSH_WINDOW,
        }
    }
}

/// The minimal client: core's encoder and decoder on one blocking connection.
pub struct ClientFloor {
    framing: Framing,
    stream: TcpStream,
    frames: FrameDecoder,
    read_buf: Vec<u8>,
    out: Vec<u8>,
    next_req_id: u32,
    frames_sent: u64,
    last_frames: Option<u64>,
    cost: CellCost,
}

impl ClientFloor {
    /// Connects to `addr`.
    pub fn connect(addr: SocketAddr, framing: Framing) -> io::Result<ClientFloor> {
        let stream = crate::floor::blocking_stream(addr)?;
        Ok(ClientFloor {
            framing,
            stream,
            frames: FrameDecoder::new(),
            read_buf: vec![0; READ_CHUNK],
            out: Vec::with_capacity(4096),
            next_req_id: 1,
            frames_sent: 0,
            last_frames: None,
            cost: CellCost::default(),
        })
    }

    /// Reads once from the socket (blocking until something comes) and settles every whole
    /// reply that is then buffered against `in_flight`.
    fn settle_replies(&mut self, in_flight: &mut VecDeque<(u32, usize)>) -> io::Result<()> {
        let got = self.stream.read(&mut self.read_buf)?;
        if got == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection with replies outstanding",
            ));
        }
        self.frames.extend(&self.read_buf[..got]);
        while let Some(body) = self.frames.next_frame().map_err(invalid_data)? {
            let (req_id, ids) = decode_reply(&body, self.framing)?;
            // Replies come nearly in order: the search ends at once.
            let expected = in_flight
                .iter()
                .position(|(r, _)| *r == req_id)
                .and_then(|at| in_flight.remove(at))
                .map(|(_, jobs)| jobs)
                .ok_or_else(|| {
                    invalid_data(format!(
                        "a reply to reqId {req_id}, which is not outstanding"
                    ))
                })?;
            check_ids(&ids, expected)?;
        }
        Ok(())
    }

    /// Adds jobs `0..n` to `queue` in the floor's framing (the last frame may be short): the
    /// window filled with one write, then each read's replies settled and the window filled
    /// again, until every job is answered.
    fn adds(&mut self, queue: &str, n: usize) -> io::Result<()> {
        let (per_frame, window) = (self.framing.jobs_per_frame(), self.framing.window());
        // (reqId, jobs in that frame) of every frame not yet answered.
        let mut in_flight: VecDeque<(u32, usize)> = VecDeque::with_capacity(window);
        let mut next_job = 0;
        while next_job < n || !in_flight.is_empty() {
            self.out.clear();
            while next_job < n && in_flight.len() < window {
                let jobs = per_frame.min(n - next_job);
                let req_id = self.next_req_id;
                self.next_req_id = self.next_req_id.wrapping_add(1);
                match self.framing {
                    Framing::Batched => encode_pushb(&mut self.out, queue, next_job, jobs, req_id)?,
                    Framing::Unbatched => encode_push(&mut self.out, queue, next_job, req_id)?,
                }
                self.frames_sent += 1;
                in_flight.push_back((req_id, jobs));
                next_job += jobs;
            }
            if !self.out.is_empty() {
                self.stream.write_all(&self.out)?;
            }
            self.settle_replies(&mut in_flight)?;
        }
        Ok(())
    }
}

/// Appends the frame of a PUSHB of the bench's jobs `first..first + n` to `queue`, with reqId
/// `req_id` (a decimal string, as autobatch's session writes it), built and encoded through
/// core's public API.
pub fn encode_pushb(
    out: &mut Vec<u8>,
    queue: &str,
    first: usize,
    n: usize,
    req_id: u32,
) -> io::Result<()> {
    let jobs = (first..first + n)
        .map(bench_job)
        .collect::<io::Result<Vec<JobSpec>>>()?;
    let cmd = Command::PushB {
        queue: queue.to_owned(),
        jobs,
    };
    write_command(out, &cmd, req_id)
}

/// Appends the frame of a PUSH of the bench's job `i` to `queue`, with reqId `req_id`, built
/// and encoded through core's public API.
pub fn encode_push(out: &mut Vec<u8>, queue: &str, i: usize, req_id: u32) -> io::Result<()> {
    let cmd = Command::Push {
        queue: queue.to_owned(),
        job: bench_job(i)?,
    };
    write_command(out, &cmd, req_id)
}

/// The bench's job `i`: name `"bench"`, data `{i}` through [`Value::from_serialize`].
fn bench_job(i: usize) -> io::Result<JobSpec> {
    let data = Value::from_serialize(&Data { i }).map_err(|e| invalid_input(e.0))?;
    Ok(JobSpec::new("bench", data))
}

/// Appends `cmd` as a frame with reqId `req_id` (a decimal string).
fn write_command(out: &mut Vec<u8>, cmd: &Command, req_id: u32) -> io::Result<()> {
    let req_id = Value::from(req_id.to_string());
    write_frame(out, |buf| cmd.encode(Some(&req_id), buf)).map_err(invalid_input)
}

/// Decodes one reply frame body of the floor's framing with core's public decoder: the reqId
/// it answers and the ids of its jobs. A refusal (`ok: false`) is an error carrying the
/// server's message.
fn decode_reply(body: &[u8], framing: Framing) -> io::Result<(u32, Vec<String>)> {
    match framing {
        Framing::Batched => decode_pushb_reply(body),
        Framing::Unbatched => decode_push_reply(body),
    }
}

/// Decodes one PUSH reply frame body: the reqId it answers and the job's id, as a list of one.
pub fn decode_push_reply(body: &[u8]) -> io::Result<(u32, Vec<String>)> {
    let (req_id, reply) = decode_our_reply(body, "PUSH")?;
    match reply.response(CommandKind::Push).map_err(invalid_data)? {
        Response::Pushed(id) => Ok((req_id, vec![id])),
        other => Err(invalid_data(format!(
            "a PUSH answered with {other:?}, not an id"
        ))),
    }
}

/// Decodes one PUSHB reply frame body with core's public decoder: the reqId it answers and the
/// ids of its jobs. A refusal (`ok: false`) is an error carrying the server's message.
pub fn decode_pushb_reply(body: &[u8]) -> io::Result<(u32, Vec<String>)> {
    let (req_id, reply) = decode_our_reply(body, "PUSHB")?;
    match reply.response(CommandKind::PushB).map_err(invalid_data)? {
        Response::PushedBatch(ids) => Ok((req_id, ids)),
        other => Err(invalid_data(format!(
            "a PUSHB answered with {other:?}, not a list of ids"
        ))),
    }
}

/// A reply frame body as a [`Reply`] that succeeded, with the reqId (one of ours) it answers.
/// A refusal (`ok: false`) is an error carrying the server's message about `what`.
fn decode_our_reply(body: &[u8], what: &str) -> io::Result<(u32, Reply)> {
    let value = Value::decode(body).map_err(invalid_data)?;
    let reply = match Incoming::from_value(value).map_err(invalid_data)? {
        Incoming::Reply(reply) => reply,
        Incoming::Event(_) => {
            return Err(invalid_data(
                "an event frame on a connection that subscribed to none",
            ))
        }
    };
    if let Err(message) = &reply.result {
        return Err(io::Error::other(format!(
            "the server refused a {what}: {message}"
        )));
    }
    let req_id = reply
        .req_id
        .as_str()
        .and_then(|s| s.parse::<u32>().ok())
        .ok_or_else(|| {
            invalid_data(format!(
                "a reply whose reqId {:?} is not ours",
                reply.req_id
            ))
        })?;
    Ok((req_id, reply))
}

/// Every job of a frame must come back with an id, and no more ids than jobs.
fn check_ids(ids: &[String], jobs: usize) -> io::Result<()> {
    if ids.len() != jobs {
        return Err(invalid_data(format!(
            "a frame of {jobs} jobs answered with {} ids",
            ids.len()
        )));
    }
    Ok(())
}

fn invalid_data(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

fn invalid_input(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e)
}

impl Contender for ClientFloor {
    fn id(&self) -> String {
        match self.framing {
            Framing::Batched => CLIENT_FLOOR.into(),
            Framing::Unbatched => CLIENT_FLOOR_PUSH.into(),
        }
    }

    fn label(&self) -> String {
        match self.framing {
            Framing::Batched => format!(
                "client floor (core's encoder and decoder, std TcpStream, PUSHB of \
                 {JOBS_PER_FRAME}, {IN_FLIGHT} in flight)"
            ),
            Framing::Unbatched => format!(
                "unbatched client floor (core's encoder and decoder, std TcpStream, one PUSH \
                 per job, {PUSH_WINDOW} in flight)"
            ),
        }
    }

    fn applies(&self, pattern: Pattern) -> bool {
        self.framing.applies(pattern)
    }

    fn run(&mut self, cell: &Cell) -> io::Result<Duration> {
        self.adds(&cell.queue, cell.warmup)?;
        let frames_before = self.frames_sent;
        // One thread does everything here: its own CPU time is the whole client's.
        let cpu_before = cpu::this_thread();
        let t0 = Instant::now();
        self.adds(&cell.queue, cell.adds)?;
        let elapsed = t0.elapsed();
        self.cost = CellCost {
            client_cpu: cpu::delta(cpu_before, cpu::this_thread()),
            latency: None,
        };
        self.last_frames = Some(self.frames_sent - frames_before);
        Ok(elapsed)
    }

    fn last_frames(&self) -> Option<u64> {
        self.last_frames
    }

    fn last_cost(&self) -> CellCost {
        self.cost
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autobatch_core::wire::server::{DecodeCommand, EncodeResponse};

    fn one_frame_body(wire: &[u8]) -> Vec<u8> {
        let mut frames = FrameDecoder::new();
        frames.extend(wire);
        let body = frames.next_frame().unwrap().expect("a whole frame");
        assert!(frames.next_frame().unwrap().is_none(), "exactly one frame");
        body.to_vec()
    }

    #[test]
    fn a_frame_round_trips_through_cores_decoder_into_50_jobs() {
        let mut out = Vec::new();
        encode_pushb(&mut out, "q1", 100, JOBS_PER_FRAME, 7).unwrap();
        let body = one_frame_body(&out);
        let (req_id, cmd) = Command::decode(&Value::decode(&body).unwrap());
        assert_eq!(req_id, Value::from("7"));
        let Ok(Command::PushB { queue, jobs }) = cmd else {
            panic!("not a PUSHB: {cmd:?}");
        };
        assert_eq!(queue, "q1");
        assert_eq!(jobs.len(), 50);
        for (k, job) in jobs.iter().enumerate() {
            assert_eq!(job.name, "bench");
            let data = job.data.expanded().unwrap();
            assert_eq!(data, Value::map([("i", Value::Int(100 + k as i64))]));
        }
    }

    #[test]
    fn a_short_last_frame_holds_the_rest() {
        let mut out = Vec::new();
        encode_pushb(&mut out, "q", 0, 3, 1).unwrap();
        let (_, cmd) = Command::decode(&Value::decode(&one_frame_body(&out)).unwrap());
        let Ok(Command::PushB { jobs, .. }) = cmd else {
            panic!("not a PUSHB");
        };
        assert_eq!(jobs.len(), 3);
    }

    #[test]
    fn replies_decode_into_their_ids() {
        let ids: Vec<String> = (0..50).map(|k| format!("id-{k}")).collect();
        let mut body = Vec::new();
        Response::PushedBatch(ids.clone()).encode(&Value::from("42"), &mut body);
        let (req_id, got) = decode_pushb_reply(&body).unwrap();
        assert_eq!((req_id, got.clone()), (42, ids));
        assert!(check_ids(&got, 50).is_ok());
        assert!(check_ids(&got, 49).is_err());
    }

    #[test]
    fn a_push_frame_holds_one_job_and_its_reply_one_id() {
        let mut out = Vec::new();
        encode_push(&mut out, "q1", 7, 9).unwrap();
        let (req_id, cmd) = Command::decode(&Value::decode(&one_frame_body(&out)).unwrap());
        assert_eq!(req_id, Value::from("9"));
        let Ok(Command::Push { queue, job }) = cmd else {
            panic!("not a PUSH: {cmd:?}");
        };
        assert_eq!(queue, "q1");
        assert_eq!(job.name, "bench");
        let data = job.data.expanded().unwrap();
        assert_eq!(data, Value::map([("i", Value::Int(7))]));

        let mut body = Vec::new();
        Response::Pushed("id-1".into()).encode(&Value::from("9"), &mut body);
        let (req_id, ids) = decode_reply(&body, Framing::Unbatched).unwrap();
        assert_eq!((req_id, ids), (9, vec!["id-1".to_owned()]));
        // A PUSHB's reply is not a PUSH's, and the other way round.
        assert!(decode_reply(&body, Framing::Batched).is_err());
    }

    #[test]
    fn each_framing_runs_beside_the_cells_it_is_the_yardstick_of() {
        assert_eq!(Framing::Batched.jobs_per_frame(), JOBS_PER_FRAME);
        assert_eq!(Framing::Unbatched.jobs_per_frame(), 1);
        assert_eq!(Framing::Unbatched.window(), PUSH_WINDOW);
        assert!(!Framing::Batched.applies(Pattern::Seq));
        assert!(Framing::Batched.applies(Pattern::All(10)));
        assert!(!Framing::Unbatched.applies(Pattern::All(100)));
        assert!(Framing::Unbatched.applies(Pattern::All(UNBATCHED_FLOOR_MIN_WAVE)));
        assert_eq!(
            autobatch_core::session::SessionConfig::default().max_in_flight_commands,
            PUSH_WINDOW,
            "the unbatched floor keeps autobatch's default window"
        );
    }

    #[test]
    fn refusals_and_strangers_are_errors_not_panics() {
        let mut refused = Vec::new();
        autobatch_core::wire::server::encode_error(&Value::from("3"), "Queue full", &mut refused);
        let e = decode_pushb_reply(&refused).unwrap_err();
        assert!(e.to_string().contains("Queue full"), "{e}");

        let mut foreign = Vec::new();
        Response::PushedBatch(vec![]).encode(&Value::from("not-a-number"), &mut foreign);
        assert!(decode_pushb_reply(&foreign).is_err());

        assert!(decode_pushb_reply(&[0xc1]).is_err());
        assert!(decode_pushb_reply(&[]).is_err());
    }
}

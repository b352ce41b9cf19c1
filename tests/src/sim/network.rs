//! The simulated network: connections carrying byte chunks in order, with latency and jitter.
//!
//! A connection is two ordered byte streams. A write is cut into chunks at random points (so
//! frames arrive split and merged), and each chunk gets `latency + jitter`, but never arrives
//! before the previous chunk of the same direction: TCP keeps order. A cut kills the connection
//! at once; chunks still in flight are lost when they would have arrived, so a cut can fall in
//! the middle of a frame or of a pipelined batch of frames.

use std::collections::BTreeMap;
use std::time::Duration;

use super::Rng;

/// Identifies one connection (never reused).
pub type ConnId = u64;

/// Direction of a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Client to broker.
    ToBroker,
    /// Broker to client.
    ToClient,
}

/// Network timing drawn from the seed.
#[derive(Debug, Clone)]
pub struct NetProfile {
    /// Fixed one-way latency.
    pub latency: Duration,
    /// Up to this much more, per chunk.
    pub jitter: Duration,
    /// Probability that a write is cut at one more point.
    pub split: f64,
}

impl NetProfile {
    /// A profile drawn from `rng`.
    pub fn draw(rng: &mut Rng) -> NetProfile {
        NetProfile {
            latency: rng.us(0, 3_000),
            jitter: rng.us(0, 4_000),
            split: *rng.pick(&[0.0, 0.1, 0.3, 0.6]),
        }
    }
}

#[derive(Debug)]
struct Conn {
    client: usize,
    alive: bool,
    last_to_broker: Duration,
    last_to_client: Duration,
    /// Chunks in flight per direction (sent, not yet delivered or lost).
    in_flight: [u32; 2],
}

/// All connections.
#[derive(Debug)]
pub struct Net {
    profile: NetProfile,
    conns: BTreeMap<ConnId, Conn>,
    next: ConnId,
}

impl Net {
    /// An empty network.
    pub fn new(profile: NetProfile) -> Net {
        Net {
            profile,
            conns: BTreeMap::new(),
            next: 1,
        }
    }

    /// Opens a connection for `client`.
    pub fn open(&mut self, client: usize) -> ConnId {
        let id = self.next;
        self.next += 1;
        self.conns.insert(
            id,
            Conn {
                client,
                alive: true,
                last_to_broker: Duration::ZERO,
                last_to_client: Duration::ZERO,
                in_flight: [0, 0],
            },
        );
        id
    }

    /// Whether `conn` is up.
    pub fn alive(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_some_and(|c| c.alive)
    }

    /// The client that owns `conn`.
    pub fn client(&self, conn: ConnId) -> Option<usize> {
        self.conns.get(&conn).map(|c| c.client)
    }

    /// Kills `conn`; returns whether it was alive, and whether chunks were still in flight
    /// (the cut falls inside a write).
    pub fn cut(&mut self, conn: ConnId) -> (bool, bool) {
        match self.conns.get_mut(&conn) {
            Some(c) if c.alive => {
                c.alive = false;
                (true, c.in_flight[0] + c.in_flight[1] > 0)
            }
            _ => (false, false),
        }
    }

    /// Live connections.
    pub fn live(&self) -> Vec<ConnId> {
        self.conns
            .iter()
            .filter(|(_, c)| c.alive)
            .map(|(id, _)| *id)
            .collect()
    }

    /// Plans the delivery of `bytes` written at `now`: chunks with their arrival times.
    pub fn send(
        &mut self,
        rng: &mut Rng,
        now: Duration,
        conn: ConnId,
        dir: Dir,
        bytes: &[u8],
    ) -> Vec<(Duration, Vec<u8>)> {
        let p = self.profile.clone();
        let Some(c) = self.conns.get_mut(&conn) else {
            return Vec::new();
        };
        if !c.alive || bytes.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            let n = if rest.len() > 1 && rng.chance(p.split) {
                rng.range(1, rest.len() as u64 - 1) as usize
            } else {
                rest.len()
            };
            let jitter = Duration::from_nanos(rng.below(p.jitter.as_nanos() as u64 + 1));
            let last = match dir {
                Dir::ToBroker => &mut c.last_to_broker,
                Dir::ToClient => &mut c.last_to_client,
            };
            let at = (now + p.latency + jitter).max(*last);
            *last = at;
            out.push((at, rest[..n].to_vec()));
            rest = &rest[n..];
        }
        c.in_flight[dir as usize] += out.len() as u32;
        out
    }

    /// A chunk reached its end; returns whether it is delivered (the connection is up).
    pub fn arrive(&mut self, conn: ConnId, dir: Dir) -> bool {
        match self.conns.get_mut(&conn) {
            Some(c) => {
                c.in_flight[dir as usize] = c.in_flight[dir as usize].saturating_sub(1);
                c.alive
            }
            None => false,
        }
    }
}

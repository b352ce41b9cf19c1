//! The four patterns of bunqueue's auto-batching write-up (sequential `await`, waves of 10, 50
//! and 100 concurrent adds) and the interface every measured client implements.

use std::io;
use std::time::Duration;

/// How adds are issued: the rows of the throughput table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// `for i in 0..n { queue.add(..).await }`.
    Seq,
    /// Waves of `w` concurrent adds: `join_all(w adds).await`, then the next wave.
    All(usize),
}

impl Pattern {
    /// Short name, as bench.ts spells it: `seq`, `all10`, ...
    pub fn name(self) -> String {
        match self {
            Pattern::Seq => "seq".into(),
            Pattern::All(w) => format!("all{w}"),
        }
    }

    /// Row label for the table.
    pub fn label(self) -> String {
        match self {
            Pattern::Seq => "Sequential `await`".into(),
            Pattern::All(w) => format!("join_all({w})"),
        }
    }

    /// Adds in flight at once: 1 for `Seq`.
    pub fn wave(self) -> usize {
        match self {
            Pattern::Seq => 1,
            Pattern::All(w) => w.max(1),
        }
    }

    /// Parse `seq` or `allN`.
    pub fn parse(s: &str) -> Option<Pattern> {
        if s == "seq" {
            return Some(Pattern::Seq);
        }
        let w: usize = s.strip_prefix("all")?.parse().ok()?;
        (w > 0).then_some(Pattern::All(w))
    }
}

/// One measurement: `adds` timed adds in `pattern` to a fresh queue, after `warmup` untimed ones.
#[derive(Debug, Clone)]
pub struct Cell {
    /// The pattern.
    pub pattern: Pattern,
    /// Timed adds.
    pub adds: usize,
    /// Untimed adds before the timed ones, same queue, same pattern.
    pub warmup: usize,
    /// Queue name, unique to this cell.
    pub queue: String,
}

/// The sizes of the waves that make up `n` adds in waves of `w` (the last one may be short).
pub fn waves(n: usize, w: usize) -> impl Iterator<Item = usize> {
    let w = w.max(1);
    (0..n.div_ceil(w)).map(move |i| w.min(n - i * w))
}

/// Something that can be measured: a client in one configuration (or the ping-pong floor).
pub trait Contender {
    /// Stable id for JSON and lookups, e.g. `autobatch-on`.
    fn id(&self) -> String;
    /// Human label, e.g. `autobatch (tokio), batching on`.
    fn label(&self) -> String;
    /// Whether this contender runs `pattern` at all (the floor only runs `Seq`).
    fn applies(&self, pattern: Pattern) -> bool {
        let _ = pattern;
        true
    }
    /// Run one cell and return the time the timed adds took.
    fn run(&mut self, cell: &Cell) -> io::Result<Duration>;
    /// Frames written during the last cell's timed adds, if the client counts them.
    fn last_frames(&self) -> Option<u64> {
        None
    }
    /// What the last cell's timed adds cost the client, where it can tell.
    fn last_cost(&self) -> CellCost {
        CellCost::default()
    }
}

/// A contender under another id: `id:tag`, for the same client on a further runtime.
pub struct Tagged {
    inner: Box<dyn Contender>,
    tag: String,
}

impl Tagged {
    /// `inner`, reported as `{inner.id()}:{tag}`.
    pub fn new(inner: Box<dyn Contender>, tag: &str) -> Tagged {
        Tagged {
            inner,
            tag: tag.to_owned(),
        }
    }
}

impl Contender for Tagged {
    fn id(&self) -> String {
        format!("{}:{}", self.inner.id(), self.tag)
    }
    fn label(&self) -> String {
        self.inner.label()
    }
    fn applies(&self, pattern: Pattern) -> bool {
        self.inner.applies(pattern)
    }
    fn run(&mut self, cell: &Cell) -> io::Result<Duration> {
        self.inner.run(cell)
    }
    fn last_frames(&self) -> Option<u64> {
        self.inner.last_frames()
    }
    fn last_cost(&self) -> CellCost {
        self.inner.last_cost()
    }
}

/// What a cell's timed adds cost a client, beside their wall time.
#[derive(Debug, Clone, Copy, Default)]
pub struct CellCost {
    /// CPU time the client spent on the timed adds (every thread it ran on).
    pub client_cpu: Option<Duration>,
    /// How long the adds took, each from the moment it was issued to its reply.
    pub latency: Option<Latency>,
}

/// Percentiles of the add latencies of one cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Latency {
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
}

impl Latency {
    /// The percentiles of `samples` (nearest rank); `None` for no samples. Sorts in place.
    pub fn of(samples: &mut [Duration]) -> Option<Latency> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let rank = |q: f64| {
            samples[((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1]
        };
        Some(Latency {
            p50: rank(0.50),
            p99: rank(0.99),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in [Pattern::Seq, Pattern::All(10), Pattern::All(100)] {
            assert_eq!(Pattern::parse(&p.name()), Some(p));
        }
        assert_eq!(Pattern::parse("all0"), None);
        assert_eq!(Pattern::parse("nope"), None);
    }

    #[test]
    fn latency_percentiles_are_nearest_rank() {
        let mut v: Vec<Duration> = (1..=200).rev().map(Duration::from_micros).collect();
        let l = Latency::of(&mut v).unwrap();
        assert_eq!(l.p50, Duration::from_micros(100));
        assert_eq!(l.p99, Duration::from_micros(198));
        let mut one = [Duration::from_micros(7)];
        assert_eq!(Latency::of(&mut one).unwrap().p99, Duration::from_micros(7));
        assert!(Latency::of(&mut []).is_none());
    }

    #[test]
    fn waves_cover_n_exactly() {
        assert_eq!(waves(250, 100).collect::<Vec<_>>(), vec![100, 100, 50]);
        assert_eq!(waves(3, 1).collect::<Vec<_>>(), vec![1, 1, 1]);
        assert_eq!(waves(0, 10).count(), 0);
    }
}

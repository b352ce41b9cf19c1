//! The scenario a seed stands for: configurations, the workload plan and the fault mix.

use std::time::Duration;

use autobatch_core::batch::{BatchConfig, OverflowPolicy};
use autobatch_core::session::{ReconnectConfig, SessionConfig, WorkerConfig};

use super::broker::BrokerFaults;
use super::network::NetProfile;
use super::Rng;

/// One thing the workload does at a planned time.
#[derive(Debug, Clone)]
pub enum Action {
    /// `n` adds in one go (concurrent callers), some with custom ids, some durable, some
    /// cancelled straight away.
    Burst {
        /// Queue.
        queue: String,
        /// How many.
        n: u32,
        /// Probability of a custom id per add.
        custom: f64,
        /// Probability of `durable` per add.
        durable: f64,
        /// Probability of cancelling an add right after making it.
        cancel: f64,
        /// Padding bytes in each job's data.
        pad: usize,
    },
    /// One add, then the next when it resolves (sequential code).
    Chain {
        /// Queue.
        queue: String,
        /// Adds left.
        left: u32,
        /// With custom ids.
        custom: bool,
    },
    /// `add_bulk` of `n` jobs.
    Bulk {
        /// Queue.
        queue: String,
        /// How many.
        n: u32,
        /// With custom ids.
        custom: bool,
    },
    /// A lookup (GetState of a known job, or Count).
    Lookup,
    /// An add the session must refuse before sending (bad option).
    Invalid {
        /// Queue.
        queue: String,
    },
    /// Cancel the most recent still-unresolved add of this client.
    CancelLast,
}

/// Fault classes and their intensities for one seed.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Connection cuts per second of workload (per client).
    pub cut_rate: f64,
    /// Probability that a connection attempt fails.
    pub connect_fail: f64,
    /// Broker error and dropped-reply faults.
    pub broker: BrokerFaults,
    /// Broker restarts during the workload.
    pub restarts: u32,
    /// Restart keeps persisted jobs.
    pub persistent: bool,
    /// Client stalls (its clock jumps) per second of workload.
    pub stall_rate: f64,
    /// Hostile frames from the server per second of workload (part 2).
    pub hostile_rate: f64,
    /// Frames near the size limit: one burst of eight valid adds of 8.4 MB each, which one
    /// PUSHB could not hold (64 MiB). Not a fault of the transport: every one of these adds must
    /// succeed or fail for a transport reason, and no frame written may exceed the limit.
    pub huge_adds: bool,
}

impl Faults {
    /// No fault at all: every add must succeed (or fail only by local policy).
    pub fn is_lossless(&self) -> bool {
        self.cut_rate == 0.0
            && self.connect_fail == 0.0
            && self.broker.internal_error == 0.0
            && self.broker.drop_reply == 0.0
            && self.broker.invalid_item == 0.0
            && self.broker.commit_fail == 0.0
            && self.restarts == 0
            && self.stall_rate == 0.0
            && self.hostile_rate == 0.0
    }
}

/// Everything one seed decides.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The seed.
    pub seed: u64,
    /// Producer sessions.
    pub producers: Vec<SessionConfig>,
    /// A worker session (it pulls `queues[0]`).
    pub worker: Option<SessionConfig>,
    /// Queue names used.
    pub queues: Vec<String>,
    /// Auth token of the broker (and the clients).
    pub token: Option<String>,
    /// Faults.
    pub faults: Faults,
    /// Network timing.
    pub net: NetProfile,
    /// Broker handling time, max (replies are reordered by it).
    pub max_processing: Duration,
    /// Worker processing time, max.
    pub max_work: Duration,
    /// Probability a finished job is failed rather than completed.
    pub fail_jobs: f64,
    /// When `close` is called.
    pub close_at: Duration,
    /// The plan: `(when, client, action)`.
    pub plan: Vec<(Duration, usize, Action)>,
    /// Longest stall.
    pub max_stall: Duration,
    /// Longest broker downtime.
    pub max_down: Duration,
}

/// Data padding of the "frames near the size limit" burst: 8.4 MB, valid alone (under bunqueue's
/// 10 MB), eight of them past one 64 MiB frame.
pub const HUGE_PAD: usize = 8_400_000;

const TRICKY_IDS: [&str; 8] = ["7", "17", "117", "r", "or", "error", "1", "11"];

/// A custom id: mostly unique, sometimes shared or suffix-tricky on purpose.
pub fn custom_id(rng: &mut Rng, client: usize, n: u64) -> String {
    match rng.below(20) {
        0 => rng.pick(&TRICKY_IDS).to_string(),
        1 => format!("shared-{}", rng.below(5)),
        _ => format!("c{client}-{n}"),
    }
}

fn batch_config(rng: &mut Rng) -> BatchConfig {
    let max_batch = *rng.pick(&[1, 2, 3, 5, 8, 16, 50, 64]) as usize;
    let overflow = *rng.pick(&[
        OverflowPolicy::Backpressure,
        OverflowPolicy::Backpressure,
        OverflowPolicy::Reject,
        OverflowPolicy::DropOldest,
    ]);
    // Setters in the order the fields were drawn before: the same seed, the same scenario.
    BatchConfig::new()
        .max_batch(max_batch)
        .linger(*rng.pick(&[
            Duration::ZERO,
            Duration::from_millis(1),
            Duration::from_millis(5),
            Duration::from_millis(20),
            Duration::from_millis(60),
        ]))
        .max_in_flight(rng.range(1, 6) as usize)
        .max_pending_items(max_batch * rng.range(1, 8) as usize)
        .max_pending_bytes(if rng.chance(0.2) {
            rng.range(300, 4_000) as usize
        } else {
            64 * 1024 * 1024
        })
        .overflow(overflow)
}

fn session_config(rng: &mut Rng, token: &Option<String>, lossless: bool) -> SessionConfig {
    let base = rng.ms(5, 150);
    let config = match token {
        Some(t) => SessionConfig::default().with_token(t.clone()),
        None => SessionConfig::default(),
    };
    // Setters in the order the fields were drawn before: the same seed, the same scenario.
    config
        .batching(if rng.chance(0.1) {
            None
        } else {
            Some(batch_config(rng))
        })
        .max_in_flight_commands(*rng.pick(&[1, 2, 3, 5, 10, 100]))
        .command_timeout(if lossless {
            rng.ms(2_000, 5_000)
        } else {
            rng.ms(150, 3_000)
        })
        .max_command_timeouts(rng.range(1, 4) as u32)
        .ping_interval(if rng.chance(0.5) {
            None
        } else {
            Some(rng.ms(50, 2_000))
        })
        .reconnect(
            ReconnectConfig::default()
                .base(base)
                .max(base + rng.ms(0, 1_000))
                .jitter(*rng.pick(&[0.0, 0.3, 1.0])),
        )
        .seed(rng.next_u64())
        .worker(None)
}

impl Scenario {
    /// The scenario of `seed`.
    pub fn from_seed(seed: u64) -> Scenario {
        let mut rng = Rng::new(seed);
        let token = rng.chance(0.3).then(|| "s3cret".to_owned());
        let lossless = rng.chance(0.2);
        let mut faults = Faults::default();
        if !lossless {
            // Each class on or off, with its own intensity.
            if rng.chance(0.6) {
                faults.cut_rate = *rng.pick(&[0.5, 2.0, 6.0]);
            }
            if rng.chance(0.3) {
                faults.connect_fail = *rng.pick(&[0.1, 0.5]);
            }
            if rng.chance(0.5) {
                faults.broker.internal_error = *rng.pick(&[0.01, 0.05, 0.2]);
            }
            if rng.chance(0.4) {
                faults.broker.drop_reply = *rng.pick(&[0.01, 0.05, 0.2]);
            }
            if rng.chance(0.4) {
                faults.broker.invalid_item = *rng.pick(&[0.02, 0.1, 0.3]);
            }
            if rng.chance(0.3) {
                faults.restarts = rng.range(1, 2) as u32;
                faults.persistent = rng.chance(0.5);
            }
            if rng.chance(0.3) {
                faults.stall_rate = *rng.pick(&[0.5, 2.0]);
            }
            // Drawn from its own stream, so adding this class did not move older seeds.
            let mut hostile = Rng::new(seed ^ 0x4057_11e5);
            if hostile.chance(0.25) {
                faults.hostile_rate = *hostile.pick(&[0.5, 2.0, 5.0]);
            }
            // Likewise: a store whose durable commits fail.
            let mut store = Rng::new(seed ^ 0x5707_e0ff);
            if store.chance(0.2) {
                faults.broker.commit_fail = *store.pick(&[0.1, 0.5, 1.0]);
            }
        }
        let nq = rng.range(1, 3);
        let queues: Vec<String> = (0..nq).map(|i| format!("q{i}")).collect();
        let np = rng.range(1, 2) as usize;
        let producers: Vec<SessionConfig> = (0..np)
            .map(|_| session_config(&mut rng, &token, lossless))
            .collect();
        let worker = rng.chance(0.6).then(|| {
            let mut c = session_config(&mut rng, &token, lossless);
            let mut w = WorkerConfig::new(queues[0].clone());
            w.concurrency = *rng.pick(&[1, 2, 5, 16]);
            w.poll_timeout = Duration::from_millis(*rng.pick(&[0, 50, 500, 2_000]));
            w.acks = batch_config(&mut rng);
            // The ACK batcher must never refuse or drop a completion.
            w.acks.overflow = OverflowPolicy::Backpressure;
            w.acks.max_pending_bytes = 64 * 1024 * 1024;
            w.ack_retries = rng.range(0, 3) as u32;
            w.ack_retry_base = rng.ms(10, 200);
            c.worker = Some(w);
            c
        });
        let close_at = rng.ms(500, 3_000);
        let mut plan = Vec::new();
        let nactions = rng.range(3, 25);
        for _ in 0..nactions {
            let at = Duration::from_millis(rng.below(close_at.as_millis() as u64));
            let client = rng.below(np as u64) as usize;
            let queue = rng.pick(&queues).clone();
            let action = match rng.below(16) {
                0..=6 => Action::Burst {
                    queue,
                    n: *rng.pick(&[1, 2, 5, 20, 60]),
                    custom: *rng.pick(&[0.0, 0.0, 0.3, 1.0]),
                    durable: *rng.pick(&[0.0, 0.0, 0.1]),
                    cancel: *rng.pick(&[0.0, 0.0, 0.1]),
                    pad: *rng.pick(&[0, 0, 10, 200]),
                },
                7..=9 => Action::Chain {
                    queue,
                    left: rng.range(1, 20) as u32,
                    custom: rng.chance(0.3),
                },
                10..=11 => Action::Bulk {
                    queue,
                    n: rng.range(1, 30) as u32,
                    custom: rng.chance(0.3),
                },
                12..=13 => Action::Lookup,
                14 => Action::Invalid { queue },
                _ => Action::CancelLast,
            };
            plan.push((at, client, action));
        }
        // Drawn from its own stream, so adding this class did not move older seeds.
        let mut huge = Rng::new(seed ^ 0x6f7e_2511);
        if huge.chance(0.003) {
            faults.huge_adds = true;
            let at = Duration::from_millis(huge.below(close_at.as_millis() as u64));
            let client = huge.below(np as u64) as usize;
            plan.push((
                at,
                client,
                Action::Burst {
                    queue: queues[0].clone(),
                    n: 8,
                    custom: 0.0,
                    durable: 0.0,
                    cancel: 0.0,
                    pad: HUGE_PAD,
                },
            ));
        }
        plan.sort_by_key(|(at, c, _)| (*at, *c));
        Scenario {
            seed,
            producers,
            worker,
            queues,
            token,
            net: NetProfile::draw(&mut rng),
            max_processing: rng.ms(0, 30),
            max_work: rng.ms(0, 60),
            fail_jobs: *rng.pick(&[0.0, 0.1, 0.3]),
            faults,
            close_at,
            plan,
            max_stall: Duration::from_millis(1_500),
            max_down: Duration::from_millis(800),
        }
    }

    /// All session configurations: producers first, then the worker.
    pub fn sessions(&self) -> Vec<SessionConfig> {
        let mut v = self.producers.clone();
        v.extend(self.worker.clone());
        v
    }

    /// The longest an operation of a session configured by `c` may take, parked time aside:
    /// linger, then up to a command timeout waiting to be written and one more once written,
    /// a reconnect backoff, a stall and a broker downtime, plus slack for the network.
    pub fn op_bound(&self, c: &SessionConfig) -> Duration {
        let linger = c.batching.as_ref().map_or(Duration::ZERO, |b| b.linger);
        let reconnect = c.reconnect.max + c.reconnect.max.mul_f64(c.reconnect.jitter);
        linger
            + 2 * c.command_timeout
            + reconnect
            + self.max_stall
            + self.max_down
            + Duration::from_millis(100)
    }
}

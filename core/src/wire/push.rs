//! How PUSH and PUSHB carry a job, in the client role: the map of each command, the fields of
//! each job in it (its name and data, the options declared in [`options`](super::options),
//! the custom id and the remove flags, which the two commands send differently), and what that
//! takes in bytes, so that the producer caps a PUSHB by bytes before building it.

use super::codec::Encoder;
use super::options::{write_schedule, write_tail, Discard, Measure, Sink};
use super::size::map_header_len;
use super::JobSpec;

/// Which of the two add commands a job is written into: they name the custom id and send the
/// remove flags differently.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Flavor {
    Push,
    PushB,
}

impl Flavor {
    pub(super) fn custom_id_key(self) -> &'static str {
        match self {
            Flavor::Push => "jobId",
            Flavor::PushB => "customId",
        }
    }

    /// How many remove flags a job with these settings writes.
    pub(super) fn remove_flag_count(
        self,
        on_complete: Option<bool>,
        on_fail: Option<bool>,
    ) -> usize {
        match self {
            Flavor::PushB => 2,
            Flavor::Push => usize::from(on_complete.is_some()) + usize::from(on_fail.is_some()),
        }
    }
}

/// One job as PUSH and PUSHB write it: a [`JobSpec`] as it stands, or an
/// [`EncodedJob`](super::EncodedJob) whose fields were written when it was added.
pub(super) trait PushItem {
    /// How many fields it writes into `flavor`'s command.
    fn field_count(&self, flavor: Flavor) -> usize;
    /// Writes those fields (no map header); returns how many.
    fn write_fields<S: Sink>(&self, s: &mut S, flavor: Flavor) -> usize;
}

impl PushItem for JobSpec {
    fn field_count(&self, flavor: Flavor) -> usize {
        // Counted by the writers themselves, writing nothing: a map's header comes before its
        // fields. Only jobs not yet encoded take this way; an add's job counts its fields as
        // it is encoded.
        write_job_fields(&mut Discard, self, flavor)
    }

    fn write_fields<S: Sink>(&self, s: &mut S, flavor: Flavor) -> usize {
        write_job_fields(s, self, flavor)
    }
}

/// Writes every field of `job` into `flavor`'s command; returns how many.
fn write_job_fields<S: Sink>(s: &mut S, job: &JobSpec, flavor: Flavor) -> usize {
    let mut n = write_job_head(s, job);
    if let Some(id) = &job.opts.job_id {
        s.kv_str(flavor.custom_id_key(), id);
        n += 1;
    }
    n += write_tail(s, &job.opts);
    n + write_remove_flags(
        s,
        job.opts.remove_on_complete,
        job.opts.remove_on_fail,
        flavor,
    )
}

/// The `name` and `data` keys of every job, pre-encoded (fixstr).
pub(super) const NAME_KEY: &[u8] = b"\xa4name";
pub(super) const DATA_KEY: &[u8] = b"\xa4data";

/// The fields a job writes before its custom id, which PUSH and PUSHB name differently: name,
/// data and the scheduling options. Returns how many.
#[inline]
pub(super) fn write_job_head<S: Sink>(s: &mut S, job: &JobSpec) -> usize {
    s.raw(NAME_KEY)
        .str(&job.name)
        .raw(DATA_KEY)
        .value(&job.data);
    2 + write_schedule(s, &job.opts)
}

/// A PUSH map: `cmd`, `queue`, the job's fields and `extra` more the caller writes after.
pub(super) fn write_push(e: &mut Encoder<'_>, queue: &str, job: &impl PushItem, extra: usize) {
    e.map(2 + job.field_count(Flavor::Push) + extra)
        .kv_str("cmd", "PUSH")
        .kv_str("queue", queue);
    job.write_fields(e, Flavor::Push);
}

/// A PUSHB map: `cmd`, `queue`, the jobs and `extra` more the caller writes after.
pub(super) fn write_pushb<J: PushItem>(e: &mut Encoder<'_>, queue: &str, jobs: &[J], extra: usize) {
    e.map(3 + extra)
        .kv_str("cmd", "PUSHB")
        .kv_str("queue", queue)
        .str("jobs")
        .array(jobs.len());
    for job in jobs {
        e.map(job.field_count(Flavor::PushB));
        job.write_fields(e, Flavor::PushB);
    }
}

/// The remove flags, last: PUSHB items always carry both (as the official client sends
/// them), PUSH only those that are set.
/// `removeOnComplete: false, removeOnFail: false` as MessagePack: two fixstr keys, each
/// followed by its boolean (at the two offsets below).
const PUSHB_REMOVE_FLAGS: &[u8; 32] = b"\xb0removeOnComplete\xc2\xacremoveOnFail\xc2";
const REMOVE_ON_COMPLETE_AT: usize = 17;
const REMOVE_ON_FAIL_AT: usize = 31;

fn bool_byte(b: bool) -> u8 {
    if b {
        0xc3
    } else {
        0xc2
    }
}

/// Writes the remove flags `flavor` sends; returns how many.
#[inline]
pub(super) fn write_remove_flags<S: Sink>(
    s: &mut S,
    on_complete: Option<bool>,
    on_fail: Option<bool>,
    flavor: Flavor,
) -> usize {
    match flavor {
        Flavor::PushB => {
            // Every PUSHB item carries both: written as one pre-encoded run, its two
            // booleans filled in, rather than as four values.
            let mut flags = *PUSHB_REMOVE_FLAGS;
            flags[REMOVE_ON_COMPLETE_AT] = bool_byte(on_complete.unwrap_or(false));
            flags[REMOVE_ON_FAIL_AT] = bool_byte(on_fail.unwrap_or(false));
            s.raw(&flags);
            2
        }
        Flavor::Push => {
            if let Some(r) = on_complete {
                s.str("removeOnComplete").bool(r);
            }
            if let Some(r) = on_fail {
                s.str("removeOnFail").bool(r);
            }
            usize::from(on_complete.is_some()) + usize::from(on_fail.is_some())
        }
    }
}

// Here rather than in `job`, beside the writers it measures, so that `job` does not depend
// on `push`.
impl JobSpec {
    /// The exact number of bytes this job takes as one item of a PUSHB: its name, its data and
    /// every option the encoder writes, keys and MessagePack headers included.
    ///
    /// The producer declares this to its batcher, whose batches are capped at
    /// [`pushb_jobs_budget`], so a PUSHB of valid jobs never
    /// exceeds the frame limit. Computed without encoding: the encoder's own writers, into a
    /// measure of the bytes they would write.
    ///
    /// ```
    /// use autobatch_core::wire::{Command, JobOptions, JobSpec, Value};
    /// let job = JobSpec::new("email", Value::from("a@b")).with_options(JobOptions::new().priority(3));
    /// let mut alone = Vec::new();
    /// Command::PushB { queue: "q".into(), jobs: vec![] }.encode(None, &mut alone);
    /// let mut with_job = Vec::new();
    /// Command::PushB { queue: "q".into(), jobs: vec![job.clone()] }.encode(None, &mut with_job);
    /// assert_eq!(with_job.len() - alone.len(), job.pushb_len());
    /// ```
    pub fn pushb_len(&self) -> usize {
        pushb_item_len(self)
    }
}

/// The exact length of `job` (an [`EncodedJob`](super::EncodedJob) or a [`JobSpec`]) as one
/// PUSHB item, its map header included.
pub(super) fn pushb_item_len(job: &impl PushItem) -> usize {
    let mut m = Measure::default();
    let fields = job.write_fields(&mut m, Flavor::PushB);
    map_header_len(fields) + m.0
}

/// Longest reqId the bound of [`pushb_jobs_budget`] allows for: a string of 10 characters, as
/// long as any `u32` in decimal (the session's reqIds).
const REQ_ID_MAX_CHARS: usize = 10;

/// An upper bound on everything a PUSHB to `queue` holds besides its items: the map header,
/// `cmd`, `queue`, `reqId` (a string of up to 10 characters) and the `jobs` array header.
fn pushb_envelope_max_len(queue: &str) -> usize {
    use super::size::{array_header_len, map_header_len, str_len};
    map_header_len(4)
        + str_len("cmd".len())
        + str_len("PUSHB".len())
        + str_len("queue".len())
        + str_len(queue.len())
        + str_len("reqId".len())
        + str_len(REQ_ID_MAX_CHARS)
        + str_len("jobs".len())
        + array_header_len(usize::MAX)
}

/// The most bytes of items — the sum of [`JobSpec::pushb_len`] over its jobs — that one PUSHB
/// to `queue` may carry and still fit in one frame ([`MAX_FRAME`](super::MAX_FRAME)), whatever
/// the number of jobs and for any reqId of up to 10 characters.
///
/// The producer caps every batch at this, so a batch of valid jobs never overflows a frame.
///
/// ```
/// use autobatch_core::wire::{pushb_jobs_budget, write_frame, Command, JobSpec, Value, MAX_FRAME};
/// let budget = pushb_jobs_budget("emails");
/// assert!(budget < MAX_FRAME && budget > MAX_FRAME - 100);
/// // Jobs that fill the budget exactly still make a frame.
/// let job = |n| JobSpec::new("j", Value::Str("x".repeat(n)));
/// let first = job(budget / 2);
/// let rest = budget - first.pushb_len();
/// let second = job(rest - (job(rest).pushb_len() - rest));
/// assert_eq!(first.pushb_len() + second.pushb_len(), budget);
/// let cmd = Command::PushB { queue: "emails".into(), jobs: vec![first, second] };
/// let mut out = Vec::new();
/// write_frame(&mut out, |b| cmd.encode(Some(&Value::from("4294967295")), b)).unwrap();
/// ```
pub fn pushb_jobs_budget(queue: &str) -> usize {
    super::MAX_FRAME.saturating_sub(pushb_envelope_max_len(queue))
}

/// The byte sizes the producer relies on: a job's computed PUSHB length is its real encoding,
/// and the budget leaves room for any envelope.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{pushb_jobs_budget, Dedup, MAX_FRAME};
    use crate::wire::{Backoff, ChildFailure, Command, Debounce, JobOptions, Repeat, Value};
    use proptest::prelude::*;

    /// Lengths on both sides of every header boundary (fix, 8, 16, 32 bits).
    fn len() -> impl Strategy<Value = usize> {
        prop_oneof![
            4 => 0usize..40,
            1 => 250usize..260,
            1 => 65_530usize..65_540,
            1 => Just(70_000usize),
        ]
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "[a-z0-9é€😀]{0,40}",
            1 => len().prop_map(|n| "y".repeat(n)),
        ]
    }

    fn int() -> impl Strategy<Value = i64> {
        prop_oneof![
            3 => -300i64..70_000,
            1 => any::<i64>(),
            1 => prop::sample::select(vec![
                i64::MIN, -(1 << 31) - 1, -(1 << 31), -32769, -32768, -129, -128, -33, -32, -1,
                0, 127, 128, 255, 256, 65535, 65536, (1 << 32) - 1, 1 << 32, i64::MAX,
            ]),
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Nil),
            Just(Value::Undefined),
            any::<bool>().prop_map(Value::Bool),
            int().prop_map(Value::Int),
            any::<f64>().prop_map(Value::F64),
            any::<i64>().prop_map(|i| Value::BigInt(i as i128)),
            text().prop_map(Value::Str),
            len().prop_map(|n| Value::Bin(vec![7; n])),
            (any::<i8>(), len()).prop_map(|(t, n)| Value::Ext(t, vec![1; n])),
        ];
        leaf.prop_recursive(3, 64, 20, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..20).prop_map(Value::Array),
                prop::collection::vec((text().prop_map(Value::Str), inner), 0..20)
                    .prop_map(Value::Map),
            ]
        })
    }

    fn span(i: i64) -> std::time::Duration {
        std::time::Duration::from_millis(i.unsigned_abs())
    }

    fn backoff() -> impl Strategy<Value = Backoff> {
        prop_oneof![
            int().prop_map(|i| Backoff::Delay(span(i))),
            int().prop_map(|i| Backoff::Fixed(span(i))),
            int().prop_map(|i| Backoff::Exponential(span(i))),
        ]
    }

    fn options() -> impl Strategy<Value = JobOptions> {
        let ints = prop::array::uniform7(prop::option::of(int()));
        let texts = prop::array::uniform3(prop::option::of(text()));
        let bools = prop::array::uniform7(prop::option::of(any::<bool>()));
        let lists = (
            prop::collection::vec(text(), 0..20),
            prop::collection::vec(text(), 0..20),
        );
        (
            ints,
            texts,
            bools,
            lists,
            prop::option::of(backoff()),
            prop::option::of(any::<f64>()),
            extras(),
        )
            .prop_map(|(i, t, b, (tags, deps), backoff, timestamp, x)| {
                x.merge(JobOptions {
                    priority: i[0],
                    delay: i[1].map(span),
                    attempts: i[2],
                    backoff,
                    timeout: i[3].map(span),
                    ttl: i[4].map(span),
                    job_id: t[0].clone(),
                    unique_key: t[1].clone(),
                    dedup: (i[5].is_some() || b[5].is_some() || b[6].is_some()).then_some(Dedup {
                        ttl: i[5].map(span),
                        extend: b[5],
                        replace: b[6],
                    }),
                    depends_on: deps,
                    tags,
                    group_id: t[2].clone(),
                    lifo: b[0],
                    stall_timeout: i[6].map(span),
                    timestamp,
                    remove_on_complete: b[1],
                    remove_on_fail: b[2],
                    durable: b[3],
                    ..JobOptions::default()
                })
            })
    }

    /// The rarely used options, each present or not.
    #[derive(Debug, Clone)]
    struct Extras(JobOptions);

    impl Extras {
        fn merge(self, o: JobOptions) -> JobOptions {
            JobOptions {
                group_max_size: self.0.group_max_size,
                repeat: self.0.repeat,
                debounce: self.0.debounce,
                parent_id: self.0.parent_id,
                children_ids: self.0.children_ids,
                stack_trace_limit: self.0.stack_trace_limit,
                keep_logs: self.0.keep_logs,
                size_limit: self.0.size_limit,
                on_failure: self.0.on_failure,
                ..o
            }
        }
    }

    fn extras() -> impl Strategy<Value = Extras> {
        let ints = prop::array::uniform8(prop::option::of(int()));
        let texts = prop::array::uniform4(prop::option::of(text()));
        let bools = prop::array::uniform5(prop::option::of(any::<bool>()));
        (ints, texts, bools, any::<bool>()).prop_map(|(i, t, b, with_repeat)| {
            let repeat = with_repeat.then(|| Repeat {
                every: i[4].map(span),
                pattern: t[2].clone(),
                limit: i[5],
                start_date: i[6],
                tz: t[3].clone(),
                immediately: b[4],
                offset: i[7],
                ..Repeat::default()
            });
            Extras(JobOptions {
                group_max_size: i[0],
                repeat,
                debounce: t[0].clone().map(|id| Debounce {
                    id,
                    ttl: i[1].map(span),
                }),
                parent_id: t[1].clone(),
                children_ids: t[1].iter().cloned().collect(),
                stack_trace_limit: i[1],
                keep_logs: i[2],
                size_limit: i[3],
                on_failure: ChildFailure::ALL
                    .into_iter()
                    .zip(b)
                    .filter_map(|(p, on)| (on == Some(true)).then_some(p))
                    .collect(),
                ..JobOptions::default()
            })
        })
    }

    fn job() -> impl Strategy<Value = JobSpec> {
        (text(), value(), options()).prop_map(|(name, data, opts)| JobSpec { name, data, opts })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Whatever the jobs, the queue and the reqId: the computed item lengths plus the
        /// envelope bound are never below the real PUSHB, and each item length is exact.
        #[test]
        fn pushb_len_is_the_real_encoded_size(
            jobs in prop::collection::vec(job(), 0..6),
            queue in "[a-zA-Z0-9_.:-]{1,256}",
            req in any::<u32>(),
        ) {
            let req = Value::Str(req.to_string());
            let encode = |jobs: Vec<JobSpec>| {
                let mut out = Vec::new();
                Command::PushB { queue: queue.clone(), jobs }.encode(Some(&req), &mut out);
                out.len()
            };
            let items: usize = jobs.iter().map(JobSpec::pushb_len).sum();
            let real = encode(jobs.clone());
            // The bound the producer relies on.
            prop_assert!(real <= MAX_FRAME - pushb_jobs_budget(&queue) + items,
                "PUSHB of {} bytes above its bound", real);
            // Exactness, item by item: adding a job adds exactly its length (plus the growth of
            // the array header, which the envelope bound covers).
            let header = |n: usize| crate::wire::size::array_header_len(n);
            let empty = encode(Vec::new()) - header(0);
            prop_assert_eq!(real, empty + header(jobs.len()) + items);
        }

        /// The one walk validation makes gives the same verdict as the three it replaced
        /// (BigInt search, size estimate, exact count) and the data's exact length, so the
        /// session sizes a validated job without walking its data again.
        #[test]
        fn validation_sizes_the_data_it_checks(
            data in prop_oneof![
                value(),
                value().prop_map(|v| Value::Raw(crate::wire::RawValue::from_bytes(&v.to_bytes()).unwrap())),
                value().prop_map(|v| Value::map([("raw", Value::Raw(crate::wire::RawValue::from_bytes(&v.to_bytes()).unwrap())), ("v", v)])),
            ],
        ) {
            use crate::wire::job::approx_value_size;
            use crate::wire::{MAX_DATA_JSON_LEN, ValidationError};
            let old = if data.contains_bigint() {
                Err(ValidationError::new("data", "Job data must be JSON serializable"))
            } else if approx_value_size(&data) * 6 > MAX_DATA_JSON_LEN
                && data.json_len(MAX_DATA_JSON_LEN) > MAX_DATA_JSON_LEN
            {
                Err(ValidationError::new("data", "Job data too large (max 10MB)"))
            } else {
                Ok(())
            };
            let job = JobSpec::new("j", data.clone());
            let sized = job.validate_sized();
            prop_assert_eq!(sized.clone().map(|_| ()), old);
            if let Ok(len) = sized {
                prop_assert_eq!(len, crate::wire::size::value_len(&data));
            }
        }

        /// The session's encoders of encoded jobs write exactly what the commands write for
        /// the jobs they came from, and size them as the jobs do.
        #[test]
        fn encoded_jobs_write_what_the_commands_write(
            jobs in prop::collection::vec(job(), 0..4),
            queue in "[a-z]{1,12}",
            req in 0u32..,
        ) {
            use crate::wire::encoded::{encode_push, encode_pushb};
            use crate::wire::EncodedJob;
            let req = req.to_string();
            let via = |cmd: Command| {
                let mut out = Vec::new();
                cmd.encode(Some(&Value::from(req.as_str())), &mut out);
                out
            };
            // Only valid jobs can be encoded; the rest are refused as validation refuses them.
            let mut valid = Vec::new();
            let mut encoded = Vec::new();
            for job in jobs {
                match EncodedJob::new(&job) {
                    Ok(e) => {
                        prop_assert_eq!(e.pushb_len(), job.pushb_len());
                        prop_assert_eq!(e.has_custom_id(), job.opts.job_id.is_some());
                        prop_assert_eq!(e.is_durable(), job.opts.is_durable());
                        valid.push(job);
                        encoded.push(e);
                    }
                    Err(e) => prop_assert_eq!(Err(e), job.validate()),
                }
            }
            let mut out = Vec::new();
            encode_pushb(&queue, &encoded, &req, &mut out);
            prop_assert_eq!(&out, &via(Command::PushB { queue: queue.clone(), jobs: valid.clone() }));
            for (job, e) in valid.into_iter().zip(&encoded) {
                out.clear();
                encode_push(&queue, e, &req, &mut out);
                prop_assert_eq!(&out, &via(Command::Push { queue: queue.clone(), job }));
            }
        }
    }

    #[test]
    fn pre_encoded_keys_are_what_the_encoder_writes() {
        for (complete, fail) in [(false, false), (true, false), (false, true), (true, true)] {
            let (mut fast, mut slow) = (Vec::new(), Vec::new());
            write_remove_flags(
                &mut Encoder::new(&mut fast),
                Some(complete),
                Some(fail),
                Flavor::PushB,
            );
            Encoder::new(&mut slow)
                .str("removeOnComplete")
                .bool(complete)
                .str("removeOnFail")
                .bool(fail);
            assert_eq!(
                fast, slow,
                "removeOnComplete {complete}, removeOnFail {fail}"
            );
        }
        let mut none = Vec::new();
        write_remove_flags(&mut Encoder::new(&mut none), None, None, Flavor::PushB);
        assert_eq!(
            &none[..],
            &PUSHB_REMOVE_FLAGS[..],
            "unset flags are sent as false"
        );
        for (key, text) in [(NAME_KEY, "name"), (DATA_KEY, "data")] {
            let mut slow = Vec::new();
            Encoder::new(&mut slow).str(text);
            assert_eq!(key, &slow[..]);
        }
    }

    #[test]
    fn budget_leaves_room_for_the_longest_queue_and_req_id() {
        let queue = "q".repeat(256);
        let budget = pushb_jobs_budget(&queue);
        // One job filling the budget exactly, sent with the longest reqId: it fits.
        let mut data_len = budget - JobSpec::new("j", Value::Str(String::new())).pushb_len();
        let job = loop {
            let job = JobSpec::new("j", Value::Str("x".repeat(data_len)));
            if job.pushb_len() <= budget {
                break job;
            }
            data_len -= 1;
        };
        assert!(budget - job.pushb_len() < 4, "job fills the budget");
        let mut out = Vec::new();
        Command::PushB {
            queue,
            jobs: vec![job],
        }
        .encode(Some(&Value::from("4294967295")), &mut out);
        assert!(out.len() <= MAX_FRAME, "{} > {MAX_FRAME}", out.len());
    }
}

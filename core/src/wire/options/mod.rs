//! Every option a job carries on the wire, declared once.
//!
//! The table at the end of this file ([`job_options!`]) lists each [`JobOptions`] field with
//! its wire key and its [`Codec`], in the order a job's map carries them. Everything else
//! comes from it:
//!
//! * what PUSH and PUSHB write ([`write_schedule`], [`write_tail`]), each writer returning how
//!   many fields it wrote, so that the map header and [`EncodedJob`](super::EncodedJob)'s
//!   field count need no second list;
//! * what that costs in bytes: the same writers into a [`Measure`] instead of an
//!   [`Encoder`], so a size can never disagree with the bytes;
//! * how the server role reads a job's map back ([`read_options`]).
//!
//! Adding an option is a field on [`JobOptions`] with its setter and one row in the table
//! (docs/protocol/README.md walks through one). The custom id and the remove flags are not
//! rows: PUSH and PUSHB name and send them differently (see `push.rs`).

mod codec;
mod codecs;
mod sink;

use super::{JobOptions, ValidationError, Value};
use codec::Codec;
pub(super) use codecs::{opt_bool, opt_int, raw_backoff, string_list};
use codecs::{
    BackoffCodec, ChildFailureFlags, Count, DebounceCodec, DedupCodec, Flag, GroupId, IdText, Int,
    List, Millis, Priority, RepeatCodec, Text, Timestamp,
};
pub(super) use sink::{Discard, Measure, Sink};

/// Declares the table: each row `field: "key" => Codec`, in wire order, in three groups. The
/// schedule goes before the custom id, the rest after it; the rare ones, which most jobs
/// leave out, are checked together so that a job without any pays one test.
macro_rules! job_options {
    (
        schedule { $($s:ident: $sk:literal => $sc:ty,)* }
        common { $($c:ident: $ck:literal => $cc:ty,)* }
        rare { $($r:ident: $rk:literal => $rc:ty,)* }
    ) => {
        /// Writes the options a job's map carries before its custom id; returns how many
        /// fields.
        pub(super) fn write_schedule<S: Sink>(s: &mut S, o: &JobOptions) -> usize {
            0 $(+ if <$sc>::is_set(&o.$s) { <$sc>::write(s, $sk, &o.$s) } else { 0 })*
        }

        /// Writes the options a job's map carries after its custom id and before its
        /// remove flags; returns how many fields.
        pub(super) fn write_tail<S: Sink>(s: &mut S, o: &JobOptions) -> usize {
            let n = 0 $(+ if <$cc>::is_set(&o.$c) { <$cc>::write(s, $ck, &o.$c) } else { 0 })*;
            if !($(<$rc>::is_set(&o.$r))||*) {
                return n;
            }
            n $(+ if <$rc>::is_set(&o.$r) { <$rc>::write(s, $rk, &o.$r) } else { 0 })*
        }

        /// Reads every option of the table from a job's map, in the server role: by
        /// [`Codec::READ_RANK`], then in the table's order, so the first error is the one
        /// bunqueue reports first.
        pub(super) fn read_options(item: &Value) -> Result<JobOptions, ValidationError> {
            let mut o = JobOptions::default();
            for rank in (0..=3u8).rev() {
                $(if <$sc>::READ_RANK == rank {
                    o.$s = <$sc>::read(item, $sk, &o)?;
                })*
                $(if <$cc>::READ_RANK == rank {
                    o.$c = <$cc>::read(item, $ck, &o)?;
                })*
                $(if <$rc>::READ_RANK == rank {
                    o.$r = <$rc>::read(item, $rk, &o)?;
                })*
            }
            Ok(o)
        }

        /// Every key of the table, in wire order.
        #[cfg(test)]
        pub(super) const KEYS: &[&str] = &[$($sk,)* $($ck,)* $($rk,)*];
    };
}

job_options! {
    schedule {
        priority: "priority" => Priority,
        delay: "delay" => Millis,
        attempts: "maxAttempts" => Int,
        backoff: "backoff" => BackoffCodec,
        timeout: "timeout" => Millis,
        ttl: "ttl" => Millis,
    }
    common {
        tags: "tags" => List,
        group_id: "groupId" => GroupId,
        depends_on: "dependsOn" => List,
        unique_key: "uniqueKey" => Text,
        dedup: "dedup" => DedupCodec,
        lifo: "lifo" => Flag,
        stall_timeout: "stallTimeout" => Millis,
        timestamp: "timestamp" => Timestamp,
        durable: "durable" => Flag,
    }
    rare {
        group_max_size: "groupMaxSize" => Count,
        stack_trace_limit: "stackTraceLimit" => Count,
        keep_logs: "keepLogs" => Count,
        size_limit: "sizeLimit" => Count,
        on_failure: "failParentOnFailure" => ChildFailureFlags,
        debounce: "debounceId" => DebounceCodec,
        repeat: "repeat" => RepeatCodec,
        parent_id: "parentId" => IdText,
        children_ids: "childrenIds" => List,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::KEYS;
    use crate::wire::{
        Backoff, ChildFailure, Command, Debounce, Dedup, JobOptions, JobSpec, Repeat, Value,
    };

    /// A job with every option of the table set (two of the failure policies).
    fn every_option() -> JobOptions {
        JobOptions::new()
            .priority(3)
            .delay(Duration::from_secs(1))
            .attempts(2)
            .backoff(Backoff::Fixed(Duration::from_millis(50)))
            .timeout(Duration::from_secs(5))
            .ttl(Duration::from_secs(60))
            .tags(["a", "b"])
            .group_id("g")
            .depends_on(["d1"])
            .unique_key("u")
            .dedup(Dedup::new().ttl(Duration::from_secs(9)))
            .lifo(true)
            .stall_timeout(Duration::from_secs(7))
            .timestamp(1.7e12)
            .durable(false)
            .group_max_size(4)
            .stack_trace_limit(5)
            .keep_logs(6)
            .size_limit(7)
            .on_failure(ChildFailure::FailParent)
            .on_failure(ChildFailure::ContinueParent)
            .debounce(Debounce::new("k").ttl(Duration::from_secs(2)))
            .repeat(Repeat::every(Duration::from_secs(30)))
            .parent_id("p")
            .children_ids(["c1", "c2"])
    }

    /// Unset options are not sent at all: not as empty lists, nor as defaults.
    #[test]
    fn a_job_without_options_writes_none() {
        let mut out = Vec::new();
        let n = super::write_schedule(&mut crate::wire::Encoder::new(&mut out), &JobOptions::new())
            + super::write_tail(&mut crate::wire::Encoder::new(&mut out), &JobOptions::new());
        assert_eq!((n, out.len()), (0, 0));
    }

    #[test]
    fn the_table_names_each_key_once() {
        let mut keys = KEYS.to_vec();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), KEYS.len(), "{KEYS:?}");
    }

    /// A PUSH carries the table's keys in the table's order, after the name and the data,
    /// and the server role reads every option back as it was.
    #[test]
    fn every_option_is_written_in_table_order_and_read_back() {
        let job = JobSpec::new("n", Value::Int(1)).with_options(every_option());
        let cmd = Command::Push {
            queue: "q".into(),
            job: job.clone(),
        };
        let mut out = Vec::new();
        cmd.encode(None, &mut out);
        let v = Value::decode(&out).unwrap();
        let Value::Map(entries) = &v else {
            panic!("a map: {v:?}")
        };
        let written: Vec<&str> = entries.iter().filter_map(|(k, _)| k.as_str()).collect();
        let mut expected = vec!["cmd", "queue", "name", "data"];
        expected.extend(KEYS);
        // The debounce's window travels beside its id; of the failure policies, the two set
        // follow `failParentOnFailure`, in bunqueue's order.
        let at = expected.iter().position(|k| *k == "debounceId").unwrap();
        expected.insert(at + 1, "debounceTtl");
        let at = expected
            .iter()
            .position(|k| *k == "failParentOnFailure")
            .unwrap();
        expected.insert(at + 1, "continueParentOnFailure");
        assert_eq!(written, expected);
        // Read by the table alone: bunqueue would refuse a repeat job with a parent, which
        // is beside the point here.
        assert_eq!(super::read_options(&v), Ok(job.opts));
    }
}

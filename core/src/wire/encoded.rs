//! A job encoded once, when it is added ([`EncodedJob`]): what the session keeps of each add
//! until it is answered.
//!
//! A [`JobSpec`] is hundreds of bytes however small the job (most of it [`JobOptions`] left
//! unset), so an add that kept it until its PUSHB is encoded would hold, with a thousand adds out
//! at once, most of a megabyte, the size of a core's L2 cache, walked again to encode and to drop
//! each job. Encoded when it is added, a small job is a few dozen bytes in one allocation, and a
//! PUSHB is its items copied side by side (both sizes: `cargo test -p autobatch-core --lib
//! wire::encoded`).
//!

use std::fmt;

use serde::Serialize;

use super::codec::Encoder;
use super::encode_serde::BytesSerializer;
use super::job::check_job_name;
use super::options::{write_schedule, write_tail, Sink};
use super::push::{
    pushb_item_len, write_job_head, write_push, write_pushb, write_remove_flags, Flavor, PushItem,
    DATA_KEY, NAME_KEY,
};
use super::{JobOptions, JobSpec, ValidationError, Value, MAX_DATA_JSON_LEN};

/// A validated job in its wire form, ready to be written into a PUSH or a PUSHB.
///
/// Made from a [`JobSpec`] with [`new`](Self::new), which checks the job as
/// [`JobSpec::validate`] does. The two commands differ in how they name the custom id (`jobId`
/// in PUSH, `customId` in PUSHB) and in which remove flags they send, so those stay apart from
/// the bytes; everything else is written once. A PUSH or PUSHB holding it is byte for byte the
/// one its `JobSpec` would make.
///
/// ```
/// use autobatch_core::wire::{EncodedJob, JobOptions, JobSpec, Value};
/// let job = JobSpec::new("email", Value::from("a@b"))
///     .with_options(JobOptions::new().job_id("welcome-a@b").durable(true));
/// let encoded = EncodedJob::new(&job).unwrap();
/// assert!(encoded.has_custom_id());
/// assert!(encoded.is_durable());
/// assert_eq!(encoded.pushb_len(), job.pushb_len());
/// // Bad input is refused here, with the field named.
/// let bad = JobSpec::new("", Value::Nil);
/// assert_eq!(EncodedJob::new(&bad).unwrap_err().field, "name");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct EncodedJob {
    /// The job's key/value pairs (no map header) but for the remove flags, with the value of
    /// its custom id, if any, at `id` (its key is written in between, per command). A `Vec`
    /// with the room it was given, not shrunk to a box: that would cost a reallocation per add
    /// for at most a few dozen bytes.
    bytes: Vec<u8>,
    /// Where the custom id's encoded value lies in `bytes`.
    id: Option<(u32, u32)>,
    /// How many pairs `bytes` holds, the custom id not counted.
    pairs: u32,
    remove_on_complete: Option<bool>,
    remove_on_fail: Option<bool>,
    durable: bool,
}

impl EncodedJob {
    /// Checks `job` as the server will (see [`JobSpec::validate`]) and encodes it.
    ///
    /// # Errors
    ///
    /// The [`ValidationError`] naming the first thing wrong with the job.
    pub fn new(job: &JobSpec) -> Result<EncodedJob, ValidationError> {
        let data_len = job.validate_sized()?;
        // Room for the name, the data and a few options: one allocation for most jobs.
        let mut bytes = Vec::with_capacity(job.name.len() + data_len + 32);
        let pairs = write_job_head(&mut Encoder::new(&mut bytes), job);
        Ok(Self::finish(bytes, pairs, &job.opts))
    }

    /// Checks and encodes a job from its parts, serializing `data` straight into the job's
    /// bytes: no [`Value`] tree is built. The bytes, and the verdict on bad input, are those of
    /// [`new`](Self::new) on the job whose data is [`Value::from_serialize`]`(data)`.
    ///
    /// # Errors
    ///
    /// The [`ValidationError`] naming the first thing wrong: the name, data that cannot be
    /// serialized or is too large, an option.
    ///
    /// ```
    /// use autobatch_core::wire::{EncodedJob, JobOptions, JobSpec, Value};
    /// #[derive(serde::Serialize)]
    /// struct Email<'a> { to: &'a str, attempt: u32 }
    /// let data = Email { to: "a@b", attempt: 1 };
    /// let opts = JobOptions::new().priority(3);
    /// let direct = EncodedJob::from_serialize("email", &data, &opts).unwrap();
    /// let spec = JobSpec::new("email", Value::from_serialize(&data).unwrap()).with_options(opts);
    /// assert_eq!(direct, EncodedJob::new(&spec).unwrap());
    /// ```
    pub fn from_serialize<T: Serialize + ?Sized>(
        name: &str,
        data: &T,
        opts: &JobOptions,
    ) -> Result<EncodedJob, ValidationError> {
        check_job_name(name)?;
        let mut bytes = Vec::with_capacity(name.len() + 64);
        Encoder::new(&mut bytes)
            .raw(NAME_KEY)
            .str(name)
            .raw(DATA_KEY);
        let data_start = bytes.len();
        data.serialize(BytesSerializer::new(&mut bytes))
            .map_err(|e| {
                ValidationError::new("data", format!("Job data must be serializable: {}", e.0))
            })?;
        // Data that might be over the 10 MiB JSON limit (a MessagePack byte is at most about
        // six JSON characters) is judged by the tree path, which counts the JSON exactly. It
        // is over a megabyte: the tree costs little beside it.
        if (bytes.len() - data_start) * 6 > MAX_DATA_JSON_LEN {
            let data = Value::from_serialize(data).map_err(|e| {
                ValidationError::new("data", format!("Job data must be serializable: {}", e.0))
            })?;
            return EncodedJob::new(&JobSpec {
                name: name.to_owned(),
                data,
                opts: opts.clone(),
            });
        }
        opts.validate()?;
        let pairs = 2 + write_schedule(&mut Encoder::new(&mut bytes), opts);
        Ok(Self::finish(bytes, pairs, opts))
    }

    /// Writes the custom id and the options after it into `bytes`, which hold the job's name,
    /// data and scheduling options: `pairs` fields.
    fn finish(mut bytes: Vec<u8>, pairs: usize, o: &JobOptions) -> EncodedJob {
        let id = o.job_id.as_deref().map(|id| {
            let start = bytes.len();
            Encoder::new(&mut bytes).str(id);
            (start, bytes.len())
        });
        let pairs = pairs + write_tail(&mut Encoder::new(&mut bytes), o);
        // A job that validated is far below 4 GiB (its data at most 10 MiB of JSON, the rest
        // bounded): these cannot overflow, but saturate rather than wrap should they.
        let narrow = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        EncodedJob {
            bytes,
            id: id.map(|(s, e)| (narrow(s), narrow(e))),
            pairs: narrow(pairs),
            remove_on_complete: o.remove_on_complete,
            remove_on_fail: o.remove_on_fail,
            durable: o.is_durable(),
        }
    }

    /// Whether the job is durable: it bypasses the client's batcher and goes out alone.
    pub fn is_durable(&self) -> bool {
        self.durable
    }

    /// Whether the server removes the job once it finishes (`removeOnComplete` or
    /// `removeOnFail`): after that, nothing tells that it was ever added.
    ///
    /// ```
    /// use autobatch_core::wire::{EncodedJob, JobOptions, JobSpec, Value};
    /// let job = JobSpec::new("email", Value::from("a@b"));
    /// assert!(!EncodedJob::new(&job).unwrap().removed_when_finished());
    /// let removed = job.with_options(JobOptions::new().remove_on_complete(true));
    /// assert!(EncodedJob::new(&removed).unwrap().removed_when_finished());
    /// ```
    pub fn removed_when_finished(&self) -> bool {
        self.remove_on_complete == Some(true) || self.remove_on_fail == Some(true)
    }

    /// Whether the job has a custom id, which makes adding it again harmless (the server keeps
    /// one job per id).
    pub fn has_custom_id(&self) -> bool {
        self.id.is_some()
    }

    /// The job's custom id (the `job_id` option), if it has one.
    ///
    /// ```
    /// use autobatch_core::wire::{EncodedJob, JobOptions, JobSpec, Value};
    /// let spec = JobSpec::new("send", Value::from("x")).with_options(JobOptions::new().job_id("order-42"));
    /// let job = EncodedJob::new(&spec).unwrap();
    /// assert_eq!(job.custom_id(), Some("order-42"));
    /// ```
    pub fn custom_id(&self) -> Option<&str> {
        let (start, end) = self.id?;
        let raw = self.bytes.get(start as usize..end as usize)?;
        // A MessagePack str as `Encoder::str` writes it: its header, then the UTF-8 bytes.
        let skip = match *raw.first()? {
            0xa0..=0xbf => 1,
            0xd9 => 2,
            0xda => 3,
            0xdb => 5,
            _ => return None,
        };
        std::str::from_utf8(raw.get(skip..)?).ok()
    }

    /// The exact length of this job as one PUSHB item (as [`JobSpec::pushb_len`]).
    pub fn pushb_len(&self) -> usize {
        pushb_item_len(self)
    }
}

impl PushItem for EncodedJob {
    fn field_count(&self, flavor: Flavor) -> usize {
        self.pairs as usize
            + usize::from(self.id.is_some())
            + flavor.remove_flag_count(self.remove_on_complete, self.remove_on_fail)
    }

    fn write_fields<S: Sink>(&self, s: &mut S, flavor: Flavor) -> usize {
        match self.id {
            Some((start, end)) => {
                let (start, end) = (start as usize, end as usize);
                let (head, rest) = self.bytes.split_at(start.min(self.bytes.len()));
                let (id, tail) = rest.split_at((end - start).min(rest.len()));
                s.raw(head).str(flavor.custom_id_key()).raw(id).raw(tail);
            }
            None => {
                s.raw(&self.bytes);
            }
        }
        self.pairs as usize
            + usize::from(self.id.is_some())
            + write_remove_flags(s, self.remove_on_complete, self.remove_on_fail, flavor)
    }
}

/// A PUSH of one encoded job (no frame header), as [`Command::Push`](super::Command::Push)
/// writes it for the job it came from.
pub(crate) fn encode_push(queue: &str, job: &EncodedJob, req_id: &str, out: &mut Vec<u8>) {
    let mut e = Encoder::new(out);
    write_push(&mut e, queue, job, 1);
    e.kv_str("reqId", req_id);
}

/// A PUSHB of encoded jobs (no frame header), as [`Command::PushB`](super::Command::PushB)
/// writes it for the jobs they came from.
pub(crate) fn encode_pushb(queue: &str, jobs: &[EncodedJob], req_id: &str, out: &mut Vec<u8>) {
    let mut e = Encoder::new(out);
    write_pushb(&mut e, queue, jobs, 1);
    e.kv_str("reqId", req_id);
}

impl fmt::Debug for EncodedJob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EncodedJob")
            .field("bytes", &self.bytes.len())
            .field("custom_id", &self.has_custom_id())
            .field("durable", &self.durable)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes the module's documentation gives: a job's spec is hundreds of bytes however
    /// small the job, its encoded form a few dozen.
    #[test]
    fn a_small_job_encoded_is_a_few_dozen_bytes_its_spec_hundreds() {
        let job = JobSpec::new("email", Value::from("a@b"));
        let encoded = EncodedJob::new(&job).unwrap();
        let spec = std::mem::size_of::<JobSpec>();
        assert!(spec >= 500, "a JobSpec is {spec} bytes");
        assert!(
            encoded.bytes.len() < 48,
            "{} bytes encoded",
            encoded.bytes.len()
        );
    }
}

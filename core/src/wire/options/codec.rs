//! How one kind of option travels ([`Codec`]), and the common case of one value after its key
//! ([`One`]).

use super::super::{JobOptions, ValidationError, Value};
use super::sink::Sink;

/// How one kind of option travels: when it is sent, what it writes, how the server reads it.
pub(in crate::wire) trait Codec {
    /// The [`JobOptions`] field's type.
    type Field;

    /// Read before the options of a lower rank, as bunqueue checks them: the group first
    /// (it decides how the priority reads), then the backoff and dedup maps.
    const READ_RANK: u8 = 0;

    /// Whether the option is sent at all.
    fn is_set(v: &Self::Field) -> bool;

    /// Writes the option, which [`is_set`](Self::is_set), under `key`; returns how many fields
    /// that is.
    fn write<S: Sink>(s: &mut S, key: &str, v: &Self::Field) -> usize;

    /// Reads the option from a job's map in the server role, as bunqueue reads it. `so_far`
    /// holds the options of a higher [`READ_RANK`](Self::READ_RANK).
    fn read(
        item: &Value,
        key: &'static str,
        so_far: &JobOptions,
    ) -> Result<Self::Field, ValidationError>;
}

/// How an option that is one field when set travels: its value after its key. Every
/// [`One`] is a [`Codec`] of `Option<Value>`, sent when it is `Some`.
pub(in crate::wire) trait One {
    /// The value the option holds when set.
    type Value;

    /// As [`Codec::READ_RANK`].
    const READ_RANK: u8 = 0;

    /// Writes the value (its key is written already).
    fn put<S: Sink>(s: &mut S, v: &Self::Value);

    /// As [`Codec::read`].
    fn take(
        item: &Value,
        key: &'static str,
        so_far: &JobOptions,
    ) -> Result<Option<Self::Value>, ValidationError>;
}

impl<C: One> Codec for C {
    type Field = Option<C::Value>;
    const READ_RANK: u8 = C::READ_RANK;

    fn is_set(v: &Self::Field) -> bool {
        v.is_some()
    }

    fn write<S: Sink>(s: &mut S, key: &str, v: &Self::Field) -> usize {
        let Some(v) = v else { return 0 };
        s.str(key);
        C::put(s, v);
        1
    }

    fn read(
        item: &Value,
        key: &'static str,
        so_far: &JobOptions,
    ) -> Result<Self::Field, ValidationError> {
        C::take(item, key, so_far)
    }
}

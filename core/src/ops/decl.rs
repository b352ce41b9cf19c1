//! The declaration of an operation: [`op!`] turns one table entry into the request struct,
//! its constructor and setters, its [`Operation`](super::Operation) and its
//! [`ServeOperation`](crate::wire::server::ServeOperation) implementations.
//!
//! A declaration reads as the command's contract; only the first line is required:
//!
//! ```text
//! op! {
//!     /// `Drain`: removes every waiting job of a queue, and says how many.
//!     Drain, NotSafe, Eq;                // name (wire name unless `as "..."`), replay, derives
//!     queue;                             // or `queue (unchecked);`, `id;`: the first field, or:
//!     /// Drains `queue`.
//!     new(queue: impl Into<String>);     // constructor (any name): required fields (`=> f`)
//!     fields {
//!         /// Queue name.
//!         queue: String = "queue" => Queue,  // field, wire key, optional Kind, `| default`
//!     }
//!     set { count: u64 }                 // setters (see [`setters!`])
//!     reply: u64 = field("count");       // reply shape (none: `ok`)
//!     validate: |op: &Drain| ...;        // checks beyond the fields' kinds
//!     request: |request: &Value| ...;    // a server-role reading of one's own
//! }
//! ```
//!
//! The constructor may be left out (an op whose constructor differs writes its own). Fields
//! are written in declaration order (the order bunqueue's own client writes them in), each
//! through its type's [`Field`] codec, or through a [`Kind`] (one [`kinds!`] entry) that also
//! checks it before it is sent and reads it as bunqueue validates it. Replies take one of six
//! shapes: `ok` (`{ok: true, id: undefined}`, nothing to read), `field(key)` (one value, as
//! its [`Wire`] reads it strictly, at the top level), `data(key)` (one inside `data`), `data` (a [`Record`]
//! that is `data`), `flat` (a [`Record`] whose fields are the reply's), or `with(read, write)`
//! for a reply that really differs. Reply objects are [`record!`]s and maps of optional
//! settings [`options!`], their fields read and written through [`Wire`] codecs. Everything
//! expands to the same code one would write by hand, so a declaration costs nothing at run
//! time.

use std::time::Duration;

use super::read::{
    array, bad, number, reply_array, reply_bool, reply_field, reply_i64, reply_opt, reply_opt_str,
    reply_str, reply_strings, reply_u64, req_opt_i64, req_opt_str, text,
};
use super::Fields;
use crate::wire::{millis, Job, JobState, ProtocolError, ValidationError, Value};

/// How one request field travels: written under its key, read back in the server role as
/// bunqueue reads an unchecked field (absent: the type's empty value).
pub(crate) trait Field: Sized {
    /// Appends `key: self` (an absent optional leaves the key out).
    fn put(&self, key: &'static str, fields: &mut Fields);
    /// Reads it from a request map.
    fn take(request: &Value, key: &'static str) -> Result<Self, ValidationError>;
}

/// `Field` impls, one entry each: `Type: |self, key, fields| put, |request, key| take;`.
macro_rules! fields {
    ($(
        $(#[$doc:meta])* $ty:ty: |$s:ident, $k:tt, $f:ident| $put:expr, |$r:ident, $rk:tt| $take:expr;
    )*) => {$(
        $(#[$doc])*
        impl $crate::ops::decl::Field for $ty {
            fn put(&self, $k: &'static str, $f: &mut $crate::ops::Fields) {
                let $s = self;
                $put;
            }
            fn take(
                $r: &$crate::wire::Value,
                $rk: &'static str,
            ) -> Result<Self, $crate::wire::ValidationError> {
                $take
            }
        }
    )*};
}

pub(crate) use fields;

fields! {
    String: |s, k, f| f.put(k, s.as_str()), |r, k| Ok(req_opt_str(r, k).unwrap_or_default());
    Option<String>: |s, k, f| f.put_opt(k, s.as_deref()), |r, k| Ok(req_opt_str(r, k));
    u64: |s, k, f| f.put(k, *s), |r, k| Ok(<Option<u64> as Field>::take(r, k)?.unwrap_or(0));
    Option<u64>: |s, k, f| f.put_opt(k, *s), |r, k| match req_opt_i64(r, k)? {
        None => Ok(None),
        Some(n) => u64::try_from(n)
            .map(Some)
            .map_err(|_| ValidationError::new(k, format!("{k} must be at least 0"))),
    };
    i64: |s, k, f| f.put(k, *s), |r, k| Ok(req_opt_i64(r, k)?.unwrap_or(0));
    Option<i64>: |s, k, f| f.put_opt(k, *s), |r, k| req_opt_i64(r, k);
    Option<bool>: |s, k, f| f.put_opt(k, *s), |r, k| Ok(r.get(k).and_then(Value::as_bool));
    Option<f64>: |s, k, f| f.put_opt(k, *s), |r, k| Ok(r.get(k).and_then(Value::as_f64));
    // A time span travels as whole milliseconds.
    Duration: |s, k, f| f.put(k, millis(*s)), |r, k| Ok(Duration::from_millis(u64::take(r, k)?));
    Option<Duration>: |s, k, f| f.put_opt(k, s.map(millis)),
        |r, k| Ok(<Option<u64> as Field>::take(r, k)?.map(Duration::from_millis));
    Vec<String>: |s, k, f| f.put(k, array(s.iter().map(String::as_str))),
        |r, k| Ok(<Vec<String> as Wire>::get(r, k).unwrap_or_default());
    Vec<i64>: |s, k, f| f.put(k, array(s.iter().copied())), |r, k| {
        let numbers = r.get(k).and_then(Value::as_array).map(|a| a.iter().map(number));
        Ok(numbers.map(|n| n.map(|d| d.unwrap_or(0.0) as i64).collect()).unwrap_or_default())
    };
    Option<JobState>: |s, k, f| f.put_opt(k, s.as_ref().map(JobState::as_str)),
        |r, k| Ok(req_opt_str(r, k).map(JobState::from));
}

/// A field bunqueue checks: how the server reads it, what the client refuses before sending
/// it, and (rarely) how it travels when not as its type's [`Field`].
pub(crate) trait Kind {
    /// The field's type.
    type T: Field;
    /// Reads it from a request map, as bunqueue validates it.
    fn take(request: &Value, key: &'static str) -> Result<Self::T, ValidationError>;
    /// Checks it before it is sent.
    fn check(_: &Self::T, _: &'static str) -> Result<(), ValidationError> {
        Ok(())
    }
    /// Appends `key: value`.
    fn put(value: &Self::T, key: &'static str, fields: &mut Fields) {
        value.put(key, fields);
    }
}

/// `Kind`s, one entry each: `Name: Type = |request, key| take`, then optionally
/// `, check |value, key| check` and `, put |value, key, fields| put`.
macro_rules! kinds {
    ($(
        $(#[$doc:meta])* $vis:vis $name:ident: $t:ty = |$r:ident, $k:tt| $take:expr
        $(, check |$cv:tt, $ck:tt| $check:expr)?
        $(, put |$pv:ident, $pk:ident, $pf:ident| $put:expr)?;
    )*) => {$(
        $(#[$doc])*
        $vis struct $name;

        impl $crate::ops::decl::Kind for $name {
            type T = $t;
            fn take(
                $r: &$crate::wire::Value,
                $k: &'static str,
            ) -> Result<$t, $crate::wire::ValidationError> {
                $take
            }
            $(fn check($cv: &$t, $ck: &'static str) -> Result<(), $crate::wire::ValidationError> {
                $check
            })?
            $(fn put($pv: &$t, $pk: &'static str, $pf: &mut $crate::ops::Fields) {
                $put
            })?
        }
    )*};
}

pub(crate) use kinds;

/// Fields that bunqueue checks, each a kind with how the server reads it and what the client
/// refuses before sending it.
pub(crate) mod kind {
    use super::super::read::{req_queue, req_str};
    use crate::wire::{validate_queue_name, ValidationError};

    kinds! {
        /// A queue name, validated as bunqueue validates queue names.
        pub(crate) Queue: String = |r, _| req_queue(r), check |queue, _| validate_queue_name(queue);
        /// Text the server requires non-empty (a job id, a name): `<key> is required` otherwise.
        pub(crate) Required: String = |r, k| req_str(r, k), check |text, k| if text.is_empty() {
            Err(ValidationError::new(k, format!("{k} is required")))
        } else {
            Ok(())
        };
    }
}

/// A required `data` object in a reply (`resp.data(...)` replies wrap their payload in it),
/// decoded in full: the decoder keeps `data` values encoded, as they are user payloads
/// elsewhere.
pub(crate) fn reply_data(reply: &Value) -> Result<Value, ProtocolError> {
    reply_field(reply, "data")?
        .expanded()
        .map_err(|_| bad("data", "not valid MessagePack"))
}

/// Appends `data: {key: value}`, the shape of `resp.data` replies.
pub(crate) fn put_data(fields: &mut Fields, key: &str, value: impl Into<Value>) {
    fields.put("data", Value::map([(key, value.into())]));
}

/// A time span of milliseconds as the wire carries it.
pub(crate) fn ms(d: Duration) -> Value {
    Value::Int(millis(d))
}

/// A wire span (ms) as a [`Duration`] (negatives read as zero).
pub(crate) fn span(f: f64) -> Duration {
    Duration::from_millis(if f > 0.0 { f as u64 } else { 0 })
}

pub(crate) use crate::wire::js_number;

/// How a value travels in a reply, inside a reply object or in a settings map (a [`record!`]
/// or [`options!`] field): read leniently (`None`: absent or unreadable, so the field's
/// default) or, when the reply promises it, strictly; written as the server writes it. A type
/// is its own codec; a unit struct codes one another way.
pub(crate) trait Wire {
    /// The field's type.
    type T;
    /// Reads `key` of `v`.
    fn get(v: &Value, key: &'static str) -> Option<Self::T>;
    /// The value as the server writes it.
    fn put(x: &Self::T) -> Value;
    /// Reads the required field `key` of a reply (`missing` when [`get`](Self::get) reads none).
    fn read(v: &Value, key: &'static str) -> Result<Self::T, ProtocolError> {
        Self::get(v, key).ok_or(bad(key, "missing"))
    }
}

/// Reads the required field `key` of `reply`, as its type reads it.
pub(crate) fn read<T: Wire<T = T>>(reply: &Value, key: &'static str) -> Result<T, ProtocolError> {
    T::read(reply, key)
}

/// A value as its type writes it.
pub(crate) fn put<T: Wire<T = T>>(x: &T) -> Value {
    T::put(x)
}

/// `Wire` impls, one entry each: `Codec => Type: |object, key| read, |value| written`, then
/// optionally `, strict reader` (how a reply's required field is read), and `;`.
macro_rules! wires {
    ($(
        $(#[$doc:meta])* $codec:ty => $t:ty: |$v:ident, $k:ident| $get:expr, |$x:ident| $put:expr
        $(, strict $read:expr)?;
    )*) => {$(
        $(#[$doc])*
        impl $crate::ops::decl::Wire for $codec {
            type T = $t;
            fn get($v: &$crate::wire::Value, $k: &'static str) -> Option<$t> {
                $get
            }
            fn put($x: &$t) -> $crate::wire::Value {
                $put
            }
            $(fn read(
                v: &$crate::wire::Value,
                key: &'static str,
            ) -> Result<$t, $crate::wire::ProtocolError> {
                ($read)(v, key)
            })?
        }
    )*};
}

pub(crate) use wires;

/// A float written as a float64 whatever its value (epoch ms the server keeps as `Date.now()`).
pub(crate) struct F64;

/// A count the server may send negative, read as 0.
pub(crate) struct Count;

/// An optional value written as `undefined` (left out) when absent, not `null`.
pub(crate) struct Undef<C>(std::marker::PhantomData<C>);

wires! {
    u64 => u64: |v, k| reply_opt(v, k).and_then(number).and_then(|f| (f >= 0.0).then_some(f as u64)),
        |x| Value::from(*x), strict reply_u64;
    Count => u64: |v, k| reply_opt(v, k).and_then(number).map(|f| f.max(0.0) as u64),
        |x| Value::from(*x);
    i64 => i64: |v, k| reply_opt(v, k).and_then(number).map(|f| f as i64), |x| Value::from(*x),
        strict reply_i64;
    f64 => f64: |v, k| reply_opt(v, k).and_then(number), |x| js_number(*x);
    F64 => f64: |v, k| reply_opt(v, k).and_then(number), |x| Value::F64(*x);
    bool => bool: |v, k| reply_opt(v, k).and_then(Value::as_bool), |x| Value::from(*x),
        strict reply_bool;
    String => String: |v, k| reply_opt_str(v, k), |x| Value::from(x.as_str()), strict reply_str;
    /// A job record, as bunqueue's replies carry it.
    Job => Job: |v, k| v.get(k).and_then(Job::from_value), |x| x.to_value(),
        strict |v, k| Job::from_value(reply_field(v, k)?).ok_or(bad(k, "not a job"));
    /// An array of job records, each required to be one.
    Vec<Job> => Vec<Job>: |v, k| Self::read(v, k).ok(), |x| array(x.iter().map(Job::to_value)),
        strict |v, k| {
            let jobs = reply_array(v, k)?.iter().map(Job::from_value);
            jobs.map(|j| j.ok_or(bad(k, "an entry is not a job"))).collect()
        };
    Duration => Duration: |v, k| reply_opt(v, k).and_then(number).map(span), |x| ms(*x);
    Vec<String> => Vec<String>: |v, k| {
        let texts = v.get(k).and_then(Value::as_array).map(|a| a.iter().filter_map(text));
        texts.map(Iterator::collect)
    }, |x| array(x.iter().map(String::as_str)), strict reply_strings;
}

/// An optional value: absent or `null` reads as `None`, which is written as `null`.
impl<C: Wire> Wire for Option<C> {
    type T = Option<C::T>;
    fn get(v: &Value, key: &'static str) -> Option<Self::T> {
        Some(C::get(v, key))
    }
    fn put(x: &Self::T) -> Value {
        x.as_ref().map_or(Value::Nil, C::put)
    }
}

impl<C: Wire> Wire for Undef<C> {
    type T = Option<C::T>;
    fn get(v: &Value, key: &'static str) -> Option<Self::T> {
        Some(C::get(v, key))
    }
    fn put(x: &Self::T) -> Value {
        x.as_ref().map_or(Value::Undefined, C::put)
    }
}

/// A record inside another: absent, `null` or incomplete reads as `None`; required, its own
/// required field's error when incomplete.
impl<R: Record> Wire for R {
    type T = R;
    fn get(v: &Value, key: &'static str) -> Option<R> {
        reply_opt(v, key).and_then(R::decode)
    }
    fn put(x: &R) -> Value {
        x.encode()
    }
    fn read(v: &Value, key: &'static str) -> Result<R, ProtocolError> {
        R::read(reply_field(v, key)?)
    }
}

/// An array of records inside another, entries that are not one left out; required, every
/// entry complete.
impl<R: Record> Wire for Vec<R> {
    type T = Vec<R>;
    fn get(v: &Value, key: &'static str) -> Option<Vec<R>> {
        let entries = reply_opt(v, key).and_then(Value::as_array);
        entries.map(|a| a.iter().filter_map(R::decode).collect())
    }
    fn put(x: &Vec<R>) -> Value {
        array(x.iter().map(R::encode))
    }
    fn read(v: &Value, key: &'static str) -> Result<Vec<R>, ProtocolError> {
        let incomplete = |_| bad(key, "an entry is incomplete");
        let entries = reply_array(v, key)?.iter();
        entries.map(|e| R::read(e).map_err(incomplete)).collect()
    }
}

/// A reply object declared with [`record!`], in both roles.
pub(crate) trait Record: Sized {
    /// Reads it from the object `v`: the error of its required field when that is missing.
    fn read(v: &Value) -> Result<Self, ProtocolError>;
    /// Appends its fields, as the server writes them.
    fn write(&self, fields: &mut Fields);
    /// Reads it, `None` when its required field is missing.
    fn decode(v: &Value) -> Option<Self> {
        Self::read(v).ok()
    }
    /// The object.
    fn encode(&self) -> Value {
        let mut fields = Fields::default();
        self.write(&mut fields);
        fields.into_value()
    }
}

/// A reply object: the struct, its wire keys, and both roles' codec ([`Record`]), in one
/// declaration. A field is `name: Type = "key"`, then optionally `[required]` (no object
/// without it: read strictly, as [`Wire::read`]), `=> Codec` (a [`Wire`] other than its
/// type) and `| default` (when absent; `Default::default()` otherwise). `Name (Default) { … }`
/// also implements `Default` with those defaults; a constructor may follow, as in [`op!`].
macro_rules! record {
    (
        $(#[$doc:meta])*
        $name:ident $(($default_impl:ident))? {
            $(
                $(#[$field_doc:meta])*
                $field:ident: $ty:ty = $key:literal $([$req:ident])? $(=> $codec:ty)?
                $(| $default:expr)?,
            )*
        }
        $($(#[$new_doc:meta])* $ctor:ident($($arg:ident: $arg_ty:ty $(=> $conv:path)?),* $(,)?);)?
    ) => {
        $(#[$doc])*
        #[non_exhaustive]
        pub struct $name {
            $($(#[$field_doc])* pub $field: $ty,)*
        }

        impl $crate::ops::decl::Record for $name {
            fn read(v: &$crate::wire::Value) -> Result<Self, $crate::wire::ProtocolError> {
                Ok($name {$(
                    $field: $crate::ops::decl::record!(@get v, $key, $ty $(, $codec)?;
                        [$($req)?] [$($default)?]),
                )*})
            }

            fn write(&self, fields: &mut $crate::ops::Fields) {
                $(fields.put($key, <$crate::ops::decl::record!(@codec $ty $(, $codec)?)
                    as $crate::ops::decl::Wire>::put(&self.$field));)*
            }
        }

        $crate::ops::decl::record!(@default_impl [$($default_impl)?] $name {
            $($field: [$($default)?]),*
        });
        $crate::ops::decl::op!(@ctor $name [$(
            $(#[$new_doc])* $ctor($($arg: $arg_ty $(=> $conv)?),*)
        )?] { $($field [$($default)?]),* });
    };

    (@default_impl [] $name:ident { $($rest:tt)* }) => {};
    (@default_impl [Default] $name:ident { $($field:ident: [$($default:expr)?]),* }) => {
        impl Default for $name {
            fn default() -> Self {
                $name {
                    $($field: $crate::ops::decl::record!(@default $($default)?),)*
                }
            }
        }
    };

    (@codec $ty:ty) => { $ty };
    (@codec $ty:ty, $codec:ty) => { $codec };

    (@get $v:ident, $key:literal, $ty:ty; [required] []) => {
        <$ty as $crate::ops::decl::Wire>::read($v, $key)?
    };
    (@get $v:ident, $key:literal, $ty:ty $(, $codec:ty)?; [] [$($default:expr)?]) => {
        $crate::ops::decl::record!(@or <$crate::ops::decl::record!(@codec $ty $(, $codec)?)
            as $crate::ops::decl::Wire>::get($v, $key), $($default)?)
    };

    (@or $get:expr,) => { $get.unwrap_or_default() };
    (@or $get:expr, $default:expr) => { $get.unwrap_or_else(|| $default) };

    (@default) => { Default::default() };
    (@default $default:expr) => { $default };
}

pub(crate) use record;

/// A map of optional settings or options: the struct (every field an `Option`), its
/// constructor (nothing set), setters, and its codec (`to_value`: the set ones, in order;
/// `from_value`). Fields are written as in [`record!`] (`name: Type = "key" => Codec`, the
/// field being `Option<Type>`). `for Config` makes it an update of the record `Config`:
/// `apply`, and a [`Field`] travelling as one object (absent: changes nothing).
macro_rules! options {
    (
        $(#[$doc:meta])*
        $name:ident $(for $config:ident)? {
            $(#[$new_doc:meta])* new();
            $(
                $(#[$field_doc:meta])*
                $field:ident: $ty:ty = $key:literal $(=> $codec:ty)?,
            )*
        }
    ) => {
        $(#[$doc])*
        #[non_exhaustive]
        pub struct $name {
            $($(#[$field_doc])* pub $field: Option<$ty>,)*
        }

        impl $name {
            $(#[$new_doc])*
            pub fn new() -> Self {
                Self::default()
            }

            #[allow(dead_code)]
            fn to_value(&self) -> $crate::wire::Value {
                let mut f = $crate::ops::Fields::default();
                $(f.put_opt($key, self.$field.as_ref().map(
                    <$crate::ops::decl::record!(@codec $ty $(, $codec)?)
                        as $crate::ops::decl::Wire>::put,
                ));)*
                f.into_value()
            }

            #[allow(dead_code)]
            fn from_value(v: &$crate::wire::Value) -> Self {
                $name {$(
                    $field: <$crate::ops::decl::record!(@codec $ty $(, $codec)?)
                        as $crate::ops::decl::Wire>::get(v, $key),
                )*}
            }
        }

        $crate::setters! { $name { $($field: $ty),* } }
        $crate::ops::decl::options!(@update [$($config)?] $name { $($field),* });
    };

    (@update [] $name:ident { $($field:ident),* }) => {};
    (@update [$config:ident] $name:ident { $($field:ident),* }) => {
        impl $name {
            /// `config` with this update applied.
            pub fn apply(&self, mut config: $config) -> $config {
                $(config.$field = self.$field.unwrap_or(config.$field);)*
                config
            }
        }

        $crate::ops::decl::fields! {
            /// An update travels as one object (absent: changes nothing).
            $name: |u, k, f| f.put(k, u.to_value()),
                |r, k| Ok(r.get(k).map(Self::from_value).unwrap_or_default());
        }
    };
}

pub(crate) use options;

/// Declares one operation; see the [module docs](self) for the grammar.
macro_rules! op {
    // `queue;` / `queue (unchecked);` / `id;`: a command whose first field is a queue name or a
    // job id and whose constructor takes only that; `fields { … }` may add optional ones.
    (
        $(#[$doc:meta])* $name:ident $(as $wire:literal)?, $replay:ident $(, $derive:ident)*;
        $one:ident $(($unchecked:ident))?; fields { $($more:tt)* } $($rest:tt)*
    ) => {
        $crate::ops::decl::op! {
            @one [$one $($unchecked)?] [$(#[$doc])* $name $(as $wire)?, $replay $(, $derive)*;]
            [$($more)*] $($rest)*
        }
    };
    (
        $(#[$doc:meta])* $name:ident $(as $wire:literal)?, $replay:ident $(, $derive:ident)*;
        $one:ident $(($unchecked:ident))?; $($rest:tt)*
    ) => {
        $crate::ops::decl::op! {
            @one [$one $($unchecked)?] [$(#[$doc])* $name $(as $wire)?, $replay $(, $derive)*;]
            [] $($rest)*
        }
    };
    (@one [queue] [$($head:tt)*] [$($more:tt)*] $($rest:tt)*) => {
        $crate::ops::decl::op! {
            $($head)* #[doc = "The command for `queue`."] new(queue: impl Into<String>);
            fields { #[doc = "Queue name."] queue: String = "queue" => Queue, $($more)* }
            $($rest)*
        }
    };
    (@one [queue unchecked] [$($head:tt)*] [$($more:tt)*] $($rest:tt)*) => {
        $crate::ops::decl::op! {
            $($head)* #[doc = "The command for `queue`."] new(queue: impl Into<String>);
            fields {
                #[doc = "Queue name (not validated: the server takes it as sent)."]
                queue: String = "queue",
                $($more)*
            }
            $($rest)*
        }
    };
    (@one [id] [$($head:tt)*] [$($more:tt)*] $($rest:tt)*) => {
        $crate::ops::decl::op! {
            $($head)* #[doc = "The command for job `id`."] new(id: impl Into<String>);
            fields { #[doc = "Job id."] id: String = "id" => Required, $($more)* }
            $($rest)*
        }
    };
    // The constructor is optional (an op whose constructor differs writes its own).
    (
        $(#[$doc:meta])* $name:ident $(as $wire:literal)?, $replay:ident $(, $derive:ident)*;
        $(#[$new_doc:meta])* $ctor:ident($($args:tt)*);
        fields $($rest:tt)*
    ) => {
        $crate::ops::decl::op! {
            @main $(#[$doc])* $name $(as $wire)?, $replay $(, $derive)*;
            ctor $(#[$new_doc])* $ctor($($args)*);
            fields $($rest)*
        }
    };
    (
        $(#[$doc:meta])* $name:ident $(as $wire:literal)?, $replay:ident $(, $derive:ident)*;
        fields $($rest:tt)*
    ) => {
        $crate::ops::decl::op! {
            @main $(#[$doc])* $name $(as $wire)?, $replay $(, $derive)*;
            fields $($rest)*
        }
    };
    (
        @main
        $(#[$doc:meta])*
        $name:ident $(as $wire:literal)?, $replay:ident $(, $derive:ident)*;
        $(
            ctor $(#[$new_doc:meta])*
            $ctor:ident($($arg:ident: $arg_ty:ty $(=> $conv:path)?),* $(,)?);
        )?
        fields {
            $(
                $(#[$field_doc:meta])*
                $field:ident: $field_ty:ty = $key:literal $(=> $kind:ident)? $(| $default:expr)?
            ),* $(,)?
        }
        $(set { $($set:tt)* })?
        $(reply: $out:ty = $shape:ident $(($($shape_arg:tt)*))?;)?
        $(validate: $validate:expr;)?
        $(request: $request:expr;)?
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq $(, $derive)*)]
        #[non_exhaustive]
        pub struct $name {
            $($(#[$field_doc])* pub $field: $field_ty,)*
        }

        $crate::ops::decl::op!(@ctor $name [$(
            $(#[$new_doc])* $ctor($($arg: $arg_ty $(=> $conv)?),*)
        )?] { $($field [$($default)?]),* });

        $($crate::setters! { $name { $($set)* } })?

        impl $crate::ops::Operation for $name {
            const NAME: &'static str = $crate::ops::decl::op!(@name $name $($wire)?);
            const REPLAY: $crate::session::Replay = $crate::session::Replay::$replay;
            type Output = $crate::ops::decl::op!(@out $($out)?);

            fn write_fields(&self, _fields: &mut $crate::ops::Fields) {
                $($crate::ops::decl::op!(@put self.$field, $key, _fields $(, $kind)?);)*
            }

            fn read_reply(
                _reply: &$crate::wire::Value,
            ) -> Result<Self::Output, $crate::wire::ProtocolError> {
                $crate::ops::decl::op!(@read _reply, $($shape $(($($shape_arg)*))?)?)
            }

            fn validate(&self) -> Result<(), $crate::wire::ValidationError> {
                $($(<$kind as $crate::ops::decl::Kind>::check(&self.$field, $key)?;)?)*
                $(($validate)(self)?;)?
                Ok(())
            }
        }

        impl $crate::wire::server::ServeOperation for $name {
            fn read_request(
                _request: &$crate::wire::Value,
            ) -> Result<Self, $crate::wire::server::CommandError> {
                $crate::ops::decl::op!(@request _request, [$($request)?], $name {
                    $($field: $field_ty = $key [$($kind)?]),*
                })
            }

            fn write_reply(
                _output: &<Self as $crate::ops::Operation>::Output,
                _fields: &mut $crate::ops::Fields,
            ) {
                $crate::ops::decl::op!(@write _output, _fields, $($shape $(($($shape_arg)*))?)?)
            }
        }
    };

    (@ctor $name:ident [] { $($rest:tt)* }) => {};
    (@ctor $name:ident [
        $(#[$new_doc:meta])* $ctor:ident($($arg:ident: $arg_ty:ty $(=> $conv:path)?),*)
    ] { $($field:ident [$($default:expr)?]),* }) => {
        impl $name {
            $(#[$new_doc])*
            #[allow(clippy::needless_update)]
            pub fn $ctor($($arg: $arg_ty),*) -> Self {
                $name {
                    $($arg: $crate::ops::decl::op!(@arg $arg $($conv)?),)*
                    ..$name {
                        $($field: $crate::ops::decl::record!(@default $($default)?),)*
                    }
                }
            }
        }
    };

    (@put $self:ident.$field:ident, $key:literal, $fields:ident) => {
        $crate::ops::decl::Field::put(&$self.$field, $key, $fields)
    };
    (@put $self:ident.$field:ident, $key:literal, $fields:ident, $kind:ident) => {
        <$kind as $crate::ops::decl::Kind>::put(&$self.$field, $key, $fields)
    };

    (@out) => { () };
    (@out $out:ty) => { $out };

    (@name $name:ident) => { stringify!($name) };
    (@name $name:ident $wire:literal) => { $wire };

    (@arg $arg:ident) => { $arg.into() };
    (@arg $arg:ident $conv:path) => { $conv($arg) };

    (@request $request:ident, [], $name:ident {
        $($field:ident: $ty:ty = $key:literal [$($kind:ident)?]),*
    }) => {
        Ok($name {
            $($field: $crate::ops::decl::op!(@take $request, $key, $ty $(, $kind)?),)*
        })
    };
    (@request $request:ident, [$read:expr], $name:ident { $($fields:tt)* }) => {
        ($read)($request)
    };

    (@take $request:ident, $key:literal, $ty:ty) => {
        <$ty as $crate::ops::decl::Field>::take($request, $key)?
    };
    (@take $request:ident, $key:literal, $ty:ty, $kind:ident) => {
        <$kind as $crate::ops::decl::Kind>::take($request, $key)?
    };

    (@read $reply:ident, $(ok)?) => { Ok(()) };
    (@read $reply:ident, field($key:literal)) => { $crate::ops::decl::read($reply, $key) };
    (@read $reply:ident, data($key:literal)) => {
        $crate::ops::decl::read(&$crate::ops::decl::reply_data($reply)?, $key)
    };
    (@read $reply:ident, data) => {
        $crate::ops::decl::Record::read(&$crate::ops::decl::reply_data($reply)?)
    };
    (@read $reply:ident, flat) => { $crate::ops::decl::Record::read($reply) };
    (@read $reply:ident, with($read:expr, $write:expr)) => { ($read)($reply) };

    (@write $out:ident, $fields:ident, $(ok)?) => {{
        let _ = $out;
        $fields.put("id", $crate::wire::Value::Undefined);
    }};
    (@write $out:ident, $fields:ident, field($key:literal)) => {{
        $fields.put($key, $crate::ops::decl::put($out));
    }};
    (@write $out:ident, $fields:ident, data($key:literal)) => {
        $crate::ops::decl::put_data($fields, $key, $crate::ops::decl::put($out))
    };
    (@write $out:ident, $fields:ident, data) => {{
        $fields.put("data", $crate::ops::decl::Record::encode($out));
    }};
    (@write $out:ident, $fields:ident, flat) => { $crate::ops::decl::Record::write($out, $fields) };
    (@write $out:ident, $fields:ident, with($read:expr, $write:expr)) => {
        ($write)($out, $fields)
    };
}

pub(crate) use op;

/// A time span as the whole milliseconds a `u64` wire field carries (saturating).
pub(crate) fn ms_u64(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Builder setters, for every builder of the workspace: `setters! { Type { name: Arg, … } }`
/// gives each `pub fn name(self, value: Arg) -> Self`, which sets `self.name =
/// Some(value.into())`; `name(field): Arg` sets `field` instead, and `=` instead of `:` sets a
/// field that is not optional to the value as given (`self.name = value`). Doc comments before
/// a setter are its documentation; one without gets "Sets [`name`](Self::name).". Inside an
/// `impl` block, `setters! { name: Arg, … }` gives the same methods alone.
#[macro_export]
#[doc(hidden)]
macro_rules! setters {
    ($ty:ident { $($set:tt)* }) => {
        impl $ty {
            $crate::setters!($($set)*);
        }
    };
    ($(,)?) => {};
    ($(#[$doc:meta])* $name:ident $(($field:ident))?: $arg:ty $(, $($rest:tt)*)?) => {
        $crate::setters!(@one [$(#[$doc])*] $name [$($field)? $name] : $arg);
        $crate::setters!($($($rest)*)?);
    };
    ($(#[$doc:meta])* $name:ident $(($field:ident))? = $arg:ty $(, $($rest:tt)*)?) => {
        $crate::setters!(@one [$(#[$doc])*] $name [$($field)? $name] = $arg);
        $crate::setters!($($($rest)*)?);
    };
    (@one [] $name:ident [$field:ident $($_name:ident)?] $how:tt $arg:ty) => {
        $crate::setters!(
            @one [#[doc = concat!("Sets [`", stringify!($field), "`](Self::", stringify!($field), ").")]]
            $name [$field] $how $arg
        );
    };
    (@one [$($doc:tt)+] $name:ident [$field:ident $($_name:ident)?] $how:tt $arg:ty) => {
        $($doc)+
        pub fn $name(mut self, value: $arg) -> Self {
            self.$field = $crate::setters!(@value $how value);
            self
        }
    };
    (@value : $value:ident) => { Some($value.into()) };
    (@value = $value:ident) => { $value };
}

pub(crate) use crate::setters;

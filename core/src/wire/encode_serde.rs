//! serde straight to MessagePack bytes: a `Serializer` that writes what
//! [`Value::from_serialize`](super::Value::from_serialize) followed by
//! [`Encoder::value`](super::Encoder::value) would, byte for byte, without building the tree.
//!
//! An add's data is encoded once and never read again by the client, so the tree (a vector per
//! map, a string per key, freed right after) was pure overhead. Every scalar goes through the
//! same [`Value`] rule the tree serializer applies (msgpackr's numbers: an integer outside
//! `[-2^31, 2^32-1]` as float64, a `u64` above `i64::MAX` as float64), and maps and arrays
//! count their entries as they are written: a length hint that turns out wrong (or is absent)
//! is corrected in place, as the tree serializer ignores hints too. One difference, for
//! `Serialize` impls that break serde's contract: a map key without its value is an error here
//! (the tree serializer drops the key).

use serde::ser::{self, Serialize};

use super::codec::Encoder;
use super::size::{array_header_len, map_header_len};
use super::value::{DataError, Value};
use super::value_serde::ValueSerializer;

/// Writes a `Serialize` value's MessagePack form into a buffer.
pub(crate) struct BytesSerializer<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> BytesSerializer<'a> {
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Self {
        BytesSerializer { out }
    }

    /// A scalar, as the tree serializer makes it: no allocation for any of the number kinds.
    fn scalar(self, v: Result<Value, DataError>) -> Result<(), DataError> {
        Encoder::new(self.out).value(&v?);
        Ok(())
    }

    fn open(self, kind: Kind, hint: Option<usize>) -> Compound<'a> {
        let hint = hint.unwrap_or(0);
        let start = self.out.len();
        header(self.out, kind, hint);
        Compound {
            out: self.out,
            kind,
            start,
            hint,
            count: 0,
            key_written: false,
        }
    }

    /// `{"variant": …}`: a one-entry map whose value follows.
    fn variant(self, variant: &str) -> BytesSerializer<'a> {
        Encoder::new(self.out).map(1).str(variant);
        self
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Array,
    Map,
}

fn header(out: &mut Vec<u8>, kind: Kind, n: usize) {
    let mut e = Encoder::new(out);
    match kind {
        Kind::Array => e.array(n),
        Kind::Map => e.map(n),
    };
}

/// An array or map being written: its header went out with the length hint and is rewritten
/// at the end if the entries written were not that many.
pub(crate) struct Compound<'a> {
    out: &'a mut Vec<u8>,
    kind: Kind,
    start: usize,
    hint: usize,
    count: usize,
    /// A map key was written and its value has not been.
    key_written: bool,
}

impl Compound<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), DataError> {
        value.serialize(BytesSerializer::new(self.out))?;
        self.count += 1;
        Ok(())
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), DataError> {
        Encoder::new(self.out).str(key);
        value.serialize(BytesSerializer::new(self.out))?;
        self.count += 1;
        Ok(())
    }

    fn end(self) -> Result<(), DataError> {
        if self.key_written {
            return Err(DataError("a map key came without its value".into()));
        }
        if self.count != self.hint {
            // Rare (a hand-written `Serialize` with a wrong hint, an iterator of unknown
            // length): the header is rewritten, the entries moved if its size changed.
            let mut fixed = Vec::with_capacity(5);
            header(&mut fixed, self.kind, self.count);
            let old_len = match self.kind {
                Kind::Array => array_header_len(self.hint),
                Kind::Map => map_header_len(self.hint),
            };
            self.out.splice(self.start..self.start + old_len, fixed);
        }
        Ok(())
    }
}

impl<'a> ser::Serializer for BytesSerializer<'a> {
    type Ok = ();
    type Error = DataError;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), DataError> {
        Encoder::new(self.out).bool(v);
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), DataError> {
        self.serialize_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<(), DataError> {
        self.serialize_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<(), DataError> {
        self.serialize_i64(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<(), DataError> {
        Encoder::new(self.out).int(v);
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Result<(), DataError> {
        self.scalar(ser::Serializer::serialize_i128(ValueSerializer, v))
    }
    fn serialize_u8(self, v: u8) -> Result<(), DataError> {
        self.serialize_i64(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<(), DataError> {
        self.serialize_i64(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<(), DataError> {
        self.serialize_i64(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<(), DataError> {
        self.scalar(ser::Serializer::serialize_u64(ValueSerializer, v))
    }
    fn serialize_u128(self, v: u128) -> Result<(), DataError> {
        self.scalar(ser::Serializer::serialize_u128(ValueSerializer, v))
    }
    fn serialize_f32(self, v: f32) -> Result<(), DataError> {
        self.serialize_f64(v.into())
    }
    fn serialize_f64(self, v: f64) -> Result<(), DataError> {
        Encoder::new(self.out).f64(v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), DataError> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), DataError> {
        Encoder::new(self.out).str(v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), DataError> {
        Encoder::new(self.out).bin(v);
        Ok(())
    }
    fn serialize_none(self) -> Result<(), DataError> {
        Encoder::new(self.out).nil();
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), DataError> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), DataError> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), DataError> {
        self.serialize_none()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), DataError> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), DataError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), DataError> {
        value.serialize(self.variant(variant))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Compound<'a>, DataError> {
        Ok(self.open(Kind::Array, len))
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'a>, DataError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Compound<'a>, DataError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'a>, DataError> {
        Ok(self.variant(variant).open(Kind::Array, Some(len)))
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Compound<'a>, DataError> {
        Ok(self.open(Kind::Map, len))
    }
    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<Compound<'a>, DataError> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'a>, DataError> {
        Ok(self.variant(variant).open(Kind::Map, Some(len)))
    }
}

/// serde's four array-like traits differ only in their method's name: each writes one element.
macro_rules! array_like {
    ($($trait:ident :: $method:ident),* $(,)?) => {$(
        impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = DataError;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), DataError> {
                self.element(value)
            }
            fn end(self) -> Result<(), DataError> {
                Compound::end(self)
            }
        }
    )*};
}

array_like!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field,
);

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = DataError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), DataError> {
        if self.key_written {
            return Err(DataError("a map key came without its value".into()));
        }
        key.serialize(BytesSerializer::new(self.out))?;
        self.key_written = true;
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), DataError> {
        if !self.key_written {
            return Err(DataError("a map value came before its key".into()));
        }
        value.serialize(BytesSerializer::new(self.out))?;
        self.key_written = false;
        self.count += 1;
        Ok(())
    }
    fn end(self) -> Result<(), DataError> {
        Compound::end(self)
    }
}

/// A struct and a struct variant both write `key: value` fields.
macro_rules! struct_like {
    ($($trait:ident),* $(,)?) => {$(
        impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = DataError;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), DataError> {
                self.field(key, value)
            }
            fn end(self) -> Result<(), DataError> {
                Compound::end(self)
            }
        }
    )*};
}

struct_like!(SerializeStruct, SerializeStructVariant);

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use serde::ser::{SerializeMap, SerializeSeq, Serializer};
    use serde::Serialize;

    use super::BytesSerializer;
    use crate::wire::{EncodedJob, JobOptions, JobSpec, Value};

    fn direct<T: Serialize + ?Sized>(v: &T) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        v.serialize(BytesSerializer::new(&mut out))
            .map_err(|e| e.0)?;
        Ok(out)
    }

    fn tree<T: Serialize + ?Sized>(v: &T) -> Result<Vec<u8>, String> {
        Value::from_serialize(v)
            .map(|v| v.to_bytes())
            .map_err(|e| e.0)
    }

    #[derive(Serialize, Debug, Clone)]
    enum Shape {
        Unit,
        Newtype(i64),
        Tuple(u8, String),
        Struct { a: Option<u64>, b: Vec<f32> },
    }

    /// Bytes through `serialize_bytes`.
    #[derive(Debug, Clone)]
    struct Bytes(Vec<u8>);
    impl Serialize for Bytes {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(&self.0)
        }
    }

    /// A sequence whose length is not known up front.
    #[derive(Debug, Clone)]
    struct Unsized(Vec<i64>);
    impl Serialize for Unsized {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut seq = s.serialize_seq(None)?;
            for i in &self.0 {
                seq.serialize_element(i)?;
            }
            seq.end()
        }
    }

    /// A map whose length hint is wrong (by `extra`, in either direction).
    #[derive(Debug, Clone)]
    struct Misleading(Vec<(String, bool)>, i8);
    impl Serialize for Misleading {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let hint = (self.0.len() as i64 + i64::from(self.1)).max(0) as usize;
            let mut map = s.serialize_map(Some(hint))?;
            for (k, v) in &self.0 {
                map.serialize_entry(k, v)?;
            }
            map.end()
        }
    }

    #[derive(Serialize, Debug, Clone)]
    struct Sample {
        i: i64,
        u: u64,
        big: i128,
        ubig: u128,
        f: f64,
        f32: f32,
        s: String,
        c: char,
        bytes: Bytes,
        opt: Option<i32>,
        unit: (),
        shapes: Vec<Shape>,
        map: BTreeMap<String, i64>,
        int_keys: BTreeMap<i64, bool>,
        tuple: (bool, i8),
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u16>,
        unsized_seq: Unsized,
        misleading: Misleading,
    }

    fn shape() -> impl Strategy<Value = Shape> {
        prop_oneof![
            Just(Shape::Unit),
            any::<i64>().prop_map(Shape::Newtype),
            (any::<u8>(), ".{0,40}").prop_map(|(a, b)| Shape::Tuple(a, b)),
            (
                any::<Option<u64>>(),
                prop::collection::vec(any::<f32>(), 0..20)
            )
                .prop_map(|(a, b)| Shape::Struct { a, b }),
        ]
    }

    prop_compose! {
        fn sample()(
            i in any::<i64>(),
            u in any::<u64>(),
            big in any::<i128>(),
            ubig in any::<u128>(),
            f in any::<f64>(),
            f32 in any::<f32>(),
            s in ".{0,300}",
            c in any::<char>(),
            bytes in prop::collection::vec(any::<u8>(), 0..300),
            opt in any::<Option<i32>>(),
            shapes in prop::collection::vec(shape(), 0..20),
            map in prop::collection::btree_map(".{0,8}", any::<i64>(), 0..20),
            int_keys in prop::collection::btree_map(any::<i64>(), any::<bool>(), 0..20),
            tuple in any::<(bool, i8)>(),
            skipped in any::<Option<u16>>(),
            unsized_seq in prop::collection::vec(any::<i64>(), 0..40),
            misleading in (prop::collection::vec((".{0,4}", any::<bool>()), 0..20), -20i8..20),
        ) -> Sample {
            Sample {
                i, u, big, ubig, f, f32, s, c, bytes: Bytes(bytes), opt, unit: (), shapes, map,
                int_keys, tuple, skipped, unsized_seq: Unsized(unsized_seq),
                misleading: Misleading(misleading.0, misleading.1),
            }
        }
    }

    fn json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::Bool),
            any::<i64>().prop_map(|i| serde_json::json!(i)),
            any::<u64>().prop_map(|i| serde_json::json!(i)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| serde_json::json!(f)),
            ".{0,40}".prop_map(serde_json::Value::String),
        ];
        leaf.prop_recursive(4, 128, 20, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..20).prop_map(serde_json::Value::Array),
                prop::collection::btree_map(".{0,8}", inner, 0..20)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Every serde shape writes the bytes the tree serializer and the encoder write.
        #[test]
        fn writes_what_the_tree_encodes(s in sample()) {
            prop_assert_eq!(direct(&s), tree(&s));
        }

        /// As does any JSON document.
        #[test]
        fn writes_what_the_tree_encodes_for_json(j in json()) {
            prop_assert_eq!(direct(&j), tree(&j));
        }

        /// An encoded job made from its parts is the one made from its `JobSpec`.
        #[test]
        fn a_job_from_its_parts_is_the_job_from_its_spec(
            j in json(),
            name in ".{0,300}",
            priority in any::<Option<i64>>(),
            id in prop::option::of("[a-z0-9-]{1,20}"),
        ) {
            let mut opts = JobOptions::new();
            opts.priority = priority;
            opts.job_id = id;
            let spec = JobSpec::new(name.clone(), Value::from_serialize(&j).unwrap())
                .with_options(opts.clone());
            prop_assert_eq!(EncodedJob::from_serialize(&name, &j, &opts), EncodedJob::new(&spec));
        }
    }

    #[test]
    fn data_that_cannot_be_serialized_is_a_data_error() {
        struct Refuses;
        impl Serialize for Refuses {
            fn serialize<S: Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
                Err(serde::ser::Error::custom("no way"))
            }
        }
        let e = EncodedJob::from_serialize("j", &Refuses, &JobOptions::new()).unwrap_err();
        assert_eq!(e.field, "data");
        assert_eq!(e.message, "Job data must be serializable: no way");
        // The name is checked first, as validation does.
        let e = EncodedJob::from_serialize("", &Refuses, &JobOptions::new()).unwrap_err();
        assert_eq!(e.field, "name");
    }

    #[test]
    fn a_map_key_without_its_value_is_an_error_not_a_malformed_map() {
        struct Dangling;
        impl Serialize for Dangling {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_key("k")?;
                m.end()
            }
        }
        assert!(direct(&Dangling).is_err());
    }

    /// Data near the 10 MiB JSON limit gets the tree path's exact verdict on each side of it.
    #[test]
    fn large_data_gets_the_exact_size_verdict() {
        for len in [2 << 20, 11 << 20] {
            let data = "x".repeat(len);
            let spec = JobSpec::new("j", Value::from(data.as_str()));
            assert_eq!(
                EncodedJob::from_serialize("j", &data, &JobOptions::new()),
                EncodedJob::new(&spec),
                "{len} bytes"
            );
        }
        let e =
            EncodedJob::from_serialize("j", &"x".repeat(11 << 20), &JobOptions::new()).unwrap_err();
        assert_eq!(e.message, "Job data too large (max 10MB)");
    }
}

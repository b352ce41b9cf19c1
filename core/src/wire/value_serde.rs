//! serde for [`Value`], directly: a `Serializer` that builds a [`Value`] tree from any
//! `Serialize` type ([`Value::from_serialize`]) and a `Deserializer` that reads any
//! `Deserialize` type from a [`Value`] ([`Value::deserialize`]), without an intermediate tree.
//!
//! The shapes are the ones a JavaScript peer expects, as serde_json writes them: a struct is a
//! map of its field names, a unit is nil, an enum is externally tagged (`"Variant"` or
//! `{"Variant": …}`). Numbers follow msgpackr's rules: every integer that fits `i64` is a
//! [`Value::Int`] (the encoder writes it as float64 outside `[-2^31, 2^32-1]`), a larger one a
//! [`Value::F64`]. Reading is lenient where JavaScript is: an integral float reads as an
//! integer, `undefined` as nil (so `Option` fields accept it), a struct from a map or from an
//! array of its fields, and a [`Value::Raw`] payload is decoded first.

use std::fmt::Display;

use serde::de::{self, IntoDeserializer, Visitor};
use serde::ser::{self, Serialize};

use super::value::{DataError, Value};

impl ser::Error for DataError {
    fn custom<T: Display>(msg: T) -> Self {
        DataError(msg.to_string())
    }
}

impl de::Error for DataError {
    fn custom<T: Display>(msg: T) -> Self {
        DataError(msg.to_string())
    }
}

/// Builds a [`Value`] from a `Serialize` type.
pub(crate) struct ValueSerializer;

fn int128(i: i128) -> Value {
    match i64::try_from(i) {
        Ok(i) => Value::Int(i),
        Err(_) => Value::F64(i as f64),
    }
}

impl ser::Serializer for ValueSerializer {
    type Ok = Value;
    type Error = DataError;
    type SerializeSeq = SerializeVec;
    type SerializeTuple = SerializeVec;
    type SerializeTupleStruct = SerializeVec;
    type SerializeTupleVariant = SerializeVariant<SerializeVec>;
    type SerializeMap = SerializeMap;
    type SerializeStruct = SerializeMap;
    type SerializeStructVariant = SerializeVariant<SerializeMap>;

    fn serialize_bool(self, v: bool) -> Result<Value, DataError> {
        Ok(Value::Bool(v))
    }
    fn serialize_i8(self, v: i8) -> Result<Value, DataError> {
        Ok(Value::Int(v.into()))
    }
    fn serialize_i16(self, v: i16) -> Result<Value, DataError> {
        Ok(Value::Int(v.into()))
    }
    fn serialize_i32(self, v: i32) -> Result<Value, DataError> {
        Ok(Value::Int(v.into()))
    }
    fn serialize_i64(self, v: i64) -> Result<Value, DataError> {
        Ok(Value::Int(v))
    }
    fn serialize_i128(self, v: i128) -> Result<Value, DataError> {
        Ok(int128(v))
    }
    fn serialize_u8(self, v: u8) -> Result<Value, DataError> {
        Ok(Value::Int(v.into()))
    }
    fn serialize_u16(self, v: u16) -> Result<Value, DataError> {
        Ok(Value::Int(v.into()))
    }
    fn serialize_u32(self, v: u32) -> Result<Value, DataError> {
        Ok(Value::Int(v.into()))
    }
    fn serialize_u64(self, v: u64) -> Result<Value, DataError> {
        Ok(Value::from(v))
    }
    fn serialize_u128(self, v: u128) -> Result<Value, DataError> {
        Ok(match i64::try_from(v) {
            Ok(i) => Value::Int(i),
            Err(_) => Value::F64(v as f64),
        })
    }
    fn serialize_f32(self, v: f32) -> Result<Value, DataError> {
        Ok(Value::F64(v.into()))
    }
    fn serialize_f64(self, v: f64) -> Result<Value, DataError> {
        Ok(Value::F64(v))
    }
    fn serialize_char(self, v: char) -> Result<Value, DataError> {
        Ok(Value::Str(v.to_string()))
    }
    fn serialize_str(self, v: &str) -> Result<Value, DataError> {
        Ok(Value::Str(v.to_owned()))
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Value, DataError> {
        Ok(Value::Bin(v.to_vec()))
    }
    fn serialize_none(self) -> Result<Value, DataError> {
        Ok(Value::Nil)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Value, DataError> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Value, DataError> {
        Ok(Value::Nil)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Value, DataError> {
        Ok(Value::Nil)
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<Value, DataError> {
        Ok(Value::Str(variant.to_owned()))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<Value, DataError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Value, DataError> {
        Ok(Value::Map(vec![(
            Value::Str(variant.to_owned()),
            value.serialize(ValueSerializer)?,
        )]))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<SerializeVec, DataError> {
        Ok(SerializeVec(Vec::with_capacity(len.unwrap_or(0))))
    }
    fn serialize_tuple(self, len: usize) -> Result<SerializeVec, DataError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<SerializeVec, DataError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<SerializeVariant<SerializeVec>, DataError> {
        Ok(SerializeVariant {
            variant,
            inner: SerializeVec(Vec::with_capacity(len)),
        })
    }
    fn serialize_map(self, len: Option<usize>) -> Result<SerializeMap, DataError> {
        Ok(SerializeMap {
            entries: Vec::with_capacity(len.unwrap_or(0)),
            key: None,
        })
    }
    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<SerializeMap, DataError> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<SerializeVariant<SerializeMap>, DataError> {
        Ok(SerializeVariant {
            variant,
            inner: self.serialize_map(Some(len))?,
        })
    }
}

/// The elements of an array being serialised.
pub(crate) struct SerializeVec(Vec<Value>);

impl ser::SerializeSeq for SerializeVec {
    type Ok = Value;
    type Error = DataError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), DataError> {
        self.0.push(value.serialize(ValueSerializer)?);
        Ok(())
    }
    fn end(self) -> Result<Value, DataError> {
        Ok(Value::Array(self.0))
    }
}

impl ser::SerializeTuple for SerializeVec {
    type Ok = Value;
    type Error = DataError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), DataError> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<Value, DataError> {
        ser::SerializeSeq::end(self)
    }
}

impl ser::SerializeTupleStruct for SerializeVec {
    type Ok = Value;
    type Error = DataError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), DataError> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<Value, DataError> {
        ser::SerializeSeq::end(self)
    }
}

/// The entries of a map (or a struct) being serialised.
pub(crate) struct SerializeMap {
    entries: Vec<(Value, Value)>,
    key: Option<Value>,
}

impl ser::SerializeMap for SerializeMap {
    type Ok = Value;
    type Error = DataError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), DataError> {
        self.key = Some(key.serialize(ValueSerializer)?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), DataError> {
        let key = self
            .key
            .take()
            .ok_or_else(|| DataError("a map value came before its key".into()))?;
        self.entries.push((key, value.serialize(ValueSerializer)?));
        Ok(())
    }
    fn end(self) -> Result<Value, DataError> {
        Ok(Value::Map(self.entries))
    }
}

impl ser::SerializeStruct for SerializeMap {
    type Ok = Value;
    type Error = DataError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), DataError> {
        self.entries.push((
            Value::Str(key.to_owned()),
            value.serialize(ValueSerializer)?,
        ));
        Ok(())
    }
    fn end(self) -> Result<Value, DataError> {
        ser::SerializeMap::end(self)
    }
}

/// A tuple or struct variant: `{"Variant": [..]}` or `{"Variant": {..}}`.
pub(crate) struct SerializeVariant<S> {
    variant: &'static str,
    inner: S,
}

impl<S> SerializeVariant<S> {
    fn wrap(variant: &'static str, v: Value) -> Value {
        Value::Map(vec![(Value::Str(variant.to_owned()), v)])
    }
}

impl ser::SerializeTupleVariant for SerializeVariant<SerializeVec> {
    type Ok = Value;
    type Error = DataError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), DataError> {
        ser::SerializeSeq::serialize_element(&mut self.inner, value)
    }
    fn end(self) -> Result<Value, DataError> {
        Ok(Self::wrap(
            self.variant,
            ser::SerializeSeq::end(self.inner)?,
        ))
    }
}

impl ser::SerializeStructVariant for SerializeVariant<SerializeMap> {
    type Ok = Value;
    type Error = DataError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), DataError> {
        ser::SerializeStruct::serialize_field(&mut self.inner, key, value)
    }
    fn end(self) -> Result<Value, DataError> {
        Ok(Self::wrap(
            self.variant,
            ser::SerializeMap::end(self.inner)?,
        ))
    }
}

/// Reads a `Deserialize` type from a borrowed [`Value`]. It never lends out borrowed data (it
/// serves `DeserializeOwned` types), so it is a deserializer for every `'de`: a [`Value::Raw`]
/// is decoded into a temporary tree and read from there.
pub(crate) struct ValueDeserializer<'a>(pub(crate) &'a Value);

impl ValueDeserializer<'_> {
    /// A JS number read as an integer: ints as they are, integral floats too.
    fn integer<'de, V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DataError> {
        match *self.0 {
            Value::F64(f) if f.fract() == 0.0 && f >= i64::MIN as f64 && f < i64::MAX as f64 => {
                visitor.visit_i64(f as i64)
            }
            Value::F64(f) if f.fract() == 0.0 && f >= 0.0 && f < u64::MAX as f64 => {
                visitor.visit_u64(f as u64)
            }
            _ => de::Deserializer::deserialize_any(self, visitor),
        }
    }
}

macro_rules! integers {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DataError> {
            self.integer(visitor)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for ValueDeserializer<'_> {
    type Error = DataError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DataError> {
        match self.0 {
            Value::Nil | Value::Undefined => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Int(i) => visitor.visit_i64(*i),
            Value::F64(f) => visitor.visit_f64(*f),
            Value::BigInt(i) => match (i64::try_from(*i), u64::try_from(*i)) {
                (Ok(i), _) => visitor.visit_i64(i),
                (_, Ok(u)) => visitor.visit_u64(u),
                _ => visitor.visit_i128(*i),
            },
            Value::Str(s) => visitor.visit_str(s),
            Value::Bin(b) | Value::Ext(_, b) => visitor.visit_bytes(b),
            Value::Raw(raw) => {
                let tree = raw.decode().map_err(|e| DataError(e.to_string()))?;
                ValueDeserializer(&tree).deserialize_any(visitor)
            }
            Value::Array(items) => {
                let mut seq = SeqAccess(items.iter());
                let v = visitor.visit_seq(&mut seq)?;
                match seq.0.len() {
                    0 => Ok(v),
                    _ => Err(de::Error::invalid_length(items.len(), &"fewer elements")),
                }
            }
            Value::Map(entries) => visitor.visit_map(MapAccess {
                entries: entries.iter(),
                value: None,
            }),
        }
    }

    integers! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DataError> {
        match self.0 {
            Value::Nil | Value::Undefined => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DataError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DataError> {
        match self.0 {
            Value::Str(s) => visitor.visit_enum(s.as_str().into_deserializer()),
            Value::Map(entries) if entries.len() == 1 => {
                let (variant, value) = &entries[0];
                visitor.visit_enum(EnumAccess { variant, value })
            }
            Value::Raw(raw) => {
                let tree = raw.decode().map_err(|e| DataError(e.to_string()))?;
                ValueDeserializer(&tree).deserialize_enum(_name, _variants, visitor)
            }
            _ => Err(de::Error::invalid_type(
                de::Unexpected::Other("a value that is neither a string nor a one-key map"),
                &"an enum variant",
            )),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DataError> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool f32 f64 char str string bytes byte_buf unit unit_struct seq tuple tuple_struct
        map struct identifier
    }
}

struct SeqAccess<'a>(std::slice::Iter<'a, Value>);

impl<'de> de::SeqAccess<'de> for SeqAccess<'_> {
    type Error = DataError;
    fn next_element_seed<T: de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DataError> {
        self.0
            .next()
            .map(|v| seed.deserialize(ValueDeserializer(v)))
            .transpose()
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

struct MapAccess<'a> {
    entries: std::slice::Iter<'a, (Value, Value)>,
    value: Option<&'a Value>,
}

impl<'de> de::MapAccess<'de> for MapAccess<'_> {
    type Error = DataError;
    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DataError> {
        match self.entries.next() {
            Some((k, v)) => {
                self.value = Some(v);
                seed.deserialize(ValueDeserializer(k)).map(Some)
            }
            None => Ok(None),
        }
    }
    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, DataError> {
        let v = self
            .value
            .take()
            .ok_or_else(|| DataError("a map value was read before its key".into()))?;
        seed.deserialize(ValueDeserializer(v))
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

struct EnumAccess<'a> {
    variant: &'a Value,
    value: &'a Value,
}

impl<'de, 'a> de::EnumAccess<'de> for EnumAccess<'a> {
    type Error = DataError;
    type Variant = VariantAccess<'a>;
    fn variant_seed<V: de::DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, VariantAccess<'a>), DataError> {
        let v = seed.deserialize(ValueDeserializer(self.variant))?;
        Ok((v, VariantAccess(self.value)))
    }
}

struct VariantAccess<'a>(&'a Value);

impl<'de> de::VariantAccess<'de> for VariantAccess<'_> {
    type Error = DataError;
    fn unit_variant(self) -> Result<(), DataError> {
        de::Deserialize::deserialize(ValueDeserializer(self.0))
    }
    fn newtype_variant_seed<T: de::DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, DataError> {
        seed.deserialize(ValueDeserializer(self.0))
    }
    fn tuple_variant<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DataError> {
        de::Deserializer::deserialize_seq(ValueDeserializer(self.0), visitor)
    }
    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DataError> {
        de::Deserializer::deserialize_map(ValueDeserializer(self.0), visitor)
    }
}

impl Value {
    /// Converts any `Serialize` value (job data, a result) into a [`Value`], in one pass.
    ///
    /// Shapes are the JSON ones a JavaScript peer expects (as serde_json writes them): a struct
    /// is a map of its field names, `()` and `None` are nil, an enum is externally tagged
    /// (`"Variant"`, `{"Variant": …}`). Integers that fit `i64` are [`Value::Int`] (the encoder
    /// sends them as float64 outside `[-2^31, 2^32-1]`, as msgpackr does); larger ones become
    /// floats, as they would in JavaScript.
    ///
    /// ```
    /// use autobatch_core::wire::Value;
    /// let v = Value::from_serialize(&serde_json_like()).unwrap();
    /// assert_eq!(v.get("n"), Some(&Value::Int(8_640_000_000)));
    /// // 8_640_000_000 is outside the int32/uint32 range: it goes out as float64, never uint64.
    /// assert_eq!(v.get("n").unwrap().to_bytes()[0], 0xcb);
    /// # fn serde_json_like() -> std::collections::BTreeMap<&'static str, u64> {
    /// #     [("n", 8_640_000_000u64)].into_iter().collect()
    /// # }
    /// ```
    pub fn from_serialize<T: serde::Serialize + ?Sized>(value: &T) -> Result<Value, DataError> {
        value.serialize(ValueSerializer)
    }

    /// Deserialises this value into a user type, straight from the value (a [`Value::Raw`]
    /// payload is decoded first). `undefined` reads as nil (so `Option` fields accept it), an
    /// integral float reads as an integer, and a struct reads from a map or from an array of its
    /// fields. Bad input is a [`DataError`], never a panic.
    ///
    /// ```
    /// use autobatch_core::wire::Value;
    /// #[derive(serde::Deserialize, Debug, PartialEq)]
    /// struct Email { to: String, attempt: u32, note: Option<String> }
    /// let v = Value::map([
    ///     ("to", Value::from("a@b")),
    ///     ("attempt", Value::F64(2.0)),
    ///     ("note", Value::Undefined),
    /// ]);
    /// let e: Email = v.deserialize().unwrap();
    /// assert_eq!(e, Email { to: "a@b".into(), attempt: 2, note: None });
    /// assert!(Value::from("x").deserialize::<u32>().is_err());
    /// ```
    pub fn deserialize<T: serde::de::DeserializeOwned>(&self) -> Result<T, DataError> {
        T::deserialize(ValueDeserializer(self))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Serialize};

    use super::super::value::Value;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    enum Kind {
        Plain,
        Wrapped(u32),
        Pair(i8, String),
        Named { a: bool },
    }

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Data {
        to: String,
        n: u64,
        big: u64,
        neg: i64,
        ratio: f32,
        note: Option<String>,
        kinds: Vec<Kind>,
        map: BTreeMap<String, i32>,
        unit: (),
        bytes: serde_bytes_like::Bytes,
    }

    mod serde_bytes_like {
        #[derive(PartialEq, Debug)]
        pub struct Bytes(pub Vec<u8>);
        impl serde::Serialize for Bytes {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(&self.0)
            }
        }
        impl<'de> serde::Deserialize<'de> for Bytes {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl serde::de::Visitor<'_> for V {
                    type Value = Bytes;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str("bytes")
                    }
                    fn visit_bytes<E>(self, b: &[u8]) -> Result<Bytes, E> {
                        Ok(Bytes(b.to_vec()))
                    }
                }
                d.deserialize_bytes(V)
            }
        }
    }

    fn sample() -> Data {
        Data {
            to: "a@b".into(),
            n: 7,
            big: (1 << 63) + 4096,
            neg: -8_640_000_000,
            ratio: 0.5,
            note: None,
            kinds: vec![
                Kind::Plain,
                Kind::Wrapped(3),
                Kind::Pair(-1, "x".into()),
                Kind::Named { a: true },
            ],
            map: [("k".to_owned(), 1)].into_iter().collect(),
            unit: (),
            bytes: serde_bytes_like::Bytes(vec![1, 2]),
        }
    }

    #[test]
    fn shapes_are_json_like_and_numbers_follow_msgpackr() {
        let v = Value::from_serialize(&sample()).unwrap();
        assert_eq!(v.get("to"), Some(&Value::from("a@b")));
        assert_eq!(v.get("n"), Some(&Value::Int(7)));
        assert_eq!(
            v.get("big"),
            Some(&Value::F64(((1u64 << 63) + 4096) as f64))
        );
        assert_eq!(
            v.get("neg").unwrap().to_bytes()[0],
            0xcb,
            "outside int32: float64"
        );
        assert_eq!(v.get("note"), Some(&Value::Nil));
        assert_eq!(v.get("unit"), Some(&Value::Nil));
        let kinds = v.get("kinds").unwrap().as_array().unwrap();
        assert_eq!(kinds[0], Value::from("Plain"));
        assert_eq!(kinds[1], Value::map([("Wrapped", Value::Int(3))]));
        assert_eq!(
            kinds[3],
            Value::map([("Named", Value::map([("a", Value::Bool(true))]))])
        );
    }

    #[test]
    fn round_trips_through_the_wire_and_raw() {
        let v = Value::from_serialize(&sample()).unwrap();
        let data = sample();
        let body = Value::map([("cmd", Value::from("PUSH")), ("data", v)]).to_bytes();
        let frame = Value::decode(&body).unwrap();
        let raw = frame.get("data").unwrap();
        assert!(matches!(raw, Value::Raw(_)));
        let back: Data = raw.deserialize().unwrap();
        assert_eq!(back, data);
    }

    #[test]
    fn lenient_reads() {
        // undefined reads as None, an integral float as an int, a struct from an array.
        #[derive(Deserialize, PartialEq, Debug)]
        struct S {
            a: Option<u8>,
            b: i64,
        }
        let v = Value::map([("a", Value::Undefined), ("b", Value::F64(8_640_000_000.0))]);
        assert_eq!(
            v.deserialize::<S>().unwrap(),
            S {
                a: None,
                b: 8_640_000_000
            }
        );
        let arr = Value::Array(vec![Value::Int(1), Value::Int(2)]);
        assert_eq!(arr.deserialize::<S>().unwrap(), S { a: Some(1), b: 2 });
        // Bad input is a typed error, never a panic.
        assert!(Value::F64(1.5).deserialize::<i64>().is_err());
        assert!(Value::Int(300).deserialize::<u8>().is_err());
        assert!(Value::Array(vec![Value::Int(1); 3])
            .deserialize::<(u8, u8)>()
            .is_err());
        assert!(Value::Int(1).deserialize::<Kind>().is_err());
        assert_eq!(Value::BigInt(5).deserialize::<u64>().unwrap(), 5);
    }
}

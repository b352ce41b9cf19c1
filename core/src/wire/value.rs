//! A MessagePack value model that follows bunqueue's (msgpackr's) number rules.
//!
//! The peer on the other side of the wire is JavaScript. Its numbers are `f64`, and msgpackr maps
//! the two 64-bit integer encodings (`0xcf`, `0xd3`) to `BigInt`, which the server rejects almost
//! everywhere. So the model has one integer variant for "a JS number that happens to be an
//! integer" ([`Value::Int`]) and a separate [`Value::BigInt`] for what a peer sent as a 64-bit
//! integer. The encoder writes an [`Value::Int`] in the smallest int form only when it lies in
//! `[-2^31, 2^32-1]`, and as a float64 otherwise, exactly as msgpackr does; it never emits
//! `0xcf`/`0xd3` for a [`Value::Int`].
//!
//! msgpackr's `undefined` (fixext1 type 0, bytes `d4 00 00`) is real traffic: it reads as
//! [`Value::Undefined`], which every typed reader treats as "absent".

/// One MessagePack value (an array or a map) kept encoded: how frames carry user payloads.
///
/// Decoding a frame copies a payload's bytes once instead of building a tree of [`Value`]s,
/// which would cost up to 32 bytes of memory for each byte of a dense array. The bytes were
/// checked when the frame was decoded (well-formed, nesting within
/// [`MAX_DEPTH`](super::MAX_DEPTH)). [`decode`](Self::decode) builds the tree on request;
/// [`Value::deserialize`] reads a user type from it.
///
/// ```
/// use autobatch_core::wire::Value;
/// // A PUSH whose data is a map: the data stays encoded.
/// let body = [0x82, 0xa3, b'c', b'm', b'd', 0xa4, b'P', b'U', b'S', b'H',
///             0xa4, b'd', b'a', b't', b'a', 0x81, 0xa1, b'x', 0x01];
/// let push = Value::decode(&body).unwrap();
/// let Some(Value::Raw(data)) = push.get("data") else { panic!("kept encoded") };
/// assert_eq!(data.as_bytes(), &[0x81, 0xa1, b'x', 0x01]);
/// assert_eq!(data.decode().unwrap(), Value::map([("x", Value::Int(1))]));
/// assert_eq!(push.get("data").unwrap(), &Value::map([("x", Value::Int(1))]));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct RawValue(Box<[u8]>);

impl RawValue {
    /// Bytes the decoder has already checked.
    pub(crate) fn from_trusted(bytes: Vec<u8>) -> RawValue {
        RawValue(bytes.into_boxed_slice())
    }

    /// The encoded bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// A decoded MessagePack value, as a JavaScript peer sees it.
#[derive(Debug, Clone, Default)]
pub enum Value {
    /// `nil` (JS `null`).
    Nil,
    /// msgpackr's `undefined`: fixext1 type 0. Typed readers treat it as an absent field.
    #[default]
    Undefined,
    /// A boolean.
    Bool(bool),
    /// An integer-valued JS number. Encoded as an int only inside `[-2^31, 2^32-1]`.
    Int(i64),
    /// A non-integer JS number (or one too large for [`Value::Int`]).
    F64(f64),
    /// A 64-bit integer encoding (`0xcf`/`0xd3`): a JS `BigInt`, which bunqueue rejects as a number.
    BigInt(i128),
    /// A UTF-8 string.
    Str(String),
    /// A user payload (job data, a result) that arrived as an array or a map and is kept in
    /// its encoded form: decoding a frame never builds a tree for it (see [`RawValue`]).
    /// It compares equal to the value it encodes, and re-encodes byte for byte.
    Raw(RawValue),
    /// Binary data (`bin8/16/32`).
    Bin(Vec<u8>),
    /// An array.
    Array(Vec<Value>),
    /// A map, in wire order. bunqueue only uses string keys, but any key is kept.
    Map(Vec<(Value, Value)>),
    /// Any other extension type.
    Ext(i8, Vec<u8>),
}

/// The integer range msgpackr encodes as an int; anything outside goes out as float64.
pub const JS_INT_MIN: i64 = -(1 << 31);
/// See [`JS_INT_MIN`].
pub const JS_INT_MAX: i64 = (1 << 32) - 1;

impl Value {
    /// Looks up a string key in a map; `None` for other values or a missing key.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(entries) => entries
                .iter()
                .find(|(k, _)| matches!(k, Value::Str(s) if s == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// `true` for nil and `undefined`, the two ways a JS peer says "nothing".
    pub fn is_nullish(&self) -> bool {
        matches!(self, Value::Nil | Value::Undefined)
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value as a JS number (an int or a float; never a BigInt).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Int(i) => Some(i as f64),
            Value::F64(f) => Some(f),
            _ => None,
        }
    }

    /// The value as an integer, read leniently: an integer-valued float counts, as it does for
    /// the server (`priority: 5.0` is accepted).
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::Int(i) => Some(i),
            Value::F64(f) if f.fract() == 0.0 && f.abs() < 9.3e18 => Some(f as i64),
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The array's elements, if this is an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// Builds a map with string keys from `(key, value)` pairs.
    pub fn map<K: Into<String>>(entries: impl IntoIterator<Item = (K, Value)>) -> Value {
        Value::Map(
            entries
                .into_iter()
                .map(|(k, v)| (Value::Str(k.into()), v))
                .collect(),
        )
    }
}

/// The length of a JS number's `JSON.stringify` form.
pub(crate) fn float_json_len(f: f64) -> usize {
    if f.is_finite() {
        // JS prints floats with its own shortest form; Rust's shortest round-trip form has
        // the same digits, and the exponent spelling differs by at most a character or two.
        format!("{f}").len()
    } else {
        4 // NaN and infinities stringify as null
    }
}

pub(crate) fn itoa_len(i: i64) -> usize {
    let mut len = if i < 0 { 2 } else { 1 };
    let mut u = i.unsigned_abs();
    while u >= 10 {
        u /= 10;
        len += 1;
    }
    len
}

/// `JSON.stringify(s).length`: quotes, escapes, and UTF-16 code units.
pub(crate) fn json_str_len(s: &str) -> usize {
    let mut n = 2;
    for c in s.chars() {
        n += match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf16(),
        };
    }
    n
}

/// Job data or a result that could not be converted to or from a user type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("job data could not be converted: {0}")]
#[non_exhaustive]
pub struct DataError(pub String);

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<u64> for Value {
    fn from(u: u64) -> Self {
        match i64::try_from(u) {
            Ok(i) => Value::Int(i),
            Err(_) => Value::F64(u as f64),
        }
    }
}

impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::F64(f)
    }
}

/// A JS number as msgpackr writes it: an integral value in the int32/uint32 range as an
/// integer, anything else as a float64.
pub(crate) fn js_number(f: f64) -> Value {
    if f.fract() == 0.0 && (-2_147_483_648.0..=4_294_967_295.0).contains(&f) {
        Value::Int(f as i64)
    } else {
        Value::F64(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(v: &Value) -> Value {
        Value::decode(&v.to_bytes()).unwrap()
    }

    #[test]
    fn ints_follow_the_js_range_rule() {
        assert_eq!(Value::Int(5).to_bytes(), [0x05]);
        assert_eq!(Value::Int(-1).to_bytes(), [0xff]);
        assert_eq!(
            Value::Int(JS_INT_MAX).to_bytes(),
            [0xce, 0xff, 0xff, 0xff, 0xff]
        );
        assert_eq!(Value::Int(JS_INT_MIN).to_bytes(), [0xd2, 0x80, 0, 0, 0]);
        let big = Value::Int(JS_INT_MAX + 1).to_bytes();
        assert_eq!(big[0], 0xcb, "above uint32 goes out as float64");
        assert_eq!(Value::decode(&big).unwrap(), Value::F64(4294967296.0));
        assert_eq!(Value::Int(JS_INT_MIN - 1).to_bytes()[0], 0xcb);
        assert_eq!(
            Value::Int(1_700_000_000_000).to_bytes(),
            [0xcb, 0x42, 0x78, 0xbc, 0xfe, 0x56, 0x80, 0x00, 0x00]
        );
    }

    #[test]
    fn sixty_four_bit_ints_read_as_bigint() {
        let v = Value::decode(&[0xcf, 0, 0, 0, 0, 0, 0, 0, 5]).unwrap();
        assert_eq!(v, Value::BigInt(5));
        assert_eq!(v.as_f64(), None, "a BigInt is not a number to bunqueue");
        let v = Value::decode(&[0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe]).unwrap();
        assert_eq!(v, Value::BigInt(-2));
        assert_eq!(roundtrip(&Value::BigInt(5)), Value::BigInt(5));
    }

    #[test]
    fn undefined_is_fixext1_type0() {
        assert_eq!(Value::decode(&[0xd4, 0, 0]).unwrap(), Value::Undefined);
        assert_eq!(Value::Undefined.to_bytes(), [0xd4, 0, 0]);
        assert!(Value::Undefined.is_nullish());
    }

    #[test]
    fn lenient_integers() {
        assert_eq!(Value::F64(5.0).as_i64(), Some(5));
        assert_eq!(Value::F64(1.5).as_i64(), None);
        assert_eq!(Value::BigInt(5).as_i64(), None);
    }

    #[test]
    fn serde_round_trip_keeps_structure() {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct Email {
            to: String,
            attempt: u32,
            big: f64,
            tags: Vec<String>,
            ratio: f64,
            note: Option<String>,
        }
        let e = Email {
            to: "a@b".into(),
            attempt: 1,
            big: 8_640_000_000.0,
            tags: vec!["x".into()],
            ratio: 0.25,
            note: None,
        };
        let v = Value::from_serialize(&e).unwrap();
        let back: Email = Value::decode(&v.to_bytes()).unwrap().deserialize().unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn json_len_matches_json_stringify() {
        let v = Value::map([
            ("to", Value::from("alice@example.com")),
            ("attempt", Value::Int(1)),
            ("tags", Value::Array(vec!["a".into(), "b".into()])),
            ("ratio", Value::F64(0.25)),
        ]);
        // {"to":"alice@example.com","attempt":1,"tags":["a","b"],"ratio":0.25}
        assert_eq!(v.json_len(usize::MAX), 68);
        assert_eq!(Value::from("é\n😀").json_len(usize::MAX), 2 + 1 + 2 + 2);
    }
}

//! Encoded lengths computed without encoding: what [`Encoder`](super::Encoder) would write, byte
//! for byte. A job's writers measure themselves with these (`Measure` in `options`), so the
//! producer caps a PUSHB by bytes before building it.
//!
//! Each function mirrors one [`Encoder`](super::Encoder) method; the property tests in
//! `push.rs` check that a job's computed length equals (and so is never below) its real
//! encoding. If the encoder changes, those tests say so.

use super::value::{Value, JS_INT_MAX, JS_INT_MIN};

/// Header bytes of a map of `n` entries (fixmap, map16 or map32).
pub(crate) fn map_header_len(n: usize) -> usize {
    if n < 16 {
        1
    } else if n <= u16::MAX as usize {
        3
    } else {
        5
    }
}

/// Header bytes of an array of `n` elements (fixarray, array16 or array32).
pub(crate) fn array_header_len(n: usize) -> usize {
    map_header_len(n)
}

/// Bytes of a string of `n` UTF-8 bytes, header included.
pub(crate) fn str_len(n: usize) -> usize {
    n + if n < 32 {
        1
    } else if n <= u8::MAX as usize {
        2
    } else if n <= u16::MAX as usize {
        3
    } else {
        5
    }
}

/// Bytes of an integer as [`Encoder::int`](super::Encoder::int) writes it (float64 outside
/// msgpackr's int range).
pub(crate) fn int_len(i: i64) -> usize {
    match i {
        _ if !(JS_INT_MIN..=JS_INT_MAX).contains(&i) => 9,
        -32..=0x7f => 1,
        0x80..=0xff | -0x80..=-33 => 2,
        0x100..=0xffff | -0x8000..=-0x81 => 3,
        _ => 5,
    }
}

/// Bytes of any value as [`Encoder::value`](super::Encoder::value) writes it.
pub(crate) fn value_len(v: &Value) -> usize {
    match v {
        Value::Nil | Value::Bool(_) => 1,
        Value::Undefined => 3,
        Value::Int(i) => int_len(*i),
        Value::F64(_) | Value::BigInt(_) => 9,
        Value::Str(s) => str_len(s.len()),
        Value::Raw(raw) => raw.as_bytes().len(),
        Value::Bin(b) => {
            b.len()
                + if b.len() <= u8::MAX as usize {
                    2
                } else if b.len() <= u16::MAX as usize {
                    3
                } else {
                    5
                }
        }
        Value::Array(items) => {
            array_header_len(items.len()) + items.iter().map(value_len).sum::<usize>()
        }
        Value::Map(entries) => {
            map_header_len(entries.len())
                + entries
                    .iter()
                    .map(|(k, v)| value_len(k) + value_len(v))
                    .sum::<usize>()
        }
        Value::Ext(_, data) => {
            // Marker and type byte, plus a length for the non-fixext sizes.
            data.len()
                + match data.len() {
                    1 | 2 | 4 | 8 | 16 => 2,
                    n if n <= u8::MAX as usize => 3,
                    n if n <= u16::MAX as usize => 4,
                    _ => 6,
                }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Encoder;

    #[test]
    fn headers_match_the_encoder_at_every_boundary() {
        for n in [0usize, 15, 16, 31, 32, 255, 256, 65535, 65536] {
            let mut out = Vec::new();
            Encoder::new(&mut out).map(n);
            assert_eq!(out.len(), map_header_len(n), "map {n}");
            out.clear();
            Encoder::new(&mut out).array(n);
            assert_eq!(out.len(), array_header_len(n), "array {n}");
            out.clear();
            Encoder::new(&mut out).str(&"x".repeat(n));
            assert_eq!(out.len(), str_len(n), "str {n}");
        }
        for i in [
            0,
            127,
            128,
            255,
            256,
            65535,
            65536,
            JS_INT_MAX,
            JS_INT_MAX + 1,
            -1,
            -32,
            -33,
            -128,
            -129,
            -32768,
            -32769,
            JS_INT_MIN,
            JS_INT_MIN - 1,
            i64::MIN,
            i64::MAX,
        ] {
            let mut out = Vec::new();
            Encoder::new(&mut out).int(i);
            assert_eq!(out.len(), int_len(i), "int {i}");
        }
    }
}

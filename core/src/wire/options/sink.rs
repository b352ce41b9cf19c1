//! Where a job's fields are written: an encoder, a measure of its bytes, or nowhere (to count
//! the fields alone).

use super::super::codec::Encoder;
use super::super::size::{array_header_len, int_len, map_header_len, str_len, value_len};
use super::super::Value;

/// Where a job's fields are written: an [`Encoder`], or a [`Measure`] of what an encoder would
/// write. The writers below are generic over it, so the bytes and their size come from the
/// same code.
pub(in crate::wire) trait Sink {
    /// A string.
    fn str(&mut self, s: &str) -> &mut Self;
    /// An integer, as [`Encoder::int`] writes it.
    fn int(&mut self, i: i64) -> &mut Self;
    /// A float64.
    fn f64(&mut self, f: f64) -> &mut Self;
    /// A boolean.
    fn bool(&mut self, b: bool) -> &mut Self;
    /// A map header of `n` entries.
    fn map(&mut self, n: usize) -> &mut Self;
    /// An array header of `n` elements.
    fn array(&mut self, n: usize) -> &mut Self;
    /// A whole value.
    fn value(&mut self, v: &Value) -> &mut Self;
    /// Bytes already encoded.
    fn raw(&mut self, bytes: &[u8]) -> &mut Self;

    /// A key and its string value.
    fn kv_str(&mut self, key: &str, value: &str) -> &mut Self {
        self.str(key).str(value)
    }
}

impl Sink for Encoder<'_> {
    fn str(&mut self, s: &str) -> &mut Self {
        Encoder::str(self, s)
    }
    fn int(&mut self, i: i64) -> &mut Self {
        Encoder::int(self, i)
    }
    fn f64(&mut self, f: f64) -> &mut Self {
        Encoder::f64(self, f)
    }
    fn bool(&mut self, b: bool) -> &mut Self {
        Encoder::bool(self, b)
    }
    fn map(&mut self, n: usize) -> &mut Self {
        Encoder::map(self, n)
    }
    fn array(&mut self, n: usize) -> &mut Self {
        Encoder::array(self, n)
    }
    fn value(&mut self, v: &Value) -> &mut Self {
        Encoder::value(self, v)
    }
    fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        Encoder::raw(self, bytes)
    }
}

/// Counts the bytes an [`Encoder`] would write, without writing them.
#[derive(Debug, Default)]
pub(in crate::wire) struct Measure(pub(in crate::wire) usize);

impl Sink for Measure {
    fn str(&mut self, s: &str) -> &mut Self {
        self.0 += str_len(s.len());
        self
    }
    fn int(&mut self, i: i64) -> &mut Self {
        self.0 += int_len(i);
        self
    }
    fn f64(&mut self, _: f64) -> &mut Self {
        self.0 += 9;
        self
    }
    fn bool(&mut self, _: bool) -> &mut Self {
        self.0 += 1;
        self
    }
    fn map(&mut self, n: usize) -> &mut Self {
        self.0 += map_header_len(n);
        self
    }
    fn array(&mut self, n: usize) -> &mut Self {
        self.0 += array_header_len(n);
        self
    }
    fn value(&mut self, v: &Value) -> &mut Self {
        self.0 += value_len(v);
        self
    }
    fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.0 += bytes.len();
        self
    }
}

/// Writes nothing: for counting the fields a writer writes, from what it returns.
#[derive(Debug, Default)]
pub(in crate::wire) struct Discard;

impl Sink for Discard {
    fn str(&mut self, _: &str) -> &mut Self {
        self
    }
    fn int(&mut self, _: i64) -> &mut Self {
        self
    }
    fn f64(&mut self, _: f64) -> &mut Self {
        self
    }
    fn bool(&mut self, _: bool) -> &mut Self {
        self
    }
    fn map(&mut self, _: usize) -> &mut Self {
        self
    }
    fn array(&mut self, _: usize) -> &mut Self {
        self
    }
    fn value(&mut self, _: &Value) -> &mut Self {
        self
    }
    fn raw(&mut self, _: &[u8]) -> &mut Self {
        self
    }
}

//! The MessagePack byte codec: a bounded reader and a writer with msgpackr's number rules.
//!
//! Typed commands and replies are written straight through [`Encoder`] (no intermediate
//! [`Value`] tree on the hot path) and read through [`Value`].

use super::error::DecodeError;
use super::value::{Value, JS_INT_MAX, JS_INT_MIN};

/// Nesting deeper than this is refused rather than recursed into: it bounds stack use on
/// hostile input. Real bunqueue traffic nests a handful of levels.
pub const MAX_DEPTH: usize = 256;

/// A reader over one frame body. Every length is checked against the bytes left before
/// anything is allocated, so a lying header cannot make us allocate more than the frame holds.
pub(crate) struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
    depth: usize,
    /// How many more [`Value`] slots may be reserved ahead of decoding them. Each container
    /// header may announce up to "bytes left" elements, and nested headers all see the same
    /// bytes left, so reserving the announced count at every level would let a frame of `n`
    /// bytes reserve `depth × n` slots (gigabytes for a 64 MiB frame). Sharing one budget of
    /// `buf.len()` slots bounds every reservation by the frame length; containers that announce
    /// more than the budget grow as their elements actually arrive.
    reserve_budget: usize,
}

impl<'a> Decoder<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Decoder {
            buf,
            pos: 0,
            depth: 0,
            reserve_budget: buf.len(),
        }
    }

    /// Takes up to `n` slots from the reservation budget; returns how many were granted.
    fn reserve(&mut self, n: usize) -> usize {
        let k = n.min(self.reserve_budget);
        self.reserve_budget -= k;
        k
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.remaining() < n {
            return Err(DecodeError::Truncated { at: self.pos });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn be<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn len16(&mut self) -> Result<usize, DecodeError> {
        Ok(u16::from_be_bytes(self.be()?) as usize)
    }

    fn len32(&mut self) -> Result<usize, DecodeError> {
        Ok(u32::from_be_bytes(self.be()?) as usize)
    }

    pub(crate) fn value(&mut self) -> Result<Value, DecodeError> {
        let at = self.pos;
        let b = self.u8()?;
        Ok(match b {
            0x00..=0x7f => Value::Int(b as i64),
            0x80..=0x8f => self.map((b & 0x0f) as usize)?,
            0x90..=0x9f => self.array((b & 0x0f) as usize)?,
            0xa0..=0xbf => self.str((b & 0x1f) as usize)?,
            0xc0 => Value::Nil,
            0xc1 => return Err(DecodeError::ReservedByte { at }),
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4 => {
                let n = self.u8()? as usize;
                Value::Bin(self.take(n)?.to_vec())
            }
            0xc5 => {
                let n = self.len16()?;
                Value::Bin(self.take(n)?.to_vec())
            }
            0xc6 => {
                let n = self.len32()?;
                Value::Bin(self.take(n)?.to_vec())
            }
            0xc7 => {
                let n = self.u8()? as usize;
                self.ext(n)?
            }
            0xc8 => {
                let n = self.len16()?;
                self.ext(n)?
            }
            0xc9 => {
                let n = self.len32()?;
                self.ext(n)?
            }
            0xca => Value::F64(f32::from_be_bytes(self.be()?) as f64),
            0xcb => Value::F64(f64::from_be_bytes(self.be()?)),
            0xcc => Value::Int(self.u8()? as i64),
            0xcd => Value::Int(u16::from_be_bytes(self.be()?) as i64),
            0xce => Value::Int(u32::from_be_bytes(self.be()?) as i64),
            0xcf => Value::BigInt(u64::from_be_bytes(self.be()?) as i128),
            0xd0 => Value::Int(i8::from_be_bytes(self.be()?) as i64),
            0xd1 => Value::Int(i16::from_be_bytes(self.be()?) as i64),
            0xd2 => Value::Int(i32::from_be_bytes(self.be()?) as i64),
            0xd3 => Value::BigInt(i64::from_be_bytes(self.be()?) as i128),
            0xd4 => self.ext(1)?,
            0xd5 => self.ext(2)?,
            0xd6 => self.ext(4)?,
            0xd7 => self.ext(8)?,
            0xd8 => self.ext(16)?,
            0xd9 => {
                let n = self.u8()? as usize;
                self.str(n)?
            }
            0xda => {
                let n = self.len16()?;
                self.str(n)?
            }
            0xdb => {
                let n = self.len32()?;
                self.str(n)?
            }
            0xdc => {
                let n = self.len16()?;
                self.array(n)?
            }
            0xdd => {
                let n = self.len32()?;
                self.array(n)?
            }
            0xde => {
                let n = self.len16()?;
                self.map(n)?
            }
            0xdf => {
                let n = self.len32()?;
                self.map(n)?
            }
            0xe0..=0xff => Value::Int(b as i8 as i64),
        })
    }

    fn str(&mut self, n: usize) -> Result<Value, DecodeError> {
        let at = self.pos;
        let bytes = self.take(n)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(Value::Str(s.to_owned())),
            // The server decodes invalid UTF-8 leniently (replacement characters), then
            // validates what it got; doing the same keeps the broker's answers aligned.
            Err(_) => {
                let _ = at;
                Ok(Value::Str(String::from_utf8_lossy(bytes).into_owned()))
            }
        }
    }

    fn ext(&mut self, n: usize) -> Result<Value, DecodeError> {
        let ty = self.u8()? as i8;
        let data = self.take(n)?;
        Ok(if ty == 0 {
            Value::Undefined
        } else {
            Value::Ext(ty, data.to_vec())
        })
    }

    fn enter(&mut self) -> Result<(), DecodeError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(DecodeError::TooDeep { limit: MAX_DEPTH });
        }
        Ok(())
    }

    fn array(&mut self, n: usize) -> Result<Value, DecodeError> {
        // Every element takes at least one byte: a count above what remains is a lie.
        if n > self.remaining() {
            return Err(DecodeError::Truncated { at: self.pos });
        }
        self.enter()?;
        let mut items = Vec::with_capacity(self.reserve(n));
        for _ in 0..n {
            items.push(self.value()?);
        }
        self.depth -= 1;
        Ok(Value::Array(items))
    }

    fn map(&mut self, n: usize) -> Result<Value, DecodeError> {
        if n.saturating_mul(2) > self.remaining() {
            return Err(DecodeError::Truncated { at: self.pos });
        }
        self.enter()?;
        // An entry holds two values: it takes two slots of the budget.
        let mut entries = Vec::with_capacity(self.reserve(n.saturating_mul(2)) / 2);
        for _ in 0..n {
            let k = self.value()?;
            let v = self.value()?;
            entries.push((k, v));
        }
        self.depth -= 1;
        Ok(Value::Map(entries))
    }
}

/// A MessagePack writer into a caller-owned buffer.
///
/// Integers use the smallest form inside msgpackr's int range and float64 outside it; maps use
/// the compact fixmap form (the server accepts fixmap and map16 alike).
pub struct Encoder<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> Encoder<'a> {
    /// Writes into `out`, appending.
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        Encoder { out }
    }

    /// A map header for `n` entries; the caller writes `n` key/value pairs next.
    pub fn map(&mut self, n: usize) -> &mut Self {
        if n < 16 {
            self.out.push(0x80 | n as u8);
        } else if n <= u16::MAX as usize {
            self.out.push(0xde);
            self.out.extend_from_slice(&(n as u16).to_be_bytes());
        } else {
            self.out.push(0xdf);
            self.out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        self
    }

    /// An array header for `n` elements.
    pub fn array(&mut self, n: usize) -> &mut Self {
        if n < 16 {
            self.out.push(0x90 | n as u8);
        } else if n <= u16::MAX as usize {
            self.out.push(0xdc);
            self.out.extend_from_slice(&(n as u16).to_be_bytes());
        } else {
            self.out.push(0xdd);
            self.out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        self
    }

    /// A UTF-8 string.
    pub fn str(&mut self, s: &str) -> &mut Self {
        let n = s.len();
        if n < 32 {
            self.out.push(0xa0 | n as u8);
        } else if n <= u8::MAX as usize {
            self.out.extend_from_slice(&[0xd9, n as u8]);
        } else if n <= u16::MAX as usize {
            self.out.push(0xda);
            self.out.extend_from_slice(&(n as u16).to_be_bytes());
        } else {
            self.out.push(0xdb);
            self.out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        self.out.extend_from_slice(s.as_bytes());
        self
    }

    /// A key/value pair with a string value: the most common shape in requests.
    pub fn kv_str(&mut self, key: &str, value: &str) -> &mut Self {
        self.str(key).str(value)
    }

    /// A JS integer: smallest int form in `[-2^31, 2^32-1]`, float64 outside.
    pub fn int(&mut self, i: i64) -> &mut Self {
        if !(JS_INT_MIN..=JS_INT_MAX).contains(&i) {
            return self.f64(i as f64);
        }
        match i {
            0..=0x7f => self.out.push(i as u8),
            -32..=-1 => self.out.push(i as i8 as u8),
            0x80..=0xff => self.out.extend_from_slice(&[0xcc, i as u8]),
            0x100..=0xffff => {
                self.out.push(0xcd);
                self.out.extend_from_slice(&(i as u16).to_be_bytes());
            }
            0x1_0000..=JS_INT_MAX => {
                self.out.push(0xce);
                self.out.extend_from_slice(&(i as u32).to_be_bytes());
            }
            -0x80..=-33 => self.out.extend_from_slice(&[0xd0, i as i8 as u8]),
            -0x8000..=-0x81 => {
                self.out.push(0xd1);
                self.out.extend_from_slice(&(i as i16).to_be_bytes());
            }
            _ => {
                self.out.push(0xd2);
                self.out.extend_from_slice(&(i as i32).to_be_bytes());
            }
        }
        self
    }

    /// A float64.
    pub fn f64(&mut self, f: f64) -> &mut Self {
        self.out.push(0xcb);
        self.out.extend_from_slice(&f.to_be_bytes());
        self
    }

    /// A boolean.
    pub fn bool(&mut self, b: bool) -> &mut Self {
        self.out.push(if b { 0xc3 } else { 0xc2 });
        self
    }

    /// nil.
    pub fn nil(&mut self) -> &mut Self {
        self.out.push(0xc0);
        self
    }

    /// Bytes that already hold one encoded MessagePack value.
    pub fn raw(&mut self, encoded: &[u8]) -> &mut Self {
        self.out.extend_from_slice(encoded);
        self
    }

    /// Any [`Value`].
    pub fn value(&mut self, v: &Value) -> &mut Self {
        match v {
            Value::Nil => self.nil(),
            Value::Undefined => {
                self.out.extend_from_slice(&[0xd4, 0x00, 0x00]);
                self
            }
            Value::Bool(b) => self.bool(*b),
            Value::Int(i) => self.int(*i),
            Value::F64(f) => self.f64(*f),
            Value::BigInt(i) => {
                // Only a peer that sent a 64-bit int gets one back (for faithful re-encoding);
                // nothing we build ourselves is a BigInt.
                if *i >= 0 {
                    self.out.push(0xcf);
                    self.out.extend_from_slice(&(*i as u64).to_be_bytes());
                } else {
                    self.out.push(0xd3);
                    self.out.extend_from_slice(&(*i as i64).to_be_bytes());
                }
                self
            }
            Value::Str(s) => self.str(s),
            Value::Bin(b) => {
                let n = b.len();
                if n <= u8::MAX as usize {
                    self.out.extend_from_slice(&[0xc4, n as u8]);
                } else if n <= u16::MAX as usize {
                    self.out.push(0xc5);
                    self.out.extend_from_slice(&(n as u16).to_be_bytes());
                } else {
                    self.out.push(0xc6);
                    self.out.extend_from_slice(&(n as u32).to_be_bytes());
                }
                self.out.extend_from_slice(b);
                self
            }
            Value::Array(items) => {
                self.array(items.len());
                for item in items {
                    self.value(item);
                }
                self
            }
            Value::Map(entries) => {
                self.map(entries.len());
                for (k, v) in entries {
                    self.value(k);
                    self.value(v);
                }
                self
            }
            Value::Ext(ty, data) => {
                let n = data.len();
                match n {
                    1 => self.out.push(0xd4),
                    2 => self.out.push(0xd5),
                    4 => self.out.push(0xd6),
                    8 => self.out.push(0xd7),
                    16 => self.out.push(0xd8),
                    n if n <= u8::MAX as usize => self.out.extend_from_slice(&[0xc7, n as u8]),
                    n if n <= u16::MAX as usize => {
                        self.out.push(0xc8);
                        self.out.extend_from_slice(&(n as u16).to_be_bytes());
                    }
                    n => {
                        self.out.push(0xc9);
                        self.out.extend_from_slice(&(n as u32).to_be_bytes());
                    }
                }
                self.out.push(*ty as u8);
                self.out.extend_from_slice(data);
                self
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_int_boundary_round_trips() {
        for i in [
            0, 127, 128, 255, 256, 65535, 65536, JS_INT_MAX, -1, -32, -33, -128, -129, -32768,
            -32769, JS_INT_MIN,
        ] {
            let mut out = Vec::new();
            Encoder::new(&mut out).int(i);
            assert_eq!(Value::decode(&out).unwrap(), Value::Int(i), "{i}");
        }
    }

    #[test]
    fn lying_lengths_do_not_allocate() {
        // array32 announcing 4 billion elements in a 5-byte body.
        assert!(matches!(
            Value::decode(&[0xdd, 0xff, 0xff, 0xff, 0xff]),
            Err(DecodeError::Truncated { .. })
        ));
        assert!(matches!(
            Value::decode(&[0xdf, 0xff, 0xff, 0xff, 0xff]),
            Err(DecodeError::Truncated { .. })
        ));
        assert!(matches!(
            Value::decode(&[0xdb, 0xff, 0xff, 0xff, 0xff]),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn nested_lying_lengths_do_not_multiply_reservations() {
        // Found while bounding allocation per input byte: 200 nested array32 headers, each
        // announcing "as many elements as bytes left", followed by fixints. Every level used to
        // reserve ~32 bytes × the frame length before failing, so a 64 MiB frame could ask for
        // 200 × 2 GiB. With a shared budget the reservations add up to at most one slot per byte.
        let levels = 200;
        let body_len = levels * 5 + 100_000;
        let mut body = Vec::with_capacity(body_len);
        for i in 0..levels {
            let left = (body_len - (i + 1) * 5) as u32;
            body.push(0xdd);
            body.extend_from_slice(&left.to_be_bytes());
        }
        body.resize(body_len, 0x00);
        let mut d = Decoder::new(&body);
        assert!(matches!(d.value(), Err(DecodeError::Truncated { .. })));
        assert!(d.reserve_budget <= body_len);
        // A legitimate large array still gets its full reservation.
        let mut ok = vec![0xdc, 0x03, 0xe8];
        ok.resize(3 + 1000, 0x01);
        assert_eq!(Value::decode(&ok).unwrap().as_array().unwrap().len(), 1000);
    }

    #[test]
    fn deep_nesting_is_refused() {
        let bytes = vec![0x91; MAX_DEPTH + 10];
        assert!(matches!(
            Value::decode(&bytes),
            Err(DecodeError::TooDeep { .. })
        ));
    }

    #[test]
    fn reserved_and_trailing() {
        assert!(matches!(
            Value::decode(&[0xc1]),
            Err(DecodeError::ReservedByte { at: 0 })
        ));
        assert!(matches!(
            Value::decode(&[0xc0, 0xc0]),
            Err(DecodeError::TrailingBytes { extra: 1 })
        ));
        assert!(matches!(
            Value::decode(&[]),
            Err(DecodeError::Truncated { at: 0 })
        ));
    }

    #[test]
    fn strings_of_every_width() {
        for n in [0usize, 31, 32, 255, 256, 65535, 65536] {
            let s = "x".repeat(n);
            let mut out = Vec::new();
            Encoder::new(&mut out).str(&s);
            assert_eq!(Value::decode(&out).unwrap(), Value::Str(s));
        }
    }
}

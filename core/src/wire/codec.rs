//! The MessagePack byte codec: a bounded reader and a writer with msgpackr's number rules.
//!
//! Typed commands and replies are written straight through [`Encoder`] (no intermediate
//! [`Value`] tree on the hot path) and read through [`Value`].

use super::error::DecodeError;
use super::value::{
    float_json_len, itoa_len, json_str_len, RawValue, Value, JS_INT_MAX, JS_INT_MIN,
};

/// Nesting deeper than this is refused rather than recursed into: it bounds stack use on
/// hostile input. Real bunqueue traffic nests a handful of levels.
pub const MAX_DEPTH: usize = 256;

/// Decoding one frame may allocate at most this many times the frame's length …
pub const DECODE_BUDGET_FACTOR: usize = 4;
/// … plus this many bytes, so that small frames of many tiny items (a PUSHB of thousands of
/// small jobs, a PULLB reply) are never refused.
pub const DECODE_BUDGET_FLOOR: usize = 8 * 1024 * 1024;

/// Keys whose value is a user payload (job data, a result) when it sits in a nested map, or in
/// a request's top-level map. Such a value, when it is an array or a map, is kept encoded
/// ([`Value::Raw`]) instead of being decoded into a tree: the library only carries payloads,
/// and a tree costs up to 32 bytes for every byte of a dense array.
const PAYLOAD_KEYS: [&str; 3] = ["data", "result", "returnvalue"];
/// Keys whose value is an array of payloads (ACKB's `results`).
const PAYLOAD_LIST_KEYS: [&str; 1] = ["results"];

/// What a walk over encoded bytes learns without allocating: the length `JSON.stringify` would
/// give the value, and whether it holds a 64-bit integer (a JS BigInt, which is not
/// JSON-serialisable).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Scan {
    pub json_len: usize,
    pub has_bigint: bool,
}

/// A reader over one frame body. Every length is checked against the bytes left before
/// anything is allocated, and every allocation is charged to a byte budget first, so a frame
/// of `n` bytes never makes the decoder allocate more than
/// `DECODE_BUDGET_FACTOR × n + DECODE_BUDGET_FLOOR` bytes, whatever its shape.
pub(crate) struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
    depth: usize,
    /// Bytes the decoder may still allocate.
    budget: usize,
    /// How many more container slots may be reserved ahead of decoding them. Each container
    /// header may announce up to "bytes left" elements, and nested headers all see the same
    /// bytes left, so reserving the announced count at every level would let a small frame
    /// reserve `depth × n` slots. Sharing one budget of `buf.len()` slots bounds reservations
    /// by the frame length; containers that announce more grow as their elements arrive.
    reserve_slots: usize,
    /// Whether payloads stay encoded (frames) or are decoded too (an explicit expansion).
    keep_payloads: bool,
}

impl<'a> Decoder<'a> {
    /// A decoder for one frame body: payloads stay encoded, allocation is budgeted.
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Decoder {
            buf,
            pos: 0,
            depth: 0,
            budget: buf
                .len()
                .saturating_mul(DECODE_BUDGET_FACTOR)
                .saturating_add(DECODE_BUDGET_FLOOR),
            reserve_slots: buf.len(),
            keep_payloads: true,
        }
    }

    /// A decoder that builds the whole tree, payloads included, without a budget: for a value
    /// the caller asked to see in full ([`RawValue::decode`](super::RawValue::decode)).
    pub(crate) fn expanding(buf: &'a [u8]) -> Self {
        Decoder {
            buf,
            pos: 0,
            depth: 0,
            budget: usize::MAX,
            reserve_slots: buf.len(),
            keep_payloads: false,
        }
    }

    /// An empty container for `n` announced elements, with as much reserved as the slot and
    /// byte budgets allow (the reservation is charged).
    fn container<T>(&mut self, n: usize) -> Result<Vec<T>, DecodeError> {
        let size = std::mem::size_of::<T>().max(1);
        let k = n.min(self.reserve_slots).min(self.budget / size);
        self.reserve_slots -= k;
        self.charge(k * size)?;
        Ok(Vec::with_capacity(k))
    }

    /// Appends to a container, charging its growth before it happens.
    fn grow_push<T>(&mut self, items: &mut Vec<T>, item: T) -> Result<(), DecodeError> {
        if items.len() == items.capacity() {
            let extra = items.len().max(4);
            self.charge(extra.saturating_mul(std::mem::size_of::<T>()))?;
            items.reserve_exact(extra);
        }
        items.push(item);
        Ok(())
    }

    /// Takes `bytes` from the allocation budget, before they are allocated.
    fn charge(&mut self, bytes: usize) -> Result<(), DecodeError> {
        if bytes > self.budget {
            return Err(DecodeError::TooExpensive {
                frame_len: self.buf.len(),
            });
        }
        self.budget -= bytes;
        Ok(())
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

    /// Bytes copied out of the frame (a binary, an extension), charged first.
    fn take_owned(&mut self, n: usize) -> Result<Vec<u8>, DecodeError> {
        let bytes = self.take(n)?;
        self.charge(n)?;
        Ok(bytes.to_vec())
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

    /// Reads one header byte (and its length bytes) and says what follows.
    fn header(&mut self) -> Result<Header, DecodeError> {
        let at = self.pos;
        let b = self.u8()?;
        Ok(match b {
            0x00..=0x7f => Header::Int(b as i64),
            0x80..=0x8f => Header::Map((b & 0x0f) as usize),
            0x90..=0x9f => Header::Array((b & 0x0f) as usize),
            0xa0..=0xbf => Header::Str((b & 0x1f) as usize),
            0xc0 => Header::Nil,
            0xc1 => return Err(DecodeError::ReservedByte { at }),
            0xc2 => Header::Bool(false),
            0xc3 => Header::Bool(true),
            0xc4 => Header::Bin(self.u8()? as usize),
            0xc5 => Header::Bin(self.len16()?),
            0xc6 => Header::Bin(self.len32()?),
            0xc7 => Header::Ext(self.u8()? as usize),
            0xc8 => Header::Ext(self.len16()?),
            0xc9 => Header::Ext(self.len32()?),
            0xca => Header::F64(f32::from_be_bytes(self.be()?) as f64),
            0xcb => Header::F64(f64::from_be_bytes(self.be()?)),
            0xcc => Header::Int(self.u8()? as i64),
            0xcd => Header::Int(u16::from_be_bytes(self.be()?) as i64),
            0xce => Header::Int(u32::from_be_bytes(self.be()?) as i64),
            0xcf => Header::BigInt(u64::from_be_bytes(self.be()?) as i128),
            0xd0 => Header::Int(i8::from_be_bytes(self.be()?) as i64),
            0xd1 => Header::Int(i16::from_be_bytes(self.be()?) as i64),
            0xd2 => Header::Int(i32::from_be_bytes(self.be()?) as i64),
            0xd3 => Header::BigInt(i64::from_be_bytes(self.be()?) as i128),
            0xd4 => Header::Ext(1),
            0xd5 => Header::Ext(2),
            0xd6 => Header::Ext(4),
            0xd7 => Header::Ext(8),
            0xd8 => Header::Ext(16),
            0xd9 => Header::Str(self.u8()? as usize),
            0xda => Header::Str(self.len16()?),
            0xdb => Header::Str(self.len32()?),
            0xdc => Header::Array(self.len16()?),
            0xdd => Header::Array(self.len32()?),
            0xde => Header::Map(self.len16()?),
            0xdf => Header::Map(self.len32()?),
            0xe0..=0xff => Header::Int(b as i8 as i64),
        })
    }

    pub(crate) fn value(&mut self) -> Result<Value, DecodeError> {
        Ok(match self.header()? {
            Header::Nil => Value::Nil,
            Header::Bool(b) => Value::Bool(b),
            Header::Int(i) => Value::Int(i),
            Header::F64(f) => Value::F64(f),
            Header::BigInt(i) => Value::BigInt(i),
            Header::Str(n) => self.str(n)?,
            Header::Bin(n) => Value::Bin(self.take_owned(n)?),
            Header::Ext(n) => {
                let ty = self.u8()? as i8;
                if ty == 0 {
                    self.take(n)?;
                    Value::Undefined
                } else {
                    Value::Ext(ty, self.take_owned(n)?)
                }
            }
            Header::Array(n) => self.array(n)?,
            Header::Map(n) => self.map(n)?,
        })
    }

    fn str(&mut self, n: usize) -> Result<Value, DecodeError> {
        let bytes = self.take(n)?;
        // The server decodes invalid UTF-8 leniently (replacement characters), then validates
        // what it got; doing the same keeps the broker's answers aligned.
        let s = String::from_utf8_lossy(bytes);
        self.charge(s.len())?;
        Ok(Value::Str(s.into_owned()))
    }

    fn enter(&mut self) -> Result<(), DecodeError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(DecodeError::TooDeep { limit: MAX_DEPTH });
        }
        Ok(())
    }

    fn array(&mut self, n: usize) -> Result<Value, DecodeError> {
        self.array_of(n, Self::value)
    }

    /// An array of `n` elements, each read by `element`.
    fn array_of(
        &mut self,
        n: usize,
        element: fn(&mut Self) -> Result<Value, DecodeError>,
    ) -> Result<Value, DecodeError> {
        // Every element takes at least one byte: a count above what remains is a lie.
        if n > self.remaining() {
            return Err(DecodeError::Truncated { at: self.pos });
        }
        self.enter()?;
        let mut items = self.container(n)?;
        for _ in 0..n {
            let item = element(self)?;
            self.grow_push(&mut items, item)?;
        }
        self.depth -= 1;
        Ok(Value::Array(items))
    }

    fn map(&mut self, n: usize) -> Result<Value, DecodeError> {
        if n.saturating_mul(2) > self.remaining() {
            return Err(DecodeError::Truncated { at: self.pos });
        }
        self.enter()?;
        let top = self.depth == 1;
        let mut entries = self.container(n)?;
        let mut request = false;
        // A top-level `data` is a payload in a request and the envelope in a reply (Ping's
        // `pong`, ACKB's `ignoredIndices`), which typed readers look into; which one is known
        // only once the whole map has been seen (`cmd` need not come first).
        let mut top_data = None;
        for _ in 0..n {
            let k = self.value()?;
            let key = k.as_str().unwrap_or_default();
            request |= top && key == "cmd";
            let v = if !self.keep_payloads {
                self.value()?
            } else if top && key == "data" && self.at_container() {
                let start = self.pos;
                self.skip()?;
                top_data = Some((entries.len(), start, self.pos));
                Value::Undefined // filled in below
            } else if PAYLOAD_KEYS.contains(&key) {
                self.payload()?
            } else if PAYLOAD_LIST_KEYS.contains(&key) {
                self.payload_list()?
            } else {
                self.value()?
            };
            self.grow_push(&mut entries, (k, v))?;
        }
        if let Some((i, start, end)) = top_data {
            let v = if request {
                self.raw(start, end)?
            } else {
                let resume = std::mem::replace(&mut self.pos, start);
                let v = self.value()?;
                self.pos = resume;
                v
            };
            if let Some(entry) = entries.get_mut(i) {
                entry.1 = v;
            }
        }
        self.depth -= 1;
        Ok(Value::Map(entries))
    }

    /// Whether the next value is an array or a map.
    fn at_container(&self) -> bool {
        matches!(self.buf.get(self.pos), Some(0x80..=0x9f | 0xdc..=0xdf))
    }

    /// The already checked bytes `start..end` of this frame, kept encoded (and charged).
    fn raw(&mut self, start: usize, end: usize) -> Result<Value, DecodeError> {
        let bytes = &self.buf[start..end];
        self.charge(bytes.len())?;
        Ok(Value::Raw(super::RawValue::from_trusted(bytes.to_vec())))
    }

    /// A payload: an array or a map stays encoded (its bytes copied once); a scalar is decoded.
    fn payload(&mut self) -> Result<Value, DecodeError> {
        if !self.at_container() {
            return self.value();
        }
        let start = self.pos;
        self.skip()?;
        self.raw(start, self.pos)
    }

    /// An array of payloads; anything else is read as one payload.
    fn payload_list(&mut self) -> Result<Value, DecodeError> {
        let n = match self.buf.get(self.pos) {
            Some(0x90..=0x9f | 0xdc | 0xdd) => match self.header()? {
                Header::Array(n) => n,
                _ => return Err(DecodeError::Truncated { at: self.pos }),
            },
            _ => return self.payload(),
        };
        self.array_of(n, Self::payload)
    }

    /// Steps over one value without allocating, checking it as [`value`](Self::value) would.
    pub(crate) fn skip(&mut self) -> Result<(), DecodeError> {
        self.scan(&mut Scan::default())
    }

    /// Steps over one value without allocating, adding what it learns to `scan`.
    pub(crate) fn scan(&mut self, scan: &mut Scan) -> Result<(), DecodeError> {
        let json = match self.header()? {
            Header::Nil => 4,
            Header::Bool(b) => 4 + usize::from(!b),
            Header::Int(i) => itoa_len(i),
            Header::F64(f) => float_json_len(f),
            Header::BigInt(i) => {
                scan.has_bigint = true;
                i.to_string().len()
            }
            Header::Str(n) => json_str_len(&String::from_utf8_lossy(self.take(n)?)),
            // See `Value::json_len`: about 8 characters a byte.
            Header::Bin(n) => 2 + self.take(n)?.len() * 8,
            Header::Ext(n) => {
                let ty = self.u8()?;
                self.take(n)?;
                if ty == 0 {
                    4
                } else {
                    2 + n * 8
                }
            }
            Header::Array(n) => {
                if n > self.remaining() {
                    return Err(DecodeError::Truncated { at: self.pos });
                }
                self.enter()?;
                scan.json_len = scan.json_len.saturating_add(2 + n.saturating_sub(1));
                for _ in 0..n {
                    self.scan(scan)?;
                }
                self.depth -= 1;
                0
            }
            Header::Map(n) => {
                if n.saturating_mul(2) > self.remaining() {
                    return Err(DecodeError::Truncated { at: self.pos });
                }
                self.enter()?;
                scan.json_len = scan.json_len.saturating_add(2 + n.saturating_sub(1));
                for _ in 0..n {
                    // A key is stringified as a key: `"k":` (a non-string key gains quotes).
                    let str_key = matches!(self.buf.get(self.pos), Some(0xa0..=0xbf | 0xd9..=0xdb));
                    self.scan(scan)?;
                    scan.json_len = scan.json_len.saturating_add(if str_key { 1 } else { 3 });
                    self.scan(scan)?;
                }
                self.depth -= 1;
                0
            }
        };
        scan.json_len = scan.json_len.saturating_add(json);
        Ok(())
    }
}

/// The ids a PUSH or PUSHB reply carries.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PushIds {
    /// PUSH: `id`.
    One(String),
    /// PUSHB: `ids`.
    Many(Vec<String>),
}

/// A reply to a PUSH or PUSHB in the exact shape bunqueue writes it (`{ok: true, id, reqId}`
/// or `{ok: true, ids, reqId}`, any key order), read straight from the frame: no tree, no key
/// strings, each id copied once. An add's reply is most of what a client reads, and building
/// the generic tree for it (then cloning its ids out) was most of the session's cost per add.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PushReply {
    /// The reqId, a decimal string as the session writes it.
    pub req_id: u32,
    pub ids: PushIds,
}

impl PushReply {
    /// Reads `frame` if it is exactly such a reply; `None` for anything else, which the caller
    /// reads the generic way ([`Value::decode`], [`Incoming`](super::Incoming)). So that both
    /// ways always agree, anything the generic way reads differently — another key, a repeated
    /// one, `ok` not `true`, an id that is not valid UTF-8 text (numbers are ids there too), a
    /// reqId that is not a decimal `u32`, trailing bytes — is left to it.
    pub(crate) fn read(frame: &[u8]) -> Option<PushReply> {
        let mut d = Decoder::new(frame);
        if !matches!(d.header().ok()?, Header::Map(3)) {
            return None;
        }
        let (mut ok, mut req_id, mut ids) = (false, None, None);
        for _ in 0..3 {
            let key = match d.header().ok()? {
                Header::Str(n) => d.take(n).ok()?,
                _ => return None,
            };
            match key {
                b"ok" if !ok => ok = matches!(d.header().ok()?, Header::Bool(true)),
                b"reqId" if req_id.is_none() => req_id = Some(d.text()?.parse::<u32>().ok()?),
                b"id" if ids.is_none() => ids = Some(PushIds::One(d.owned_text()?)),
                b"ids" if ids.is_none() => {
                    let n = match d.header().ok()? {
                        Header::Array(n) if n <= d.remaining() => n,
                        _ => return None,
                    };
                    // Charged to the frame's allocation budget like any decode.
                    let mut all = d.container(n).ok()?;
                    for _ in 0..n {
                        let id = d.owned_text()?;
                        d.grow_push(&mut all, id).ok()?;
                    }
                    ids = Some(PushIds::Many(all));
                }
                _ => return None,
            }
            if !ok && key == b"ok" {
                return None;
            }
        }
        if !ok || d.remaining() != 0 {
            return None;
        }
        Some(PushReply {
            req_id: req_id?,
            ids: ids?,
        })
    }
}

impl<'a> Decoder<'a> {
    /// A string value as valid UTF-8, borrowed from the frame; `None` for anything else.
    fn text(&mut self) -> Option<&'a str> {
        match self.header().ok()? {
            Header::Str(n) => std::str::from_utf8(self.take(n).ok()?).ok(),
            _ => None,
        }
    }

    /// [`text`](Self::text), copied out (and charged).
    fn owned_text(&mut self) -> Option<String> {
        let s = self.text()?;
        self.charge(s.len()).ok()?;
        Some(s.to_owned())
    }
}

/// One MessagePack header: a scalar, or the length of what follows.
enum Header {
    Nil,
    Bool(bool),
    Int(i64),
    F64(f64),
    BigInt(i128),
    Str(usize),
    Bin(usize),
    Ext(usize),
    Array(usize),
    Map(usize),
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

    /// Bytes already encoded, appended as they are.
    pub(crate) fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.out.extend_from_slice(bytes);
        self
    }

    /// Binary data (`bin8/16/32`).
    pub fn bin(&mut self, b: &[u8]) -> &mut Self {
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

    /// nil.
    pub fn nil(&mut self) -> &mut Self {
        self.out.push(0xc0);
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
            Value::Raw(raw) => self.raw(raw.as_bytes()),
            Value::Bin(b) => self.bin(b),
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

// The byte side of `Value` and `RawValue` lives here, beside the reader and the writer, so
// that `value` (the data model) depends on nothing in this module.

impl RawValue {
    /// Checks that `bytes` hold exactly one well-formed value and keeps them.
    pub fn from_bytes(bytes: &[u8]) -> Result<RawValue, DecodeError> {
        let mut d = Decoder::expanding(bytes);
        d.skip()?;
        if d.remaining() != 0 {
            return Err(DecodeError::TrailingBytes {
                extra: d.remaining(),
            });
        }
        Ok(RawValue::from_trusted(bytes.to_vec()))
    }

    /// The whole value as a tree (nested payloads decoded too). This allocates as much as the
    /// value's shape needs: up to 32 bytes for each encoded byte.
    pub fn decode(&self) -> Result<Value, DecodeError> {
        let mut d = Decoder::expanding(self.as_bytes());
        d.value()
    }

    fn scan(&self) -> Scan {
        let mut scan = Scan::default();
        // Checked when it was made: a failure here cannot happen, and would only undercount.
        let _ = Decoder::expanding(self.as_bytes()).scan(&mut scan);
        scan
    }
}

impl std::fmt::Debug for RawValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Small payloads show as what they hold (test failures read better); large ones by size.
        match self.decode() {
            Ok(v) if self.as_bytes().len() <= 4096 => write!(f, "Raw({v:?})"),
            _ => write!(f, "Raw({} bytes)", self.as_bytes().len()),
        }
    }
}

impl PartialEq for Value {
    /// Structural equality, as the JS peer would see it: a [`Value::Raw`] equals the value it
    /// encodes. Floats compare as `f64` (NaN is unequal to itself).
    fn eq(&self, other: &Value) -> bool {
        use Value::*;
        match (self, other) {
            (Raw(a), Raw(b)) if a == b => true,
            (Raw(a), b) => a.decode().is_ok_and(|a| a == *b),
            (a, Raw(b)) => b.decode().is_ok_and(|b| *a == b),
            (Nil, Nil) | (Undefined, Undefined) => true,
            (Bool(a), Bool(b)) => a == b,
            (Int(a), Int(b)) => a == b,
            (F64(a), F64(b)) => a == b,
            (BigInt(a), BigInt(b)) => a == b,
            (Str(a), Str(b)) => a == b,
            (Bin(a), Bin(b)) => a == b,
            (Array(a), Array(b)) => a == b,
            (Map(a), Map(b)) => a == b,
            (Ext(ta, a), Ext(tb, b)) => ta == tb && a == b,
            _ => false,
        }
    }
}

impl Value {
    /// Decodes exactly one value that must span the whole of `bytes` (a frame body).
    ///
    /// Trailing bytes are an error, as they are for the server. User payloads that are arrays
    /// or maps stay encoded ([`Value::Raw`]). Allocation is bounded in bytes: at most
    /// [`DECODE_BUDGET_FACTOR`](super::DECODE_BUDGET_FACTOR) times `bytes.len()` plus
    /// [`DECODE_BUDGET_FLOOR`](super::DECODE_BUDGET_FLOOR), whatever the shape; a frame that
    /// would need more fails with [`DecodeError::TooExpensive`] before allocating it.
    ///
    /// ```
    /// use autobatch_core::wire::Value;
    /// let v = Value::decode(&[0x81, 0xa1, b'a', 0x05]).unwrap();
    /// assert_eq!(v.get("a"), Some(&Value::Int(5)));
    /// ```
    pub fn decode(bytes: &[u8]) -> Result<Value, DecodeError> {
        let mut d = Decoder::new(bytes);
        let v = d.value()?;
        if d.remaining() != 0 {
            return Err(DecodeError::TrailingBytes {
                extra: d.remaining(),
            });
        }
        Ok(v)
    }

    /// Appends the MessagePack encoding of this value to `out`, with bunqueue's number rules.
    pub fn encode(&self, out: &mut Vec<u8>) {
        Encoder::new(out).value(self);
    }

    /// The encoding as a fresh vector.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// This value as a tree: a [`Value::Raw`] payload decoded, anything else cloned. Typed data
    /// is better read with [`deserialize`](Self::deserialize); this is for looking into a
    /// payload generically.
    ///
    /// ```
    /// use autobatch_core::wire::Value;
    /// let frame = Value::map([("cmd", "PUSH".into()), ("data", Value::map([("n", 5i64.into())]))]);
    /// let decoded = Value::decode(&frame.to_bytes()).unwrap();
    /// let data = decoded.get("data").unwrap();
    /// assert_eq!(data.get("n"), None, "kept encoded");
    /// assert_eq!(data.expanded().unwrap().get("n"), Some(&Value::Int(5)));
    /// ```
    pub fn expanded(&self) -> Result<Value, DecodeError> {
        match self {
            Value::Raw(raw) => raw.decode(),
            v => Ok(v.clone()),
        }
    }

    /// Whether this is, or encodes, a 64-bit integer anywhere (a JS BigInt: not JSON).
    pub(crate) fn contains_bigint(&self) -> bool {
        match self {
            Value::BigInt(_) => true,
            Value::Raw(raw) => raw.scan().has_bigint,
            Value::Array(a) => a.iter().any(Value::contains_bigint),
            Value::Map(m) => m
                .iter()
                .any(|(k, v)| k.contains_bigint() || v.contains_bigint()),
            _ => false,
        }
    }

    /// The length `JSON.stringify` would give this value, in UTF-16 code units, stopping early
    /// once it exceeds `limit`. bunqueue bounds job data by this length (10 MiB).
    pub fn json_len(&self, limit: usize) -> usize {
        let mut n = 0usize;
        json_len_into(self, &mut n, limit);
        n
    }
}

fn json_len_into(v: &Value, n: &mut usize, limit: usize) {
    if *n > limit {
        return;
    }
    match v {
        Value::Nil | Value::Undefined => *n += 4,
        Value::Bool(b) => *n += if *b { 4 } else { 5 },
        Value::Int(i) => *n += itoa_len(*i),
        // JS prints floats with its own shortest form; Rust's shortest round-trip form has the
        // same digits, and the exponent spelling differs by at most a character or two.
        Value::F64(f) => *n += float_json_len(*f),
        Value::BigInt(i) => *n += i.to_string().len(),
        Value::Str(s) => *n += json_str_len(s),
        Value::Raw(raw) => *n += raw.scan().json_len,
        // A Uint8Array stringifies as {"0":b0,"1":b1,...}: about 6 chars a byte on average.
        Value::Bin(b) => *n += 2 + b.len() * 8,
        Value::Ext(_, b) => *n += 2 + b.len() * 8,
        Value::Array(items) => {
            *n += 2 + items.len().saturating_sub(1);
            for item in items {
                json_len_into(item, n, limit);
            }
        }
        Value::Map(entries) => {
            *n += 2 + entries.len().saturating_sub(1);
            for (k, v) in entries {
                match k {
                    Value::Str(s) => *n += json_str_len(s) + 1,
                    other => {
                        json_len_into(other, n, limit);
                        *n += 3;
                    }
                }
                json_len_into(v, n, limit);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
        // 200 nested array32 headers, each announcing "as many elements as bytes left",
        // followed by fixints. A decoder that reserved room for each level's announced length
        // would ask for ~32 bytes × the frame length per level before failing: 200 × 2 GiB for
        // a 64 MiB frame. Every reservation is charged to one byte budget first, so the whole
        // frame reserves at most about its own length.
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
        assert!(matches!(
            d.value(),
            Err(DecodeError::Truncated { .. } | DecodeError::TooExpensive { .. })
        ));
        // A legitimate large array still decodes.
        let mut ok = vec![0xdc, 0x03, 0xe8];
        ok.resize(3 + 1000, 0x01);
        assert_eq!(Value::decode(&ok).unwrap().as_array().unwrap().len(), 1000);
    }

    #[test]
    fn a_dense_array_past_the_budget_is_refused_before_it_is_allocated() {
        // 8 M nils in one array: 8 MiB of frame, 256 MiB of tree.
        let n = 8 << 20;
        let mut body = vec![0xdd];
        body.extend_from_slice(&(n as u32).to_be_bytes());
        body.resize(5 + n, 0xc0);
        assert_eq!(
            Value::decode(&body),
            Err(DecodeError::TooExpensive {
                frame_len: body.len()
            })
        );
    }

    #[test]
    fn payloads_stay_encoded_and_scalars_do_not() {
        // {cmd:"PUSHB", jobs:[{name:"n", data:[1,2,3]}, {name:"n", data:"s"}]}
        let mut body = Vec::new();
        let mut e = Encoder::new(&mut body);
        e.map(2).kv_str("cmd", "PUSHB").str("jobs").array(2);
        e.map(2)
            .kv_str("name", "n")
            .str("data")
            .array(3)
            .int(1)
            .int(2)
            .int(3);
        e.map(2).kv_str("name", "n").kv_str("data", "s");
        let v = Value::decode(&body).unwrap();
        let jobs = v.get("jobs").unwrap().as_array().unwrap();
        let Some(Value::Raw(raw)) = jobs[0].get("data") else {
            panic!("container data stays encoded: {:?}", jobs[0]);
        };
        assert_eq!(raw.as_bytes(), &[0x93, 1, 2, 3]);
        assert_eq!(jobs[1].get("data"), Some(&Value::from("s")));
        // Re-encoding gives the same bytes.
        assert_eq!(v.to_bytes(), body);
    }

    #[test]
    fn a_replys_top_level_data_is_its_envelope() {
        // Ping's reply {ok:true, data:{pong:true}}: typed readers look into `data`.
        let mut body = Vec::new();
        Encoder::new(&mut body)
            .map(2)
            .str("ok")
            .bool(true)
            .str("data")
            .map(1)
            .str("pong")
            .bool(true);
        let v = Value::decode(&body).unwrap();
        assert!(matches!(v.get("data"), Some(Value::Map(_))));
        assert_eq!(v.get("data").unwrap().get("pong"), Some(&Value::Bool(true)));
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

    /// What the generic way makes of a frame the fast way read: the reqId and the response of
    /// the kind the fast way says it is.
    fn generic(frame: &[u8], ids: &PushIds) -> (u32, super::super::Response) {
        use super::super::{CommandKind, Incoming};
        let Ok(Incoming::Reply(reply)) = Incoming::from_value(Value::decode(frame).unwrap()) else {
            panic!("the generic way reads no reply in {frame:?}");
        };
        assert_eq!(reply.result, Ok(()));
        let Value::Str(req) = &reply.req_id else {
            panic!("reqId {:?}", reply.req_id);
        };
        let kind = match ids {
            PushIds::One(_) => CommandKind::Push,
            PushIds::Many(_) => CommandKind::PushB,
        };
        (req.parse().unwrap(), reply.response(kind).unwrap())
    }

    fn as_response(ids: PushIds) -> super::super::Response {
        match ids {
            PushIds::One(id) => super::super::Response::Pushed(id),
            PushIds::Many(ids) => super::super::Response::PushedBatch(ids),
        }
    }

    #[test]
    fn push_replies_as_the_server_writes_them_are_read_fast() {
        use super::super::server::EncodeResponse;
        use super::super::{write_frame, FrameDecoder, Response};
        let ids: Vec<String> = (0..50).map(|i| format!("01a22bd0-{i:04}")).collect();
        for resp in [
            Response::Pushed(ids[0].clone()),
            Response::PushedBatch(ids.clone()),
            Response::PushedBatch(Vec::new()),
        ] {
            let mut out = Vec::new();
            write_frame(&mut out, |b| resp.encode(&Value::from("4294967295"), b)).unwrap();
            let mut frames = FrameDecoder::new();
            frames.extend(&out);
            let frame = frames.next_frame().unwrap().unwrap();
            let fast = PushReply::read(&frame).expect("read fast");
            assert_eq!(fast.req_id, u32::MAX);
            assert_eq!(generic(&frame, &fast.ids), (u32::MAX, resp.clone()));
            assert_eq!(as_response(fast.ids), resp);
        }
    }

    #[test]
    fn anything_else_is_left_to_the_generic_way() {
        let frame = |entries: Vec<(&str, Value)>| {
            Value::Map(
                entries
                    .into_iter()
                    .map(|(k, v)| (Value::from(k), v))
                    .collect(),
            )
            .to_bytes()
        };
        let ok = || ("ok", Value::Bool(true));
        let req = || ("reqId", Value::from("7"));
        let id = || ("id", Value::from("a"));
        assert!(PushReply::read(&frame(vec![ok(), id(), req()])).is_some());
        for other in [
            frame(vec![("ok", Value::Bool(false)), id(), req()]),
            frame(vec![ok(), ("error", Value::from("no")), req()]),
            frame(vec![ok(), ("id", Value::Int(5)), req()]),
            frame(vec![ok(), id(), ("reqId", Value::Int(7))]),
            frame(vec![ok(), id(), ("reqId", Value::from("-1"))]),
            frame(vec![ok(), id(), ("reqId", Value::from("4294967296"))]),
            frame(vec![ok(), id(), id()]),
            frame(vec![ok(), id(), req(), ("type", Value::from("event"))]),
            frame(vec![
                ok(),
                ("ids", Value::Array(vec![Value::Int(1)])),
                req(),
            ]),
            frame(vec![ok(), ("ids", Value::from("a")), req()]),
            // Invalid UTF-8 in the id: the generic way reads it leniently.
            vec![
                0x83, 0xa2, b'o', b'k', 0xc3, 0xa2, b'i', b'd', 0xa1, 0xff, 0xa5, b'r', b'e', b'q',
                b'I', b'd', 0xa1, b'7',
            ],
            // Trailing bytes, and a truncated frame.
            [frame(vec![ok(), id(), req()]), vec![0xc0]].concat(),
            frame(vec![ok(), id(), req()])[..10].to_vec(),
        ] {
            assert_eq!(PushReply::read(&other), None, "{other:?}");
        }
    }

    fn reply_entry() -> impl Strategy<Value = (Value, Value)> {
        let key = prop::sample::select(vec!["ok", "id", "ids", "reqId", "type", "error", "x"]);
        let text = prop_oneof![
            Just(String::new()),
            "[0-9]{1,11}",
            "\\+?[0-9]{1,3}",
            "[a-z0-9\\-é]{0,12}",
        ];
        let scalar = prop_oneof![
            any::<bool>().prop_map(Value::Bool),
            text.clone().prop_map(Value::Str),
            any::<i32>().prop_map(|i| Value::Int(i.into())),
            Just(Value::Nil),
            Just(Value::Undefined),
        ];
        let value = prop_oneof![
            3 => scalar.clone(),
            1 => prop::collection::vec(scalar, 0..4).prop_map(Value::Array),
            2 => prop::collection::vec(text, 0..4)
                .prop_map(|ids| Value::Array(ids.into_iter().map(Value::Str).collect())),
        ];
        (key.prop_map(Value::from), value)
    }

    /// A reply of the fast shape, in any key order, perhaps with one entry replaced by an
    /// arbitrary one: near misses, so both sides of the boundary are tried.
    fn near_push_reply() -> impl Strategy<Value = Vec<(Value, Value)>> {
        let ids = prop_oneof![
            "[a-z0-9\\-]{0,12}".prop_map(Value::Str),
            prop::collection::vec("[a-z0-9\\-]{0,12}", 0..4)
                .prop_map(|ids| Value::Array(ids.into_iter().map(Value::Str).collect())),
        ];
        (
            ids,
            "[0-9]{1,10}",
            prop::sample::select(vec![
                [0, 1, 2],
                [0, 2, 1],
                [1, 0, 2],
                [1, 2, 0],
                [2, 0, 1],
                [2, 1, 0],
            ]),
            prop::option::of((0..3usize, reply_entry())),
        )
            .prop_map(|(ids, req, order, swap)| {
                let key = if matches!(ids, Value::Array(_)) {
                    "ids"
                } else {
                    "id"
                };
                let base = [
                    (Value::from("ok"), Value::Bool(true)),
                    (Value::from(key), ids),
                    (Value::from("reqId"), Value::Str(req)),
                ];
                let mut entries: Vec<_> = order.iter().map(|&i| base[i].clone()).collect();
                if let Some((i, entry)) = swap {
                    entries[i] = entry;
                }
                entries
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

        /// Whatever the map: when the fast way reads it, the generic way reads the same reqId
        /// and the same response from it.
        #[test]
        fn the_fast_way_agrees_with_the_generic_way(
            entries in prop_oneof![
                prop::collection::vec(reply_entry(), 0..5),
                near_push_reply(),
            ],
            trailing in any::<bool>(),
        ) {
            let mut frame = Value::Map(entries).to_bytes();
            if trailing {
                frame.push(0xc0);
            }
            if let Some(fast) = PushReply::read(&frame) {
                let (req, resp) = generic(&frame, &fast.ids);
                prop_assert_eq!(req, fast.req_id);
                prop_assert_eq!(resp, as_response(fast.ids));
            }
        }
    }
}

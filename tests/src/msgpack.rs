//! A deliberately tiny, hand-written MessagePack writer and scanner.
//!
//! The harness must not depend on `autobatch-core`'s codec (that is the code under test), so
//! it carries just enough MessagePack to build simple request frames (`Ping`, `Auth`, a small
//! `PUSHB`), to read the top-level fields of a reply, and to find `cmd` / `jobs` / `ids` in a
//! client frame for [`CountingProxy`](crate::CountingProxy).

use std::io::{self, Read, Write};

/// Maximum frame payload accepted by bunqueue 2.9.5 (inclusive), 64 MiB.
pub const MAX_FRAME: usize = 64 * 1024 * 1024;

/// Builder for a MessagePack value, written in order (no schema, no validation).
///
/// ```
/// use autobatch_tests::msgpack::Writer;
/// let mut w = Writer::new();
/// w.map(2).str("cmd").str("Ping").str("reqId").str("1");
/// assert_eq!(w.as_bytes()[0], 0x82);
/// ```
#[derive(Debug, Default, Clone)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Map header for `n` key/value pairs (fixmap, map16 or map32).
    pub fn map(&mut self, n: u32) -> &mut Self {
        match n {
            0..=15 => self.buf.push(0x80 | n as u8),
            16..=0xffff => {
                self.buf.push(0xde);
                self.buf.extend_from_slice(&(n as u16).to_be_bytes());
            }
            _ => {
                self.buf.push(0xdf);
                self.buf.extend_from_slice(&n.to_be_bytes());
            }
        }
        self
    }

    /// Array header for `n` items (fixarray, array16 or array32).
    pub fn array(&mut self, n: u32) -> &mut Self {
        match n {
            0..=15 => self.buf.push(0x90 | n as u8),
            16..=0xffff => {
                self.buf.push(0xdc);
                self.buf.extend_from_slice(&(n as u16).to_be_bytes());
            }
            _ => {
                self.buf.push(0xdd);
                self.buf.extend_from_slice(&n.to_be_bytes());
            }
        }
        self
    }

    /// A UTF-8 string (fixstr, str8, str16 or str32).
    pub fn str(&mut self, s: &str) -> &mut Self {
        let n = s.len();
        match n {
            0..=31 => self.buf.push(0xa0 | n as u8),
            32..=0xff => self.buf.extend_from_slice(&[0xd9, n as u8]),
            0x100..=0xffff => {
                self.buf.push(0xda);
                self.buf.extend_from_slice(&(n as u16).to_be_bytes());
            }
            _ => {
                self.buf.push(0xdb);
                self.buf.extend_from_slice(&(n as u32).to_be_bytes());
            }
        }
        self.buf.extend_from_slice(s.as_bytes());
        self
    }

    /// A non-negative integer in its smallest encoding.
    pub fn uint(&mut self, v: u64) -> &mut Self {
        match v {
            0..=0x7f => self.buf.push(v as u8),
            0x80..=0xff => self.buf.extend_from_slice(&[0xcc, v as u8]),
            0x100..=0xffff => {
                self.buf.push(0xcd);
                self.buf.extend_from_slice(&(v as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                self.buf.push(0xce);
                self.buf.extend_from_slice(&(v as u32).to_be_bytes());
            }
            _ => {
                self.buf.push(0xcf);
                self.buf.extend_from_slice(&v.to_be_bytes());
            }
        }
        self
    }

    /// `true` or `false`.
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.buf.push(if v { 0xc3 } else { 0xc2 });
        self
    }

    /// `nil`.
    pub fn nil(&mut self) -> &mut Self {
        self.buf.push(0xc0);
        self
    }

    /// The encoded bytes so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The encoded value wrapped in a frame (4-byte big-endian length prefix).
    pub fn to_frame(&self) -> Vec<u8> {
        frame(&self.buf)
    }
}

/// Prefix `payload` with its 4-byte big-endian length.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 4);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A framed map whose keys and values are all strings, e.g.
/// `str_map_frame(&[("cmd", "Ping"), ("reqId", "1")])`.
pub fn str_map_frame(pairs: &[(&str, &str)]) -> Vec<u8> {
    let mut w = Writer::new();
    w.map(pairs.len() as u32);
    for (k, v) in pairs {
        w.str(k).str(v);
    }
    w.to_frame()
}

/// Write one frame to a blocking stream.
pub fn write_frame(w: &mut impl Write, payload: &[u8]) -> io::Result<()> {
    w.write_all(&frame(payload))?;
    w.flush()
}

/// Read one frame's payload from a blocking stream (honours the stream's read timeout).
pub fn read_frame(r: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let n = u32::from_be_bytes(len) as usize;
    if n > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {n} bytes exceeds the 64 MiB limit"),
        ));
    }
    let mut payload = vec![0u8; n];
    r.read_exact(&mut payload)?;
    Ok(payload)
}

/// A scalar read from the top level of a map by [`top_level_map`].
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// `nil`.
    Nil,
    /// A boolean.
    Bool(bool),
    /// An integer (any msgpack int family that fits in `i128`).
    Int(i128),
    /// A float32/float64.
    Float(f64),
    /// A string (lossy UTF-8).
    Str(String),
    /// An array with this many items (items not decoded).
    Array(usize),
    /// A map with this many entries (entries not decoded).
    Map(usize),
    /// bin or ext: not decoded.
    Other,
}

/// Decode the top-level entries of a map whose keys are strings, decoding each value only as
/// far as a [`Scalar`] (containers report their length). `None` if `buf` is not exactly one
/// such map.
pub fn top_level_map(buf: &[u8]) -> Option<Vec<(String, Scalar)>> {
    let mut pos = 0;
    let n = read_map_header(buf, &mut pos)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let key = read_str(buf, &mut pos)?;
        let start = pos;
        let value = read_scalar(buf, &mut pos)?;
        // Skip the whole value (the scalar read only consumed containers' headers).
        pos = start;
        skip_values(buf, &mut pos, 1)?;
        out.push((key, value));
    }
    (pos == buf.len()).then_some(out)
}

/// What [`scan_command`] finds in a client frame.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandInfo {
    /// The `cmd` string, if present and a string.
    pub cmd: Option<String>,
    /// Length of the top-level `jobs` array, if present and an array.
    pub jobs_len: Option<usize>,
    /// Length of the top-level `ids` array, if present and an array.
    pub ids_len: Option<usize>,
}

/// Walk a top-level map with string keys and report `cmd`, `jobs` and `ids`. `None` if the
/// payload is not a well-formed map with string keys.
pub fn scan_command(buf: &[u8]) -> Option<CommandInfo> {
    let mut pos = 0;
    let n = read_map_header(buf, &mut pos)?;
    let mut info = CommandInfo::default();
    for _ in 0..n {
        let key = read_str(buf, &mut pos)?;
        match key.as_str() {
            "cmd" => {
                let mut p = pos;
                if let Some(s) = read_str(buf, &mut p) {
                    info.cmd = Some(s);
                }
            }
            "jobs" | "ids" => {
                let mut p = pos;
                if let Some(Scalar::Array(len)) = read_scalar(buf, &mut p) {
                    if key == "jobs" {
                        info.jobs_len = Some(len);
                    } else {
                        info.ids_len = Some(len);
                    }
                }
            }
            _ => {}
        }
        skip_values(buf, &mut pos, 1)?;
    }
    Some(info)
}

fn take<'a>(buf: &'a [u8], pos: &mut usize, n: usize) -> Option<&'a [u8]> {
    let end = pos.checked_add(n)?;
    let s = buf.get(*pos..end)?;
    *pos = end;
    Some(s)
}

fn be(buf: &[u8], pos: &mut usize, n: usize) -> Option<u64> {
    Some(
        take(buf, pos, n)?
            .iter()
            .fold(0u64, |acc, b| (acc << 8) | u64::from(*b)),
    )
}

fn read_map_header(buf: &[u8], pos: &mut usize) -> Option<usize> {
    let b = *buf.get(*pos)?;
    *pos += 1;
    match b {
        0x80..=0x8f => Some((b & 0x0f) as usize),
        0xde => be(buf, pos, 2).map(|v| v as usize),
        0xdf => be(buf, pos, 4).map(|v| v as usize),
        _ => None,
    }
}

fn read_str(buf: &[u8], pos: &mut usize) -> Option<String> {
    let b = *buf.get(*pos)?;
    *pos += 1;
    let n = match b {
        0xa0..=0xbf => (b & 0x1f) as usize,
        0xd9 => be(buf, pos, 1)? as usize,
        0xda => be(buf, pos, 2)? as usize,
        0xdb => be(buf, pos, 4)? as usize,
        _ => return None,
    };
    Some(String::from_utf8_lossy(take(buf, pos, n)?).into_owned())
}

/// Read one value's header; scalars are consumed whole, containers only up to their header.
fn read_scalar(buf: &[u8], pos: &mut usize) -> Option<Scalar> {
    let b = *buf.get(*pos)?;
    let start = *pos;
    *pos += 1;
    Some(match b {
        0x00..=0x7f => Scalar::Int(i128::from(b)),
        0xe0..=0xff => Scalar::Int(i128::from(b as i8)),
        0x80..=0x8f => Scalar::Map((b & 0x0f) as usize),
        0x90..=0x9f => Scalar::Array((b & 0x0f) as usize),
        0xa0..=0xbf | 0xd9..=0xdb => {
            *pos = start;
            Scalar::Str(read_str(buf, pos)?)
        }
        0xc0 => Scalar::Nil,
        0xc2 => Scalar::Bool(false),
        0xc3 => Scalar::Bool(true),
        0xca => Scalar::Float(f64::from(f32::from_bits(be(buf, pos, 4)? as u32))),
        0xcb => Scalar::Float(f64::from_bits(be(buf, pos, 8)?)),
        0xcc => Scalar::Int(i128::from(be(buf, pos, 1)?)),
        0xcd => Scalar::Int(i128::from(be(buf, pos, 2)?)),
        0xce => Scalar::Int(i128::from(be(buf, pos, 4)?)),
        0xcf => Scalar::Int(i128::from(be(buf, pos, 8)?)),
        0xd0 => Scalar::Int(i128::from(be(buf, pos, 1)? as u8 as i8)),
        0xd1 => Scalar::Int(i128::from(be(buf, pos, 2)? as u16 as i16)),
        0xd2 => Scalar::Int(i128::from(be(buf, pos, 4)? as u32 as i32)),
        0xd3 => Scalar::Int(i128::from(be(buf, pos, 8)? as i64)),
        0xdc => Scalar::Array(be(buf, pos, 2)? as usize),
        0xdd => Scalar::Array(be(buf, pos, 4)? as usize),
        0xde => Scalar::Map(be(buf, pos, 2)? as usize),
        0xdf => Scalar::Map(be(buf, pos, 4)? as usize),
        // bin, ext, fixext and the reserved 0xc1: let skip_values judge them.
        _ => {
            *pos = start;
            skip_values(buf, pos, 1)?;
            Scalar::Other
        }
    })
}

/// Skip `count` consecutive values of any type (iteratively, so deep nesting cannot overflow
/// the stack). `None` on truncated input or the reserved byte 0xc1.
pub fn skip_values(buf: &[u8], pos: &mut usize, count: u64) -> Option<()> {
    let mut remaining = count;
    while remaining > 0 {
        remaining -= 1;
        let b = *buf.get(*pos)?;
        *pos += 1;
        let (skip, children): (u64, u64) = match b {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => (0, 0),
            0x80..=0x8f => (0, 2 * u64::from(b & 0x0f)),
            0x90..=0x9f => (0, u64::from(b & 0x0f)),
            0xa0..=0xbf => (u64::from(b & 0x1f), 0),
            0xc1 => return None,
            0xc4 | 0xd9 => (be(buf, pos, 1)?, 0),
            0xc5 | 0xda => (be(buf, pos, 2)?, 0),
            0xc6 | 0xdb => (be(buf, pos, 4)?, 0),
            0xc7 => (be(buf, pos, 1)? + 1, 0),
            0xc8 => (be(buf, pos, 2)? + 1, 0),
            0xc9 => (be(buf, pos, 4)? + 1, 0),
            0xca => (4, 0),
            0xcb => (8, 0),
            0xcc | 0xd0 => (1, 0),
            0xcd | 0xd1 => (2, 0),
            0xce | 0xd2 => (4, 0),
            0xcf | 0xd3 => (8, 0),
            0xd4 => (2, 0),
            0xd5 => (3, 0),
            0xd6 => (5, 0),
            0xd7 => (9, 0),
            0xd8 => (17, 0),
            0xdc => (0, be(buf, pos, 2)?),
            0xdd => (0, be(buf, pos, 4)?),
            0xde => (0, 2 * be(buf, pos, 2)?),
            0xdf => (0, 2 * be(buf, pos, 4)?),
        };
        take(buf, pos, usize::try_from(skip).ok()?)?;
        // Every child needs at least one byte: refuse counts that cannot fit, so that a
        // bogus header cannot make us loop for 2^32 iterations.
        if children > (buf.len() - *pos) as u64 {
            return None;
        }
        remaining += children;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_frame_bytes() {
        let f = str_map_frame(&[("cmd", "Ping"), ("reqId", "1")]);
        let mut expect = vec![0, 0, 0, 18, 0x82, 0xa3];
        expect.extend_from_slice(b"cmd");
        expect.push(0xa4);
        expect.extend_from_slice(b"Ping");
        expect.push(0xa5);
        expect.extend_from_slice(b"reqId");
        expect.push(0xa1);
        expect.extend_from_slice(b"1");
        assert_eq!(f, expect);
    }

    #[test]
    fn scan_finds_cmd_after_nested_values() {
        let mut w = Writer::new();
        w.map(4);
        w.str("queue").str("q");
        w.str("jobs").array(3);
        for i in 0..3 {
            w.map(2).str("name").str("n");
            w.str("data").map(1).str("x").array(2).uint(i).nil();
        }
        w.str("reqId").str("7");
        w.str("cmd").str("PUSHB");
        let info = scan_command(w.as_bytes()).unwrap();
        assert_eq!(info.cmd.as_deref(), Some("PUSHB"));
        assert_eq!(info.jobs_len, Some(3));
        assert_eq!(info.ids_len, None);
    }

    #[test]
    fn scan_handles_every_family() {
        let mut buf = vec![0x83, 0xa1, b'a'];
        // bin8, ext8, fixext4, float64 in an array
        buf.extend_from_slice(&[0x94, 0xc4, 2, 1, 2, 0xc7, 1, 5, 9, 0xd6, 1, 0, 0, 0, 0]);
        buf.extend_from_slice(&[0xcb, 0, 0, 0, 0, 0, 0, 0, 0]);
        buf.extend_from_slice(&[0xa3, b'i', b'd', b's', 0xdc, 0, 2, 0x01, 0xd3]);
        buf.extend_from_slice(&[0xff; 8]);
        buf.extend_from_slice(&[0xa3, b'c', b'm', b'd', 0xd9, 4, b'A', b'C', b'K', b'B']);
        let info = scan_command(&buf).unwrap();
        assert_eq!(info.cmd.as_deref(), Some("ACKB"));
        assert_eq!(info.ids_len, Some(2));
    }

    #[test]
    fn scan_rejects_garbage() {
        assert!(scan_command(&[]).is_none());
        assert!(scan_command(&[0x01]).is_none());
        assert!(scan_command(&[0x81, 0xa3, b'c', b'm']).is_none());
        assert!(scan_command(&[0x81, 0xa1, b'x', 0xdd, 0xff, 0xff, 0xff, 0xff]).is_none());
        assert!(scan_command(&[0x81, 0xa1, b'x', 0xc1]).is_none());
    }

    #[test]
    fn top_level_map_reads_reply() {
        let mut w = Writer::new();
        w.map(3)
            .str("ok")
            .bool(true)
            .str("data")
            .map(1)
            .str("pong")
            .bool(true)
            .str("reqId")
            .str("1");
        let m = top_level_map(w.as_bytes()).unwrap();
        assert_eq!(m[0], ("ok".into(), Scalar::Bool(true)));
        assert_eq!(m[1], ("data".into(), Scalar::Map(1)));
        assert_eq!(m[2], ("reqId".into(), Scalar::Str("1".into())));
        // Trailing bytes are not "exactly one map".
        let mut b = w.as_bytes().to_vec();
        b.push(0xc0);
        assert!(top_level_map(&b).is_none());
    }
}

//! Length-prefixed framing: a 4-byte big-endian length, then exactly one MessagePack value.

use bytes::{Buf, Bytes, BytesMut};

use super::error::FrameError;

/// The largest frame body bunqueue accepts, inclusive: 64 MiB.
pub const MAX_FRAME: usize = 64 * 1024 * 1024;

/// An incremental frame decoder. Feed it bytes as they arrive with [`extend`](Self::extend), then
/// take complete frames with [`next_frame`](Self::next_frame) until it returns `Ok(None)`.
///
/// It never allocates ahead of the bytes actually received: a header announcing 64 MiB costs
/// nothing until the body arrives.
///
/// ```
/// use autobatch_core::wire::FrameDecoder;
/// let mut d = FrameDecoder::new();
/// d.extend(&[0, 0, 0, 1, 0xc0, 0, 0]); // one whole frame, and the start of the next
/// assert_eq!(d.next_frame().unwrap().unwrap().as_ref(), &[0xc0]);
/// assert!(d.next_frame().unwrap().is_none());
/// d.extend(&[0, 1, 0xc2]);
/// assert_eq!(d.next_frame().unwrap().unwrap().as_ref(), &[0xc2]);
/// ```
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: BytesMut,
    failed: bool,
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends received bytes.
    pub fn extend(&mut self, bytes: &[u8]) {
        if !self.failed {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// Bytes held that do not yet form a complete frame.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Drops everything buffered (after a reconnect).
    pub fn clear(&mut self) {
        self.buf.clear();
        self.failed = false;
    }

    /// The next complete frame body, `Ok(None)` if more bytes are needed.
    ///
    /// [`FrameError::Empty`] consumes the empty frame; call again for the next one.
    /// [`FrameError::TooLarge`] is fatal: the decoder discards its buffer and keeps failing, since
    /// the stream cannot be resynchronised.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        if self.buf.len() < 4 {
            if self.failed {
                return Err(FrameError::TooLarge {
                    len: 0,
                    max: MAX_FRAME,
                });
            }
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        if len > MAX_FRAME {
            self.buf = BytesMut::new();
            self.failed = true;
            return Err(FrameError::TooLarge {
                len,
                max: MAX_FRAME,
            });
        }
        if len == 0 {
            self.buf.advance(4);
            return Err(FrameError::Empty);
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        self.buf.advance(4);
        Ok(Some(self.buf.split_to(len).freeze()))
    }
}

/// Appends one frame to `out`: a length placeholder, whatever `body` writes, then the length is
/// patched in. If the body exceeds [`MAX_FRAME`], `out` is restored and an error returned.
///
/// ```
/// use autobatch_core::wire::{write_frame, Encoder};
/// let mut out = Vec::new();
/// write_frame(&mut out, |buf| { Encoder::new(buf).nil(); }).unwrap();
/// assert_eq!(out, [0, 0, 0, 1, 0xc0]);
/// ```
pub fn write_frame(out: &mut Vec<u8>, body: impl FnOnce(&mut Vec<u8>)) -> Result<(), FrameError> {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    body(out);
    let len = out.len() - start - 4;
    if len > MAX_FRAME {
        out.truncate(start);
        return Err(FrameError::TooLarge {
            len,
            max: MAX_FRAME,
        });
    }
    out[start..start + 4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_across_reads_and_many_per_read() {
        let mut wire = Vec::new();
        for b in [0xc0u8, 0xc2, 0xc3] {
            write_frame(&mut wire, |o| o.push(b)).unwrap();
        }
        // Byte by byte.
        let mut d = FrameDecoder::new();
        let mut got = Vec::new();
        for byte in &wire {
            d.extend(std::slice::from_ref(byte));
            while let Some(f) = d.next_frame().unwrap() {
                got.push(f[0]);
            }
        }
        assert_eq!(got, [0xc0, 0xc2, 0xc3]);
        // All at once.
        d.extend(&wire);
        let mut n = 0;
        while d.next_frame().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, 3);
        assert_eq!(d.buffered(), 0);
    }

    #[test]
    fn max_frame_is_inclusive() {
        let mut d = FrameDecoder::new();
        d.extend(&(MAX_FRAME as u32).to_be_bytes());
        assert_eq!(
            d.next_frame(),
            Ok(None),
            "exactly 64 MiB waits for its body"
        );
        let mut d = FrameDecoder::new();
        d.extend(&(MAX_FRAME as u32 + 1).to_be_bytes());
        let err = d.next_frame().unwrap_err();
        assert!(err.is_fatal());
        assert_eq!(
            err.to_string(),
            "Frame too large: 67108865 bytes exceeds maximum 67108864"
        );
        d.extend(&[0, 0, 0, 1, 0xc0]);
        assert!(d.next_frame().is_err(), "a failed stream stays failed");
    }

    #[test]
    fn empty_frame_is_consumed_and_not_fatal() {
        let mut d = FrameDecoder::new();
        d.extend(&[0, 0, 0, 0, 0, 0, 0, 1, 0xc0]);
        let err = d.next_frame().unwrap_err();
        assert!(!err.is_fatal());
        assert_eq!(d.next_frame().unwrap().unwrap().as_ref(), &[0xc0]);
    }
}

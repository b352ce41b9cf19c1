//! Incoming frames, assembled under the broker's limits.
//!
//! The core's `FrameDecoder` buffers first and checks later; a server needs to decide from the
//! 4-byte header alone (a frame too large for an unauthenticated connection is refused before
//! its body is read), to know when an incomplete frame began (its deadline does not move), and
//! to charge the bytes an incomplete frame holds to a budget shared by every connection.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use autobatch_core::wire::MAX_FRAME;
use tokio::time::Instant;

/// Why [`Assembler::feed`] stops the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The header announces `len` bytes, more than the limit passed to `feed`. Nothing past
    /// the header was consumed: calling `feed` again with a higher limit goes on.
    TooLarge { len: usize },
    /// Growing the incomplete frame would take every connection's incomplete frames past the
    /// shared budget.
    OverBudget,
}

/// Bytes held in incomplete frames by every connection of one broker, and their ceiling.
pub(crate) struct Budget {
    pub used: AtomicUsize,
    pub max: usize,
}

impl Budget {
    fn charge(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(n).filter(|&t| t <= self.max)
            })
            .is_ok()
    }

    fn refund(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }
}

/// One connection's frame in the making.
pub(crate) struct Assembler {
    budget: Arc<Budget>,
    header: [u8; 4],
    have_header: usize,
    /// The body length, once the header passed the limit.
    want: Option<usize>,
    body: Vec<u8>,
    /// Bytes of `body`'s allocation charged to the budget.
    charged: usize,
    /// When the first byte of the current frame arrived.
    started: Option<Instant>,
}

impl Assembler {
    pub fn new(budget: Arc<Budget>) -> Assembler {
        Assembler {
            budget,
            header: [0; 4],
            have_header: 0,
            want: None,
            body: Vec::new(),
            charged: 0,
            started: None,
        }
    }

    /// When the incomplete frame held (if any) began: its deadline counts from here.
    pub fn started(&self) -> Option<Instant> {
        self.started
    }

    /// Consumes bytes from `input` until one frame is complete (its body, empty for a
    /// zero-length frame) or `input` is used up (`None`). `limit` is the largest body allowed
    /// now. `now` stamps the start of a frame whose first byte is in `input`.
    pub fn feed(
        &mut self,
        input: &mut &[u8],
        limit: usize,
        now: Instant,
    ) -> Result<Option<Vec<u8>>, Refusal> {
        if self.have_header < 4 {
            if input.is_empty() {
                return Ok(None);
            }
            if self.have_header == 0 {
                self.started = Some(now);
            }
            let n = (4 - self.have_header).min(input.len());
            self.header[self.have_header..self.have_header + n].copy_from_slice(&input[..n]);
            self.have_header += n;
            *input = &input[n..];
            if self.have_header < 4 {
                return Ok(None);
            }
        }
        let want = match self.want {
            Some(w) => w,
            None => {
                let len = u32::from_be_bytes(self.header) as usize;
                if len > limit.min(MAX_FRAME) {
                    return Err(Refusal::TooLarge { len });
                }
                self.want = Some(len);
                len
            }
        };
        // The common case: the whole body is in this read, nothing to buffer or charge.
        if self.body.is_empty() && input.len() >= want {
            let body = input[..want].to_vec();
            *input = &input[want..];
            self.reset();
            return Ok(Some(body));
        }
        let n = (want - self.body.len()).min(input.len());
        let needed = self.body.len() + n;
        if needed > self.charged {
            // Grow by doubling, never past the announced length, and charge the allocation
            // (not the bytes received) so the budget bounds real memory.
            let cap = needed.max(self.charged.saturating_mul(2)).min(want);
            let extra = cap - self.charged;
            if !self.budget.charge(extra) {
                return Err(Refusal::OverBudget);
            }
            self.charged = cap;
            self.body.reserve_exact(cap - self.body.len());
        }
        self.body.extend_from_slice(&input[..n]);
        *input = &input[n..];
        if self.body.len() < want {
            return Ok(None);
        }
        let body = std::mem::take(&mut self.body);
        self.reset();
        Ok(Some(body))
    }

    /// Forgets the frame in the making and gives its bytes back to the budget.
    pub fn reset(&mut self) {
        self.budget.refund(self.charged);
        self.charged = 0;
        self.body = Vec::new();
        self.have_header = 0;
        self.want = None;
        self.started = None;
    }
}

impl Drop for Assembler {
    fn drop(&mut self) {
        self.budget.refund(self.charged);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(max: usize) -> Arc<Budget> {
        Arc::new(Budget {
            used: AtomicUsize::new(0),
            max,
        })
    }

    #[test]
    fn frames_whole_split_and_empty() {
        let b = budget(1 << 20);
        let mut a = Assembler::new(b.clone());
        let now = Instant::now();
        let wire = [0, 0, 0, 1, 0xc0, 0, 0, 0, 0, 0, 0, 0, 3, 1, 2];
        let mut input = &wire[..];
        assert_eq!(a.feed(&mut input, 10, now), Ok(Some(vec![0xc0])));
        assert_eq!(a.feed(&mut input, 10, now), Ok(Some(vec![])));
        assert_eq!(a.feed(&mut input, 10, now), Ok(None));
        assert!(a.started().is_some(), "a frame is in the making");
        assert_eq!(b.used.load(Ordering::Relaxed), 2);
        let mut input = &[3u8][..];
        assert_eq!(a.feed(&mut input, 10, now), Ok(Some(vec![1, 2, 3])));
        assert_eq!(b.used.load(Ordering::Relaxed), 0);
        assert!(a.started().is_none());
    }

    #[test]
    fn a_refused_header_can_be_fed_again_with_a_higher_limit() {
        let mut a = Assembler::new(budget(1 << 20));
        let now = Instant::now();
        let mut input = &[0u8, 0, 0, 5, 1, 2, 3, 4, 5][..];
        assert_eq!(
            a.feed(&mut input, 4, now),
            Err(Refusal::TooLarge { len: 5 })
        );
        assert_eq!(input.len(), 5, "the body is not consumed");
        assert_eq!(a.feed(&mut input, 5, now), Ok(Some(vec![1, 2, 3, 4, 5])));
        let mut input = &(MAX_FRAME as u32 + 1).to_be_bytes()[..];
        assert_eq!(
            a.feed(&mut input, usize::MAX, now),
            Err(Refusal::TooLarge { len: MAX_FRAME + 1 })
        );
    }

    #[test]
    fn the_budget_is_shared_and_refunded() {
        let b = budget(100);
        let now = Instant::now();
        let mut x = Assembler::new(b.clone());
        let mut y = Assembler::new(b.clone());
        let mut input = &[0u8, 0, 0, 80, 0][..];
        assert_eq!(x.feed(&mut input, 1000, now), Ok(None));
        let mut more = [0u8; 60];
        let mut input = &more[..];
        assert_eq!(x.feed(&mut input, 1000, now), Ok(None));
        assert_eq!(
            b.used.load(Ordering::Relaxed),
            61,
            "the allocation is charged"
        );
        more[..4].copy_from_slice(&80u32.to_be_bytes());
        let mut input = &more[..];
        assert_eq!(
            y.feed(&mut input, 1000, now),
            Err(Refusal::OverBudget),
            "61 + 56 > 100"
        );
        drop(x);
        assert_eq!(b.used.load(Ordering::Relaxed), 0);
    }
}

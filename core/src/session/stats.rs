//! Counters a user can read without a runtime.

use crate::batch::FlushReason;
use crate::wire::CommandKind;

/// Counters of one session. Batch sizes and flush reasons per queue are in
/// [`Session::batch_stats`](super::Session::batch_stats).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionStats {
    /// Successful connects.
    pub connects: u64,
    /// Reconnects scheduled (after a failure or a lost connection).
    pub reconnects_scheduled: u64,
    /// Frames written.
    pub frames_sent: u64,
    /// Frames read.
    pub frames_received: u64,
    /// Bytes written.
    pub bytes_sent: u64,
    /// Bytes read.
    pub bytes_received: u64,
    /// PUSH frames written.
    pub push_frames: u64,
    /// PUSHB frames written.
    pub pushb_frames: u64,
    /// ACKB frames written.
    pub ackb_frames: u64,
    /// Adds accepted (bulk adds count each job).
    pub adds: u64,
    /// Adds that went out alone as PUSH (durable, or batching off).
    pub adds_direct: u64,
    /// Adds that had to wait for room (backpressure).
    pub adds_parked: u64,
    /// Adds rejected or dropped by the overflow policy.
    pub adds_rejected: u64,
    /// Adds withdrawn before they were sent.
    pub adds_cancelled: u64,
    /// Adds the server confirmed.
    pub adds_ok: u64,
    /// Adds that failed after being accepted.
    pub adds_failed: u64,
    /// Items sent again (custom-id adds after a lost connection; the good jobs of a PUSHB that
    /// the server refused for one bad job).
    pub items_resent: u64,
    /// Batches of adds flushed.
    pub batches_sent: u64,
    /// Flushes by reason: idle, size, linger, completion, close.
    pub flushes: [u64; 5],
    /// Error replies.
    pub error_replies: u64,
    /// Commands that timed out.
    pub timeouts: u64,
    /// Worker jobs received.
    pub jobs_received: u64,
    /// Worker jobs completed (ACKs queued).
    pub jobs_completed: u64,
    /// Worker jobs failed (FAILs sent).
    pub jobs_failed: u64,
    /// ACKB frames queued.
    pub ack_batches_sent: u64,
    /// ACKs retried.
    pub ack_retries: u64,
    /// JobHeartbeatB frames queued to renew held jobs' locks.
    pub heartbeats_sent: u64,
    /// Gauge: adds buffered in the batchers (not yet in a PUSHB), as of the last
    /// `poll_transmit`. Bounded by `max_pending_items` per queue.
    pub buffered_adds: u64,
    /// Gauge: bytes of the buffered adds. Bounded by `max_pending_bytes` per queue.
    pub buffered_bytes: u64,
    /// Gauge: adds waiting for room under backpressure (one per blocked caller).
    pub parked_adds: u64,
    /// Gauge: commands written and unanswered.
    pub in_flight_commands: u64,
    /// ACKs whose effect was checked with GetState after the server refused their ACKB for
    /// another job.
    pub ack_checks: u64,
}

impl SessionStats {
    pub(super) fn count_command(&mut self, kind: CommandKind) {
        match kind {
            CommandKind::Push => self.push_frames += 1,
            CommandKind::PushB => self.pushb_frames += 1,
            CommandKind::AckB => self.ackb_frames += 1,
            _ => {}
        }
    }

    pub(super) fn record_flush(&mut self, reason: FlushReason) {
        let i = FlushReason::ALL
            .iter()
            .position(|r| *r == reason)
            .unwrap_or(0);
        if let Some(n) = self.flushes.get_mut(i) {
            *n += 1;
        }
    }
}

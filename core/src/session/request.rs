//! Every request a session sends, typed by kind: each variant carries what its reply needs,
//! so a reply is handled without looking back into the command.

use std::time::Duration;

use crate::wire::{write_frame, Command, CommandKind, FrameError, Value};

use super::event::OpId;
use super::producer::AddRequest;
use super::replay::Replay;
use super::worker::WorkRequest;

#[derive(Debug)]
pub(super) enum Request {
    /// Goes first and alone on a connection with a token.
    Auth { token: String },
    /// Keeps an idle connection alive.
    Ping,
    /// A caller's request ([`Session::request`](super::Session::request)): written again
    /// after a lost connection only if `replay` allows it.
    User {
        op: OpId,
        cmd: Box<Command>,
        replay: Replay,
    },
    /// An add (the producer's).
    Add(AddRequest),
    /// A pull, an ACK, a FAIL... (the worker's).
    Work(WorkRequest),
}

impl Request {
    /// What its reply decodes as.
    pub(super) fn kind(&self) -> CommandKind {
        match self {
            Request::Auth { .. } => CommandKind::Auth,
            Request::Ping => CommandKind::Ping,
            Request::User { cmd, .. } => cmd.kind(),
            Request::Add(a) => a.kind(),
            Request::Work(w) => w.kind(),
        }
    }

    /// How long the server may legitimately hold the reply beyond the command timeout: the
    /// poll time of a long-poll.
    pub(super) fn long_poll(&self) -> Duration {
        match self {
            Request::User { cmd, .. } => match cmd.as_ref() {
                Command::Pull(args) | Command::PullB { args, .. } => {
                    Duration::from_millis(args.timeout.unwrap_or(0).max(0) as u64)
                }
                _ => Duration::ZERO,
            },
            Request::Work(w) => w.long_poll(),
            _ => Duration::ZERO,
        }
    }

    /// Whether `close` may abandon it unanswered.
    pub(super) fn is_background(&self) -> bool {
        match self {
            Request::Ping => true,
            Request::Work(w) => w.is_background(),
            _ => false,
        }
    }

    /// The operation it stands for alone, so a caller can withdraw it while it is unwritten.
    pub(super) fn single_op(&self) -> Option<OpId> {
        match self {
            Request::User { op, .. } => Some(*op),
            Request::Add(a) => a.single_op(),
            _ => None,
        }
    }

    /// Writes it as one frame appended to `out`, with reqId `req` (a decimal string, as the
    /// official client sends it); returns its kind.
    pub(super) fn write(&mut self, req: u32, out: &mut Vec<u8>) -> Result<CommandKind, FrameError> {
        match self {
            Request::Add(a) => {
                // Adds are most of what goes out: encoded where they sit, the reqId spelt on
                // the stack.
                let mut digits = [0u8; 10];
                let req_id = decimal(req, &mut digits);
                write_frame(out, |buf| a.encode(req_id, buf)).map(|()| a.kind())
            }
            Request::Work(w) => w.with_command(|cmd| write_command(cmd, req, out)),
            Request::User { cmd, .. } => write_command(cmd, req, out),
            Request::Ping => write_command(&Command::Ping, req, out),
            Request::Auth { token } => {
                let cmd = Command::Auth {
                    token: std::mem::take(token),
                };
                let r = write_command(&cmd, req, out);
                // `cmd` was built as an Auth just above: this always matches.
                if let Command::Auth { token: t } = cmd {
                    *token = t;
                }
                r
            }
        }
    }
}

fn write_command(cmd: &Command, req: u32, out: &mut Vec<u8>) -> Result<CommandKind, FrameError> {
    let req_id = Value::Str(req.to_string());
    write_frame(out, |buf| cmd.encode(Some(&req_id), buf)).map(|()| cmd.kind())
}

/// `n` in decimal, written into `buf` (a `u32` has at most 10 digits).
fn decimal(mut n: u32, buf: &mut [u8; 10]) -> &str {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    std::str::from_utf8(&buf[at..]).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn decimal_spells_what_to_string_spells() {
        let mut buf = [0u8; 10];
        for n in [0, 7, 10, 99, 100, 12_345, 2_147_483_647, u32::MAX] {
            assert_eq!(super::decimal(n, &mut buf), n.to_string());
        }
    }
}

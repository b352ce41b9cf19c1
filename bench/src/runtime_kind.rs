//! Which runtime adapter the autobatch client runs on: a leaf, named by the command line,
//! the contenders and the report alike.

use clap::ValueEnum;

/// The async runtime the autobatch client runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RuntimeKind {
    /// autobatch-tokio (a current-thread tokio runtime on the bench thread).
    Tokio,
    /// autobatch-tokio on a multi-thread tokio runtime (a worker per core): each cell's adds
    /// run in a task spawned on it, as a server's handlers do, and the pump is another task
    /// of it.
    TokioMultiThread,
    /// autobatch-smol, pump on smol's global executor (`SmolRuntime::default()`).
    Smol,
    /// autobatch-smol, pump on an `Executor` the bench thread runs
    /// (`SmolRuntime::with_executor`, `block_on(ex.run(..))`).
    SmolLocal,
    /// autobatch-async-std, pump on async-std's global executor.
    AsyncStd,
    /// autobatch-async-std, pump on the bench thread (`AsyncStdRuntime::local`).
    AsyncStdLocal,
}

impl RuntimeKind {
    /// As written on the command line.
    pub fn name(self) -> &'static str {
        match self {
            RuntimeKind::Tokio => "tokio",
            RuntimeKind::TokioMultiThread => "tokio-multi-thread",
            RuntimeKind::Smol => "smol",
            RuntimeKind::SmolLocal => "smol-local",
            RuntimeKind::AsyncStd => "async-std",
            RuntimeKind::AsyncStdLocal => "async-std-local",
        }
    }
}

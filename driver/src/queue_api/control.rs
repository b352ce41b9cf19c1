//! Queue control: pause, resume, drain, clean, obliterate, and moving jobs.

use autobatch_core::ops;

use crate::{Error, Queue, Runtime};

impl<R: Runtime> Queue<R> {
    /// Pauses the queue: workers get no more of its jobs until [`resume`](Self::resume);
    /// adds are still accepted. Pausing a paused queue does nothing.
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.pause().await?;
    /// assert!(q.is_paused().await?);
    /// q.resume().await?;
    /// # Ok(()) }
    /// ```
    pub async fn pause(&self) -> Result<(), Error> {
        self.client.run(ops::Pause::new(&*self.name)).await
    }

    /// Resumes a paused queue.
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// q.resume().await?;
    /// # Ok(()) }
    /// ```
    pub async fn resume(&self) -> Result<(), Error> {
        self.client.run(ops::Resume::new(&*self.name)).await
    }

    /// Whether the queue is paused.
    ///
    /// # Errors
    ///
    /// As [`Client::run`](crate::Client::run).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(q: autobatch_driver::Queue<R>) -> Result<(), autobatch_driver::Error> {
    /// if q.is_paused().await? {
    ///     println!("{} is paused", q.name());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn is_paused(&self) -> Result<bool, Error> {
        self.client.run(ops::IsPaused::new(&*self.name)).await
    }
}

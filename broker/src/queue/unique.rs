//! Unique keys (`uniqueKey`, deduplication): which job holds each key of each queue. A key
//! stays with its last holder until that job leaves or the key is freed; whether the holder is
//! live (and so blocks a new job) is the caller's to ask.

use std::collections::HashMap;

/// (queue, key) → the id of the job holding it.
#[derive(Default)]
pub(crate) struct UniqueKeys {
    holders: HashMap<(String, String), String>,
}

impl UniqueKeys {
    /// The job holding `key` in `queue`, live or not.
    pub fn holder(&self, queue: &str, key: &str) -> Option<&String> {
        self.holders.get(&(queue.to_owned(), key.to_owned()))
    }

    /// Job `id` holds `key` in `queue` from now on.
    pub fn hold(&mut self, queue: &str, key: &str, id: &str) {
        self.holders
            .insert((queue.to_owned(), key.to_owned()), id.to_owned());
    }

    /// Frees `key` in `queue` if job `id` holds it; whether it did.
    pub fn release(&mut self, queue: &str, key: &str, id: &str) -> bool {
        let k = (queue.to_owned(), key.to_owned());
        if self.holders.get(&k).map(String::as_str) != Some(id) {
            return false;
        }
        self.holders.remove(&k);
        true
    }

    /// Frees `key` in `queue`, whoever holds it.
    pub fn free(&mut self, queue: &str, key: &str) {
        self.holders.remove(&(queue.to_owned(), key.to_owned()));
    }
}

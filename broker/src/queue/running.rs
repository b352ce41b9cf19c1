//! The jobs handed out and not yet finished, and which connection holds which: what the
//! lock, timeout and stall sweeps walk (so they do not walk every job), and what a closed
//! connection gives back.

use std::collections::{HashMap, HashSet};

use crate::conn_id::ConnId;

/// See the module docs.
#[derive(Default)]
pub(crate) struct Running {
    /// Ids of the jobs pulled and not yet finished (some may have left since, dropped by
    /// Obliterate: the sweeps check).
    ids: HashSet<String>,
    /// Connection → the jobs tied to it (returned to waiting when it closes).
    held: HashMap<ConnId, HashSet<String>>,
}

impl Running {
    /// Job `id` was handed out, tied to connection `conn` if any.
    pub fn started(&mut self, id: &str, conn: Option<ConnId>) {
        self.ids.insert(id.to_owned());
        if let Some(c) = conn {
            self.held.entry(c).or_default().insert(id.to_owned());
        }
    }

    /// Job `id`'s run ended; it was tied to `conn` if any.
    pub fn ended(&mut self, id: &str, conn: Option<ConnId>) {
        self.ids.remove(id);
        if let Some(set) = conn.and_then(|c| self.held.get_mut(&c)) {
            set.remove(id);
        }
    }

    /// The running jobs' ids, in no particular order.
    pub fn ids(&self) -> impl Iterator<Item = &String> {
        self.ids.iter()
    }

    /// Keeps only the ids `keep` accepts.
    pub fn retain(&mut self, keep: impl FnMut(&String) -> bool) {
        self.ids.retain(keep);
    }

    /// Connection `conn` closed: the jobs it held, if any.
    pub fn take_held(&mut self, conn: ConnId) -> Option<HashSet<String>> {
        self.held.remove(&conn)
    }

    /// The jobs in `gone` left for good without finishing: no connection holds them.
    pub fn drop_held(&mut self, gone: &HashSet<&String>) {
        for held in self.held.values_mut() {
            held.retain(|id| !gone.contains(id));
        }
    }
}

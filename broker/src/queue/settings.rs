//! Where SQLite mode writes what it keeps beside the jobs (see `kept`): the settings store,
//! when there is one, and which jobs have extras stored, so that a job leaving for good
//! deletes only rows that exist.

use std::collections::HashSet;

use autobatch_core::wire::Value;

use crate::store::settings::SettingsStore;

/// See the module docs. Without a store (memory mode) every write is a no-op.
#[derive(Default)]
pub(crate) struct Settings {
    store: Option<SettingsStore>,
    /// Ids of the jobs whose extras are stored.
    jobs: HashSet<String>,
}

impl Settings {
    /// Writes every later change to `store`.
    pub fn attach(&mut self, store: SettingsStore) {
        self.store = Some(store);
    }

    /// Whether changes are kept (SQLite mode).
    pub fn is_on(&self) -> bool {
        self.store.is_some()
    }

    /// Writes setting `kind`/`key` (`None`: forgets it).
    pub fn put(&self, kind: &'static str, key: &str, value: Option<Value>) {
        if let Some(s) = &self.store {
            match value {
                Some(v) => s.put(kind, key, &v),
                None => s.delete(kind, key),
            }
        }
    }

    /// Writes job `id`'s extras, or forgets them when it has none (`None`).
    pub fn put_job(&mut self, id: &str, extras: Option<Value>) {
        let Some(s) = &self.store else {
            return;
        };
        match extras {
            Some(v) => {
                s.put_job(id, &v);
                self.jobs.insert(id.to_owned());
            }
            None => {
                if self.jobs.remove(id) {
                    s.delete_job(id);
                }
            }
        }
    }

    /// Job `id`'s stored extras were read back: they are there.
    pub fn note_job(&mut self, id: &str) {
        self.jobs.insert(id.to_owned());
    }

    /// Deletes the stored extras of a job that is gone (read back without its job).
    pub fn delete_stale_job(&self, id: &str) {
        if let Some(s) = &self.store {
            s.delete_job(id);
        }
    }

    /// Whether some job has extras stored.
    pub fn has_jobs(&self) -> bool {
        !self.jobs.is_empty()
    }

    /// Job `id` left for good: its extras go too.
    pub fn forget_job(&mut self, id: &str) {
        if self.jobs.remove(id) {
            if let Some(s) = &self.store {
                s.delete_job(id);
            }
        }
    }

    /// Writes what is pending and closes the store.
    pub fn close(&mut self) {
        if let Some(s) = &mut self.store {
            s.close();
        }
    }
}

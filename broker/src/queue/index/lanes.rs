//! A queue's grouped ready jobs in the order bunqueue 2.9.5's group scheduler pulls them
//! (its `GroupScheduler`): one lane per group holding that group's ready jobs, the lanes in a
//! ring that pulls walk from a cursor. A pull takes the head of the first eligible lane from
//! the cursor, and the cursor then moves past that lane, so the groups take turns, one job
//! each. A lane joins the ring just before the cursor (the turn furthest off) when its group
//! gets a ready job, and leaves it when it has none left.
//!
//! Within a lane, jobs go by priority, lowest first (bunqueue's `compareGroupFifoEntries`
//! subtracts right from left), then by the order they were added: bunqueue stamps each grouped
//! job with a FIFO order at admission and keeps it through retries, priority changes and, in
//! SQLite mode, restarts; a job's `seq` is that order here (made at admission, never changed,
//! stored with the job).
//!
//! Memory: one lane per group with ready jobs; a lane is freed when its last job leaves.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::rank::priority_rank;
use crate::store::JobRecord;

/// The group of a job, as bunqueue's `job.groupId` reads it: an empty id is no group.
pub(crate) fn group_of(rec: &JobRecord) -> Option<&str> {
    rec.options
        .as_ref()?
        .group_id
        .as_deref()
        .filter(|g| !g.is_empty())
}

/// One queue's lanes (see the module docs).
#[derive(Default)]
pub(crate) struct GroupLanes {
    /// Group → its lane; every lane here holds a job and is in the ring.
    lanes: HashMap<String, Lane>,
    /// The group whose turn it is; none when the ring is empty.
    cursor: Option<String>,
    /// The number of jobs in all lanes.
    len: u64,
}

/// One group's ready jobs and its neighbours in the ring.
struct Lane {
    jobs: BTreeMap<LaneKey, String>,
    prev: String,
    next: String,
}

/// A job's place in its lane: priority, lowest first; then its admission order; then its id.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct LaneKey(i64, u64, String);

fn lane_key(rec: &JobRecord) -> LaneKey {
    LaneKey(priority_rank(rec.priority), rec.seq, rec.id.clone())
}

impl GroupLanes {
    /// Files a ready job of `group`; its lane joins the ring if it was empty.
    pub fn file(&mut self, group: &str, rec: &JobRecord) {
        if !self.lanes.contains_key(group) {
            self.attach(group);
        }
        if let Some(lane) = self.lanes.get_mut(group) {
            if lane.jobs.insert(lane_key(rec), rec.id.clone()).is_none() {
                self.len += 1;
            }
        }
    }

    /// Takes a ready job of `group` out (by its record as it was filed); its lane leaves the
    /// ring once empty.
    pub fn unfile(&mut self, group: &str, rec: &JobRecord) {
        let Some(lane) = self.lanes.get_mut(group) else {
            return;
        };
        if lane.jobs.remove(&lane_key(rec)).is_some() {
            self.len = self.len.saturating_sub(1);
        }
        if lane.jobs.is_empty() {
            self.detach(group);
        }
    }

    /// Takes id `id` out of whichever lane holds it, without its record: a walk of them all.
    pub fn purge(&mut self, id: &str) {
        let mut emptied = Vec::new();
        for (group, lane) in &mut self.lanes {
            let before = lane.jobs.len();
            lane.jobs.retain(|_, x| x != id);
            self.len = self.len.saturating_sub((before - lane.jobs.len()) as u64);
            if lane.jobs.is_empty() {
                emptied.push(group.clone());
            }
        }
        for group in emptied {
            self.detach(&group);
        }
    }

    /// A job of `group` was handed out (and unfiled): the next lane's turn, if `group`'s lane
    /// is still in the ring. When it left the ring, the cursor stays where it was, or moved
    /// on with it if it stood on it (bunqueue's `advance` after its `remove`).
    pub fn advance(&mut self, group: &str) {
        if let Some(lane) = self.lanes.get(group) {
            self.cursor = Some(lane.next.clone());
        }
    }

    /// The head of the first lane from the cursor whose group is `eligible`, with its group;
    /// each lane is asked once.
    pub fn first_eligible(
        &self,
        mut eligible: impl FnMut(&str) -> bool,
    ) -> Option<(&str, &String)> {
        let mut group = self.cursor.as_deref()?;
        for _ in 0..self.lanes.len() {
            let lane = self.lanes.get(group)?;
            if let Some((_, id)) = lane.jobs.first_key_value() {
                if eligible(group) {
                    return Some((group, id));
                }
            }
            group = &lane.next;
        }
        None
    }

    /// The head of `group`'s lane, if it has one.
    pub fn head(&self, group: &str) -> Option<&String> {
        self.lanes.get(group)?.jobs.values().next()
    }

    /// The ids of every job in the lanes, lane by lane from the cursor, each in its order.
    pub fn ids(&self) -> impl Iterator<Item = &String> {
        let mut group = self.cursor.as_deref();
        (0..self.lanes.len())
            .filter_map(move |_| {
                let lane = self.lanes.get(group?)?;
                group = Some(&lane.next);
                Some(lane.jobs.values())
            })
            .flatten()
    }

    /// The groups with a lane, in no particular order, each with its jobs' ids.
    pub fn groups(&self) -> impl Iterator<Item = (&String, impl Iterator<Item = &String>)> {
        self.lanes.iter().map(|(g, lane)| (g, lane.jobs.values()))
    }

    /// Links the ring again in `order` (groups without a lane are skipped, lanes not named
    /// keep their turns after those named), the cursor on the first: the ring a restart builds
    /// when it files its jobs in that order.
    pub fn relink(&mut self, order: &[String]) {
        let mut seen = HashSet::new();
        let named = order.iter().filter(|g| self.lanes.contains_key(*g));
        let ring: Vec<String> = named
            .cloned()
            .chain(self.ring())
            .filter(|g| seen.insert(g.clone()))
            .collect();
        for (i, g) in ring.iter().enumerate() {
            let prev = ring[(i + ring.len() - 1) % ring.len()].clone();
            let next = ring[(i + 1) % ring.len()].clone();
            if let Some(lane) = self.lanes.get_mut(g) {
                lane.prev = prev;
                lane.next = next;
            }
        }
        self.cursor = ring.into_iter().next();
    }

    /// The groups in ring order from the cursor.
    fn ring(&self) -> Vec<String> {
        let mut group = self.cursor.as_deref();
        (0..self.lanes.len())
            .filter_map(|_| {
                let g = group?;
                group = self.lanes.get(g).map(|l| l.next.as_str());
                Some(g.to_owned())
            })
            .collect()
    }

    /// The number of jobs in all lanes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no lane holds a job.
    pub fn is_empty(&self) -> bool {
        self.lanes.is_empty()
    }

    /// A new, empty lane for `group`, just before the cursor (the last turn of the ring), or
    /// alone with the cursor on it.
    fn attach(&mut self, group: &str) {
        let (prev, next) = match self.cursor.clone() {
            None => {
                self.cursor = Some(group.to_owned());
                (group.to_owned(), group.to_owned())
            }
            Some(cursor) => {
                let tail = self
                    .lanes
                    .get(&cursor)
                    .map_or_else(|| cursor.clone(), |l| l.prev.clone());
                if let Some(t) = self.lanes.get_mut(&tail) {
                    t.next = group.to_owned();
                }
                if let Some(c) = self.lanes.get_mut(&cursor) {
                    c.prev = group.to_owned();
                }
                (tail, cursor)
            }
        };
        let jobs = BTreeMap::new();
        self.lanes
            .insert(group.to_owned(), Lane { jobs, prev, next });
    }

    /// Takes `group`'s lane out of the ring; a cursor on it moves to the next lane.
    fn detach(&mut self, group: &str) {
        let Some(lane) = self.lanes.remove(group) else {
            return;
        };
        if lane.next == group {
            self.cursor = None;
            return;
        }
        if let Some(p) = self.lanes.get_mut(&lane.prev) {
            p.next = lane.next.clone();
        }
        if let Some(n) = self.lanes.get_mut(&lane.next) {
            n.prev = lane.prev.clone();
        }
        if self.cursor.as_deref() == Some(group) {
            self.cursor = Some(lane.next);
        }
    }
}

#[cfg(test)]
mod tests;

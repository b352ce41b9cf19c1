//! What a child's failure does to its parent: one policy ([`ChildFailure`]), and the set a job
//! carries ([`ChildFailures`]).

use std::fmt;

/// What happens to a parent when this child fails for good.
///
/// ```
/// use autobatch_core::wire::{ChildFailure, JobOptions};
///
/// let opts = JobOptions::new().parent_id("report").on_failure(ChildFailure::Ignore);
/// assert_eq!(opts.on_failure.applied(), Some(ChildFailure::Ignore));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChildFailure {
    /// The parent fails too (`failParentOnFailure`).
    FailParent,
    /// The parent goes on as if this child had completed; the failure is readable with
    /// `GetIgnoredChildrenFailures` (`ignoreDependencyOnFailure`).
    Ignore,
    /// The parent is released at once (`continueParentOnFailure`).
    ContinueParent,
    /// The dependency is removed from the parent (`removeDependencyOnFailure`).
    RemoveDependency,
}

impl ChildFailure {
    /// Every policy, in the order a job's map and bunqueue's job record carry their flags.
    pub const ALL: [ChildFailure; 4] = [
        ChildFailure::FailParent,
        ChildFailure::RemoveDependency,
        ChildFailure::ContinueParent,
        ChildFailure::Ignore,
    ];

    /// The order in which a server applies them when a job carries several: bunqueue's
    /// failure path tests `failParentOnFailure` first, then `continueParentOnFailure`, then
    /// drops the dependency, recording the failure when `ignoreDependencyOnFailure` is set.
    const PRECEDENCE: [ChildFailure; 4] = [
        ChildFailure::FailParent,
        ChildFailure::ContinueParent,
        ChildFailure::Ignore,
        ChildFailure::RemoveDependency,
    ];

    /// The policy's key in a job's map and in bunqueue's job record.
    pub fn key(self) -> &'static str {
        match self {
            ChildFailure::FailParent => "failParentOnFailure",
            ChildFailure::Ignore => "ignoreDependencyOnFailure",
            ChildFailure::ContinueParent => "continueParentOnFailure",
            ChildFailure::RemoveDependency => "removeDependencyOnFailure",
        }
    }

    fn bit(self) -> u8 {
        match self {
            ChildFailure::FailParent => 1,
            ChildFailure::Ignore => 2,
            ChildFailure::ContinueParent => 4,
            ChildFailure::RemoveDependency => 8,
        }
    }
}

/// The [`ChildFailure`] policies a job carries. bunqueue keeps each as a flag of its own, and
/// a PUSH may set several; [`applied`](Self::applied) says which one acts. Empty by default.
///
/// ```
/// use autobatch_core::wire::{ChildFailure, ChildFailures};
///
/// let set = ChildFailures::new()
///     .with(ChildFailure::RemoveDependency)
///     .with(ChildFailure::FailParent);
/// assert!(set.contains(ChildFailure::RemoveDependency));
/// assert_eq!(set.applied(), Some(ChildFailure::FailParent));
/// let keys: Vec<_> = set.iter().map(ChildFailure::key).collect();
/// assert_eq!(keys, ["failParentOnFailure", "removeDependencyOnFailure"]);
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ChildFailures(u8);

impl ChildFailures {
    /// No policy.
    pub const fn new() -> Self {
        ChildFailures(0)
    }

    /// This set and `policy`.
    #[must_use]
    pub fn with(self, policy: ChildFailure) -> Self {
        ChildFailures(self.0 | policy.bit())
    }

    /// Adds `policy`, or removes it when `on` is false: a flag as a job's map carries it.
    pub fn set(&mut self, policy: ChildFailure, on: bool) {
        if on {
            self.0 |= policy.bit();
        } else {
            self.0 &= !policy.bit();
        }
    }

    /// Whether the set holds `policy`.
    pub fn contains(self, policy: ChildFailure) -> bool {
        self.0 & policy.bit() != 0
    }

    /// Whether the set holds no policy.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The policy that acts when the job fails for good: of those set, `FailParent` first,
    /// then `ContinueParent`, then `Ignore`, then `RemoveDependency`, as bunqueue applies them.
    pub fn applied(self) -> Option<ChildFailure> {
        ChildFailure::PRECEDENCE
            .into_iter()
            .find(|p| self.contains(*p))
    }

    /// The policies in the set, in [`ChildFailure::ALL`]'s order.
    pub fn iter(self) -> impl Iterator<Item = ChildFailure> {
        ChildFailure::ALL
            .into_iter()
            .filter(move |p| self.contains(*p))
    }
}

impl From<ChildFailure> for ChildFailures {
    fn from(policy: ChildFailure) -> Self {
        ChildFailures::new().with(policy)
    }
}

impl FromIterator<ChildFailure> for ChildFailures {
    fn from_iter<I: IntoIterator<Item = ChildFailure>>(policies: I) -> Self {
        policies
            .into_iter()
            .fold(ChildFailures::new(), ChildFailures::with)
    }
}

impl fmt::Debug for ChildFailures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::{ChildFailure, ChildFailures};

    #[test]
    fn each_policy_is_its_own_flag() {
        for p in ChildFailure::ALL {
            let set = ChildFailures::from(p);
            let others = ChildFailure::ALL.into_iter().filter(|q| *q != p);
            assert!(
                set.contains(p) && others.clone().all(|q| !set.contains(q)),
                "{p:?}"
            );
            let mut all: ChildFailures = ChildFailure::ALL.into_iter().collect();
            all.set(p, false);
            assert!(!all.contains(p) && others.into_iter().all(|q| all.contains(q)));
        }
    }

    #[test]
    fn policies_apply_in_bunqueues_order() {
        use ChildFailure::*;
        let applied = |ps: &[ChildFailure]| ps.iter().copied().collect::<ChildFailures>().applied();
        assert_eq!(applied(&[RemoveDependency, Ignore]), Some(Ignore));
        assert_eq!(applied(&[Ignore, ContinueParent]), Some(ContinueParent));
        assert_eq!(applied(&[ContinueParent, FailParent]), Some(FailParent));
        assert_eq!(applied(&[RemoveDependency]), Some(RemoveDependency));
        assert_eq!(ChildFailures::new().applied(), None);
        assert!(ChildFailures::default().is_empty());
        let every: ChildFailures = ChildFailure::ALL.into_iter().rev().collect();
        assert_eq!(every.iter().collect::<Vec<_>>(), ChildFailure::ALL);
    }
}

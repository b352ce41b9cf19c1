use super::*;
use crate::queue::jobs::new_record;
use autobatch_core::wire::{JobOptions, JobSpec, Value};

/// A grouped job as an add makes it, with `priority` as a ChangePriority may leave it.
fn rec(id: &str, group: &str, priority: f64, seq: u64) -> JobRecord {
    let spec = JobSpec::new("j", Value::Nil).with_options(JobOptions::new().group_id(group));
    JobRecord {
        priority,
        ..new_record("q", id.into(), spec, seq, false, 0.0)
    }
}

/// Lanes holding `recs`, filed in that order.
fn lanes(recs: &[JobRecord]) -> GroupLanes {
    let mut l = GroupLanes::default();
    for r in recs {
        l.file(group_of(r).unwrap_or_default(), r);
    }
    l
}

/// Takes the next job as a pull does: the head of the first eligible lane, then the turn
/// moves on.
fn take(l: &mut GroupLanes, recs: &[JobRecord], eligible: impl Fn(&str) -> bool) -> Option<String> {
    let (_, id) = l.first_eligible(|g| eligible(g))?;
    let r = recs.iter().find(|r| &r.id == id)?.clone();
    let g = group_of(&r)?.to_owned();
    l.unfile(&g, &r);
    l.advance(&g);
    Some(r.id)
}

fn take_all(l: &mut GroupLanes, recs: &[JobRecord]) -> Vec<String> {
    std::iter::from_fn(|| take(l, recs, |_| true)).collect()
}

/// The groups take turns, one job each, in the order their lanes joined.
#[test]
fn groups_take_turns() {
    let recs = [
        rec("a1", "a", 0.0, 0),
        rec("a2", "a", 0.0, 1),
        rec("b1", "b", 0.0, 2),
        rec("a3", "a", 0.0, 3),
        rec("c1", "c", 0.0, 4),
        rec("b2", "b", 0.0, 5),
    ];
    let mut l = lanes(&recs);
    assert_eq!(l.len(), 6);
    assert_eq!(
        take_all(&mut l, &recs),
        ["a1", "b1", "c1", "a2", "b2", "a3"]
    );
    assert!(l.is_empty());
    assert_eq!(l.len(), 0);
}

/// Within a group, the lowest priority first, then the order of admission (not the id).
#[test]
fn a_lane_goes_by_priority_lowest_first_then_admission() {
    let recs = [
        rec("z", "a", 5.0, 0),
        rec("y", "a", 1.0, 1),
        rec("x", "a", 3.0, 2),
        rec("w", "a", 1.0, 3),
        rec("v", "a", -1.5, 4),
    ];
    let mut l = lanes(&recs);
    assert_eq!(take_all(&mut l, &recs), ["v", "y", "w", "x", "z"]);
}

/// A group that is not eligible keeps its turn; the turn moves past the lane that gave a job.
#[test]
fn an_ineligible_group_is_passed_over() {
    let recs = [
        rec("a1", "a", 0.0, 0),
        rec("b1", "b", 0.0, 1),
        rec("c1", "c", 0.0, 2),
        rec("b2", "b", 0.0, 3),
    ];
    let mut l = lanes(&recs);
    assert_eq!(take(&mut l, &recs, |g| g != "a").as_deref(), Some("b1"));
    // The cursor moved past b, to c; a is asked again after c.
    assert_eq!(take_all(&mut l, &recs), ["c1", "a1", "b2"]);
    let mut l = lanes(&recs);
    assert_eq!(take(&mut l, &recs, |_| false), None);
}

/// A lane that joins the ring takes the last turn, just before the cursor; one that empties
/// leaves it, and a cursor on it moves on.
#[test]
fn a_new_lane_joins_before_the_cursor() {
    let mut recs = vec![
        rec("a1", "a", 0.0, 0),
        rec("a2", "a", 0.0, 1),
        rec("b1", "b", 0.0, 2),
    ];
    let mut l = lanes(&recs);
    assert_eq!(take(&mut l, &recs, |_| true).as_deref(), Some("a1"));
    // The ring is a, b with the cursor on b: c joins between a and b, after a's turn.
    recs.push(rec("c1", "c", 0.0, 3));
    l.file("c", &recs[3]);
    let order: Vec<&String> = l.ids().collect();
    assert_eq!(order, ["b1", "a2", "c1"]);
    // b's lane empties and leaves with the cursor on it: a's turn.
    l.unfile("b", &recs[2]);
    assert_eq!(take_all(&mut l, &recs), ["a2", "c1"]);
}

/// A restart files the lanes in its own order and links the ring in it.
#[test]
fn relink_sets_the_ring_and_the_cursor() {
    let recs = [
        rec("a1", "a", 0.0, 0),
        rec("b1", "b", 0.0, 1),
        rec("c1", "c", 0.0, 2),
    ];
    let mut l = lanes(&recs);
    l.relink(&["c".into(), "x".into(), "a".into()]);
    assert_eq!(take_all(&mut l, &recs), ["c1", "a1", "b1"]);
    let mut none = GroupLanes::default();
    none.relink(&["a".into()]);
    assert!(none.first_eligible(|_| true).is_none());
}

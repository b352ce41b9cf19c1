//! [`FlowProducer`]: parents with children (trees of any depth) and chains, each added with
//! one atomic `PUSHF`, planned on the client as bunqueue's TS `FlowProducer` plans them.
//!
//! Every job's id is chosen here (a UUIDv7, as bunqueue's client does), children are listed
//! before their parents, a parent lists its children in `dependsOn` and `childrenIds`, and
//! each child names its parent. The job data carries the same bookkeeping keys the TS client
//! adds (`__parentId`, `__parentQueue`, `__childrenIds`; `__flowParentId` in a chain), so
//! that TS workers see the same jobs; user data keys may therefore not start with `__`.
//!
//! bunqueue commits the whole graph in one step, validated before anything changes: all of
//! it or none of it (see [`ops::PushFlow`](autobatch_core::ops::PushFlow)). A lost reply
//! leaves the outcome unknown ([`Error::ConnectionLost`] `{ maybe_applied: true }`); the
//! returned ids are known before sending, so check one with `get_state`.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use autobatch_core::ops::{ChildFailure, FlowJob, PushFlow, MAX_FLOW_JOBS};
use autobatch_core::wire::{JobOptions, ValidationError, Value};
use autobatch_core::Error;
use serde::Serialize;

use crate::{Client, Runtime};

/// Deepest tree bunqueue's client accepts.
pub const MAX_FLOW_DEPTH: usize = 100;

/// One job of a flow and its children (each runs before it).
///
/// ```
/// use autobatch_driver::FlowNode;
/// let report = FlowNode::new("reports", "merge", &serde_json::json!({"month": 5}))?
///     .child(FlowNode::new("parts", "part", &serde_json::json!({"i": 0}))?)
///     .child(FlowNode::new("parts", "part", &serde_json::json!({"i": 1}))?);
/// assert_eq!(report.children.len(), 2);
/// # Ok::<(), autobatch_driver::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FlowNode {
    /// Queue name.
    pub queue: String,
    /// Job name.
    pub name: String,
    /// Job data: a map (bunqueue refuses anything else in a flow).
    pub data: Value,
    /// Options; see [`FlowJob::opts`] for which are allowed.
    pub opts: JobOptions,
    /// What this job's failure does to its parent.
    pub on_failure: Option<ChildFailure>,
    /// Children: all of them finish before this job runs.
    pub children: Vec<FlowNode>,
}

impl FlowNode {
    /// A job with `data` serialised (it must serialise to a map).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] when `data` does not serialise.
    pub fn new<T: Serialize + ?Sized>(
        queue: impl Into<String>,
        name: impl Into<String>,
        data: &T,
    ) -> Result<Self, Error> {
        let data = Value::from_serialize(data).map_err(|e| {
            Error::Invalid(ValidationError::new(
                "data",
                format!("Job data must be serializable: {}", e.0),
            ))
        })?;
        Ok(FlowNode {
            queue: queue.into(),
            name: name.into(),
            data,
            opts: JobOptions::new(),
            on_failure: None,
            children: Vec::new(),
        })
    }

    /// Sets the options.
    pub fn options(mut self, opts: JobOptions) -> Self {
        self.opts = opts;
        self
    }

    /// Adds a child.
    pub fn child(mut self, child: FlowNode) -> Self {
        self.children.push(child);
        self
    }

    /// Sets what this job's failure does to its parent.
    pub fn on_failure(mut self, policy: ChildFailure) -> Self {
        self.on_failure = Some(policy);
        self
    }
}

/// The ids given to a flow, in the shape of the [`FlowNode`] tree.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlowTree {
    /// Job id.
    pub id: String,
    /// Queue name.
    pub queue: String,
    /// Job name.
    pub name: String,
    /// The children's trees, in the order given.
    pub children: Vec<FlowTree>,
}

/// Adds flows: trees of jobs whose children finish before their parent, and chains.
///
/// Shares its [`Client`]'s connection (a flow is one request).
///
/// ```no_run
/// # async fn demo<R: autobatch_driver::Runtime>(client: autobatch_driver::Client<R>) -> Result<(), autobatch_driver::Error> {
/// use autobatch_driver::{FlowNode, FlowProducer};
/// use serde_json::json;
/// let flows = FlowProducer::new(&client);
/// let tree = flows.add(
///     FlowNode::new("reports", "merge", &json!({}))?
///         .child(FlowNode::new("parts", "part", &json!({"i": 0}))?),
/// ).await?;
/// let value = client.queue("reports").wait_until_finished(&tree.id, std::time::Duration::from_secs(60)).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct FlowProducer<R: Runtime> {
    client: Client<R>,
}

impl<R: Runtime> FlowProducer<R> {
    /// A producer on `client`'s connection.
    pub fn new(client: &Client<R>) -> Self {
        FlowProducer {
            client: client.clone(),
        }
    }

    /// Adds one tree atomically and returns its ids.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] before anything is sent for what bunqueue refuses (data not a map,
    /// a reserved `__` key, a bad name or queue, too deep or too many jobs, a failure policy
    /// on the root); otherwise as [`Client::run`].
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(flows: autobatch_driver::FlowProducer<R>) -> Result<(), autobatch_driver::Error> {
    /// use autobatch_driver::FlowNode;
    /// let tree = flows.add(FlowNode::new("q", "parent", &serde_json::json!({}))?
    ///     .child(FlowNode::new("q", "child", &serde_json::json!({}))?)).await?;
    /// println!("parent {} child {}", tree.id, tree.children[0].id);
    /// # Ok(()) }
    /// ```
    pub async fn add(&self, root: FlowNode) -> Result<FlowTree, Error> {
        let mut trees = self.add_bulk(vec![root]).await?;
        trees
            .pop()
            .ok_or_else(|| Error::Protocol("PUSHF: no tree planned".into()))
    }

    /// Adds several trees in one atomic `PUSHF`.
    ///
    /// # Errors
    ///
    /// As [`add`](Self::add).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(flows: autobatch_driver::FlowProducer<R>) -> Result<(), autobatch_driver::Error> {
    /// use autobatch_driver::FlowNode;
    /// let roots = (0..3).map(|i| FlowNode::new("q", "job", &serde_json::json!({"i": i}))).collect::<Result<Vec<_>, _>>()?;
    /// let trees = flows.add_bulk(roots).await?;
    /// # Ok(()) }
    /// ```
    pub async fn add_bulk(&self, roots: Vec<FlowNode>) -> Result<Vec<FlowTree>, Error> {
        let mut jobs = Vec::new();
        let mut trees = Vec::with_capacity(roots.len());
        for root in &roots {
            trees.push(plan(root, None, 0, &mut jobs)?);
        }
        self.commit(jobs).await?;
        Ok(trees)
    }

    /// Adds a chain atomically: each step runs after the previous one completes (the first
    /// runs at once). Steps may not have children. Returns the ids in order.
    ///
    /// # Errors
    ///
    /// As [`add`](Self::add).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(flows: autobatch_driver::FlowProducer<R>) -> Result<(), autobatch_driver::Error> {
    /// use autobatch_driver::FlowNode;
    /// use serde_json::json;
    /// let ids = flows.add_chain(vec![
    ///     FlowNode::new("pipeline", "fetch", &json!({}))?,
    ///     FlowNode::new("pipeline", "store", &json!({}))?,
    /// ]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn add_chain(&self, steps: Vec<FlowNode>) -> Result<Vec<String>, Error> {
        if steps.len() > MAX_FLOW_JOBS {
            return Err(invalid(
                "steps",
                format!("flow exceeds the {MAX_FLOW_JOBS} job limit"),
            ));
        }
        let mut jobs: Vec<FlowJob> = Vec::with_capacity(steps.len());
        for (i, step) in steps.iter().enumerate() {
            if !step.children.is_empty() {
                return Err(invalid(
                    "children",
                    "nested children are only supported by addTree".into(),
                ));
            }
            let id = job_id(step)?;
            let mut extra = vec![];
            let mut depends = vec![];
            match jobs.last() {
                Some(prev) => {
                    extra.push(("__flowParentId", Value::from(prev.id.as_str())));
                    extra.push(("__parentId", Value::from(prev.id.as_str())));
                    extra.push(("__parentQueue", Value::from(prev.queue.as_str())));
                    depends.push(prev.id.clone());
                }
                None => extra.push(("__flowParentId", Value::Nil)),
            }
            let data = with_internal(step, extra)?;
            let _ = i;
            jobs.push(
                FlowJob::new(id, step.queue.as_str(), step.name.as_str(), data)
                    .options(step.opts.clone())
                    .depends_on(depends),
            );
        }
        let ids = jobs.iter().map(|j| j.id.clone()).collect();
        self.commit(jobs).await?;
        Ok(ids)
    }

    async fn commit(&self, jobs: Vec<FlowJob>) -> Result<(), Error> {
        if jobs.is_empty() {
            return Ok(());
        }
        let expected = jobs.len();
        let committed = self.client.run(PushFlow::new(jobs)).await?;
        if committed.len() != expected {
            return Err(Error::Protocol(format!(
                "PUSHF committed {} jobs of {expected}",
                committed.len()
            )));
        }
        Ok(())
    }
}

fn invalid(field: &'static str, message: String) -> Error {
    Error::Invalid(ValidationError::new(field, message))
}

/// The node's id: its `job_id` option, else a new UUIDv7.
fn job_id(node: &FlowNode) -> Result<String, Error> {
    match &node.opts.job_id {
        Some(id) if id.is_empty() || id.contains(':') => Err(invalid(
            "job_id",
            "flow jobId must be non-empty and cannot contain a colon".into(),
        )),
        Some(id) => Ok(id.clone()),
        None => Ok(uuid_v7()),
    }
}

/// The node's data with the TS client's bookkeeping keys added.
fn with_internal(node: &FlowNode, extra: Vec<(&str, Value)>) -> Result<Value, Error> {
    let data = match &node.data {
        Value::Raw(r) => r.decode().unwrap_or(Value::Nil),
        other => other.clone(),
    };
    let Value::Map(mut entries) = data else {
        return Err(invalid("data", "flow job data must be an object".into()));
    };
    for (k, _) in &entries {
        if let Some(k) = k.as_str().filter(|k| k.starts_with("__")) {
            return Err(invalid(
                "data",
                format!("flow job data key is reserved: {k}"),
            ));
        }
    }
    entries.extend(extra.into_iter().map(|(k, v)| (Value::from(k), v)));
    Ok(Value::Map(entries))
}

/// Appends `node`'s subtree to `jobs`, children first, and returns its ids.
fn plan(
    node: &FlowNode,
    parent: Option<(&str, &str)>,
    depth: usize,
    jobs: &mut Vec<FlowJob>,
) -> Result<FlowTree, Error> {
    if depth > MAX_FLOW_DEPTH {
        return Err(invalid(
            "children",
            format!("flow exceeds the {MAX_FLOW_DEPTH} level depth limit"),
        ));
    }
    if jobs.len() >= MAX_FLOW_JOBS {
        return Err(invalid(
            "children",
            format!("flow exceeds the {MAX_FLOW_JOBS} job limit"),
        ));
    }
    let id = job_id(node)?;
    let mut children = Vec::with_capacity(node.children.len());
    for child in &node.children {
        children.push(plan(child, Some((&id, &node.queue)), depth + 1, jobs)?);
    }
    let child_ids: Vec<String> = children.iter().map(|c| c.id.clone()).collect();
    let mut extra = Vec::new();
    if let Some((pid, pqueue)) = parent {
        extra.push(("__parentId", Value::from(pid)));
        extra.push(("__parentQueue", Value::from(pqueue)));
    }
    if !child_ids.is_empty() {
        extra.push((
            "__childrenIds",
            Value::Array(child_ids.iter().map(|s| Value::from(s.as_str())).collect()),
        ));
    }
    let data = with_internal(node, extra)?;
    let mut job = FlowJob::new(id.as_str(), node.queue.as_str(), node.name.as_str(), data)
        .options(node.opts.clone())
        .depends_on(child_ids.clone())
        .children(child_ids);
    if let Some((pid, _)) = parent {
        job = job.parent(pid);
    }
    if let Some(p) = node.on_failure {
        job = job.on_failure(p);
    }
    jobs.push(job);
    Ok(FlowTree {
        id,
        queue: node.queue.clone(),
        name: node.name.clone(),
        children,
    })
}

/// A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then random bits, as bunqueue's client
/// makes with `Bun.randomUUIDv7()`. The randomness is std's per-process hash keys mixed with
/// a counter: unique, not secret (ids are not secrets).
fn uuid_v7() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let state = RandomState::new();
    let mut h = state.build_hasher();
    h.write_u64(n);
    h.write_u64(ms);
    let a = h.finish();
    h.write_u64(a);
    let b = h.finish();
    let hi = (ms << 16) | 0x7000 | (a & 0x0fff);
    let lo = (b & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xffff,
        lo >> 48,
        lo & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use autobatch_core::ops::Operation;
    use serde_json::json;

    fn node(name: &str) -> FlowNode {
        FlowNode::new("q", name, &json!({"k": name})).expect("serialisable")
    }

    #[test]
    fn uuids_are_v7_and_distinct() {
        let a = uuid_v7();
        let b = uuid_v7();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "7");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"));
    }

    #[test]
    fn trees_are_planned_children_first_with_links() {
        let root = node("root")
            .child(node("a").child(node("a1")))
            .child(node("b"));
        let mut jobs = Vec::new();
        let tree = plan(&root, None, 0, &mut jobs).expect("valid");
        let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["a1", "a", "b", "root"]);
        let root_job = &jobs[3];
        assert_eq!(root_job.id, tree.id);
        assert_eq!(
            root_job.children_ids,
            vec![tree.children[0].id.clone(), tree.children[1].id.clone()]
        );
        assert_eq!(root_job.depends_on, root_job.children_ids);
        assert_eq!(jobs[1].parent_id.as_deref(), Some(tree.id.as_str()));
        assert_eq!(
            jobs[1].data.get("__parentQueue").and_then(Value::as_str),
            Some("q")
        );
        assert!(PushFlow::new(jobs).validate().is_ok());
    }

    #[test]
    fn reserved_keys_and_non_maps_are_refused() {
        let bad = FlowNode::new("q", "x", &json!({"__parentId": 1})).expect("serialisable");
        let mut jobs = Vec::new();
        assert!(
            matches!(plan(&bad, None, 0, &mut jobs), Err(Error::Invalid(e)) if e.message == "flow job data key is reserved: __parentId")
        );
        let bad = FlowNode::new("q", "x", &3).expect("serialisable");
        assert!(
            matches!(plan(&bad, None, 0, &mut jobs), Err(Error::Invalid(e)) if e.field == "data")
        );
    }
}

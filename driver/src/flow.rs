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

use std::collections::HashSet;

use autobatch_core::ops::{ChildFailure, FlowJob, PushFlow, MAX_FLOW_JOBS};
use autobatch_core::wire::{Job, JobOptions, ValidationError, Value};
use autobatch_core::Error;
use futures_util::future::join_all;
use serde::Serialize;

use crate::uuid::uuid_v7;
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

/// A flow read back from the server by [`FlowProducer::get_flow`]: a job and its children.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FlowJobs {
    /// The job as `GetJob` returns it: state, return value, and in its data the flow's
    /// bookkeeping keys (`__parentId`, `__childrenIds`, …) as the TS client leaves them.
    pub job: Job,
    /// Its children still on the server, in the parent's `childrenIds` order (a child removed
    /// since, or one past [`FlowRead`]'s limits, is left out).
    pub children: Vec<FlowJobs>,
}

/// How much of a flow [`FlowProducer::get_flow_with`] reads: the TS `getFlow`'s `depth` and
/// `maxChildren`.
///
/// ```
/// use autobatch_driver::FlowRead;
/// let read = FlowRead::new().depth(1).max_children(10);
/// assert_eq!(read.depth, 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlowRead {
    /// Levels read below the job (0: the job alone). Default and most: [`MAX_FLOW_DEPTH`].
    pub depth: usize,
    /// Children read per job, the first ones in `childrenIds` order. Default
    /// [`MAX_FLOW_JOBS`].
    pub max_children: usize,
}

impl Default for FlowRead {
    fn default() -> Self {
        FlowRead {
            depth: MAX_FLOW_DEPTH,
            max_children: MAX_FLOW_JOBS,
        }
    }
}

impl FlowRead {
    /// The whole flow, up to [`MAX_FLOW_DEPTH`] levels and [`MAX_FLOW_JOBS`] jobs.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the levels read below the job.
    pub fn depth(mut self, depth: usize) -> Self {
        self.depth = depth;
        self
    }

    /// Sets the children read per job.
    pub fn max_children(mut self, max: usize) -> Self {
        self.max_children = max;
        self
    }
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
        for step in &steps {
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

    /// Reads a flow back: the job `id` of `queue` and its children, any depth (TS `getFlow`).
    /// `None` when the server does not know the job or it is in another queue.
    ///
    /// # Errors
    ///
    /// As [`Queue::get_job`](crate::Queue::get_job).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(flows: autobatch_driver::FlowProducer<R>, id: String) -> Result<(), autobatch_driver::Error> {
    /// if let Some(flow) = flows.get_flow("reports", &id).await? {
    ///     println!("{} has {} children", flow.job.id, flow.children.len());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_flow(&self, queue: &str, id: &str) -> Result<Option<FlowJobs>, Error> {
        self.get_flow_with(queue, id, FlowRead::new()).await
    }

    /// As [`get_flow`](Self::get_flow), reading at most `read.depth` levels and
    /// `read.max_children` children per job. The lookups of one level go out together (one
    /// round trip per level), and at most [`MAX_FLOW_JOBS`] jobs are read in all; a job listed
    /// twice (bunqueue's trees have none) appears once.
    ///
    /// # Errors
    ///
    /// As [`Queue::get_job`](crate::Queue::get_job).
    ///
    /// ```no_run
    /// # async fn demo<R: autobatch_driver::Runtime>(flows: autobatch_driver::FlowProducer<R>, id: String) -> Result<(), autobatch_driver::Error> {
    /// use autobatch_driver::FlowRead;
    /// let top = flows.get_flow_with("reports", &id, FlowRead::new().depth(1)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_flow_with(
        &self,
        queue: &str,
        id: &str,
        read: FlowRead,
    ) -> Result<Option<FlowJobs>, Error> {
        let lookups = self.client.queue(queue);
        let root = match lookups.get_job(id).await? {
            Some(job) if job.queue == queue => job,
            _ => return Ok(None),
        };
        // Jobs in the order read; `children[i]` lists the indices of job i's children.
        let mut jobs = vec![root];
        let mut children: Vec<Vec<usize>> = vec![Vec::new()];
        let mut seen: HashSet<String> = HashSet::from([id.to_owned()]);
        let mut level = vec![0usize];
        for _ in 0..read.depth.min(MAX_FLOW_DEPTH) {
            let mut wanted: Vec<(usize, String)> = Vec::new();
            for &parent in &level {
                for child in jobs[parent].children_ids.iter().take(read.max_children) {
                    if jobs.len() + wanted.len() >= MAX_FLOW_JOBS {
                        break;
                    }
                    if seen.insert(child.clone()) {
                        wanted.push((parent, child.clone()));
                    }
                }
            }
            if wanted.is_empty() {
                break;
            }
            let found = join_all(wanted.iter().map(|(_, id)| lookups.get_job(id))).await;
            level.clear();
            for ((parent, _), job) in wanted.into_iter().zip(found) {
                if let Some(job) = job? {
                    children[parent].push(jobs.len());
                    level.push(jobs.len());
                    jobs.push(job);
                    children.push(Vec::new());
                }
            }
        }
        let mut jobs: Vec<Option<Job>> = jobs.into_iter().map(Some).collect();
        Ok(assemble(0, &mut jobs, &children))
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

/// Job `i` and its subtree, taken out of `jobs` (each index is listed once, under one parent).
fn assemble(i: usize, jobs: &mut [Option<Job>], children: &[Vec<usize>]) -> Option<FlowJobs> {
    let job = jobs.get_mut(i)?.take()?;
    let kids = children
        .get(i)
        .map(|kids| {
            kids.iter()
                .filter_map(|&k| assemble(k, jobs, children))
                .collect()
        })
        .unwrap_or_default();
    Some(FlowJobs {
        job,
        children: kids,
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use autobatch_core::ops::Operation;
    use serde_json::json;

    fn node(name: &str) -> FlowNode {
        FlowNode::new("q", name, &json!({"k": name})).expect("serialisable")
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

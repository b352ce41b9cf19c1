//! PUSHF's checks, as bunqueue 2.9.5's `validateAtomicFlowBatch` and `validateFlowTopology`
//! make them, with their messages, before anything changes: the whole flow is planned (ids,
//! queues, options, links) or refused. Nothing here looks at the queue state (ids taken,
//! group sizes: see `ops::flow::push_flow`).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use autobatch_core::wire::{Backoff, ChildFailure, JobOptions, JobSpec, Value};

/// Most jobs in one flow (bunqueue's `MAX_FLOW_JOBS`).
const MAX_FLOW_JOBS: usize = 10_000;

/// One job of a checked flow: its planned id, queue, the job to add (links in its options)
/// and its `groupMaxSize`.
pub(crate) struct Planned {
    pub id: String,
    pub queue: String,
    pub spec: JobSpec,
    pub group_max_size: Option<i64>,
    /// The input's own `customId`, which the job's record shows.
    pub custom_id: Option<String>,
}

/// A map of a request, whether decoded or still encoded.
fn tree(v: &Value) -> Option<Value> {
    match v {
        Value::Raw(r) => r.decode().ok(),
        Value::Map(_) => Some(v.clone()),
        _ => None,
    }
}

/// `Value::get` on a possibly encoded map.
fn field<'a>(m: &'a Value, k: &str) -> Option<&'a Value> {
    m.get(k).filter(|v| !matches!(v, Value::Undefined))
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::F64(f) => Some(*f),
        _ => None,
    }
}

/// bunqueue's `numeric` check (`null` and absent pass).
fn numeric(
    input: &Value,
    key: &str,
    name: &str,
    min: f64,
    max: f64,
    integer: bool,
) -> Result<Option<f64>, String> {
    let Some(v) = field(input, key).filter(|v| !matches!(v, Value::Nil)) else {
        return Ok(None);
    };
    let Some(x) = number(v).filter(|x| x.is_finite()) else {
        return Err(format!("{name} must be a finite number"));
    };
    if integer && x.fract() != 0.0 {
        return Err(format!("{name} must be an integer"));
    }
    if x < min || x > max {
        return Err(format!("{name} must be between {min} and {max}"));
    }
    Ok(Some(x))
}

fn ids(input: &Value, key: &str) -> Result<Vec<String>, String> {
    let bad = || format!("{key} must be an array of valid string job ids");
    match field(input, key) {
        None => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| match v.as_str() {
                Some(s) if !s.is_empty() && s.len() <= 1024 => Ok(s.to_owned()),
                _ => Err(bad()),
            })
            .collect(),
        Some(_) => Err(bad()),
    }
}

/// The options bunqueue's `validateOptions` checks, read into [`JobOptions`], in its order.
fn options(input: &Value) -> Result<(JobOptions, Option<i64>), String> {
    let mut o = JobOptions::new();
    let group_max = numbers(input, &mut o)?;
    o.backoff = backoff(input)?;
    flags(input, &mut o)?;
    o.group_id = field(input, "groupId")
        .and_then(Value::as_str)
        .map(str::to_owned);
    if let Some(t) = field(input, "tags") {
        o.tags = tags(t)?;
    }
    refuse_unsupported(input)?;
    check_policies(input)?;
    Ok((o, group_max))
}

const DAY: f64 = 86_400_000.0;
const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

fn ms(x: f64) -> Duration {
    Duration::from_millis(x as u64)
}

/// The numeric options, each in its range; returns `groupMaxSize`.
fn numbers(input: &Value, o: &mut JobOptions) -> Result<Option<i64>, String> {
    o.priority = numeric(input, "priority", "priority", -1e6, 1e6, true)?.map(|x| x as i64);
    o.delay = numeric(input, "delay", "delay", 0.0, 365.0 * DAY, false)?.map(ms);
    o.timeout = numeric(input, "timeout", "timeout", 0.0, DAY, false)?.map(ms);
    o.ttl = numeric(input, "ttl", "ttl", 0.0, 365.0 * DAY, false)?.map(ms);
    o.attempts = numeric(input, "maxAttempts", "attempts", 1.0, 1000.0, true)?.map(|x| x as i64);
    o.stall_timeout = numeric(input, "stallTimeout", "stallTimeout", 0.0, DAY, false)?.map(ms);
    numeric(input, "stackTraceLimit", "stackTraceLimit", 0.0, 1e4, true)?;
    numeric(input, "keepLogs", "keepLogs", 0.0, 1e6, true)?;
    numeric(
        input,
        "sizeLimit",
        "sizeLimit",
        0.0,
        10.0 * 1024.0 * 1024.0,
        true,
    )?;
    o.timestamp = numeric(input, "timestamp", "timestamp", 0.0, MAX_SAFE, false)?;
    Ok(numeric(input, "groupMaxSize", "group.maxSize", 1.0, MAX_SAFE, true)?.map(|x| x as i64))
}

/// `backoff`: a `{type, delay}` map (fixed or exponential) or a plain delay.
fn backoff(input: &Value) -> Result<Option<Backoff>, String> {
    let Some(b @ Value::Map(_)) = field(input, "backoff") else {
        return Ok(
            numeric(input, "backoff", "backoff", 0.0, DAY, false)?.map(|d| Backoff::Delay(ms(d)))
        );
    };
    let kind = b.get("type").and_then(Value::as_str);
    if !matches!(kind, Some("fixed" | "exponential")) {
        return Err("backoff.type must be 'fixed' or 'exponential'".into());
    }
    let d = numeric(b, "delay", "backoff.delay", 0.0, DAY, false)?.unwrap_or(0.0);
    Ok(Some(if kind == Some("fixed") {
        Backoff::Fixed(ms(d))
    } else {
        Backoff::Exponential(ms(d))
    }))
}

/// The boolean options, each a boolean when given.
fn flags(input: &Value, o: &mut JobOptions) -> Result<(), String> {
    let flag = |k: &str| -> Result<Option<bool>, String> {
        match field(input, k) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(format!("{k} must be a boolean")),
        }
    };
    o.lifo = flag("lifo")?;
    o.remove_on_complete = flag("removeOnComplete")?;
    o.remove_on_fail = flag("removeOnFail")?;
    o.durable = flag("durable")?;
    for p in ChildFailure::ALL {
        o.on_failure.set(p, flag(p.key())? == Some(true));
    }
    Ok(())
}

/// `tags`: an array of strings of at most 256 characters.
fn tags(tags: &Value) -> Result<Vec<String>, String> {
    let ok = match tags {
        Value::Array(a) => a
            .iter()
            .all(|t| t.as_str().is_some_and(|s| s.chars().count() <= 256)),
        _ => false,
    };
    if !ok {
        return Err("tags must be an array of strings of at most 256 characters".into());
    }
    Ok(tags
        .as_array()
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect())
}

/// The options an atomic flow does not take: repeat, deduplication, debounce.
fn refuse_unsupported(input: &Value) -> Result<(), String> {
    if field(input, "repeat").is_some() {
        return Err("repeat is not supported inside an atomic flow".into());
    }
    if field(input, "uniqueKey").is_some() || field(input, "dedup").is_some() {
        return Err("deduplication is not supported inside an atomic flow".into());
    }
    if field(input, "debounceId").is_some() || field(input, "debounceTtl").is_some() {
        return Err("debounce is not supported inside an atomic flow".into());
    }
    Ok(())
}

/// At most one failure policy, and only on a job with a parent.
fn check_policies(input: &Value) -> Result<(), String> {
    let set = ChildFailure::ALL
        .iter()
        .filter(|p| field(input, p.key()).and_then(Value::as_bool) == Some(true))
        .count();
    if set > 1 {
        return Err("flow failure policies are mutually exclusive".into());
    }
    let has_parent = field(input, "parentId")
        .and_then(Value::as_str)
        .is_some_and(|p| !p.is_empty());
    if set == 1 && !has_parent {
        return Err("a flow failure policy requires a parent".into());
    }
    Ok(())
}

/// Checks a PUSHF body as bunqueue does, in its order, and plans its jobs.
pub(crate) fn plan(body: &Value) -> Result<Vec<Planned>, String> {
    let Some(Value::Array(jobs)) = body.get("jobs") else {
        return Err("flow jobs must be an array".into());
    };
    if jobs.len() > MAX_FLOW_JOBS {
        return Err(format!("flow exceeds the {MAX_FLOW_JOBS} job limit"));
    }
    let mut seen = HashSet::new();
    let mut planned = Vec::with_capacity(jobs.len());
    // Per job: the data tree, for the topology checks.
    let mut data_trees = Vec::with_capacity(jobs.len());
    for (i, job) in jobs.iter().enumerate() {
        let Some(job) = tree(job) else {
            return Err(format!("flow jobs[{i}] must be an object"));
        };
        let id = planned_id(&job, &mut seen)?;
        let (job, data_tree) = plan_job(&job, id)?;
        data_trees.push(data_tree);
        planned.push(job);
    }
    topology(&planned, &data_trees)?;
    Ok(planned)
}

/// A flow job's planned `id`: a string, well formed, without a colon, not seen before.
fn planned_id(job: &Value, seen: &mut HashSet<String>) -> Result<String, String> {
    let Some(id) = job.get("id").and_then(Value::as_str).map(str::to_owned) else {
        return Err("flow job id must be a string".into());
    };
    if id.is_empty() || id.len() > 1024 {
        return Err("flow job id is invalid or is not well-formed Unicode".into());
    }
    if id.contains(':') {
        return Err("flow job id cannot contain a colon".into());
    }
    if !seen.insert(id.clone()) {
        return Err(format!("duplicate flow job id: {id}"));
    }
    Ok(id)
}

/// One flow job (past its id) planned, with its data tree.
fn plan_job(job: &Value, id: String) -> Result<(Planned, Value), String> {
    let queue = flow_queue(job)?;
    let Some(input) = job.get("input").and_then(tree) else {
        return Err(format!("flow job input is invalid: {id}"));
    };
    if let Some(c) = field(&input, "customId") {
        if c.as_str() != Some(id.as_str()) {
            return Err(format!("custom id does not match planned id: {id}"));
        }
    }
    let parent = match field(&input, "parentId") {
        None => None,
        Some(Value::Str(p)) if !p.is_empty() => Some(p.clone()),
        Some(_) => return Err(format!("flow parent id is invalid: {id}")),
    };
    let depends_on = ids(&input, "dependsOn")?;
    let children = ids(&input, "childrenIds")?;
    let (name, data) = name_and_data(&input)?;
    let Some(data_tree) = tree(&data) else {
        return Err("flow job data must be an object".into());
    };
    let (mut opts, group_max_size) = options(&input)?;
    opts.job_id = Some(id.clone());
    opts.parent_id = parent;
    opts.depends_on = depends_on;
    opts.children_ids = children;
    let custom_id = field(&input, "customId")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let planned = Planned {
        id,
        queue,
        spec: JobSpec::new(name, data).with_options(opts),
        group_max_size,
        custom_id,
    };
    Ok((planned, data_tree))
}

/// A flow job's queue: 1 to 256 letters, digits or `_-.:`.
fn flow_queue(job: &Value) -> Result<String, String> {
    let queue = job.get("queue").and_then(Value::as_str).unwrap_or_default();
    let queue_ok = !queue.is_empty()
        && queue.len() <= 256
        && queue
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.:".contains(&b));
    if !queue_ok {
        let shown = job
            .get("queue")
            .and_then(Value::as_str)
            .unwrap_or("undefined");
        return Err(format!("invalid flow queue: {shown}"));
    }
    Ok(queue.to_owned())
}

/// A flow job's name (`default` when absent) and data.
fn name_and_data(input: &Value) -> Result<(String, Value), String> {
    let name = field(input, "name")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_owned();
    if name.is_empty() || name.chars().count() > 256 {
        return Err("flow job name must be a non-empty string of at most 256 characters".into());
    }
    let data = field(input, "data").cloned().unwrap_or(Value::Undefined);
    // The pre-2.8.56 envelope (`data.name`), as bunqueue unpacks it before planning.
    Ok(crate::envelope::legacy(input, &data)?.unwrap_or((name, data)))
}

/// bunqueue's `validateFlowTopology`: references, parent edges both ways, the `__parentId`,
/// `__parentQueue` and `__childrenIds` its client writes into the data, then no cycle.
fn topology(jobs: &[Planned], data_trees: &[Value]) -> Result<(), String> {
    let by_id: HashMap<&str, usize> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.id.as_str(), i))
        .collect();
    for (j, data) in jobs.iter().zip(data_trees) {
        let deps = check_references(j, &by_id)?;
        check_children(j, &deps, jobs, &by_id)?;
        if let Some(p) = &j.spec.opts.parent_id {
            check_parent(j, p, data, jobs, &by_id)?;
        }
        check_children_listed(j, data)?;
    }
    assert_acyclic(jobs)
}

/// A job's dependencies and children, each listed once, its dependencies found and not
/// itself. Returns its dependencies.
fn check_references<'a>(
    j: &'a Planned,
    by_id: &HashMap<&str, usize>,
) -> Result<HashSet<&'a str>, String> {
    let o = &j.spec.opts;
    let mut deps = HashSet::new();
    for d in &o.depends_on {
        if !deps.insert(d.as_str()) {
            return Err(format!("duplicate dependency in flow job: {}", j.id));
        }
    }
    let mut kids = HashSet::new();
    for c in &o.children_ids {
        if !kids.insert(c.as_str()) {
            return Err(format!("duplicate child in flow job: {}", j.id));
        }
    }
    for d in &o.depends_on {
        if !by_id.contains_key(d.as_str()) {
            return Err(format!("flow dependency not found: {d}"));
        }
        if *d == j.id {
            return Err(format!("flow job cannot depend on itself: {}", j.id));
        }
    }
    Ok(deps)
}

/// Each child of a job among its dependencies, found, and pointing back to it.
fn check_children(
    j: &Planned,
    deps: &HashSet<&str>,
    jobs: &[Planned],
    by_id: &HashMap<&str, usize>,
) -> Result<(), String> {
    for c in &j.spec.opts.children_ids {
        if !deps.contains(c.as_str()) {
            return Err(format!("flow child is missing from dependencies: {c}"));
        }
        let Some(&ci) = by_id.get(c.as_str()) else {
            return Err(format!("flow child not found: {c}"));
        };
        if jobs[ci].spec.opts.parent_id.as_deref() != Some(j.id.as_str()) {
            return Err(format!(
                "flow child {c} does not point back to parent {}",
                j.id
            ));
        }
    }
    Ok(())
}

/// A job's parent `p` found, owning it, and named with its queue in the job's data.
fn check_parent(
    j: &Planned,
    p: &str,
    data: &Value,
    jobs: &[Planned],
    by_id: &HashMap<&str, usize>,
) -> Result<(), String> {
    let Some(&pi) = by_id.get(p) else {
        return Err(format!("flow parent not found: {p}"));
    };
    let parent = &jobs[pi];
    if !parent.spec.opts.children_ids.contains(&j.id) {
        return Err(format!("flow parent {p} does not own child {}", j.id));
    }
    let text = |k: &str| data.get(k).and_then(Value::as_str).map(str::to_owned);
    if text("__parentId").as_deref() != Some(p)
        || text("__parentQueue").as_deref() != Some(parent.queue.as_str())
    {
        return Err(format!(
            "flow child {} metadata does not match parent {p}",
            j.id
        ));
    }
    Ok(())
}

/// A parent's data lists its children (`__childrenIds`) as its options do, in order.
fn check_children_listed(j: &Planned, data: &Value) -> Result<(), String> {
    let children = &j.spec.opts.children_ids;
    if children.is_empty() {
        return Ok(());
    }
    let listed: Option<Vec<&str>> = data
        .get("__childrenIds")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect());
    let matches = listed
        .is_some_and(|l| l.len() == children.len() && l.iter().zip(children).all(|(a, b)| *a == b));
    if !matches {
        return Err(format!(
            "flow parent {} children does not match the canonical flow topology",
            j.id
        ));
    }
    Ok(())
}

/// No dependency cycle: Kahn's walk, as bunqueue's `assertAcyclic`.
fn assert_acyclic(jobs: &[Planned]) -> Result<(), String> {
    let mut remaining: Vec<usize> = jobs.iter().map(|j| j.spec.opts.depends_on.len()).collect();
    let mut dependents: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, j) in jobs.iter().enumerate() {
        for d in &j.spec.opts.depends_on {
            dependents.entry(d.as_str()).or_default().push(i);
        }
    }
    let mut ready: Vec<usize> = (0..jobs.len()).filter(|&i| remaining[i] == 0).collect();
    let mut visited = 0;
    while let Some(i) = ready.pop() {
        visited += 1;
        for &d in dependents
            .get(jobs[i].id.as_str())
            .map_or(&[][..], Vec::as_slice)
        {
            remaining[d] -= 1;
            if remaining[d] == 0 {
                ready.push(d);
            }
        }
    }
    if visited != jobs.len() {
        return Err("flow contains a dependency cycle".into());
    }
    Ok(())
}

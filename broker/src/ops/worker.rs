//! The worker registry, served: RegisterWorker, Heartbeat, UnregisterWorker and ListWorkers,
//! the official Worker's housekeeping. A worker is tied to the connection it registered on
//! and goes when that closes. The broker does not count a worker's jobs: `activeJobs`,
//! `processedJobs` and `failedJobs` stay 0, and every listed worker is `active`.

use autobatch_core::ops::{
    ListWorkers, ListedWorker, RegisterWorker, UnregisterWorker, WorkerHeartbeat, WorkerInfo,
    WorkerList,
};

use crate::context::{Ctx, Served};
use crate::queue::Worker;

/// Registers the worker (replacing an earlier registration of the same id); the server
/// makes an id when the request has none.
pub(crate) fn register(cx: &Ctx<'_>, op: RegisterWorker) -> Served<WorkerInfo> {
    let id = op
        .worker_id
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let mut info = WorkerInfo::new(id.clone(), op.name);
    info.queues = op.queues;
    info.concurrency = op.concurrency;
    info.hostname = op.hostname;
    info.pid = op.pid;
    info.registered_at = cx.now;
    info.last_seen = cx.now;
    let worker = Worker {
        conn: cx.conn.id,
        info: info.clone(),
    };
    cx.state().register_worker(id, worker);
    Ok(info)
}

pub(crate) fn heartbeat(cx: &Ctx<'_>, op: WorkerHeartbeat) -> Served<()> {
    if cx.state().touch_worker(&op.id, cx.now) {
        Ok(())
    } else {
        Err("Worker not found".into())
    }
}

pub(crate) fn unregister(cx: &Ctx<'_>, op: UnregisterWorker) -> Served<()> {
    if cx.state().unregister_worker(&op.worker_id) {
        Ok(())
    } else {
        Err("Worker not found".into())
    }
}

/// Every registered worker, oldest registration first, and totals over them.
pub(crate) fn list(cx: &Ctx<'_>, _: ListWorkers) -> Served<WorkerList> {
    let state = cx.state();
    let mut list = WorkerList::default();
    for (id, w) in state.workers() {
        let info = &w.info;
        let mut listed = ListedWorker::default();
        listed.id = id.clone();
        listed.name = info.name.clone();
        listed.queues = info.queues.clone();
        listed.concurrency = u64::try_from(info.concurrency).unwrap_or(0);
        listed.hostname = info.hostname.clone();
        listed.pid = info.pid;
        listed.status = info.status.clone();
        listed.registered_at = info.registered_at;
        listed.last_seen = info.last_seen;
        listed.uptime = cx.now - info.registered_at;
        list.stats.concurrency_slots += listed.concurrency;
        list.workers.push(listed);
    }
    list.stats.total = list.workers.len() as u64;
    list.stats.active = list.stats.total;
    Ok(list)
}

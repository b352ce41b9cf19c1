"""One short scenario through bunqueue's official Python SDK (bunqueue-client 0.1.5).

Usage: python scenario.py HOST PORT QUEUE

Prints one JSON document: {"ids": [...], "steps": [[what, value], ...]}, every job object
as the SDK hands it back (its raw record, name and data), errors as {"error": text}.
tests/tests/sdk_peers.rs runs it against bunqueue and the broker and compares the steps;
ids are listed in creation order so that the comparison can name them by slot.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any, Callable, Dict, List

from bunqueue import FlowProducer, Queue, UnrecoverableError, Worker


def everything(queue_name: str) -> Dict[str, Any]:
    return {
        "ttl": 3_600_000,
        "timeout": 600_000,
        "deduplication": {"id": f"{queue_name}-dedup", "ttl": 3_600_000},
        "tags": ["a", "b"],
        "lifo": True,
        "remove_on_complete": False,
        "remove_on_fail": False,
        "stall_timeout": 600_000,
        "durable": True,
        "stack_trace_limit": 3,
        "keep_logs": 5,
        "size_limit": 1_000_000,
        "fail_parent_on_failure": True,
    }


def controls(host: str, port: int, queue_name: str, note_id: Any, step: Any) -> None:
    """Queue and job controls on a queue of their own: priority, delay, promotion, data,
    progress and logs of waiting jobs, pause and resume, listings, counts per priority, a job
    scheduler (every hour, so it never fires here), the stall and DLQ settings, clean, drain,
    remove and obliterate."""
    q = Queue(queue_name, host=host, port=port)
    ids = []
    for name, opts in [("c1", {"delay": 3_600_000}), ("c2", {}), ("c3", {})]:
        job = step(f"controls: add {name}", lambda: q.add(name, {"k": 1}, **opts).id)
        note_id(job)
        ids.append(job)
    c1, c2, c3 = ids

    def raw(job_id: str) -> Any:
        job = q.get_job(job_id)
        return None if job is None else job.raw

    step("controls: change_job_priority", lambda: q.change_job_priority(c2, 7))
    step("controls: get_job after change_job_priority", lambda: raw(c2))
    step("controls: change_job_delay", lambda: q.change_job_delay(c1, 7_200_000))
    step("controls: get_state after change_job_delay", lambda: q.get_state(c1))
    step("controls: promote_job", lambda: q.promote_job(c1))
    step("controls: get_state after promote_job", lambda: q.get_state(c1))
    step("controls: update_job_data", lambda: q.update_job_data(c3, {"k": 30}))
    step("controls: update_job_progress", lambda: q.update_job_progress(c3, 40, "half"))
    step("controls: get_progress", lambda: q.get_progress(c3))
    step("controls: add_job_log", lambda: q.add_job_log(c3, "hello", "info"))
    step("controls: get_job_logs", lambda: q.get_job_logs(c3))
    step("controls: get_job after data, progress and log", lambda: raw(c3))
    step("controls: pause, is_paused", lambda: (q.pause(), q.is_paused())[1])
    step("controls: resume, is_paused", lambda: (q.resume(), q.is_paused())[1])
    step(
        "controls: get_jobs waiting and prioritized",
        lambda: [j.raw for j in q.get_jobs(["waiting", "prioritized"])],
    )
    step("controls: get_prioritized", lambda: [j.raw for j in q.get_prioritized()])
    step("controls: get_delayed", lambda: [j.raw for j in q.get_delayed()])
    step("controls: get_counts_per_priority", q.get_counts_per_priority)
    step("controls: get_waiting_count", q.get_waiting_count)
    step("controls: get_stall_config", q.get_stall_config)
    step("controls: get_dlq_config", q.get_dlq_config)
    sched = f"{queue_name}-sched"
    step(
        "controls: upsert_job_scheduler",
        lambda: q.upsert_job_scheduler(
            sched,
            {"every": 3_600_000, "limit": 3},
            {"name": "tick", "data": {"k": 1}, "opts": {"attempts": 2, "priority": 4}},
        ),
    )
    step("controls: get_job_scheduler", lambda: q.get_job_scheduler(sched))
    step("controls: get_job_schedulers_count", q.get_job_schedulers_count)
    step("controls: remove_job_scheduler", lambda: q.remove_job_scheduler(sched))
    step("controls: get_job_scheduler after remove", lambda: q.get_job_scheduler(sched))
    step("controls: clean completed", lambda: q.clean(0, 100, "completed"))
    step("controls: remove", lambda: q.remove(c2))
    step("controls: get_job after remove", lambda: raw(c2))
    step("controls: drain", q.drain)
    step("controls: get_job_counts after drain", q.get_job_counts)
    step("controls: obliterate, count", lambda: (q.obliterate(), q.count())[1])
    q.close()


def flows(host: str, port: int, queue_name: str, note_id: Any, step: Any) -> None:
    """The SDK's flows, on a queue of their own: a tree (whose children the SDK adds under the
    parent id "pending", before the parent exists, which bunqueue refuses; the SDK then
    removes what it added) and a chain of three steps, each depending on the one before, run
    to completion by a worker."""
    producer = FlowProducer(host=host, port=port)
    q = Queue(queue_name, host=host, port=port)

    def leaf(name: str) -> Dict[str, Any]:
        return {"name": name, "queueName": queue_name, "data": {"k": 1}}

    step(
        "flows: add a tree",
        lambda: producer.add({**leaf("parent"), "children": [leaf("child-a"), leaf("child-b")]}).job.id,
    )
    chain = step(
        "flows: add_chain",
        lambda: producer.add_chain(
            [{"name": n, "queueName": queue_name, "data": {"k": 2}} for n in ("first", "second", "third")]
        ),
    )
    for job_id in chain or []:
        note_id(job_id)
    if chain:

        def jobs() -> Any:
            return [None if (j := q.get_job(i)) is None else j.raw for i in chain]

        step("flows: the chain's jobs", jobs)
        done = []
        lock = threading.Lock()

        def process(job: Any) -> Any:
            with lock:
                done.append(job.id)
            return {"saw": job.data}

        worker = Worker(
            queue_name,
            process,
            host=host,
            port=port,
            concurrency=1,
            batch_size=1,
            poll_timeout_ms=100,
            heartbeat_interval_s=0,
            autorun=False,
        )
        worker.start()
        # One step becomes ready as the one before completes; the bound only stops a server
        # that never hands them out, and what was done by then is compared.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if q.get_job_counts().get("completed", 0) >= len(chain):
                break
            time.sleep(0.05)
        worker.close(timeout=10)
        step("flows: processed", lambda: list(done))
        step("flows: the chain's jobs after the worker", jobs)
        step("flows: the chain's results", lambda: [q.get_result(i) for i in chain])
    step("flows: get_job_counts", q.get_job_counts)
    q.close()
    producer.close()


def main() -> int:
    host, port, queue_name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    q = Queue(queue_name, host=host, port=port)
    ids: List[str] = []
    steps: List[Any] = []

    def note_id(job_id: Any) -> None:
        if job_id and str(job_id) not in ids:
            ids.append(str(job_id))

    def step(what: str, thunk: Callable[[], Any]) -> Any:
        try:
            value = thunk()
        except Exception as e:  # noqa: BLE001 - an SDK error is an outcome to compare
            steps.append([what, {"error": f"{type(e).__name__}: {e}"}])
            return None
        steps.append([what, value])
        return value

    def job_view(job: Any) -> Any:
        if job is None:
            return None
        return {"id": job.id, "name": job.name, "data": job.data, "raw": job.raw}

    # Adds: plain; with options; with a custom id, twice (the second is deduplicated); data
    # that is not a dict (the SDK wraps it as `payload`) and no data at all.
    custom = f"{queue_name}-custom"
    adds: List[Any] = [
        ("plain", {"k": 1}, {}),
        (
            "options",
            {"k": 2},
            {
                "priority": 5,
                # An hour: the job stays delayed for the whole scenario on every server.
                "delay": 3_600_000,
                "attempts": 4,
                "backoff": {"type": "exponential", "delay": 2000, "maxDelay": 60000},
            },
        ),
        ("custom", {"k": 3}, {"job_id": custom}),
        ("custom", {"k": 33}, {"job_id": custom}),
        ("scalar", 7, {}),
        ("bare", None, {}),
        # Most other options the SDK sends (not a group: grouped jobs are pulled in bunqueue's
        # group-scheduler order, which the broker does not follow), then a second job under
        # the same deduplication key (its add returns the first job's id).
        ("everything", {"k": 8}, everything(queue_name)),
        ("everything", {"k": 88}, everything(queue_name)),
    ]
    for name, data, opts in adds:
        job = step(f"add {name}", lambda: job_view(q.add(name, data, **opts)))
        if job is not None:
            note_id(job["id"])
            # The SDK's stub carries the options as it sent them; compared as they are.
    # A bulk add: one job that fails once and waits an hour to retry, one that fails for
    # good (to the DLQ), one with a priority, one with a custom id.
    bulk_ids = step(
        "add_bulk",
        lambda: q.add_bulk(
            [
                {"name": "retry", "data": {"k": 4}, "attempts": 2, "backoff": 3_600_000},
                {"name": "doomed", "data": {"k": 5}},
                {"name": "urgent", "data": {"k": 6}, "priority": 9},
                {"name": "bulk-custom", "job_id": f"{queue_name}-bulk-custom"},
            ]
        ),
    )
    for job_id in bulk_ids or []:
        note_id(job_id)

    def reads(when: str) -> None:
        for slot, job_id in enumerate(list(ids)):
            step(f"get_job #{slot} {when}", lambda: job_view(q.get_job(job_id)))
            step(f"get_state #{slot} {when}", lambda: q.get_state(job_id))
        step(f"get_job_counts {when}", q.get_job_counts)
        step(f"count {when}", q.count)

    reads("after adds")
    step("get_job_by_custom_id", lambda: job_view(q.get_job_by_custom_id(custom)))
    step("get_job of an unknown id", lambda: job_view(q.get_job("no-such-job")))

    # The worker: one job at a time, no heartbeats. Each job is recorded as the processor
    # sees it; "retry" fails (and waits an hour for its retry), "doomed" fails for good, the
    # others complete with a value.
    processed: Dict[str, Any] = {}
    lock = threading.Lock()

    def process(job: Any) -> Any:
        name = job.raw.get("name")
        with lock:
            processed[str(name)] = {
                "id": job.id,
                "data": job.data,
                "attempts": job.attempts,
                "raw": job.raw,
                "hasToken": bool(job.token),
            }
        if name == "retry":
            raise RuntimeError("retry later")
        if name == "doomed":
            raise UnrecoverableError("doomed")
        return {"done": name}

    ready = len(ids) - 1  # every job but the delayed one (the deduplicated add made none)
    worker = Worker(
        queue_name,
        process,
        host=host,
        port=port,
        concurrency=1,
        batch_size=1,
        poll_timeout_ms=100,
        heartbeat_interval_s=0,
        autorun=False,
    )
    worker.start()

    def settle(count: int) -> None:
        """Until `count` jobs have been processed and settled (none active); the bound only
        stops a server that never hands them out, and what was seen by then is compared."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with lock:
                seen = len(processed)
            if seen >= count and q.get_job_counts().get("active", 0) == 0:
                return
            time.sleep(0.05)

    settle(ready)
    worker.close(timeout=10)
    for name in sorted(processed):
        steps.append([f"processed {name}", processed[name]])

    reads("after the worker")
    for slot, job_id in enumerate(list(ids)):
        step(f"get_result #{slot}", lambda: q.get_result(job_id))
    step("get_dlq", q.get_dlq)
    step("get_dlq of 1", lambda: q.get_dlq(1))
    # The DLQ's job back to waiting, read, failed for good again, then purged.
    step("retry_dlq", q.retry_dlq)
    step("get_dlq after retry_dlq", q.get_dlq)
    step("get_job_counts after retry_dlq", q.get_job_counts)
    worker = Worker(
        queue_name,
        process,
        host=host,
        port=port,
        concurrency=1,
        batch_size=1,
        poll_timeout_ms=100,
        heartbeat_interval_s=0,
        autorun=False,
        # The second worker acknowledges in batches (ACKB), as the SDK offers.
        ack_batch={"max_size": 50, "max_delay_ms": 5},
    )
    processed.clear()
    late = step("add late", lambda: job_view(q.add("late", {"k": 9})))
    if late is not None:
        note_id(late["id"])
    worker.start()
    settle(2)
    worker.close(timeout=10)
    for name in sorted(processed):
        steps.append([f"processed again {name}", processed[name]])
    step("purge_dlq", q.purge_dlq)
    step("get_dlq after purge_dlq", q.get_dlq)
    step("get_job_counts after purge_dlq", q.get_job_counts)
    step("get_result of the late job", lambda: q.get_result(ids[-1]))
    step("get_jobs waiting", lambda: [job_view(j) for j in q.get_waiting()])
    q.close()
    controls(host, port, f"{queue_name}-ctl", note_id, step)
    flows(host, port, f"{queue_name}-flow", note_id, step)

    print(json.dumps({"ids": ids, "steps": steps}, default=repr))
    return 0


if __name__ == "__main__":
    sys.exit(main())

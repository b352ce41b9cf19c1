// Jobs as bunqueue's own TS client shows them: the `Job` objects its `Queue` and `Worker` build
// from the server's records, for a few scenarios, so that two servers can be compared on what
// users see.
//
//   bun --no-install run job_objects.ts HOST PORT '{"queue": "..."}'
//
// Prints one JSON document: {"ids": [job ids in creation order], "steps": [[what, value]...]},
// each value a plain copy of a `Job` (its data fields, no methods) or of a listing.
import { FlowProducer, Queue, Worker } from 'bunqueue/client';
import { connection, emit, fail, parseArgs } from './common';

const t = parseArgs('job_objects.ts HOST PORT [json options]');
const name: string = t.opts.queue ?? 'peer-job-objects';
const conn = connection(t);
const q = new Queue(name, { connection: conn });
const ids: string[] = [];
const steps: [string, unknown][] = [];

/** A plain, JSON-safe copy of a client object: data fields only, cycles cut. */
function plain(v: unknown, seen = new WeakSet<object>()): unknown {
  if (v === undefined) return '#undefined';
  if (v === null || typeof v !== 'object') return typeof v === 'function' ? undefined : v;
  if (seen.has(v as object)) return '#cycle';
  seen.add(v as object);
  if (Array.isArray(v)) return v.map((x) => plain(x, seen));
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    if (typeof x === 'function') continue;
    // The client's own handles (its queue, connection pool): not the job's.
    if (x !== null && typeof x === 'object' && x.constructor && x.constructor.name !== 'Object' && !Array.isArray(x)) {
      out[k] = `#${x.constructor.name}`;
      continue;
    }
    out[k] = plain(x, seen);
  }
  return out;
}

async function note(what: string, v: unknown) {
  steps.push([what, plain(v)]);
}

try {
  // Every add option bunqueue keeps, read back.
  const a = await q.add('all-options', { k: 1 }, {
    priority: 3,
    attempts: 2,
    backoff: { type: 'fixed', delay: 3_600_000 },
    timeout: 3_600_000,
    jobId: `${name}-custom`,
    tags: ['t1', 't2'],
    lifo: true,
    removeOnComplete: false,
    removeOnFail: false,
    stackTraceLimit: 2,
    keepLogs: 5,
    sizeLimit: 1000,
    failParentOnFailure: true,
  } as any);
  ids.push(a.id);
  await note('add: returned job', a);
  await note('getJob', await q.getJob(a.id));
  const b = await q.add('plain', { k: 2 }, { delay: 3_600_000, backoff: 10 } as any);
  ids.push(b.id);
  await note('getJob delayed', await q.getJob(b.id));
  const c = await q.add('fails', { k: 3 }, { attempts: 1, stackTraceLimit: 3 } as any);
  ids.push(c.id);
  const d = await q.add('completes', { k: 4 });
  ids.push(d.id);
  await note('getJobs waiting', await q.getJobs(['waiting'], 0, 10, true));

  // A worker runs the ready jobs: `fails` throws (its stack kept, capped), the others return.
  const done = new Set<string>();
  const worker = new Worker(
    name,
    async (job: any) => {
      if (job.name === 'fails') {
        const e = new Error('it broke');
        e.stack = 'Error: it broke\n    at one (a.ts:1)\n\n    at two (a.ts:2)\n    at three (a.ts:3)\n    at four (a.ts:4)';
        throw e;
      }
      return { ok: job.name };
    },
    { connection: conn, autorun: false, concurrency: 1 } as any,
  );
  const seenJobs: Record<string, unknown> = {};
  worker.on('active', (job: any) => {
    seenJobs[job.name] = plain(job);
  });
  worker.on('completed', (job: any) => done.add(job.id));
  worker.on('failed', (job: any) => done.add(job.id));
  worker.run();
  const deadline = Date.now() + 20_000;
  while (done.size < 3 && Date.now() < deadline) await Bun.sleep(20);
  await worker.close();
  if (done.size < 3) fail(`worker finished ${done.size} of 3 jobs`);
  for (const n of Object.keys(seenJobs).sort()) await note(`worker active: ${n}`, seenJobs[n]);
  await note('getJob failed', await q.getJob(c.id));
  await note('getJob completed', await q.getJob(d.id));
  await note('getJobs completed', await q.getJobs(['completed'], 0, 10, true));
  await note('getJobs failed', await q.getJobs(['failed'], 0, 10, true));
  await note('getJobCounts', await q.getJobCounts());

  // A flow: a parent waiting for two children, one of them with its own options.
  const flow = new FlowProducer({ connection: conn });
  const tree: any = await flow.add({
    name: 'parent',
    queueName: name,
    data: { p: 1 },
    children: [
      { name: 'kid1', queueName: name, data: { c: 1 } },
      { name: 'kid2', queueName: name, data: { c: 2 }, opts: { attempts: 1, ignoreDependencyOnFailure: true } as any },
    ],
  });
  const parentId = String(tree.job.id);
  const kidIds = tree.children.map((c: any) => String(c.job.id));
  ids.push(parentId, ...kidIds);
  await note('flow: parent', await q.getJob(parentId));
  for (const [i, id] of kidIds.entries()) await note(`flow: child ${i}`, await q.getJob(id));
  await note('getJobs waiting-children', await q.getJobs(['waiting-children'], 0, 10, true));
  await flow.close();
  await q.obliterate();
  await q.close();
  emit({ ids, steps });
  process.exit(0);
} catch (e: any) {
  fail(`job_objects.ts: ${e?.stack ?? e}`);
}

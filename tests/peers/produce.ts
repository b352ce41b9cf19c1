// Add jobs with bunqueue's official client in a given pattern.
//
//   bun --no-install run produce.ts HOST PORT '<json>'
//
// Options (all optional):
//   queue      queue name (default "peer-produce")
//   autoBatch  true/false: the Queue's autoBatch.enabled (default true)
//   name       job name (default "job")
//   tag        string copied into every job's data (default "")
//   steps      list of steps run in order (default [{"kind":"seq","n":10}]):
//                {"kind":"seq","n":N}                 N sequential `await add()`
//                {"kind":"waves","n":N,"wave":W}      Promise.all of W adds per wave
//                {"kind":"bulk","n":N,"batch":B}      addBulk of B jobs at a time
//                {"kind":"durable","n":N}             sequential add(..., {durable:true})
//   token, poolSize, tls  passed to the connection (tls: true or {caFile, rejectUnauthorized})
//
// Job data is {i: <global index from 0>, tag, kind}. Prints one JSON document:
//   {"queue", "autoBatch", "ids": [...], "data": [...], "steps": [{"kind","n","ms"}], "elapsed_ms"}
// where ids[k] is the id of the job whose data.i == k.
import { Queue } from 'bunqueue/client';
import { connection, emit, fail, parseArgs } from './common';

const t = parseArgs('produce.ts HOST PORT [json options]');
const queueName: string = t.opts.queue ?? 'peer-produce';
const autoBatch: boolean = t.opts.autoBatch ?? true;
const jobName: string = t.opts.name ?? 'job';
const tag: string = t.opts.tag ?? '';
const steps: any[] = t.opts.steps ?? [{ kind: 'seq', n: 10 }];

const queue = new Queue(queueName, {
  connection: connection(t),
  autoBatch: { enabled: autoBatch },
});

const ids: string[] = [];
const data: any[] = [];
let next = 0;
const mk = (kind: string) => {
  const d = { i: next++, tag, kind };
  data.push(d);
  return d;
};
const record = (job: { id: string }, d: { i: number }) => {
  ids[d.i] = String(job.id);
};

const started = performance.now();
const stepReports: any[] = [];
try {
  for (const step of steps) {
    const n: number = step.n ?? 0;
    const t0 = performance.now();
    switch (step.kind) {
      case 'seq':
        for (let k = 0; k < n; k++) {
          const d = mk('seq');
          record(await queue.add(jobName, d), d);
        }
        break;
      case 'durable':
        for (let k = 0; k < n; k++) {
          const d = mk('durable');
          record(await queue.add(jobName, d, { durable: true }), d);
        }
        break;
      case 'waves': {
        const w: number = step.wave ?? 10;
        for (let done = 0; done < n; done += w) {
          const ds = Array.from({ length: Math.min(w, n - done) }, () => mk('waves'));
          const jobs = await Promise.all(ds.map((d) => queue.add(jobName, d)));
          jobs.forEach((j, k) => record(j, ds[k]));
        }
        break;
      }
      case 'bulk': {
        const b: number = step.batch ?? 100;
        for (let done = 0; done < n; done += b) {
          const ds = Array.from({ length: Math.min(b, n - done) }, () => mk('bulk'));
          const jobs = await queue.addBulk(ds.map((d) => ({ name: jobName, data: d })));
          if (jobs.length !== ds.length) fail(`addBulk returned ${jobs.length} jobs for ${ds.length}`);
          jobs.forEach((j, k) => record(j, ds[k]));
        }
        break;
      }
      default:
        fail(`unknown step kind ${JSON.stringify(step.kind)}`);
    }
    stepReports.push({ kind: step.kind, n, ms: performance.now() - t0 });
  }
} catch (e) {
  fail(`add failed: ${e instanceof Error ? e.message : String(e)}`, { ids_so_far: ids.length });
}
const elapsed = performance.now() - started;

await queue.disconnect();
emit({ queue: queueName, autoBatch, ids, data, steps: stepReports, elapsed_ms: elapsed });
// The shared TCP pool may keep timers alive; leave deterministically.
process.exit(0);

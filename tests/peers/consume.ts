// Process jobs with bunqueue's official Worker.
//
//   bun --no-install run consume.ts HOST PORT '<json>'
//
// Options (all optional):
//   queue        queue name (default "peer-produce")
//   count        number of jobs to process before closing (default 10)
//   concurrency  Worker concurrency (default 1)
//   batchSize    Worker batchSize (default: the client's, 10)
//   timeoutMs    give up after this long (default 30000); exit code 2
//   settleMs     after `count` jobs, keep the worker open this long so that
//                duplicate deliveries would show up (default 0)
//   token, poolSize, tls  passed to the connection (tls: true or {caFile, rejectUnauthorized})
//
// The processor returns {i: data.i, doubled: data.i * 2} when data.i is a
// number, else {seen: true}. Prints one JSON document:
//   {"queue", "processed": [{"id","name","data","result"}...], "count",
//    "elapsed_ms", "counts": <Queue.getJobCountsAsync() after the worker closed>,
//    "timed_out": bool}
import { Queue, Worker } from 'bunqueue/client';
import { connection, emit, parseArgs } from './common';

const t = parseArgs('consume.ts HOST PORT [json options]');
const queueName: string = t.opts.queue ?? 'peer-produce';
const count: number = t.opts.count ?? 10;
const concurrency: number = t.opts.concurrency ?? 1;
const timeoutMs: number = t.opts.timeoutMs ?? 30000;
const settleMs: number = t.opts.settleMs ?? 0;

const processed: any[] = [];
let resolveDone!: () => void;
const done = new Promise<void>((r) => (resolveDone = r));

const started = performance.now();
const workerOpts: Record<string, any> = { concurrency, connection: connection(t) };
if (t.opts.batchSize !== undefined) workerOpts.batchSize = t.opts.batchSize;

const worker = new Worker(
  queueName,
  async (job: any) => {
    const d = job.data;
    const result = d && typeof d.i === 'number' ? { i: d.i, doubled: d.i * 2 } : { seen: true };
    processed.push({ id: String(job.id), name: job.name, data: d, result });
    if (processed.length >= count) resolveDone();
    return result;
  },
  workerOpts,
);
worker.on('error', (e: unknown) => console.error(`worker error: ${e}`));

let timedOut = false;
const timer = setTimeout(() => {
  timedOut = true;
  resolveDone();
}, timeoutMs);
if (count <= 0) resolveDone();
await done;
clearTimeout(timer);
if (settleMs > 0) await Bun.sleep(settleMs);
const elapsed = performance.now() - started;

// close() waits for running jobs, flushes the ACK batcher (ACKB) and sends
// UnregisterWorker.
await worker.close();

const queue = new Queue(queueName, { connection: connection(t) });
let counts: unknown = null;
try {
  counts = await queue.getJobCountsAsync();
} catch (e) {
  console.error(`getJobCountsAsync failed: ${e}`);
}
queue.close();

emit({ queue: queueName, processed, count: processed.length, elapsed_ms: elapsed, counts, timed_out: timedOut });
process.exit(timedOut ? 2 : 0);

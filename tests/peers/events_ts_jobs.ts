// Causes events with bunqueue's official Queue and Worker, for autobatch's QueueEvents to see.
//
//   bun --no-install run events_ts_jobs.ts HOST PORT '{"queue": "...", "count": 3}'
//
// Adds `count` jobs {i} one after the other, then a Worker processes them: each reports
// progress 50 and returns {i}. Prints {"ids": [...]} (in add order) once all completed.
import { Queue, Worker } from 'bunqueue/client';
import { connection, emit, fail, parseArgs } from './common';

const t = parseArgs('events_ts_jobs.ts HOST PORT [json options]');
const queueName: string = t.opts.queue ?? 'peer-events';
const count: number = t.opts.count ?? 3;

const queue = new Queue(queueName, { connection: connection(t) });
const ids: string[] = [];
for (let i = 0; i < count; i++) {
  const job = await queue.add('ts', { i }, { attempts: 1 });
  ids.push(String(job.id));
}

let done = 0;
let resolveDone!: () => void;
const finished = new Promise<void>((r) => (resolveDone = r));
const worker = new Worker(
  queueName,
  async (job: any) => {
    await job.updateProgress(50);
    return { i: job.data.i };
  },
  { connection: connection(t), concurrency: 1 },
);
worker.on('completed', () => {
  done++;
  if (done >= count) resolveDone();
});
worker.on('error', (e: unknown) => console.error(`worker error: ${e}`));
const timer = setTimeout(() => fail('timed out'), 30000);
await finished;
clearTimeout(timer);
await worker.close();
queue.close();
emit({ ids });
process.exit(0);

// Processes a flow added by autobatch's FlowProducer with bunqueue's official Worker.
//
//   bun --no-install run flow_ts_worker.ts HOST PORT '{"queue": "...", "count": 3}'
//
// Processes `count` jobs one at a time (children return {child: data.i}); the job named
// "parent" reads job.getChildrenValues(). Prints {"order": [ids in processing order],
// "parentChildrenValues": {...}}.
import { Worker } from 'bunqueue/client';
import { connection, emit, fail, parseArgs } from './common';

const t = parseArgs('flow_ts_worker.ts HOST PORT [json options]');
const queueName: string = t.opts.queue ?? 'peer-flow';
const count: number = t.opts.count ?? 3;

const order: string[] = [];
let parentChildrenValues: unknown = null;
let resolveDone!: () => void;
const finished = new Promise<void>((r) => (resolveDone = r));
let completed = 0;
const worker = new Worker(
  queueName,
  async (job: any) => {
    order.push(String(job.id));
    if (job.name === 'parent') {
      parentChildrenValues = await job.getChildrenValues();
      return { merged: true };
    }
    return { child: job.data.i };
  },
  { connection: connection(t), concurrency: 1 },
);
worker.on('completed', () => {
  completed++;
  if (completed >= count) resolveDone();
});
worker.on('error', (e: unknown) => console.error(`worker error: ${e}`));
const timer = setTimeout(() => fail('timed out', { order }), 30000);
await finished;
clearTimeout(timer);
await worker.close();
emit({ order, parentChildrenValues });
process.exit(0);

// bunqueue's own FlowProducer and Worker, unchanged, end to end: adds `trees` flows
// (merge ← a ← a1, merge ← b), one chain of 3 steps (addChain: dependsOn without a parent) and
// one flow whose child fails with ignoreDependencyOnFailure, then processes every job with two
// Workers (queues `top` and `parts`).
//
//   bun --no-install run flow_ts_producer.ts HOST PORT '{"top": "...", "parts": "...", "trees": 20}'
//
// Children return {leg}; a job named "merge" returns what job.getChildrenValues() and
// job.getIgnoredChildrenFailures() gave it; a job named "bad" throws "boom". Prints
// {"trees": [{id, a, a1, b}], "chain": [ids], "policy": {id, ok, bad}, "processed": [{id, name,
// queue, seq, values, ignored}], "failed": [ids], "counts": {top: {...}, parts: {...}}}.
import { FlowProducer, Queue, Worker } from 'bunqueue/client';
import { connection, emit, fail, parseArgs } from './common';

const t = parseArgs('flow_ts_producer.ts HOST PORT [json options]');
const top: string = t.opts.top ?? 'peer-flow-top';
const parts: string = t.opts.parts ?? 'peer-flow-parts';
const n: number = t.opts.trees ?? 20;

const flow = new FlowProducer({ connection: connection(t) });
const trees: { id: string; a: string; a1: string; b: string }[] = [];
for (let i = 0; i < n; i++) {
  const tree: any = await flow.add({
    name: 'merge',
    queueName: top,
    data: { i },
    children: [
      {
        name: 'a',
        queueName: parts,
        data: { i, leg: 'a' },
        children: [{ name: 'a1', queueName: parts, data: { i, leg: 'a1' } }],
      },
      { name: 'b', queueName: parts, data: { i, leg: 'b' } },
    ],
  });
  trees.push({
    id: String(tree.job.id),
    a: String(tree.children[0].job.id),
    a1: String(tree.children[0].children[0].job.id),
    b: String(tree.children[1].job.id),
  });
}
const chain = await flow.addChain([0, 1, 2].map((s) => ({ name: `s${s}`, queueName: parts, data: { step: s } })));
const policyTree: any = await flow.add({
  name: 'merge',
  queueName: top,
  data: { i: -1 },
  children: [
    { name: 'ok', queueName: parts, data: { leg: 'ok' } },
    {
      name: 'bad',
      queueName: parts,
      data: { leg: 'bad' },
      opts: { attempts: 1, ignoreDependencyOnFailure: true },
    },
  ],
});
const policy = {
  id: String(policyTree.job.id),
  ok: String(policyTree.children[0].job.id),
  bad: String(policyTree.children[1].job.id),
};

const total = n * 4 + 3 + 3;
const processed: any[] = [];
const failed: string[] = [];
let seq = 0;
let finished = 0;
let resolveDone!: () => void;
const done = new Promise<void>((r) => (resolveDone = r));
const settle = () => {
  finished++;
  if (finished >= total) resolveDone();
};
const processor = async (job: any) => {
  const entry: any = { id: String(job.id), name: job.name, queue: job.queueName, seq: seq++ };
  processed.push(entry);
  if (job.name === 'bad') throw new Error('boom');
  if (job.name === 'merge') {
    entry.values = await job.getChildrenValues();
    entry.ignored = await job.getIgnoredChildrenFailures();
    return { merged: true };
  }
  return { leg: job.data.leg ?? job.name };
};
const workers = [top, parts].map((q) => {
  const w = new Worker(q, processor, { connection: connection(t), concurrency: 4 });
  w.on('completed', settle);
  w.on('failed', (job: any) => {
    failed.push(String(job.id));
    settle();
  });
  w.on('error', (e: unknown) => console.error(`worker error: ${e}`));
  return w;
});
const timer = setTimeout(() => fail('timed out', { processed: processed.length, total }), 60000);
await done;
clearTimeout(timer);
await Promise.all(workers.map((w) => w.close()));
const counts: Record<string, unknown> = {};
for (const [key, name] of [['top', top], ['parts', parts]]) {
  const q = new Queue(name, { connection: connection(t) });
  counts[key] = await q.getJobCounts();
  await q.close();
}
await flow.close();
emit({ trees, chain: chain.jobIds, policy, processed, failed, counts });
process.exit(0);

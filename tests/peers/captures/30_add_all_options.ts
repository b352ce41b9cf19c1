// Every job option the TS client sends on PUSH (durable add) and PUSHB (batched add and
// addBulk), then GetJob of each so the capture shows what the server stored; and raw PUSH /
// PUSHB frames the server refuses (bad group size, group priority, repeat rules), for the
// error texts.
import { attempt, queue } from './common';

const q = queue('cap-options');
const raw = (body: Record<string, unknown>) => (q as any).tcpPool.send(body);

// A job to depend on and to be the parent of the others.
const base = await q.add('base', { n: 0 }, { durable: true });

// Options that may repeat: no custom id, no parent, no dependencies.
const repeating = {
  group: { id: 'g1', priority: 5, maxSize: 100 },
  repeat: { every: 3_600_000, limit: 3 },
  debounce: { id: 'deb-1', ttl: 1500 },
  keepLogs: 25,
  stackTraceLimit: 4,
  sizeLimit: 4096,
  failParentOnFailure: true,
  removeDependencyOnFailure: true,
  continueParentOnFailure: false,
  ignoreDependencyOnFailure: true,
  lifo: true,
  timeout: 30_000,
  ttl: 60_000,
  stallTimeout: 10_000,
  attempts: 4,
  backoff: { type: 'exponential', delay: 500 },
  removeOnComplete: true,
  removeOnFail: false,
};
// Options that may not repeat: custom id, parent, dependencies, deduplication.
const linked = {
  jobId: 'custom-1',
  priority: 9,
  delay: 60_000,
  tags: ['a', 'b'],
  deduplication: { id: 'dedup-1', ttl: 5000, extend: true, replace: false },
  dependsOn: [base.id],
  parent: { id: base.id, queue: 'cap-options' },
  timestamp: Date.now(),
  backoff: 250,
  groupId: 'g2',
};

const a = await attempt('add repeating durable', () => q.add('rep', { n: 1 }, { ...repeating, durable: true }));
const b = await attempt('add linked durable', () => q.add('lnk', { n: 2 }, { ...linked, durable: true }));
const c = await attempt('add repeating batched', () => q.add('rep', { n: 3 }, { ...repeating, debounce: { id: 'deb-2', ttl: 1500 } }));
const d = await attempt('addBulk', () =>
  q.addBulk([
    { name: 'rep', data: { n: 4 }, opts: { ...repeating, debounce: { id: 'deb-3' } } },
    { name: 'lnk', data: { n: 5 }, opts: { ...linked, jobId: 'custom-2', deduplication: { id: 'dedup-2' } } },
  ]),
);
for (const job of [a, b, c, ...(d ?? [])]) {
  if (job) await attempt(`getJob ${job.id}`, () => raw({ cmd: 'GetJob', id: job.id }));
}

// Refusals, PUSH then PUSHB.
const push = (extra: Record<string, unknown>) =>
  attempt(`PUSH ${JSON.stringify(extra)}`, () => raw({ cmd: 'PUSH', queue: 'cap-options', name: 'x', data: {}, ...extra }));
const pushb = (extra: Record<string, unknown>) =>
  attempt(`PUSHB ${JSON.stringify(extra)}`, () =>
    raw({ cmd: 'PUSHB', queue: 'cap-options', jobs: [{ name: 'ok', data: {} }, { name: 'x', data: {}, ...extra }] }),
  );
await push({ groupMaxSize: 0 });
await push({ groupId: 'g', priority: -1 });
await push({ groupId: 'g', priority: 1.5 });
await push({ groupId: '' });
await push({ groupId: 7 });
await push({ repeat: { every: 1000, pattern: '* * * * *' } });
await push({ repeat: {} });
await push({ repeat: { every: -5 } });
await push({ repeat: { every: 1000 }, jobId: 'r-1' });
await push({ repeat: { every: 1000 }, dependsOn: [base.id] });
await push({ repeat: { pattern: 'not a cron' } });
await pushb({ groupMaxSize: 1.5 });
await pushb({ groupId: 'g', priority: 3_000_000 });
await pushb({ repeat: { every: 1000, pattern: '* * * * *' } });
await Bun.sleep(100);
await q.close();

// The dead-letter queue through the official client: a job fails for good (Worker throws,
// attempts 1), then list (entries and jobs), stats, retry one, retry by filter, retry all,
// remove one, purge, get/set config; raw RetryDlq with a count.
import { Worker } from 'bunqueue/client';
import { attempt, port, queue } from './common';

const name = 'cap-dlq';
const q = queue(name);
const raw = (body: Record<string, unknown>) => (q as any).tcpPool.send(body);
let fails = 0;
const worker = new Worker(
  name,
  async () => {
    fails++;
    throw new Error('boom');
  },
  { connection: { host: '127.0.0.1', port, poolSize: 1 }, concurrency: 1 },
);
const failAll = async (n: number) => {
  const target = fails + n;
  for (let i = 0; i < n; i++) await q.add('x', { i }, { attempts: 1 });
  for (let t = 0; t < 200 && fails < target; t++) await Bun.sleep(20);
  await Bun.sleep(100);
};
await failAll(3);
await worker.close();

await attempt('getDlqAsync', () => q.getDlqAsync());
await attempt('getDlqAsync filter', () => q.getDlqAsync({ reason: 'max_attempts_exceeded', limit: 2, offset: 1 }));
await attempt('getDlqJobsAsync', () => q.getDlqJobsAsync(2));
await attempt('getDlqStatsAsync', () => q.getDlqStatsAsync());
const entries = (await q.getDlqAsync()) as any[];
const first = entries[0]?.job?.id;
await attempt('retryDlqAsync one', () => q.retryDlqAsync(first));
await attempt('retryDlqByFilterAsync', () => q.retryDlqByFilterAsync({ reason: 'stalled' }));
await attempt('raw RetryDlq count', () => raw({ cmd: 'RetryDlq', queue: name, count: 1 }));
const rest = (await q.getDlqAsync()) as any[];
await attempt('removeDlqJobAsync', () => q.removeDlqJobAsync(rest[0]?.job?.id));
await attempt('removeDlqJobAsync unknown', () => q.removeDlqJobAsync('no-such-job'));
await attempt('retryDlqAsync all', () => q.retryDlqAsync());
await attempt('purgeDlqAsync', () => q.purgeDlqAsync());
await attempt('getDlqConfigAsync', () => q.getDlqConfigAsync());
await attempt('setDlqConfigAsync', () => q.setDlqConfigAsync({ autoRetry: true, maxAge: null as any, maxEntries: 50 }));
await attempt('getDlqConfigAsync', () => q.getDlqConfigAsync());
await attempt('raw RemoveDlqJob without jobId', () => raw({ cmd: 'RemoveDlqJob', queue: name }));
await Bun.sleep(100);
await q.close();

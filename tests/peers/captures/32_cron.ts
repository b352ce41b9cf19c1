// Job schedulers through the official client: upsert (every / pattern, with a template and
// every repeat option), get, list, count, remove (known and unknown); raw CronGet, and the
// server's refusals (bad pattern, zero interval, neither pattern nor interval).
import { attempt, queue } from './common';

const q = queue('cap-cron');
const raw = (body: Record<string, unknown>) => (q as any).tcpPool.send(body);
await attempt('upsert every', () =>
  q.upsertJobScheduler('cap-every', { every: 60_000, limit: 5, immediately: false }, { name: 'tick', data: { n: 1 } }),
);
await attempt('upsert pattern', () =>
  q.upsertJobScheduler(
    'cap-pattern',
    { pattern: '0 3 * * *', tz: 'Europe/Rome', skipMissedOnRestart: true, skipIfNoWorker: true, preventOverlap: false } as any,
    {
      name: 'nightly',
      data: { kind: 'cleanup' },
      opts: {
        attempts: 5,
        backoff: { type: 'fixed', delay: 1000 },
        timeout: 30_000,
        delay: 100,
        stallTimeout: 5000,
        removeOnComplete: true,
        removeOnFail: false,
        priority: 3,
        deduplication: { id: 'nightly-key', ttl: 1000, extend: true, replace: false },
      } as any,
    },
  ),
);
await attempt('getJobScheduler', () => q.getJobScheduler('cap-every'));
await attempt('getJobSchedulers', () => q.getJobSchedulers());
await attempt('raw CronGet', () => raw({ cmd: 'CronGet', name: 'cap-pattern' }));
await attempt('raw CronGet unknown', () => raw({ cmd: 'CronGet', name: 'no-such-cron' }));
await attempt('upsert bad pattern', () => q.upsertJobScheduler('cap-bad', { pattern: '61 * * * *' }, { name: 'x' }));
await attempt('raw Cron zero', () => raw({ cmd: 'Cron', name: 'cap-zero', queue: 'cap-cron', jobName: 'x', data: {}, repeatEvery: 0 }));
await attempt('raw Cron neither', () => raw({ cmd: 'Cron', name: 'cap-neither', queue: 'cap-cron', jobName: 'x', data: {} }));
await attempt('removeJobScheduler', () => q.removeJobScheduler('cap-every'));
await attempt('removeJobScheduler unknown', () => q.removeJobScheduler('cap-every'));
await attempt('removeJobScheduler pattern', () => q.removeJobScheduler('cap-pattern'));
await Bun.sleep(100);
await q.close();

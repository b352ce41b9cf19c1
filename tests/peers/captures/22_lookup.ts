// Lookups through the official client, and raw frames (the pool's `send`) for the commands the
// high-level API does not send and for error replies. One connection, so every request pairs
// with its reply.
import { Worker } from 'bunqueue/client';
import { attempt, port, queue } from './common';

const q = queue('cap-lookup');
const raw = (cmd: Record<string, unknown>) =>
  attempt(String(cmd.cmd), () => (q as any).tcpPool.send(cmd));

await q.add('w1', { n: 1 });
await q.add('w2', { n: 2 }, { priority: 5, jobId: 'custom-7' });
await q.add('w3', { n: 3 }, { priority: 5 });
await q.add('d1', { n: 4 }, { delay: 600_000 });
await q.add('u1', { n: 5 }, { deduplication: { id: 'dedup-a' } } as any);

// GetJobs: one state, several, none; paging; order; a state name the server does not know.
await attempt('getJobs waiting', () => q.getJobsAsync({ state: 'waiting', start: 0, end: 10 } as any));
await attempt('getJobs many desc', () => q.getJobsAsync({ state: ['waiting', 'prioritized', 'delayed'], start: 1, end: 3, asc: false } as any));
await raw({ cmd: 'GetJobs', queue: 'cap-lookup' });
await raw({ cmd: 'GetJobs', queue: 'cap-lookup', state: 'delayed', offset: 0, limit: 5, asc: true });

// By custom id.
await raw({ cmd: 'GetJobByCustomId', customId: 'custom-7' });
await raw({ cmd: 'GetJobByCustomId', customId: 'no-such-id' });

await attempt('getCountsPerPriorityAsync', () => q.getCountsPerPriorityAsync());
await attempt('getRateLimitTtl', () => q.getRateLimitTtl(10));
await attempt('isMaxed', () => q.isMaxed());
await attempt('getDeduplicationJobId', () => q.getDeduplicationJobId('dedup-a'));
await attempt('getDeduplicationJobId (none)', () => q.getDeduplicationJobId('no-such-key'));

await raw({ cmd: 'ListQueues' });

// A worker (on its own queue, so that it takes none of these jobs) registers itself, so
// ListWorkers has one to show.
const w = new Worker('cap-lookup-w', async () => 'done', {
  connection: { host: '127.0.0.1', port, poolSize: 1 },
  concurrency: 1,
});
await Bun.sleep(300);
await attempt('getWorkers', () => q.getWorkers()); // this queue's: none
await raw({ cmd: 'ListWorkers' });
await w.close();

await raw({ cmd: 'Stats' });
await raw({ cmd: 'Metrics' });
await attempt('getMetrics completed', () => q.getMetrics('completed'));
await attempt('getMetrics failed', () => q.getMetrics('failed', 0, 10));
await raw({ cmd: 'Metrics', queue: 'cap-lookup', type: 'bogus' });
await raw({ cmd: 'Metrics', queue: 'bad queue!', type: 'completed' });
await raw({ cmd: 'StorageStatus' });
await Bun.sleep(100);
await q.close();

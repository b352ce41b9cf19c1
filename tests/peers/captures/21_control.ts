// Queue control through the official client, and raw frames (the pool's `send`, which resolves
// with the reply map even when `ok` is false) for the commands the high-level API only sends
// fire-and-forget or not at all, and for error replies. Every request here is on one
// connection, so the capture pairs each with its reply.
import { attempt, queue } from './common';

const q = queue('cap-control');
// The pool the Queue sends through: raw maps, replies returned as they are.
const raw = (cmd: Record<string, unknown>) =>
  attempt(String(cmd.cmd), () => (q as any).tcpPool.send(cmd));

// Pause / Resume / IsPaused.
await q.add('a', { n: 1 });
q.pause();
await attempt('isPausedAsync', () => q.isPausedAsync());
q.resume();
await attempt('isPausedAsync', () => q.isPausedAsync());

// A worker's view of one job: pulled with a lock token.
async function pull(name: string): Promise<{ id: string; token: string }> {
  const r: any = await (q as any).tcpPool.send({ cmd: 'PULL', queue: 'cap-control', owner: 'cap-w', timeout: 0 });
  if (!r?.job) throw new Error(`nothing to pull for ${name}`);
  return { id: String(r.job.id), token: String(r.token) };
}
await attempt('drainAsync', () => q.drainAsync());

// Promote one delayed job, then many.
const d1 = await q.add('d1', {}, { delay: 600_000 });
await attempt('promoteJob', () => q.promoteJob(d1.id));
await raw({ cmd: 'Promote', id: d1.id }); // no longer delayed: error
await raw({ cmd: 'Promote', id: 'no-such-job' });
await q.add('d2', {}, { delay: 600_000 });
await q.add('d3', {}, { delay: 600_000 });
await attempt('promoteJobs', () => q.promoteJobs({ count: 1 }));
await attempt('promoteJobs', () => q.promoteJobs());

// Change priority and delay.
const p = await q.add('p', {}, { priority: 1 });
await attempt('changeJobPriority', () => q.changeJobPriority(p.id, { priority: 7 }));
await attempt('changeJobPriority lifo', () => q.changeJobPriority(p.id, { priority: 3, lifo: true }));
await raw({ cmd: 'ChangePriority', id: 'no-such-job', priority: 1 });
await attempt('changeJobDelay', () => q.changeJobDelay(p.id, 60_000));
await raw({ cmd: 'ChangeDelay', id: 'no-such-job', delay: 1000 });

// Remove (Cancel), and its error.
await attempt('removeAsync', () => q.removeAsync(p.id));
await raw({ cmd: 'Cancel', id: 'no-such-job' });
await attempt('drainAsync', () => q.drainAsync());

// Move an active job to delayed, then to wait (retry), and discard one.
await q.add('m', {});
const m = await pull('m');
await attempt('moveJobToDelayed', () => q.moveJobToDelayed(m.id, Date.now() + 60_000, m.token));
await raw({ cmd: 'MoveToDelayed', id: 'no-such-job', delay: 1000 });
await raw({ cmd: 'MoveToDelayed', id: m.id, delay: 1000 }); // delayed, not active
await attempt('retryJob (delayed)', () => q.retryJob(m.id)); // MoveToWait: promotes it
await attempt('retryJob (waiting)', () => q.retryJob(m.id));
const m2 = await pull('m2');
await attempt('moveJobToWait (active)', () => q.moveJobToWait(m2.id, m2.token));
await raw({ cmd: 'MoveToWait', id: 'no-such-job' });
const disc = await pull('disc');
await raw({ cmd: 'Discard', id: disc.id }); // active without its token: refused
await raw({ cmd: 'Discard', id: disc.id, token: disc.token });
await raw({ cmd: 'GetState', id: disc.id });
await raw({ cmd: 'Discard', id: 'no-such-job' });

// Completed jobs: retry them; clean them.
await q.add('c1', {});
await q.add('c2', {});
for (const n of ['c1', 'c2']) {
  const c = await pull(n);
  await (q as any).tcpPool.send({ cmd: 'ACK', id: c.id, token: c.token, result: { n } });
}
await raw({ cmd: 'MoveToWait', id: disc.id }); // a discarded (failed) job
await attempt('retryCompletedAsync', () => q.retryCompletedAsync());
await attempt('retryJobs completed', () => q.retryJobs({ state: 'completed', count: 5 }));
const c3 = await pull('c3');
await (q as any).tcpPool.send({ cmd: 'ACK', id: c3.id, token: c3.token, result: 1 });
await raw({ cmd: 'RetryCompleted', queue: 'cap-control', id: c3.id });
await raw({ cmd: 'MoveToWait', id: c3.id }); // back to waiting: ok, nothing to do
const c4 = await pull('c4');
await (q as any).tcpPool.send({ cmd: 'ACK', id: c4.id, token: c4.token, result: 1 });
await raw({ cmd: 'MoveToWait', id: c4.id }); // completed: refused
await attempt('cleanAsync completed', () => q.cleanAsync(0, 10, 'completed'));
await attempt('cleanAsync waiting', () => q.cleanAsync(0, 100));

// Deduplication keys.
const u = await q.add('u', {}, { deduplication: { id: 'dedup-1' } } as any);
await attempt('removeDeduplicationKey', () => q.removeDeduplicationKey('dedup-1'));
await attempt('removeDeduplicationKey (none)', () => q.removeDeduplicationKey('dedup-1'));
await q.add('u2', {}, { deduplication: { id: 'dedup-2' } } as any);
const u2 = await q.getDeduplicationJobId('dedup-2');
await raw({ cmd: 'RemoveJobDeduplicationKey', id: u2 });
await raw({ cmd: 'RemoveJobDeduplicationKey', id: u.id });

// Obliterate.
await attempt('obliterateAsync', () => q.obliterateAsync());
await Bun.sleep(100);
await q.close();

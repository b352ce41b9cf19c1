// A job's own records through the official client: logs, data, progress (Queue methods),
// then raw frames on the Queue's own connection for what the Queue has no method for or
// swallows (GetProgress, error replies, lock extension and moves of an active job).
import { attempt, queue } from './common';

const q = queue('cap-job');
const job = await q.add('a', { n: 1 });
const id = String(job.id);
await attempt('addJobLog', () => q.addJobLog(id, 'first line'));
await attempt('addJobLog', () => q.addJobLog(id, 'second line'));
await attempt('getJobLogs', () => q.getJobLogs(id));
await attempt('clearJobLogs keep 1', () => q.clearJobLogs(id, 1));
await attempt('updateJobData', () => q.updateJobData(id, { n: 2 }));
await attempt('updateJobProgress (waiting)', () => q.updateJobProgress(id, 10));

// The Queue's own connection: raw commands, replies captured as the server writes them.
const tcp = (q as any).ctx.tcp;
const raw = (what: string, cmd: Record<string, unknown>) => attempt(what, () => tcp.send(cmd));
await raw('AddLog level', { cmd: 'AddLog', id, message: 'warned', level: 'warn' });
await raw('AddLog unknown', { cmd: 'AddLog', id: 'no-such-job', message: 'x' });
await raw('GetLogs range', { cmd: 'GetLogs', id, start: 0, end: 0 });
await raw('GetLogs unknown', { cmd: 'GetLogs', id: 'no-such-job' });
await raw('ClearLogs', { cmd: 'ClearLogs', id });
await raw('Update unknown', { cmd: 'Update', id: 'no-such-job', data: { n: 3 } });
await raw('Progress unknown', { cmd: 'Progress', id: 'no-such-job', progress: 5 });
await raw('GetProgress waiting', { cmd: 'GetProgress', id });
await raw('GetProgress unknown', { cmd: 'GetProgress', id: 'no-such-job' });
await raw('ExtendLock no lock', { cmd: 'ExtendLock', id, token: 'wrong', duration: 1000 });
await raw('MoveToDelayed unknown', { cmd: 'MoveToDelayed', id: 'no-such-job', delay: 1000 });

// Make it active with a lock, as a worker would.
const pulled: any = await tcp.send({ cmd: 'PULL', queue: 'cap-job', timeout: 0, owner: 'cap-owner', lockTtl: 30000 });
const token = String(pulled.token ?? '');
await raw('Progress', { cmd: 'Progress', id, progress: 40, message: 'fetching' });
await raw('Progress no message', { cmd: 'Progress', id, progress: 55.5 });
await raw('GetProgress', { cmd: 'GetProgress', id });
await raw('ExtendLock', { cmd: 'ExtendLock', id, token, duration: 60000 });
await raw('ExtendLocks', { cmd: 'ExtendLocks', ids: [id, 'no-such-job'], tokens: [token, ''], durations: [60000, 1000] });
await raw('MoveToDelayed no token', { cmd: 'MoveToDelayed', id, delay: 1000 });
await raw('MoveToDelayed wrong token', { cmd: 'MoveToDelayed', id, delay: 1000, token: 'wrong' });
await raw('MoveToDelayed', { cmd: 'MoveToDelayed', id, delay: 600000, token });
await raw('Progress (delayed)', { cmd: 'Progress', id, progress: 70 });
await raw('MoveToWait (delayed)', { cmd: 'MoveToWait', id });
await raw('MoveToWait (waiting)', { cmd: 'MoveToWait', id });
await Bun.sleep(100);
await q.close();

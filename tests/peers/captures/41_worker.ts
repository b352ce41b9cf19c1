// A Worker through the official client: it registers (RegisterWorker), reports progress and
// log lines from its processor, throws an UnrecoverableError and a DelayedError, and
// unregisters on close; plus raw Heartbeat/UnregisterWorker errors for an unknown worker.
import { Worker, UnrecoverableError, DelayedError } from 'bunqueue/client';
import { attempt, port, queue } from './common';

const q = queue('cap-worker');
await q.add('progress', { n: 1 });
await q.add('unrecoverable', { n: 2 }, { attempts: 3 });
await q.add('delayed', { n: 3 }, { attempts: 3 });
let done = 0;
const worker = new Worker(
  'cap-worker',
  async (job: any) => {
    try {
      if (job.name === 'unrecoverable') throw new UnrecoverableError('cannot ever work');
      if (job.name === 'delayed') throw new DelayedError('later');
      await job.updateProgress(50);
      await job.log('half way');
      await job.extendLock(job.token, 30000);
      return { ok: true };
    } finally {
      done++;
    }
  },
  { connection: { host: '127.0.0.1', port, poolSize: 1 }, concurrency: 1, heartbeatInterval: 200 },
);
for (let i = 0; i < 100 && done < 3; i++) await Bun.sleep(50);
await Bun.sleep(500); // a heartbeat or two
await worker.close();
const tcp = (q as any).ctx.tcp;
await attempt('Heartbeat unknown', () => tcp.send({ cmd: 'Heartbeat', id: 'no-such-worker' }));
await attempt('UnregisterWorker unknown', () => tcp.send({ cmd: 'UnregisterWorker', workerId: 'no-such-worker' }));
await attempt('RegisterWorker', () =>
  tcp.send({ cmd: 'RegisterWorker', name: 'cap-raw', queues: ['cap-worker'], concurrency: 2, workerId: 'cap-raw-1' }),
);
await attempt('Heartbeat', () => tcp.send({ cmd: 'Heartbeat', id: 'cap-raw-1', activeJobs: 1, processed: 2, failed: 0 }));
await attempt('UnregisterWorker', () => tcp.send({ cmd: 'UnregisterWorker', workerId: 'cap-raw-1' }));
await Bun.sleep(100);
await q.close();

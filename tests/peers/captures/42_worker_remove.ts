// A Worker with the worker-level removeOnComplete / removeOnFail options: its ACKB carries
// `removeOnCompletes`, its final FAIL `removeOnFail`; GetState then reports both jobs unknown.
import { Worker } from 'bunqueue/client';
import { attempt, port, queue } from './common';

const q = queue('cap-worker-remove');
const ok = await q.add('ok', { n: 1 });
const bad = await q.add('bad', { n: 2 }, { attempts: 1 });
let done = 0;
const worker = new Worker(
  'cap-worker-remove',
  async (job: any) => {
    try {
      if (job.name === 'bad') throw new Error('no');
      return { ok: true };
    } finally {
      done++;
    }
  },
  {
    connection: { host: '127.0.0.1', port, poolSize: 1 },
    concurrency: 1,
    removeOnComplete: true,
    removeOnFail: true,
  },
);
for (let i = 0; i < 100 && done < 2; i++) await Bun.sleep(50);
await worker.close();
const tcp = (q as any).ctx.tcp;
await attempt('GetState ok', () => tcp.send({ cmd: 'GetState', id: ok.id }));
await attempt('GetState bad', () => tcp.send({ cmd: 'GetState', id: bad.id }));
await Bun.sleep(100);
await q.close();

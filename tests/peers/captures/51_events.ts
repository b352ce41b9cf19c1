// Queue events through the official client: a QueueEvents subscribes (SubscribeEvents on a
// connection of its own), a Queue adds, a Worker processes (progress, a return value, a
// failure); the event frames the server pushes are captured with everything else. Error
// replies and UnsubscribeEvents go through the client's TcpClient (raw maps).
import { Queue, QueueEvents, Worker } from 'bunqueue/client';
import { TcpClient } from '../node_modules/bunqueue/dist/client/tcpClient.js';
import { attempt, port } from './common';

const connection = { host: '127.0.0.1', port, poolSize: 1 };
const events = new QueueEvents('cap-events', { connection });
await events.waitUntilReady();
let seen = 0;
for (const name of ['waiting', 'active', 'progress', 'completed', 'failed', 'removed', 'delayed']) {
  events.on(name as any, (e: any) => {
    seen++;
    console.error(`event ${name}: ${JSON.stringify(e)}`);
  });
}

const q = new Queue('cap-events', { connection });
await q.add('ok', { n: 1 }, { attempts: 1 });
await q.add('bad', { n: 2 }, { attempts: 1 });
const worker = new Worker(
  'cap-events',
  async (job: any) => {
    await job.updateProgress(50);
    if (job.name === 'bad') throw new Error('boom');
    return { done: true };
  },
  { connection, concurrency: 1 },
);
while (seen < 8) await Bun.sleep(20);
await worker.close();
const later = await q.add('later', {}, { delay: 60000 });
await q.removeAsync(String(later.id));
await Bun.sleep(100);

const raw = new TcpClient({ host: '127.0.0.1', port });
await raw.connect();
await attempt('SubscribeEvents bad name', () => raw.send({ cmd: 'SubscribeEvents', queue: 'bad name!' }));
await attempt('SubscribeEvents no queue', () => raw.send({ cmd: 'SubscribeEvents' }));
await attempt('SubscribeEvents', () => raw.send({ cmd: 'SubscribeEvents', queue: 'cap-events' }));
await attempt('UnsubscribeEvents', () => raw.send({ cmd: 'UnsubscribeEvents' }));
await attempt('UnsubscribeEvents again', () => raw.send({ cmd: 'UnsubscribeEvents' }));
raw.close();
await events.close();
await q.close();

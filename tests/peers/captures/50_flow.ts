// Flows through the official client: FlowProducer.add (a tree, PUSHF), addChain, a Worker
// whose parent job reads getChildrenValues, failure policies read back with
// GetFailedChildrenValues / GetIgnoredChildrenFailures, and WaitJob; error replies through the
// client's TcpClient (raw maps).
import { FlowProducer, Queue, Worker } from 'bunqueue/client';
import { TcpClient } from '../node_modules/bunqueue/dist/client/tcpClient.js';
import { attempt, port } from './common';

const connection = { host: '127.0.0.1', port, poolSize: 1 };
const flow = new FlowProducer({ connection });
const tree = await attempt('add', () =>
  flow.add({
    name: 'parent',
    queueName: 'cap-flow',
    data: { p: 1 },
    children: [
      { name: 'child', queueName: 'cap-flow-kids', data: { c: 1 } },
      {
        name: 'child',
        queueName: 'cap-flow-kids',
        data: { c: 2 },
        opts: { attempts: 1, priority: 3, ignoreDependencyOnFailure: true },
      },
      {
        name: 'child',
        queueName: 'cap-flow-kids',
        data: { c: 3 },
        opts: { attempts: 1, continueParentOnFailure: true },
      },
    ],
  }),
);
await attempt('addChain', () =>
  flow.addChain([
    { name: 's0', queueName: 'cap-flow-chain', data: {} },
    { name: 's1', queueName: 'cap-flow-chain', data: { k: 'v' }, opts: { delay: 10 } },
  ]),
);

const raw = new TcpClient({ host: '127.0.0.1', port });
await raw.connect();
const parentId = String((tree as any).job.id);
const kids = (tree as any).children.map((c: any) => String(c.job.id));

let done = 0;
const worker = new Worker(
  'cap-flow-kids',
  async (job: any) => {
    done++;
    if (job.data.c === 1) return { ok: job.data.c };
    throw new Error(`child ${job.data.c} broke`);
  },
  { connection, concurrency: 1 },
);
while (done < 3) await Bun.sleep(20);
await Bun.sleep(200);
await worker.close();

for (const cmd of ['GetChildrenValues', 'GetFailedChildrenValues', 'GetIgnoredChildrenFailures']) {
  await attempt(cmd, () => raw.send({ cmd, id: parentId }));
  await attempt(`${cmd} unknown`, () => raw.send({ cmd, id: 'no-such-parent' }));
}
await attempt('WaitJob done', () => raw.send({ cmd: 'WaitJob', id: kids[0], timeout: 1000 }));
await attempt('WaitJob waiting', () => raw.send({ cmd: 'WaitJob', id: parentId, timeout: 50 }));
await attempt('WaitJob unknown', () => raw.send({ cmd: 'WaitJob', id: 'no-such-job' }));
await attempt('WaitJob too long', () => raw.send({ cmd: 'WaitJob', id: kids[0], timeout: 700000 }));
await attempt('WaitJob negative', () => raw.send({ cmd: 'WaitJob', id: kids[0], timeout: -1 }));
// A flow whose job id is taken is refused whole (through the official FlowProducer).
const q = new Queue('cap-flow', { connection });
await q.add('taken', {}, { jobId: 'cap-taken' });
await attempt('add taken id', () =>
  flow.add({
    name: 'parent',
    queueName: 'cap-flow',
    data: {},
    children: [{ name: 'child', queueName: 'cap-flow', data: {}, opts: { jobId: 'cap-taken' } }],
  }),
);
await q.close();
raw.close();
await flow.close();

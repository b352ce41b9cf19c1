// GetResult, a job's return value, as bunqueue 2.9.5 answers it: a completed job with an object
// result and one with a scalar result, a job that has none yet (waiting), one that completed
// with none, and an unknown id.
import { attempt, queue } from './common';

const q = queue('cap-result');
const raw = (what: string, cmd: Record<string, unknown>) =>
  attempt(what, () => (q as any).tcpPool.send(cmd));

async function complete(name: string, result?: unknown): Promise<string> {
  await q.add(name, {});
  const r: any = await (q as any).tcpPool.send({ cmd: 'PULL', queue: 'cap-result', owner: 'cap-w', timeout: 0 });
  if (!r?.job) throw new Error(`nothing to pull for ${name}`);
  const ack: Record<string, unknown> = { cmd: 'ACK', id: String(r.job.id), token: String(r.token) };
  if (result !== undefined) ack.result = result;
  await (q as any).tcpPool.send(ack);
  return String(r.job.id);
}

const withObject = await complete('object', { sent: 3, to: ['a@x', 'b@x'] });
const withScalar = await complete('scalar', 42);
const withNone = await complete('none');
const waiting = String((await q.add('waiting', {})).id);

await raw('GetResult object', { cmd: 'GetResult', id: withObject });
await raw('GetResult scalar', { cmd: 'GetResult', id: withScalar });
await raw('GetResult none', { cmd: 'GetResult', id: withNone });
await raw('GetResult waiting', { cmd: 'GetResult', id: waiting });
await raw('GetResult unknown', { cmd: 'GetResult', id: 'no-such-job' });
await Bun.sleep(100);
await q.close();

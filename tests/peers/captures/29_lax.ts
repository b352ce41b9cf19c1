// Requests bunqueue 2.9.5 accepts without a word although they cannot mean what they say: a
// state name it does not know (GetJobs answers no jobs, Clean cleans nothing) and a negative
// limit (GetJobs slices from the end: `limit: -1` returns all but the last job). autobatch
// refuses these locally; this capture is the evidence of what the server does instead
// (checked by core/tests/golden_lookup.rs, `lax_requests_...`).
import { attempt, queue } from './common';

const q = queue('cap-lax');
const raw = (cmd: Record<string, unknown>) =>
  attempt(String(cmd.cmd), () => (q as any).tcpPool.send(cmd));

await q.add('a', { n: 1 });
await q.add('b', { n: 2 });
await raw({ cmd: 'GetJobs', queue: 'cap-lax', state: 'no-such-state' });
await raw({ cmd: 'GetJobs', queue: 'cap-lax', state: ['waiting', 'no-such-state'] });
await raw({ cmd: 'GetJobs', queue: 'cap-lax', state: 'waiting', offset: 0, limit: -1 });
await raw({ cmd: 'GetJobs', queue: 'cap-lax', state: 'waiting', offset: -1, limit: 10 });
await raw({ cmd: 'Clean', queue: 'cap-lax', grace: 0, limit: 10, state: 'no-such-state' });
await raw({ cmd: 'Clean', queue: 'cap-lax', grace: 0, limit: -5, state: 'waiting' });
await raw({ cmd: 'PromoteJobs', queue: 'cap-lax', count: -1 });
await Bun.sleep(100);
await q.close();

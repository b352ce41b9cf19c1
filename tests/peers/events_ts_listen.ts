// Listens with bunqueue's official QueueEvents: what a TS dashboard sees of jobs that
// another client (autobatch's worker) works.
//
//   bun --no-install run events_ts_listen.ts HOST PORT '{"queue": "...", "count": 1}'
//
// Prints {"ready": true} once subscribed, then one line per `progress` and `completed` event
// of the queue, in arrival order ({"event", "jobId", "data"} / {"event", "jobId",
// "returnvalue"}), and exits 0 after `count` completed events.
import { QueueEvents } from 'bunqueue/client';
import { connection, emit, parseArgs } from './common';

const t = parseArgs('events_ts_listen.ts HOST PORT [json options]');
const queueName: string = t.opts.queue ?? 'peer-listen';
const count: number = t.opts.count ?? 1;

const events = new QueueEvents(queueName, { connection: connection(t) });
events.on('error', (e: unknown) => console.error(`QueueEvents error: ${e}`));
let completed = 0;
const done = new Promise<void>((resolve) => {
  events.on('progress', ({ jobId, data }: any) => {
    emit({ event: 'progress', jobId: String(jobId), data });
  });
  events.on('completed', ({ jobId, returnvalue }: any) => {
    emit({ event: 'completed', jobId: String(jobId), returnvalue });
    if (++completed >= count) resolve();
  });
});
await events.waitUntilReady();
emit({ ready: true });
await done;
await events.close();
process.exit(0);

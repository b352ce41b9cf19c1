// Reads one job's progress and logs with bunqueue's official Queue: what a TS dashboard or
// service sees of a job another client (autobatch's worker) is running.
//
//   bun --no-install run job_view.ts HOST PORT '{"queue": "...", "id": "..."}'
//
// Prints one JSON document:
//   {"id", "state", "progress", "logs": [string...], "count"}
// (`getJobLogs` gives "[level] message" strings; `progress` is the Job's, from GetJob.)
import { Queue } from 'bunqueue/client';
import { connection, emit, fail, parseArgs } from './common';

const t = parseArgs('job_view.ts HOST PORT [json options]');
const id: string | undefined = t.opts.id;
if (!id) fail('options.id is required');
const q = new Queue(t.opts.queue ?? 'peer-produce', { connection: connection(t) });
const job: any = await q.getJob(id!);
const state = await q.getJobState(id!);
const logs = await q.getJobLogs(id!);
emit({ id, state, progress: job?.progress ?? null, logs: logs.logs, count: logs.count });
await q.close();

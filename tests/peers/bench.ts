// The seed's add() throughput table, measured with bunqueue's official client.
//
//   bun --no-install run bench.ts HOST PORT '<json>'
//
// Options (all optional):
//   total     adds per measurement (default 10000)
//   patterns  subset of ["seq","all10","all50","all100"] (default: all four)
//             seq = sequential `await queue.add()`, allW = waves of Promise.all of W adds
//   batching  subset of [true,false]: autoBatch.enabled (default [true,false])
//   reps      repetitions of every cell (default 1)
//   warmup    adds before each measurement, not timed (default 200)
//   queue     queue-name prefix (default "peer-bench"); each cell uses its own queue,
//             obliterated afterwards so the server does not grow across cells
//   token, poolSize  passed to the connection
//   ports     the ports of several brokers on HOST, bunqueue's PostgreSQL fleet (default
//             [PORT]): one Queue per broker, and add i of a run goes through queue
//             i % ports.length, so a wave of W concurrent adds is dealt round-robin over them
//
// Prints one JSON line per measurement:
//   {"pattern","batching","rep","total","elapsed_ms","ops_per_sec"}
// then one summary line {"summary": [{"pattern","batching","ops_per_sec_median","runs"}...]}.
import { Queue } from 'bunqueue/client';
import { connection, emit, fail, parseArgs } from './common';

const t = parseArgs('bench.ts HOST PORT [json options]');
const total: number = t.opts.total ?? 10000;
const patterns: string[] = t.opts.patterns ?? ['seq', 'all10', 'all50', 'all100'];
const batching: boolean[] = t.opts.batching ?? [true, false];
const reps: number = t.opts.reps ?? 1;
const warmup: number = t.opts.warmup ?? 200;
const prefix: string = t.opts.queue ?? 'peer-bench';
const ports: number[] = t.opts.ports ?? [t.port];

function waveOf(pattern: string): number {
  if (pattern === 'seq') return 1;
  const m = /^all(\d+)$/.exec(pattern);
  if (!m) fail(`unknown pattern ${pattern}`);
  return Number(m[1]);
}

async function run(queues: Queue<any>[], pattern: string, n: number): Promise<void> {
  const w = waveOf(pattern);
  const m = queues.length;
  if (w === 1) {
    for (let i = 0; i < n; i++) await queues[i % m].add('bench', { i });
    return;
  }
  for (let done = 0; done < n; done += w) {
    const k = Math.min(w, n - done);
    const ps = new Array(k);
    for (let j = 0; j < k; j++) ps[j] = queues[(done + j) % m].add('bench', { i: done + j });
    await Promise.all(ps);
  }
}

const results = new Map<string, number[]>();
for (let rep = 0; rep < reps; rep++) {
  for (const pattern of patterns) {
    for (const on of batching) {
      const name = `${prefix}-${pattern}-${on ? 'on' : 'off'}-${rep}`;
      const queues = ports.map(
        (port) => new Queue(name, { connection: { ...connection(t), port }, autoBatch: { enabled: on } }),
      );
      const queue = queues[0];
      try {
        if (warmup > 0) await run(queues, pattern, warmup);
        const t0 = performance.now();
        await run(queues, pattern, total);
        const ms = performance.now() - t0;
        const ops = (total / ms) * 1000;
        emit({ pattern, batching: on, rep, total, elapsed_ms: ms, ops_per_sec: Math.round(ops) });
        const key = `${pattern}|${on}`;
        results.set(key, [...(results.get(key) ?? []), ops]);
        await queue.obliterateAsync();
      } catch (e) {
        fail(`bench cell ${name} failed: ${e instanceof Error ? e.message : String(e)}`);
      }
      for (const q of queues) await q.disconnect();
    }
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
emit({
  summary: [...results.entries()].map(([k, v]) => {
    const [pattern, on] = k.split('|');
    return { pattern, batching: on === 'true', ops_per_sec_median: Math.round(median(v)), runs: v.length };
  }),
});
process.exit(0);

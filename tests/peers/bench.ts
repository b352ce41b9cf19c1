// The add() throughput table of bunqueue's auto-batching write-up, measured with bunqueue's official client.
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
//   keep      true: the queue is named exactly `queue` and keeps its jobs (the caller counts
//             and removes them), for a single cell
//
// Prints one JSON line per measurement:
//   {"pattern","batching","rep","total","elapsed_ms","ops_per_sec","cpu_us","lat_p50_us","lat_p99_us"}
// cpu_us is this process's CPU time (user + system, process.cpuUsage) over the timed adds;
// the latencies run from an add's call to its promise settling (nearest rank).
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
const keep: boolean = t.opts.keep ?? false;

function waveOf(pattern: string): number {
  if (pattern === 'seq') return 1;
  const m = /^all(\d+)$/.exec(pattern);
  if (!m) fail(`unknown pattern ${pattern}`);
  return Number(m[1]);
}

// Adds `n` jobs in `pattern`; with `lat`, pushes each add's latency (ms) onto it.
async function run(queues: Queue<any>[], pattern: string, n: number, lat?: number[]): Promise<void> {
  const w = waveOf(pattern);
  const m = queues.length;
  if (w === 1) {
    for (let i = 0; i < n; i++) {
      const s = performance.now();
      await queues[i % m].add('bench', { i });
      lat?.push(performance.now() - s);
    }
    return;
  }
  for (let done = 0; done < n; done += w) {
    const k = Math.min(w, n - done);
    const ps = new Array(k);
    const s = performance.now();
    for (let j = 0; j < k; j++) {
      const p = queues[(done + j) % m].add('bench', { i: done + j });
      ps[j] = lat ? p.then(() => lat.push(performance.now() - s)) : p;
    }
    await Promise.all(ps);
  }
}

// Nearest-rank percentile of sorted `xs`.
const rank = (xs: number[], q: number) => xs[Math.min(xs.length, Math.max(1, Math.ceil(q * xs.length))) - 1];

const results = new Map<string, number[]>();
for (let rep = 0; rep < reps; rep++) {
  for (const pattern of patterns) {
    for (const on of batching) {
      const name = keep ? prefix : `${prefix}-${pattern}-${on ? 'on' : 'off'}-${rep}`;
      const queues = ports.map(
        (port) => new Queue(name, { connection: { ...connection(t), port }, autoBatch: { enabled: on } }),
      );
      const queue = queues[0];
      try {
        if (warmup > 0) await run(queues, pattern, warmup);
        const lat: number[] = [];
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        await run(queues, pattern, total, lat);
        const ms = performance.now() - t0;
        const cpu = process.cpuUsage(cpu0);
        const ops = (total / ms) * 1000;
        lat.sort((a, b) => a - b);
        emit({
          pattern, batching: on, rep, total, elapsed_ms: ms, ops_per_sec: Math.round(ops),
          cpu_us: cpu.user + cpu.system,
          lat_p50_us: Math.round(rank(lat, 0.5) * 1000), lat_p99_us: Math.round(rank(lat, 0.99) * 1000),
        });
        const key = `${pattern}|${on}`;
        results.set(key, [...(results.get(key) ?? []), ops]);
        if (!keep) await queue.obliterateAsync();
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

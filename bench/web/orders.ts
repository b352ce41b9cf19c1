// The peer of runtime-tokio/examples/web_orders.rs: the `POST /orders` handler of bunqueue's
// auto-batching write-up (https://bunqueue.dev), on Bun.serve with bunqueue's TS client.
//
//   bun --no-install run bench/web/orders.ts LISTEN_HOST LISTEN_PORT BUNQUEUE_HOST:PORT on|off [no-add]
//
// `on|off` is the client's autoBatch.enabled; `no-add` answers the same 202 without adding
// (the baseline). Prints `listening on HOST:PORT` once it accepts connections. SIGTERM or
// SIGINT: stop accepting, let the requests in flight finish, close the queue, exit 0.
import { Queue } from 'bunqueue/client';

const [host, portStr, server, batching, mode] = Bun.argv.slice(2);
const [bqHost, bqPort] = (server ?? '').split(':');
if (!host || !portStr || !bqHost || !bqPort || (batching !== 'on' && batching !== 'off')) {
  console.error('usage: orders.ts LISTEN_HOST LISTEN_PORT BUNQUEUE_HOST:PORT on|off [no-add]');
  process.exit(64);
}
const noAdd = mode === 'no-add';
const queue = new Queue('orders', {
  connection: { host: bqHost, port: Number(bqPort) },
  autoBatch: { enabled: batching === 'on' },
});

const http = Bun.serve({
  hostname: host,
  port: Number(portStr),
  async fetch(req) {
    const url = new URL(req.url);
    if (req.method !== 'POST' || url.pathname !== '/orders') {
      return new Response('not found', { status: 404 });
    }
    let order: unknown;
    try {
      order = await req.json();
    } catch (e) {
      return Response.json({ error: `the body is not JSON: ${e}` }, { status: 400 });
    }
    if (noAdd) {
      return Response.json({ status: 'queued', id: '00000000-0000-0000-0000-000000000000' }, { status: 202 });
    }
    // These adds from concurrent requests get auto-batched.
    const job = await queue.add('process-order', order);
    return Response.json({ status: 'queued', id: job.id }, { status: 202 });
  },
});
console.log(`listening on ${http.hostname}:${http.port}`);

let stopping = false;
async function shutdown(): Promise<void> {
  if (stopping) return;
  stopping = true;
  await http.stop(); // resolves once the requests in flight are answered
  await queue.disconnect(); // flushes the batch being built and waits for the ones in flight
  process.exit(0);
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);

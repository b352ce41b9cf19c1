// Shared helpers for the capture scripts run by scripts/capture.sh: the proxy's port comes in
// BQ_PORT. Each script drives bunqueue's own TS client (the frames as the official client
// emits them) and, for error replies it cannot produce, raw frames through its TcpClient.
import { Queue } from 'bunqueue/client';

export const port = Number(process.env.BQ_PORT);
if (!Number.isInteger(port) || port <= 0) {
  console.error('BQ_PORT is not set: run through scripts/capture.sh');
  process.exit(64);
}

/** A Queue on one connection (poolSize 1), so the capture pairs requests on one conn. */
export function queue<T = unknown>(name: string): Queue<T> {
  return new Queue<T>(name, { connection: { host: '127.0.0.1', port, poolSize: 1 } });
}

/** Runs `f`, printing (not throwing) what the client threw: error replies are captured too. */
export async function attempt<T>(what: string, f: () => Promise<T>): Promise<T | undefined> {
  try {
    const r = await f();
    console.error(`${what}: ${JSON.stringify(r)}`);
    return r;
  } catch (e) {
    console.error(`${what}: threw ${e}`);
    return undefined;
  }
}

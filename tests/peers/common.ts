// Shared helpers for the peer scripts. Each script is run as
//   bun --no-install run tests/peers/<script>.ts HOST PORT ['<json options>']
// and prints JSON on stdout; diagnostics go to stderr.

export interface Target {
  host: string;
  port: number;
  opts: Record<string, any>;
}

export function parseArgs(usage: string): Target {
  const [host, portStr, json] = Bun.argv.slice(2);
  const port = Number(portStr);
  if (!host || !Number.isInteger(port) || port <= 0) {
    console.error(`usage: ${usage}`);
    process.exit(64);
  }
  let opts: Record<string, any> = {};
  if (json !== undefined && json !== '') {
    try {
      opts = JSON.parse(json);
    } catch (e) {
      console.error(`bad JSON options: ${e}`);
      process.exit(64);
    }
  }
  return { host, port, opts };
}

/** Connection options accepted by bunqueue's Queue and Worker. */
export function connection(t: Target): Record<string, any> {
  const c: Record<string, any> = { host: t.host, port: t.port };
  if (t.opts.token !== undefined) c.token = t.opts.token;
  if (t.opts.poolSize !== undefined) c.poolSize = t.opts.poolSize;
  // bunqueue's `tls`: true, or { caFile, rejectUnauthorized }.
  if (t.opts.tls !== undefined) c.tls = t.opts.tls;
  return c;
}

/** Print one JSON document on stdout. */
export function emit(value: unknown): void {
  process.stdout.write(JSON.stringify(value) + '\n');
}

/** Fail the script with a JSON error line on stdout and a message on stderr. */
export function fail(message: string, extra: Record<string, unknown> = {}): never {
  console.error(message);
  emit({ error: message, ...extra });
  process.exit(1);
}

// Queue control through the official client: pause, isPausedAsync, resume. The client's
// pause()/resume() are fire-and-forget (they return before the reply); the TCP lookups that
// follow on the same connection are answered after them, so the capture holds every reply.
import { attempt, queue } from './common';

const q = queue('cap-control');
await q.add('a', { n: 1 });
q.pause();
await attempt('isPausedAsync', () => q.isPausedAsync());
q.resume();
await attempt('isPausedAsync', () => q.isPausedAsync());
await Bun.sleep(100);
await q.close();

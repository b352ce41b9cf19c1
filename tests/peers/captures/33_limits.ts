// Queue limits through the official client: rate limit set / clear / temporary, global
// concurrency set / clear, stall config get / set; raw frames for what the server refuses.
import { attempt, queue } from './common';

const q = queue('cap-limits');
const raw = (body: Record<string, unknown>) => (q as any).tcpPool.send(body);
await attempt('setGlobalRateLimitAsync', () => q.setGlobalRateLimitAsync(10, 2000));
await attempt('setGlobalRateLimitAsync no duration', () => q.setGlobalRateLimitAsync(5));
await attempt('removeGlobalRateLimitAsync', () => q.removeGlobalRateLimitAsync());
await attempt('rateLimit', () => q.rateLimit(1500));
await attempt('removeGlobalRateLimitAsync', () => q.removeGlobalRateLimitAsync());
await attempt('setGlobalConcurrencyAsync', () => q.setGlobalConcurrencyAsync(3));
await attempt('removeGlobalConcurrencyAsync', () => q.removeGlobalConcurrencyAsync());
await attempt('getStallConfigAsync', () => q.getStallConfigAsync());
await attempt('setStallConfigAsync', () => q.setStallConfigAsync({ enabled: true, stallInterval: 10_000, maxStalls: 2, gracePeriod: 1000 }));
await attempt('getStallConfigAsync', () => q.getStallConfigAsync());
await attempt('raw RateLimit no limit', () => raw({ cmd: 'RateLimit', queue: 'cap-limits' }));
await attempt('raw SetConcurrency bad limit', () => raw({ cmd: 'SetConcurrency', queue: 'cap-limits', limit: 'many' }));
await Bun.sleep(100);
await q.close();

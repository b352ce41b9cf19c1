// Group controls through the official client, and the server's refusals (bad group id,
// non-positive limits, bad queue name) through raw frames.
import { attempt, queue } from './common';

const name = 'cap-groups';
const q = queue(name);
const raw = (body: Record<string, unknown>) => (q as any).tcpPool.send(body);
await q.add('x', { n: 1 }, { groupId: 't1' });
await attempt('getGroupJobsCount', () => q.getGroupJobsCount('t1'));
await attempt('getGroupsJobsCount', () => q.getGroupsJobsCount());
await attempt('getGroupActiveCount', () => q.getGroupActiveCount('t1'));
await attempt('setGroupRateLimit', () => q.setGroupRateLimit('t1', 5, 2000));
await attempt('getGroupRateLimit', () => q.getGroupRateLimit('t1'));
await attempt('getGroupRateLimitTtl', () => q.getGroupRateLimitTtl('t1', 5));
await attempt('removeGroupRateLimit', () => q.removeGroupRateLimit('t1'));
await attempt('getGroupRateLimit none', () => q.getGroupRateLimit('t1'));
await attempt('setGroupConcurrency', () => q.setGroupConcurrency('t1', 2));
await attempt('getGroupConcurrency', () => q.getGroupConcurrency('t1'));
await attempt('removeGroupConcurrency', () => q.removeGroupConcurrency('t1'));
await attempt('removeGroupConcurrency again', () => q.removeGroupConcurrency('t1'));
await attempt('getGroupConcurrency none', () => q.getGroupConcurrency('t1'));
await attempt('pauseGroup', () => q.pauseGroup('t1'));
await attempt('isGroupPaused', () => q.isGroupPaused('t1'));
await attempt('resumeGroup', () => q.resumeGroup('t1'));
await attempt('resumeGroup again', () => q.resumeGroup('t1'));
await attempt('raw RateLimitGroup', () => raw({ cmd: 'RateLimitGroup', queue: name, groupId: 't1', duration: 1000 }));
await attempt('raw RateLimitGroup bad', () => raw({ cmd: 'RateLimitGroup', queue: name, groupId: 't1', duration: 0 }));
await attempt('raw SetGroupRateLimit bad max', () => raw({ cmd: 'SetGroupRateLimit', queue: name, groupId: 't1', max: 0, duration: 1000 }));
await attempt('raw SetGroupRateLimit bad duration', () => raw({ cmd: 'SetGroupRateLimit', queue: name, groupId: 't1', max: 1, duration: 1.5 }));
await attempt('raw SetGroupConcurrency bad', () => raw({ cmd: 'SetGroupConcurrency', queue: name, groupId: 't1', concurrency: -1 }));
await attempt('raw PauseGroup no group', () => raw({ cmd: 'PauseGroup', queue: name }));
await attempt('raw PauseGroup empty group', () => raw({ cmd: 'PauseGroup', queue: name, groupId: '' }));
await attempt('raw IsGroupPaused bad queue', () => raw({ cmd: 'IsGroupPaused', queue: 'bad queue!', groupId: 't1' }));
await attempt('raw GetGroupsJobsCount bad queue', () => raw({ cmd: 'GetGroupsJobsCount', queue: '' }));
await Bun.sleep(100);
await q.close();

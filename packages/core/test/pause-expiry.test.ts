/**
 * "Pause for 1 hour" ends by itself: when the hour is over the status leaves "paused" and
 * what waited meanwhile is sent, without any other event to start a pass (an idle folder
 * showed "Paused until 10:00" at 11:00, its edits unsent until something else happened).
 */
import { describe, expect, it } from 'vitest';
import { onCloud } from './support/cloud-run.ts';

describe('a pause for a while', () => {
  it('ends by itself: the status leaves paused and what waited is sent', () =>
    onCloud(async (cloud) => {
      const a = await cloud.addDevice('laptop', { now: Date.now });
      await a.write('a.txt', 'one');
      await a.sync();
      a.engine.pause(Date.now() + 300);
      await a.write('b.txt', 'two');
      await a.sync();
      expect(cloud.serverTree().has('b.txt'), 'nothing is sent while paused').toBe(false);
      expect(a.engine.getStatus().state).toBe('paused');
      await expect.poll(() => cloud.serverTree().has('b.txt'), { timeout: 10_000, interval: 20 }).toBe(true);
      await expect.poll(() => a.engine.getStatus().state, { timeout: 10_000, interval: 20 }).toBe('idle');
      expect(a.engine.getStatus().pausedUntilMs).toBeUndefined();
    }));

  it('resumed early, or paused again, the first pause’s end changes nothing', () =>
    onCloud(async (cloud) => {
      const a = await cloud.addDevice('laptop', { now: Date.now });
      a.engine.pause(Date.now() + 200);
      a.engine.pause(); // until resumed
      await new Promise((r) => setTimeout(r, 400));
      expect(a.engine.getStatus().state).toBe('paused');
      a.engine.resume();
      expect(a.engine.getStatus().state).toBe('idle');
    }));
});

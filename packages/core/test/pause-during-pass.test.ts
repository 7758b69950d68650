/**
 * Paused while a pass is on its way: the pass ends, and the status still says paused (CI, the
 * tray popover e2e: the pass that was running when "Pause for 1 hour" was clicked ended by
 * writing its own state — idle — over "paused", so the popover showed "Up to date" with the
 * pause buttons while the engine stayed paused, and "Resume syncing" was gone).
 */
import { describe, expect, it } from 'vitest';
import { onCloud } from './support/cloud-run.ts';
import type { FakeDevice } from './support/fake-cloud.ts';

/** The device's next pull waits until `release()`; `inPull` resolves once it is waiting. */
function holdNextPull(a: FakeDevice): { inPull: Promise<void>; release: () => void } {
  let release: () => void = () => undefined;
  const held = new Promise<void>((r) => (release = r));
  let entered: () => void = () => undefined;
  const inPull = new Promise<void>((r) => (entered = r));
  a.remote.beforeCall = async (m) => {
    if (m !== 'changes') return;
    a.remote.beforeCall = undefined;
    entered();
    await held;
  };
  return { inPull, release };
}

describe('pause during a pass', () => {
  it('the pass on its way ends without writing over the paused state', () =>
    onCloud(async (cloud) => {
      const a = await cloud.addDevice('laptop');
      await a.write('a.txt', 'one');
      await a.sync();
      // The next pass waits in its pull until the person has paused.
      const { inPull, release } = holdNextPull(a);
      await a.write('b.txt', 'two');
      const pass = a.sync();
      await inPull;
      a.engine.pause();
      expect(a.engine.getStatus().state).toBe('paused');
      release();
      await pass;
      expect(a.engine.getStatus().state).toBe('paused');
      a.engine.resume();
      await a.sync();
      expect(a.engine.getStatus().state).toBe('idle');
      expect(cloud.serverTree().has('b.txt')).toBe(true);
    }));

  it('no state of the pass shows while paused: the popover does not flicker', () =>
    onCloud(async (cloud) => {
      // The UI re-renders its action row on every state it is sent (a flip to "syncing" and
      // back took "Resume syncing" from under a click): what the pass pulls and pushes after
      // the pause must leave the state at "paused" the whole time.
      const a = await cloud.addDevice('laptop');
      const b = await cloud.addDevice('desktop');
      await a.write('a.txt', 'one');
      await a.sync();
      await b.sync();
      await b.write('from-b.txt', 'pulled while paused');
      await b.sync();
      const { inPull, release } = holdNextPull(a);
      await a.write('b.txt', 'two');
      const pass = a.sync();
      await inPull;
      a.engine.pause();
      const seen: string[] = [];
      const sub = a.engine.status.onChange((st) => seen.push(st.state));
      release();
      await pass;
      sub.dispose();
      expect(seen.length, 'the pass did report while paused').toBeGreaterThan(0);
      expect([...new Set(seen)]).toEqual(['paused']);
      a.engine.resume();
      await a.sync();
      expect(a.engine.getStatus().state).toBe('idle');
    }));
});

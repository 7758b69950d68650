/**
 * A write of a killed agent that the server finishes after the restarted agent's pull (issue
 * #16, found by the e2e crash test on the S3 tier: `big2 (conflicted copy … from crashy).bin`
 * holding the very content of big2.bin). The dead agent had sent content A; the server wrote
 * it after the new agent had read the feed, so the new agent sent its newer content B against
 * the old base, met A there — its own write, whose answer it never heard — and the server
 * kept B as a conflicted copy of itself.
 *
 * The agent names with each write the contents it sent to that path and never heard back
 * about (the journal's `sent` rows); a head holding one of them is its own write, not a
 * conflict (wire/write-rule.ts). Each case failed before that.
 */
import { describe, expect, it } from 'vitest';
import { OfflineError } from '../src/remote/proxy-client.ts';
import { converged, onCloud } from './support/cloud-run.ts';
import { type FakeDevice, sha256 } from './support/fake-cloud.ts';

const SMALL = 4096;
const cut = () => new OfflineError('connection cut: the agent was killed');

/** Conflicted copies on the server. */
function copies(tree: Map<string, string>): string[] {
  return [...tree.keys()].filter((p) => p.includes('(conflicted copy'));
}

/**
 * `a` sends what it holds now with the call of `method` cut off (the server does it later),
 * then restarts after `whileDown`; its next pass lands the held call just before the
 * restarted agent's first call of `landBefore` — after its pull.
 */
async function killedWithCallHeld(
  a: FakeDevice,
  method: 'uploadBundle' | 'ops',
  landBefore: 'uploadBundle' | 'ops',
  whileDown: () => Promise<void>,
): Promise<void> {
  const land = a.remote.holdNext(method, cut());
  await a.sync().catch(() => undefined);
  await a.restart({}, whileDown);
  let landed = false;
  a.remote.beforeCall = async (m) => {
    if (landed || m !== landBefore) return;
    landed = true;
    await land();
  };
  await a.sync();
  a.remote.beforeCall = undefined;
  expect(landed, 'the held call landed during the pass').toBe(true);
}

describe('a dead agent’s write landing after the restarted agent’s pull', () => {
  it('a small file edited again meanwhile: the newer edit replaces ours, no conflicted copy', () =>
    onCloud(async (cloud) => {
      const a = await cloud.addDevice('laptop', { smallFileBytes: SMALL });
      await a.write('notes.txt', 'one');
      await a.sync();
      await a.write('notes.txt', 'two');
      await killedWithCallHeld(a, 'uploadBundle', 'uploadBundle', () => a.write('notes.txt', 'three'));
      await converged(cloud);
      expect(copies(cloud.serverTree())).toEqual([]);
      expect(cloud.serverTree().get('notes.txt')).toBe(sha256('three'));
    }, SMALL));

  it('a new large file grown meanwhile (the crash test’s case): no conflicted copy', () =>
    onCloud(async (cloud) => {
      const a = await cloud.addDevice('laptop', { smallFileBytes: SMALL });
      const big = Buffer.alloc(64 * 1024, 7);
      await a.write('big.bin', big);
      await killedWithCallHeld(a, 'ops', 'ops', () =>
        a.write('big.bin', Buffer.concat([big, Buffer.from('appended after the crash')])),
      );
      await converged(cloud);
      expect(copies(cloud.serverTree())).toEqual([]);
      expect(cloud.serverTree().get('big.bin')).toBe(
        sha256(Buffer.concat([big, Buffer.from('appended after the crash')])),
      );
    }, SMALL));

  it('a file deleted meanwhile: the delete goes ahead, the file does not come back', () =>
    onCloud(async (cloud) => {
      const a = await cloud.addDevice('laptop', { smallFileBytes: SMALL });
      await a.write('old.txt', 'one');
      await a.sync();
      await a.write('old.txt', 'two');
      await killedWithCallHeld(a, 'uploadBundle', 'ops', () => a.rm('old.txt'));
      await converged(cloud);
      expect(cloud.serverTree().has('old.txt')).toBe(false);
      expect(await a.exists('old.txt')).toBe(false);
    }, SMALL));

  it('another device’s edit in between is still a conflict: both kept', () =>
    onCloud(async (cloud) => {
      const a = await cloud.addDevice('laptop', { smallFileBytes: SMALL });
      const b = await cloud.addDevice('desktop', { smallFileBytes: SMALL });
      await a.write('notes.txt', 'one');
      await a.sync();
      await b.sync();
      await a.write('notes.txt', 'two');
      const land = a.remote.holdNext('uploadBundle', cut());
      await a.sync().catch(() => undefined);
      await a.restart({}, () => a.write('notes.txt', 'three'));
      // Ours lands, then the other device edits on top of it, all before our push.
      let step = 0;
      a.remote.beforeCall = async (m) => {
        if (step > 0 || m !== 'uploadBundle') return;
        step = 1;
        await land();
        await b.sync(); // takes "two" down
        await b.write('notes.txt', 'theirs');
        await b.sync();
      };
      await a.sync();
      a.remote.beforeCall = undefined;
      expect(step).toBe(1);
      await converged(cloud);
      const tree = cloud.serverTree();
      const held = new Set(tree.values());
      expect(held.has(sha256('three')), 'our edit kept').toBe(true);
      expect(held.has(sha256('theirs')), 'their edit kept').toBe(true);
      expect(copies(tree)).toHaveLength(1);
    }, SMALL));
});

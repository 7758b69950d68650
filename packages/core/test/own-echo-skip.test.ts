/**
 * The agent steps its feed cursor over a run of its own recorded writes instead of reading
 * them back (issue #16: after a 10,029-file drop it read back all of them, eleven pages,
 * before it reported idle). A change from another device that lands between two of our own
 * runs is still read and applied, as is everything after the first change not ours.
 */
import { describe, expect, it } from 'vitest';
import type { ChangesResponse } from '@weft/wire';
import { OwnChanges } from '../src/sync/own-changes.ts';
import type { FakeDevice } from './support/fake-cloud.ts';
import { fakeCloudPerTest } from './drop-shared.ts';

/** Every changes() call the device makes: the cursor asked from and what came back. */
function countPulls(d: FakeDevice): { cursor: number; page: ChangesResponse }[] {
  const seen: { cursor: number; page: ChangesResponse }[] = [];
  const changes = d.remote.changes.bind(d.remote);
  d.remote.changes = async (cursor, limit) => {
    const page = await changes(cursor, limit);
    seen.push({ cursor, page });
    return page;
  };
  return seen;
}

describe('own echoes stepped over', () => {
  const newCloud = fakeCloudPerTest();

  it('reads none of its own uploads and folders back from the feed', async () => {
    const cloud = newCloud();
    const d = await cloud.addDevice('laptop');
    await d.engine.waitIdle();
    for (let i = 0; i < 60; i++) await d.write(`drop/${i % 3}/f${i}.txt`, `file ${i}`);
    await d.sync(); // uploads 60 files and 4 folders
    const seq = cloud.server.seq('alice');
    expect(seq).toBeGreaterThanOrEqual(64);
    const pulls = countPulls(d);
    await d.sync();
    // One request, from past every change of ours, and nothing in it.
    expect(pulls.map((p) => p.cursor)).toEqual([seq]);
    expect(pulls.flatMap((p) => p.page.changes)).toEqual([]);
    expect(d.engine.journal.getMeta('cursor')).toBe(String(seq));
    expect(d.engine.journal.pendingCount()).toBe(0);
  });

  it("pulls another device's change that lands between its own, and the ones after it", async () => {
    const cloud = newCloud();
    const phone = await cloud.addDevice('phone');
    const d = await cloud.addDevice('laptop');
    await phone.engine.waitIdle();
    await d.engine.waitIdle();
    for (let i = 0; i < 40; i++) await d.write(`drop/${i % 2}/f${i}.txt`, `file ${i}`);
    // The laptop's folders go first (one ops request), then its files in a bundle: the phone's
    // file lands in between, so the feed holds ours, theirs, ours.
    const upload = d.remote.uploadBundle.bind(d.remote);
    let between = 0;
    d.remote.uploadBundle = async (bytes) => {
      if (between === 0) {
        await phone.write('from-phone.txt', 'between');
        await phone.sync();
        between = cloud.server.seq('alice');
      }
      return upload(bytes);
    };
    await d.sync();
    expect(between).toBeGreaterThan(0);
    // And one after all of ours.
    await phone.write('late.txt', 'after');
    await phone.sync();
    const pulls = countPulls(d);
    await d.sync();
    expect(await d.read('from-phone.txt')).toBe('between');
    expect(await d.read('late.txt')).toBe('after');
    // Our folders before the phone's change were stepped over: the pull asked from just before it.
    expect(pulls[0]?.cursor).toBe(between - 1);
    const got = pulls.flatMap((p) => p.page.changes.map((c) => c.path));
    expect(got[0]).toBe('from-phone.txt');
    expect(got).toContain('late.txt');
    expect(d.engine.journal.getMeta('cursor')).toBe(String(cloud.server.seq('alice')));
    expect(cloud.serverTree().get('from-phone.txt')).toBeDefined();
    expect(d.engine.journal.pendingCount()).toBe(0);
    // Nothing left over: the next pull reads nothing.
    const again = countPulls(d);
    await d.sync();
    expect(again.flatMap((p) => p.page.changes)).toEqual([]);
  });
});

describe('OwnChanges', () => {
  it('steps over a run right after the cursor, noted in any order, and stops at the first gap', () => {
    const own = new OwnChanges();
    for (const s of [5, 3, 4, 7, 8, 0, -1, 2.5]) own.note(s);
    expect(own.size).toBe(2); // [3,5] and [7,8]; 0, negatives and fractions ignored
    expect(own.skip(1)).toBe(1); // 2 is not ours
    expect(own.skip(2)).toBe(5);
    expect(own.skip(5)).toBe(5); // 6 is not ours
    expect(own.skip(6)).toBe(8);
    expect(own.size).toBe(0);
    expect(own.skipped).toBe(5);
  });

  it('joins runs a note bridges, and forgets runs the cursor passed by reading', () => {
    const own = new OwnChanges();
    own.note(10);
    own.note(12);
    own.note(11);
    expect(own.size).toBe(1);
    own.note(20);
    expect(own.skip(15)).toBe(15); // [10,12] forgotten, 16 not ours
    expect(own.size).toBe(1);
    expect(own.skip(19)).toBe(20);
  });
});

/**
 * A first sync (or a reset feed) reads the server's listing a page at a time (issue #16: a
 * whole listing of a million entries was one statement on the proxy's loop and held whole on
 * both sides). Pages are keyset pages in byte order with one snapshot seq; changes landing
 * between pages are in the feed after that seq. Counted: pages, entries per page, entries
 * listed twice (none), and the device's tree against the server's after the feed.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ListResponse } from '@weft/wire';
import type { ListPageRequest } from '../src/remote/remote-store.ts';
import { FakeCloud, type FakeDevice } from './support/fake-cloud.ts';

let cloud: FakeCloud | undefined;
afterEach(async () => {
  await cloud?.close();
  cloud = undefined;
});

/** Pages of at most `limit` entries for `d`, each one recorded; `between` runs before page n ≥ 2. */
function smallPages(
  d: FakeDevice,
  limit: number,
  between: (n: number) => Promise<void> = async () => {},
): ListResponse[] {
  const pages: ListResponse[] = [];
  const real = d.remote.listPage.bind(d.remote);
  d.remote.listPage = async (path: string, page: ListPageRequest) => {
    if (pages.length > 0) await between(pages.length + 1);
    const r = await real(path, { ...page, limit });
    pages.push(r);
    return r;
  };
  return pages;
}

function localTree(d: FakeDevice): string[] {
  return d.engine.journal
    .allFiles()
    .map((r) => `${r.path}:${r.kind === 'dir' ? 'dir' : r.hash}`)
    .sort();
}

function serverTree(c: FakeCloud): string[] {
  return [...c.serverTree()].map(([p, h]) => `${p}:${h}`).sort();
}

describe('paged full listing', () => {
  it('arrivesWholeAndConsistentWhileChangesLandBetweenPages', async () => {
    cloud = new FakeCloud();
    const a = await cloud.addDevice('a', { watch: false, settleMs: 0 });
    const b = await cloud.addDevice('b', { watch: false, settleMs: 0 });
    for (let i = 0; i < 30; i++) await a.write(`d${i % 3}/f${String(i).padStart(2, '0')}.txt`, `file ${i}`);
    await a.sync();
    // b has none of them: its next pull lists everything, as a first sync does.
    b.engine.journal.setMeta('cursor', '');
    const snapshot = cloud.seq;
    const pages = smallPages(b, 4, async (n) => {
      if (n !== 3) return;
      // Between the second and third pages: one path behind the keyset, one deleted ahead of
      // it, one changed ahead of it.
      await a.write('a-early.txt', 'behind the cursor');
      await a.rm('d2/f29.txt');
      await a.write('d2/f26.txt', 'changed while listing');
      await a.sync();
    });
    await b.sync(); // the paged listing
    const listed = pages.flatMap((p) => p.entries.map((e) => e.path));
    expect(pages.length).toBeGreaterThanOrEqual(Math.ceil(33 / 4));
    expect(pages.every((p) => p.entries.length <= 4)).toBe(true);
    expect(new Set(listed).size).toBe(listed.length); // nothing listed twice
    expect(pages.every((p) => p.seq === snapshot)).toBe(true);
    expect(listed).not.toContain('a-early.txt');
    expect(listed).not.toContain('d2/f29.txt');
    expect(b.engine.journal.getMeta('cursor')).toBe(String(snapshot));
    await b.sync(); // the feed from the snapshot
    expect(await b.read('a-early.txt')).toBe('behind the cursor');
    expect(await b.read('d2/f26.txt')).toBe('changed while listing');
    expect(await b.exists('d2/f29.txt')).toBe(false);
    expect(localTree(b)).toEqual(serverTree(cloud));
  });

  it('findsRemoteDeletesInEverySpanOfAResetListing', async () => {
    cloud = new FakeCloud();
    const a = await cloud.addDevice('a', { watch: false, settleMs: 0 });
    const b = await cloud.addDevice('b', { watch: false, settleMs: 0 });
    for (let i = 0; i < 24; i++) await a.write(`d${i % 4}/f${String(i).padStart(2, '0')}.txt`, `file ${i}`);
    await a.sync();
    await b.sync();
    // Gone while b does not follow the feed: the first path, one mid-page, a whole folder,
    // and the last path (after the last page's end).
    for (const p of ['d0/f00.txt', 'd1/f09.txt', 'd2', 'd3/f23.txt']) await a.rm(p);
    await a.sync();
    b.engine.journal.setMeta('cursor', '');
    // What stays is left alone: same inode after (a span read too far would delete it and
    // download it again).
    const kept = b.engine.journal.allFiles().filter((r) => r.kind === 'file' && !r.path.startsWith('d2/'));
    const inodes = async (): Promise<Map<string, number>> => {
      const out = new Map<string, number>();
      for (const r of kept) {
        const st = await fsp.stat(nodePath.join(b.folder, r.path)).catch(() => undefined);
        if (st) out.set(r.path, st.ino);
      }
      return out;
    };
    const before = await inodes();
    const pages = smallPages(b, 5);
    await b.sync();
    expect(pages.length).toBeGreaterThan(2);
    const after = await inodes();
    for (const [path, ino] of after) expect(ino, path).toBe(before.get(path));
    expect(after.size).toBe(before.size - 3); // d0/f00, d1/f09, d3/f23 gone
    for (const p of ['d0/f00.txt', 'd1/f09.txt', 'd2', 'd3/f23.txt']) expect(await b.exists(p)).toBe(false);
    expect(await b.exists('d3/f19.txt')).toBe(true);
    expect(localTree(b)).toEqual(serverTree(cloud));
  });
});

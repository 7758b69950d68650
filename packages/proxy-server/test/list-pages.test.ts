/**
 * `GET /v1/list` paged (issue #16): keyset pages by path with a bounded size and one snapshot
 * seq, so a listing of a million entries is never one statement on the proxy's loop nor held
 * whole. Counted: pages, entries per page, entries listed twice; the listing plus the feed
 * after its seq against the namespace as it ends up. A request without `limit` is answered
 * whole, as before.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChangesResponse, ListResponse } from '@weft/wire';
import { startTestServer, TestClient } from './helpers.ts';

let server: Awaited<ReturnType<typeof startTestServer>>;
let dev1: TestClient;
let dev2: TestClient;

beforeAll(async () => {
  server = await startTestServer();
  dev1 = await TestClient.enrol(server, 'pageuser', 'one');
  dev2 = await TestClient.enrol(server, 'pageuser', 'two');
  const files: Record<string, string> = {};
  for (let i = 0; i < 30; i++) files[`d${i % 3}/f${String(i).padStart(2, '0')}.txt`] = `file ${i}`;
  await dev1.putSmall(files);
});
afterAll(async () => server.stop());

const page = (q: string): Promise<ListResponse> =>
  dev2.json<ListResponse>('GET', `/v1/list?recursive=1&${q}`);

/** path → revision ('' for folders' own revision too: what the listing says). */
type Tree = Map<string, string>;

function applyFeed(tree: Tree, changes: ChangesResponse['changes']): void {
  const dropBelow = (p: string): void => {
    for (const k of [...tree.keys()]) if (k === p || k.startsWith(`${p}/`)) tree.delete(k);
  };
  for (const c of changes) {
    if (c.type === 'delete') dropBelow(c.path);
    else if (c.type === 'upsert') tree.set(c.path, c.entry.revision);
    else {
      for (const [k, v] of [...tree]) {
        if (k.startsWith(`${c.from}/`)) {
          tree.delete(k);
          tree.set(c.path + k.slice(c.from.length), v);
        }
      }
      tree.delete(c.from);
      tree.set(c.path, c.entry.revision);
    }
  }
}

describe('paged listing', () => {
  it('arrivesWholeAndConsistentWhileChangesLandBetweenPages', async () => {
    const whole = await dev2.json<ListResponse>('GET', '/v1/list?recursive=1');
    expect(whole.next).toBeUndefined();
    const pages: ListResponse[] = [await page('limit=4')];
    const seq = pages[0]?.seq ?? -1;
    expect(seq).toBe(whole.seq);
    let changed = false;
    for (let p = pages[0]; p?.next !== undefined;) {
      if (pages.length === 2 && !changed) {
        changed = true;
        // Behind the keyset (a new folder and file), ahead of it (a delete, an edit, a move
        // out of the way and one into the part already listed).
        await dev1.putSmall({ 'a/early.txt': 'behind' });
        await dev1.ops({ op: 'delete', path: 'd2/f29.txt' });
        await dev1.putSmall({ 'd2/f26.txt': 'edited' });
        await dev1.ops({ op: 'move', from: 'd2/f23.txt', to: 'a/moved.txt' });
      }
      p = await page(`limit=4&after=${encodeURIComponent(p.next)}&seq=${seq}`);
      pages.push(p);
    }
    const listed = pages.flatMap((p) => p.entries.map((e) => e.path));
    expect(pages.every((p) => p.entries.length <= 4 && p.seq === seq)).toBe(true);
    expect(pages.length).toBeGreaterThanOrEqual(Math.ceil((whole.entries.length - 2) / 4)); // 2 gone ahead
    expect(new Set(listed).size).toBe(listed.length); // nothing listed twice
    expect([...listed].sort(byBytes)).toEqual(listed); // in byte order
    // Everything there throughout is listed; what changed meanwhile comes from the feed.
    for (const e of whole.entries)
      if (!['d2/f29.txt', 'd2/f23.txt'].includes(e.path)) expect(listed).toContain(e.path);
    expect(listed).not.toContain('a/early.txt');
    const tree: Tree = new Map(pages.flatMap((p) => p.entries.map((e) => [e.path, e.revision] as const)));
    const feed = await dev2.json<ChangesResponse>('GET', `/v1/changes?cursor=${seq}&limit=1000`);
    expect(feed.reset).toBe(false);
    applyFeed(tree, feed.changes);
    const after = await dev2.json<ListResponse>('GET', '/v1/list?recursive=1');
    expect([...tree].sort()).toEqual(after.entries.map((e) => [e.path, e.revision]).sort());
  });

  it('pagesAFolderAndEndsWithoutNext', async () => {
    const first = await page('path=d1&limit=6');
    expect(first.entries.map((e) => e.path)).toEqual(
      first.entries.map((e) => e.path).filter((p) => p.startsWith('d1/')),
    );
    expect(first.next).toBe(first.entries.at(-1)?.path);
    const rest = await page(`path=d1&limit=6&after=${encodeURIComponent(first.next ?? '')}&seq=${first.seq}`);
    expect(rest.entries.length).toBe(4); // d1 holds 10 files
    expect(rest.next).toBeUndefined();
  });

  it('refusesBadPageRequests', async () => {
    const status = async (q: string): Promise<number> => (await dev2.req('GET', `/v1/list?${q}`)).status;
    expect(await status('recursive=1&limit=5001')).toBe(400);
    expect(await status('recursive=1&limit=0')).toBe(400);
    expect(await status('recursive=0&limit=10')).toBe(400); // only a recursive listing is paged
    expect(await status('recursive=1&limit=10&after=d0')).toBe(400); // a later page without its seq
    expect(await status('recursive=1&after=d0&seq=1')).toBe(400); // no limit
    expect(await status('recursive=1&limit=10&after=d0&seq=999999')).toBe(400); // a seq from the future
    expect(await status('recursive=1&limit=10&path=nowhere')).toBe(404);
    expect(await status('recursive=1&limit=10&path=d0%2Ff00.txt')).toBe(409);
  });
});

function byBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

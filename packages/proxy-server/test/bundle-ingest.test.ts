/**
 * Bundle ingest as one batch: a bundle's small files are written in parallel, renamed into
 * place and recorded in ONE metadata transaction (their change records are contiguous),
 * while per-entry decisions stay those of one-by-one writes and same-path operations keep
 * their arrival order.
 */
import { existsSync } from 'node:fs';
import * as nodePath from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChangesResponse, ListResponse, OpResult } from '@weft/wire';
import type { ChangeInput } from '../src/store/metadata.ts';
import { sha, startTestServer, TestClient } from './helpers.ts';

let server: Awaited<ReturnType<typeof startTestServer>>;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.stop();
});

async function changes(c: TestClient): Promise<ChangesResponse['changes']> {
  return (await c.json<ChangesResponse>('GET', '/v1/changes?cursor=0&limit=5000')).changes;
}

describe('bundle ingest', () => {
  it('recordsABundleInOneTransaction', async () => {
    const c = await TestClient.enrol(server, 'batch');
    // Two bundles at once on unrelated paths: each one's records must be contiguous.
    const bundle = (tag: string): Record<string, string> =>
      Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`${tag}/d${i % 4}/f${i}.txt`, `${tag} ${i}`]));
    const [a, b] = await Promise.all([c.putSmall(bundle('a')), c.putSmall(bundle('b'))]);
    for (const r of [...a!, ...b!]) expect(r.result.status, r.path).toBe('applied');
    const feed = await changes(c);
    for (const tag of ['a', 'b']) {
      const seqs = feed.filter((x) => x.path.startsWith(`${tag}/`) || x.path === tag).map((x) => x.seq);
      expect(seqs).toHaveLength(1 + 4 + 40); // folder, 4 subfolders, 40 files
      expect(seqs, `records of bundle ${tag} are contiguous`).toEqual(seqs.map((_, i) => seqs[0]! + i));
    }
    // Folders before their files, and every file on the tier with its content.
    const list = await c.json<ListResponse>('GET', '/v1/list?path=&recursive=1');
    expect(list.entries.filter((e) => e.kind === 'file')).toHaveLength(80);
    expect(await c.text('b/d3/f39.txt')).toBe('b 39');
    const seqOf = (p: string): number => feed.find((x) => x.path === p)!.seq;
    expect(seqOf('a/d1')).toBeLessThan(seqOf('a/d1/f1.txt'));
  });

  it('decidesEachEntryAsIfAppliedOneByOne', async () => {
    const c = await TestClient.enrol(server, 'decide');
    const [first] = await c.putSmall({ 'n.md': 'v1', 'dir/x.txt': 'x' });
    const rev1 = first?.result.status === 'applied' ? first.result.entry?.revision : undefined;
    await c.putSmall({ 'n.md': 'v2' }, { 'n.md': rev1 ?? null });
    const results = await c.putSmall(
      {
        'n.md': 'v2 elsewhere', // stale base: conflicted copy
        dir: 'a file where a folder is', // folder at that path
        'dir/x.txt': 'x', // same content: no-op
        'f.txt': 'a file', // a file …
        'f.txt/inner.txt': 'under a file', // … in the way of this one's folder
        'new/deep/er.txt': 'fine',
      },
      { 'n.md': rev1 ?? null },
    );
    const by = new Map(results.map((r) => [r.path, r.result]));
    expect(by.get('n.md')?.status).toBe('conflict');
    expect(by.get('dir')).toMatchObject({ status: 'error', error: { code: 'ALREADY_EXISTS' } });
    expect(by.get('dir/x.txt')).toMatchObject({ status: 'applied', seq: 0 });
    expect(by.get('f.txt')?.status).toBe('applied');
    expect(by.get('f.txt/inner.txt')).toMatchObject({ status: 'error', error: { code: 'ALREADY_EXISTS' } });
    expect(by.get('new/deep/er.txt')?.status).toBe('applied');
    const conflict = by.get('n.md') as Extract<OpResult, { status: 'conflict' }>;
    expect(await c.text('n.md')).toBe('v2');
    expect(await c.text(conflict.conflict.conflictPath)).toBe('v2 elsewhere');
    expect(await c.text('new/deep/er.txt')).toBe('fine');
    expect((await c.get('f.txt/inner.txt')).status).toBe(404);
    // Nothing was left on the tier for the refused entries.
    const ns = nodePath.join(server.dir, 'fs', 'ns', 'decide');
    expect(existsSync(nodePath.join(ns, 'f.txt', 'inner.txt'))).toBe(false);
  });

  it('looksEachNewFileUpOnce', async () => {
    // Issue #16: the batch looked each file up, then the store's applyChanges looked it up
    // again before inserting it. Counted on the real store (wrapped, not replaced).
    const c = await TestClient.enrol(server, 'lookups');
    const meta = server.store.meta;
    const paths: string[] = [];
    const upserts: ChangeInput[] = [];
    const getEntry = meta.getEntry.bind(meta);
    const applyChanges = meta.applyChanges.bind(meta);
    meta.getEntry = (u, p) => (paths.push(p), getEntry(u, p));
    meta.applyChanges = (u, ch, ...rest) => (upserts.push(...ch), applyChanges(u, ch, ...rest));
    try {
      const files = Object.fromEntries(
        Array.from({ length: 30 }, (_, i) => [`l/d${i % 3}/f${i}.txt`, `v ${i}`]),
      );
      for (const r of await c.putSmall(files)) expect(r.result.status).toBe('applied');
      // One look-up per file and one per folder (l, l/d0..l/d2), none more.
      expect(paths.filter((p) => p.endsWith('.txt'))).toHaveLength(30);
      expect(new Set(paths.filter((p) => p.endsWith('.txt'))).size).toBe(30);
      expect(paths.filter((p) => !p.endsWith('.txt')).sort()).toEqual(['l', 'l/d0', 'l/d1', 'l/d2']);
      const fileUpserts = upserts.filter((x) => x.type === 'upsert' && x.entry.kind === 'file');
      expect(fileUpserts).toHaveLength(30);
      // Each new file goes to the store as absent: it does not look again (sqlite.ts putRow).
      expect(fileUpserts.every((x) => x.type === 'upsert' && x.absent === true)).toBe(true);
      // A file replaced is not absent: its old row is read in the transaction (versions, refcounts).
      upserts.length = 0;
      await c.putSmall({ 'l/d0/f0.txt': 'v 0 again' });
      expect(upserts).toHaveLength(1);
      expect(upserts[0]).not.toHaveProperty('absent');
      expect(await c.text('l/d0/f0.txt')).toBe('v 0 again');
    } finally {
      meta.getEntry = getEntry;
      meta.applyChanges = applyChanges;
    }
  });

  it('keepsSamePathOperationsInArrivalOrder', async () => {
    const c = await TestClient.enrol(server, 'order');
    const p = 'r/same.txt';
    // Hold the path busy, then queue bundle v1, bundle v2, a delete and bundle v3, each sent
    // once the previous one is waiting in the scheduler (so their arrival order is known).
    let release!: () => void;
    const blocker = server.scheduler.submit({
      namespace: 'order',
      paths: ['r'],
      bytes: 0,
      run: () => new Promise<void>((r) => (release = r)),
    });
    // (The request's promise is returned wrapped: an async function would wait for it.)
    const queued = async (send: () => Promise<unknown>): Promise<{ pending: Promise<unknown> }> => {
      const depth = server.scheduler.depth;
      const pending = send();
      const t0 = Date.now();
      while (server.scheduler.depth === depth) {
        if (Date.now() - t0 > 5_000)
          throw new Error(`not queued: ${JSON.stringify(await Promise.race([pending, 'pending']))}`);
        await new Promise((r) => setTimeout(r, 5));
      }
      return { pending };
    };
    const sent = [
      await queued(() => c.putSmall({ [p]: 'v1', 'r/other1.txt': 'o', 'unrelated.txt': 'u' })),
      await queued(() => c.putSmall({ [p]: 'v2' })),
      await queued(() => c.ops({ op: 'delete', path: p })),
      await queued(() => c.putSmall({ [p]: 'v3', 'r/other2.txt': 'o' })),
      await queued(() => c.putSmall({ 'r/other1.txt': 'o2' })),
    ];
    release();
    await blocker;
    await Promise.all(sent.map((s) => s.pending));
    const feed = (await changes(c)).filter((x) => x.path === p);
    expect(feed.map((x) => (x.type === 'upsert' ? x.entry.sha256 : x.type))).toEqual([
      sha('v1'),
      sha('v2'),
      'delete',
      sha('v3'),
    ]);
    expect(await c.text(p)).toBe('v3');
    expect(await c.text('r/other1.txt')).toBe('o2');
  });
});

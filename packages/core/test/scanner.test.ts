import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { describe, expect, it } from 'vitest';
import { IgnoreRules } from '../src/ignore-rules.ts';
import { Journal, SMUDGED_MTIME } from '../src/journal/journal.ts';
import { ScanStopped, enqueueScan, scan as rawScan } from '../src/scanner.ts';
import { fileRow } from './support/journal-rig.ts';
import { later, markSynced, scanFolder } from './support/scan-rig.ts';

/** Scan and commit the index rows, as the engine does. */
async function scan(...args: Parameters<typeof rawScan>): ReturnType<typeof rawScan> {
  const r = await rawScan(...args);
  r.commit();
  return r;
}

describe('scanner', () => {
  it('finds new files and folders, then nothing on a second scan', async () => {
    const { root, journal } = await scanFolder();
    await fsp.mkdir(nodePath.join(root, 'docs'));
    await fsp.writeFile(nodePath.join(root, 'docs', 'a.txt'), 'hello');
    await fsp.writeFile(nodePath.join(root, 'b.txt'), 'bee');
    const first = await scan(root, journal, new IgnoreRules(), { now: later });
    expect(first.ops.map((o) => `${o.kind}:${'path' in o ? o.path : ''}`).sort()).toEqual([
      'mkdir:docs',
      'put:b.txt',
      'put:docs/a.txt',
    ]);
    const second = await scan(root, journal, new IgnoreRules(), { now: later });
    expect(second.ops).toEqual([]);
  });

  it('detects edits by content, not by touch', async () => {
    const { root, journal } = await scanFolder();
    const f = nodePath.join(root, 'f.txt');
    await fsp.writeFile(f, 'one');
    await scan(root, journal, new IgnoreRules(), { now: later });
    markSynced(journal);
    const t = new Date(Date.now() + 5000);
    await fsp.utimes(f, t, t);
    expect((await scan(root, journal, new IgnoreRules(), { now: later })).ops).toEqual([]);
    await fsp.writeFile(f, 'two');
    const ops = (await scan(root, journal, new IgnoreRules(), { now: later })).ops;
    expect(ops).toMatchObject([{ kind: 'put', path: 'f.txt', created: false, size: 3 }]);
  });

  it('sees a same-size edit made within the timestamp granularity of the recorded scan', async () => {
    // Filesystems keep coarse timestamps (a jiffy on ext4, 2 s on FAT): an edit right after
    // a scan can leave size, mtime and inode as recorded. Such "racily clean" rows must be
    // re-hashed by the next scan, not trusted (the racy-git problem).
    const { root, journal } = await scanFolder();
    const f = nodePath.join(root, 'f.txt');
    const t = new Date(); // both writes land on this timestamp, as within one clock tick
    await fsp.writeFile(f, 'one');
    await fsp.utimes(f, t, t);
    await scan(root, journal, new IgnoreRules(), { now: later });
    markSynced(journal);
    await fsp.writeFile(f, 'two');
    await fsp.utimes(f, t, t); // same timestamp, same size, same inode
    const ops = (await scan(root, journal, new IgnoreRules(), { now: later })).ops;
    expect(ops).toMatchObject([{ kind: 'put', path: 'f.txt', hash: expect.any(String), size: 3 }]);
  });

  it('leaves files still being written for the next scan', async () => {
    const { root, journal } = await scanFolder();
    await fsp.writeFile(nodePath.join(root, 'growing.bin'), 'partial');
    const r = await scan(root, journal, new IgnoreRules(), { settleMs: 60_000 });
    expect(r.ops).toEqual([]);
    expect(r.unsettled).toEqual(['growing.bin']);
  });

  it('with settleMs 0, takes a file written earlier in the millisecond the scan starts in', async () => {
    // Date.now() is whole milliseconds and an mtime has nanoseconds: a file written 0.5 ms
    // into the scan's millisecond was left "unsettled" (an e2e's offline edits flaked on it).
    const { root, journal } = await scanFolder();
    const f = nodePath.join(root, 'just-written.txt');
    await fsp.writeFile(f, 'now');
    await fsp.utimes(f, 1_700_000_000.0005, 1_700_000_000.0005);
    const r = await scan(root, journal, new IgnoreRules(), { settleMs: 0, now: () => 1_700_000_000_000 });
    expect(r.unsettled).toEqual([]);
    expect(r.ops).toMatchObject([{ kind: 'put', path: 'just-written.txt' }]);
  });

  it('sees a rename as a move, and a folder rename as one move', async () => {
    const { root, journal } = await scanFolder();
    await fsp.mkdir(nodePath.join(root, 'dir'));
    await fsp.writeFile(nodePath.join(root, 'dir', 'x.txt'), 'x');
    await fsp.writeFile(nodePath.join(root, 'y.txt'), 'y');
    await scan(root, journal, new IgnoreRules(), { now: later });
    markSynced(journal);
    await fsp.rename(nodePath.join(root, 'dir'), nodePath.join(root, 'renamed'));
    await fsp.rename(nodePath.join(root, 'y.txt'), nodePath.join(root, 'renamed', 'y2.txt'));
    const ops = (await scan(root, journal, new IgnoreRules(), { now: later })).ops;
    expect(ops).toEqual([
      { kind: 'move', from: 'dir', to: 'renamed', replaces: false },
      { kind: 'move', from: 'y.txt', to: 'renamed/y2.txt', replaces: false },
    ]);
    expect(journal.getFile('renamed/x.txt')?.syncedRev).toBe('rev-dir/x.txt');
  });

  it("does not take a new file at a deleted file's inode (reused) for a move when its time differs", async () => {
    // A file deleted and another created before the scan may get the freed inode; with the
    // same size the two looked like a rename (CI saw it: a deletion reported as a move). A
    // rename keeps the file's modification time, a new file has its own.
    const { root, journal } = await scanFolder();
    await fsp.writeFile(nodePath.join(root, 'old.txt'), 'aaaa');
    await fsp.utimes(nodePath.join(root, 'old.txt'), 1_600_000_000, 1_600_000_000);
    await scan(root, journal, new IgnoreRules(), { now: later });
    markSynced(journal);
    await fsp.rm(nodePath.join(root, 'old.txt'));
    await fsp.writeFile(nodePath.join(root, 'new.txt'), 'bbbb');
    // The inode reuse made certain: the deleted file's row now names the new file's inode.
    const ino = (await fsp.stat(nodePath.join(root, 'new.txt'), { bigint: true })).ino;
    journal.upsertFile({ ...journal.getFile('old.txt')!, inode: ino });
    const r = await scan(root, journal, new IgnoreRules(), { now: later });
    expect(r.ops.map((o) => (o.kind === 'move' ? `move ${o.from} ${o.to}` : `${o.kind} ${o.path}`))).toEqual([
      'put new.txt',
      'delete old.txt',
    ]);
    expect(r.deletedFiles).toBe(1);
    // The same with a row too fresh to keep its time (racily clean): told apart by content.
    r.commit();
    markSynced(journal);
    await fsp.rm(nodePath.join(root, 'new.txt'));
    await fsp.writeFile(nodePath.join(root, 'fresh.txt'), 'cccc');
    const fresh = (await fsp.stat(nodePath.join(root, 'fresh.txt'), { bigint: true })).ino;
    journal.upsertFile({ ...journal.getFile('new.txt')!, inode: fresh, mtimeNs: SMUDGED_MTIME });
    const again = await scan(root, journal, new IgnoreRules(), { now: later });
    expect(
      again.ops.map((o) => (o.kind === 'move' ? `move ${o.from} ${o.to}` : `${o.kind} ${o.path}`)),
    ).toEqual(['put fresh.txt', 'delete new.txt']);
  });

  it('reports deletions top-most only, with the revision of deleted files', async () => {
    const { root, journal } = await scanFolder();
    await fsp.mkdir(nodePath.join(root, 'd', 'e'), { recursive: true });
    await fsp.writeFile(nodePath.join(root, 'd', 'e', 'f'), 'f');
    await fsp.writeFile(nodePath.join(root, 'g'), 'g');
    await scan(root, journal, new IgnoreRules(), { now: later });
    markSynced(journal);
    await fsp.rm(nodePath.join(root, 'd'), { recursive: true });
    await fsp.rm(nodePath.join(root, 'g'));
    const ops = (await scan(root, journal, new IgnoreRules(), { now: later })).ops;
    expect(ops).toEqual([
      { kind: 'delete', path: 'd' },
      { kind: 'delete', path: 'g', revision: 'rev-g' },
    ]);
    expect(journal.allFiles()).toEqual([]);
  });

  it('skips symlinks, ignored names and case clashes with warnings, and honours .weftignore', async () => {
    const { root, journal } = await scanFolder();
    await fsp.writeFile(nodePath.join(root, 'real.txt'), 'r');
    await fsp.symlink('/etc/passwd', nodePath.join(root, 'link'));
    await fsp.writeFile(nodePath.join(root, '.DS_Store'), 'junk');
    await fsp.writeFile(nodePath.join(root, 'Case.txt'), '1');
    await fsp.writeFile(nodePath.join(root, 'case.txt'), '2');
    await fsp.writeFile(nodePath.join(root, '.weftignore'), 'secret*\n');
    await fsp.writeFile(nodePath.join(root, 'secret.key'), 'k');
    const r = await scan(root, journal, new IgnoreRules(), { now: later, detectCaseClashes: true });
    const paths = r.ops.map((o) => ('path' in o ? o.path : '')).sort();
    expect(paths).toEqual(['.weftignore', 'Case.txt', 'real.txt']);
    // A skipped clash is not a deletion, even when the journal knew that name.
    markSynced(journal);
    journal.upsertFile({
      ...(journal.getFile('Case.txt') as NonNullable<ReturnType<typeof journal.getFile>>),
      path: 'case.txt',
    });
    const again = await scan(root, journal, new IgnoreRules(), { now: later, detectCaseClashes: true });
    expect(again.ops.filter((o) => o.kind === 'delete')).toEqual([]);
    expect(r.warnings.some((w) => w.includes('link') && w.includes('symbolic'))).toBe(true);
    expect(r.warnings.some((w) => w.includes('case.txt') && w.includes('case'))).toBe(true);
  });

  it('limits itself to the scope it is given', async () => {
    const { root, journal } = await scanFolder();
    await fsp.mkdir(nodePath.join(root, 'a'));
    await fsp.mkdir(nodePath.join(root, 'b'));
    await fsp.writeFile(nodePath.join(root, 'a', '1'), '1');
    await fsp.writeFile(nodePath.join(root, 'b', '2'), '2');
    const r = await scan(root, journal, new IgnoreRules(), { now: later, scope: ['a'] });
    expect(r.ops.map((o) => ('path' in o ? o.path : '')).sort()).toEqual(['a', 'a/1']);
  });
});

describe('journal queue', () => {
  it('persists coalesced operations across a reopen', async () => {
    const base = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-j-'));
    const file = nodePath.join(base, 'j.db');
    const j = new Journal(file);
    j.enqueue({ kind: 'put', path: 'a', hash: 'h1', size: 1, created: true });
    j.enqueue({ kind: 'put', path: 'b', hash: 'h2', size: 1, created: false });
    j.enqueue({ kind: 'put', path: 'a', hash: 'h3', size: 2, created: false });
    j.enqueue({ kind: 'delete', path: 'b', revision: 'r9' });
    j.close();
    const k = new Journal(file);
    expect(k.pendingOps().map((q) => q.op)).toEqual([
      { kind: 'put', path: 'a', hash: 'h3', size: 2, created: true },
      { kind: 'delete', path: 'b', revision: 'r9' },
    ]);
    const first = k.pendingOps()[0];
    if (!first) throw new Error('queue empty');
    k.completeOp(first.id, () => k.setMeta('done', 'a'));
    expect(k.pendingOps()).toHaveLength(1);
    expect(k.getMeta('done')).toBe('a');
    k.close();
  });

  it('keeps the table equal to the queue through coalescing, completions and a failed transaction', async () => {
    const base = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-j-'));
    const file = nodePath.join(base, 'j.db');
    const j = new Journal(file);
    j.enqueueMany([
      { kind: 'mkdir', path: 'd', created: true },
      { kind: 'put', path: 'd/x', hash: 'h1', size: 1, created: true },
      { kind: 'move', from: 'm', to: 'n', replaces: false },
    ]);
    const sent = j.pendingOps()[1];
    if (!sent) throw new Error('queue short');
    // R1 drops the put being sent; its completion later removes nothing.
    j.enqueue({ kind: 'put', path: 'd/x', hash: 'h2', size: 2, created: false });
    j.completeOp(sent.id, () => undefined);
    // R7 rewrites the move in place.
    j.enqueue({ kind: 'move', from: 'n', to: 'o', replaces: false });
    // A failed transaction changes neither the table nor the queue.
    expect(() =>
      j.enqueueMany([{ kind: 'delete', path: 'd' }], () => {
        throw new Error('disk full');
      }),
    ).toThrow('disk full');
    const expected = [
      { kind: 'mkdir', path: 'd', created: true },
      { kind: 'move', from: 'm', to: 'o', replaces: false },
      { kind: 'put', path: 'd/x', hash: 'h2', size: 2, created: true },
    ];
    expect(j.pendingOps().map((q) => q.op)).toEqual(expected);
    const ids = j.pendingOps().map((q) => q.id);
    j.close();
    const k = new Journal(file);
    expect(k.pendingOps().map((q) => q.op)).toEqual(expected);
    expect(k.pendingOps().map((q) => q.id)).toEqual(ids);
    // A new operation never takes the position of one completed before the reopen.
    k.enqueue({ kind: 'mkdir', path: 'e', created: true });
    expect(k.pendingOps().at(-1)?.id).toBeGreaterThan(sent.id + 1);
    k.close();
  });
});

describe('journal index pages', () => {
  it('reads rows at or below a folder a page at a time, the same rows as one read', async () => {
    const { journal } = await scanFolder();
    const paths = ['a', 'a!b', 'a/x', 'a/y/z', 'a0', 'b', ...Array.from({ length: 25 }, (_, i) => `a/f${i}`)];
    for (const p of paths)
      journal.upsertFile(fileRow(p, { kind: p === 'a' || p === 'a/y' ? 'dir' : 'file' }));
    for (const dir of ['', 'a', 'a/y', 'nothing']) {
      const paged: string[] = [];
      for await (const r of journal.filesUnderPaged(dir, 4)) paged.push(r.path);
      expect(paged, dir).toEqual(journal.filesUnder(dir).map((r) => r.path));
    }
    expect(journal.filesUnder('a')).toHaveLength(28); // a, a/x, a/y/z and 25 files — not a!b or a0
  });
});

describe('queueing a large scan', () => {
  const BATCH = 40; // ENQUEUE_BATCH in production; small here so the files stay few
  /** 2.5 batches of files in two folders (one mkdir each). */
  async function manyFiles(root: string): Promise<number> {
    const n = Math.floor(BATCH * 2.5);
    for (const d of ['p', 'q']) await fsp.mkdir(nodePath.join(root, d));
    for (let i = 0; i < n; i++) await fsp.writeFile(nodePath.join(root, i % 2 ? 'p' : 'q', `f${i}`), `${i}`);
    return n;
  }

  it('queues in batches, each with its index rows, and lets the event loop run between them', async () => {
    const { root, journal } = await scanFolder();
    const n = await manyFiles(root);
    const r = await rawScan(root, journal, new IgnoreRules(), { now: later });
    expect(r.ops).toHaveLength(n + 2);
    let turns = 0;
    const tick = (): void => {
      turns += 1;
      if (!done) setImmediate(tick);
    };
    let done = false;
    setImmediate(tick);
    const out = await enqueueScan(journal, r, { batch: BATCH });
    done = true;
    expect(out).toEqual({ queued: n + 2, complete: true, eliminated: 0 });
    expect(journal.pendingOps().map((q) => q.op)).toEqual(r.ops);
    expect(journal.allFiles()).toHaveLength(n + 2);
    // Three batches: the loop ran (at least) between them.
    expect(turns).toBeGreaterThanOrEqual(2);
  });

  it('stops between batches with every queued change and its index row together', async () => {
    const { root, journal } = await scanFolder();
    const n = await manyFiles(root);
    const r = await rawScan(root, journal, new IgnoreRules(), { now: later });
    let batches = 0;
    const out = await enqueueScan(journal, r, { shouldStop: () => ++batches >= 1, batch: BATCH });
    expect(out).toEqual({ queued: BATCH, complete: false, eliminated: 0 });
    const queued = new Set(journal.pendingOps().map((q) => (q.op.kind === 'move' ? q.op.from : q.op.path)));
    const indexed = new Set(journal.allFiles().map((f) => f.path));
    // No change recorded in the index without the operation that sends it.
    for (const p of indexed) expect(queued.has(p), p).toBe(true);
    // The next scan finds the rest; the queue ends as one uninterrupted scan's would.
    const again = await rawScan(root, journal, new IgnoreRules(), { now: later });
    expect(again.ops).toHaveLength(n + 2 - BATCH);
    await enqueueScan(journal, again, { batch: BATCH });
    expect(new Set(journal.pendingOps().map((q) => JSON.stringify(q.op)))).toEqual(
      new Set(r.ops.map((o) => JSON.stringify(o))),
    );
  });

  it('a scan asked to stop throws and writes nothing', async () => {
    const { root, journal } = await scanFolder();
    await manyFiles(root);
    let checks = 0;
    await expect(
      rawScan(root, journal, new IgnoreRules(), { now: later, shouldStop: () => ++checks > 30 }),
    ).rejects.toBeInstanceOf(ScanStopped);
    expect(journal.allFiles()).toEqual([]);
    expect(journal.pendingOps()).toEqual([]);
  });
});

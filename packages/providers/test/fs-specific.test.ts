import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import { syncBuiltinESMExports } from 'node:module';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { FS_STATE_DIR, FsProvider } from '../src/adapters/fs.ts';
import { collect } from '../src/body.ts';
import { InvalidPathError } from '../src/errors.ts';

async function tempRoot(): Promise<string> {
  return fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-fs-x-'));
}

describe('fs provider specifics', () => {
  it('never follows a symlink out of the root', async () => {
    const root = await tempRoot();
    const outside = await tempRoot();
    await fsp.symlink(outside, nodePath.join(root, 'link'));
    const p = await FsProvider.open({ root });
    await expect(p.write('link/evil.txt', Buffer.from('x'))).rejects.toBeInstanceOf(InvalidPathError);
    await expect(p.write('link/deeper/evil.txt', Buffer.from('x'))).rejects.toBeInstanceOf(InvalidPathError);
    await expect(p.mkdir('link/sub')).rejects.toBeInstanceOf(InvalidPathError);
    expect(await fsp.readdir(outside)).toEqual([]);
    // Symlinks are not listed (not synced) and cannot be read through.
    const listed = [];
    for await (const e of p.list('', { recursive: true })) listed.push(e.path);
    expect(listed).toEqual([]);
    await fsp.writeFile(nodePath.join(outside, 'secret'), 'secret');
    await fsp.symlink(nodePath.join(outside, 'secret'), nodePath.join(root, 'secret-link'));
    await expect(p.read('secret-link')).rejects.toThrow();
  });

  it('reads a small file into buffers the size of the file, a large one in chunks of at most 1 MiB', async () => {
    const p = await FsProvider.open({ root: await tempRoot() });
    const small = Buffer.alloc(3000, 7);
    const large = Buffer.alloc(3 * 1024 * 1024 + 5, 9);
    await p.write('small.txt', small);
    await p.write('large.bin', large);
    // The buffers a read allocates (a file read stream allocates a whole chunk per read, then
    // copies what it got): 1 MiB per small file made the packer's flush of 10,000 files spend
    // seconds in the garbage collector (issue #16).
    const read = async (path: string, o?: { offset: number; length: number }) => {
      const spy = vi.spyOn(Buffer, 'allocUnsafeSlow');
      try {
        const bytes = await collect(await p.read(path, o));
        return { bytes, biggest: Math.max(0, ...spy.mock.calls.map(([n]) => n)) };
      } finally {
        spy.mockRestore();
      }
    };
    const s = await read('small.txt');
    expect(s.bytes.equals(small)).toBe(true);
    expect(s.biggest).toBeLessThanOrEqual(16 * 1024);
    const l = await read('large.bin');
    expect(l.bytes.equals(large)).toBe(true);
    expect(l.biggest).toBeLessThanOrEqual(1024 * 1024 + 1);
    const r = await read('large.bin', { offset: 1000, length: 2000 });
    expect(r.bytes.equals(large.subarray(1000, 3000))).toBe(true);
    expect(r.biggest).toBeLessThanOrEqual(16 * 1024);
  });

  it('reserves its state folder', async () => {
    const p = await FsProvider.open({ root: await tempRoot() });
    await expect(p.write(`${FS_STATE_DIR}/changes.jsonl`, Buffer.from('x'))).rejects.toBeInstanceOf(
      InvalidPathError,
    );
    await expect(p.stat(FS_STATE_DIR)).rejects.toBeInstanceOf(InvalidPathError);
  });

  it('keeps its change journal and hashes across a reopen, and clears crash leftovers', async () => {
    const root = await tempRoot();
    const p = await FsProvider.open({ root });
    const cursor = await p.latestCursor();
    const written = await p.write('kept.txt', Buffer.from('journal'));
    await p.close();
    // A temp file from a write that crashed before its rename.
    await fsp.writeFile(nodePath.join(root, FS_STATE_DIR, 'tmp', 'deadbeef'), 'partial');
    const q = await FsProvider.open({ root });
    expect(await fsp.readdir(nodePath.join(root, FS_STATE_DIR, 'tmp'))).toEqual([]);
    const page = await q.changes(cursor);
    expect(page.changes.map((c) => c.path)).toEqual(['kept.txt']);
    const stat = await q.stat('kept.txt');
    expect(stat.revision).toBe(written.revision);
    expect(stat.hash?.value).toBe(written.hash?.value);
    expect((await collect(await q.read('kept.txt'))).toString()).toBe('journal');
  });

  it("appends a batch's changes to its journal in few writes, in order, across compactions", async () => {
    const root = await tempRoot();
    const p = await FsProvider.open({ root, maxJournal: 40 });
    // Counted on node:fs's own object, copied into the ES module's bindings (syncBuiltinESMExports).
    const appends = vi.spyOn(fs.promises, 'appendFile');
    syncBuiltinESMExports();
    const names = Array.from({ length: 100 }, (_, i) => `d/f${i}.txt`);
    const out = await p.writeMany(names.map((path, i) => ({ path, bytes: Buffer.from(`v${i}`) })));
    expect(out.every((e) => !(e instanceof Error))).toBe(true);
    await p.write('last.txt', Buffer.from('z'));
    await p.close();
    // One append per turn of the writes, not one per file (100 files recorded).
    expect(appends.mock.calls.length).toBeLessThan(10);
    appends.mockRestore();
    syncBuiltinESMExports();
    // Reopened: the journal holds the newest changes (compacted to at most 40), oldest first.
    const q = await FsProvider.open({ root, maxJournal: 40 });
    const file = await fsp.readFile(nodePath.join(root, FS_STATE_DIR, 'changes.jsonl'), 'utf8');
    const seqs = file
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => (JSON.parse(l) as { s: number }).s);
    // 100 files, their folder and last.txt: 102 changes, the newest kept, consecutive.
    const last = seqs.at(-1)!;
    expect(last).toBe(102);
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => last + 1 - seqs.length + i));
    expect(seqs.length).toBeLessThanOrEqual(40);
    const cursor = (await q.latestCursor()).replace(/\d+$/, String(last - 5));
    const page = await q.changes(cursor);
    expect(page.changes.map((c) => c.path)).toEqual([...names.slice(-4), 'last.txt']);
  });

  it('writes no journal without a change feed (the proxy keeps its own), and says so', async () => {
    const root = await tempRoot();
    // A journal left from when the feed was on goes at open: nothing would keep it true.
    const before = await FsProvider.open({ root });
    await before.write('old.txt', Buffer.from('o'));
    await before.close();
    const journal = nodePath.join(root, FS_STATE_DIR, 'changes.jsonl');
    expect(fs.existsSync(journal)).toBe(true);
    const p = await FsProvider.open({ root, changeFeed: false, batchLog: true });
    expect(fs.existsSync(journal)).toBe(false);
    expect(p.features.changeFeed).toBe(false);
    const appends = vi.spyOn(fs.promises, 'appendFile');
    syncBuiltinESMExports();
    try {
      const out = await p.writeMany(
        Array.from({ length: 50 }, (_, i) => ({ path: `d${i % 5}/f${i}.txt`, bytes: Buffer.from(`v${i}`) })),
      );
      expect(out.every((e) => !(e instanceof Error))).toBe(true);
      await p.write('one.txt', Buffer.from('1'));
      await p.mkdir('e/f');
      await p.move('one.txt', 'e/one.txt');
      await p.remove('e/one.txt');
      await p.close();
      expect(appends).not.toHaveBeenCalled();
    } finally {
      appends.mockRestore();
      syncBuiltinESMExports();
    }
    expect(fs.existsSync(journal)).toBe(false);
    await expect(p.changes('fs1:0')).rejects.toMatchObject({ code: 'NotSupported' });
    await expect(p.latestCursor()).rejects.toMatchObject({ code: 'NotSupported' });
    const q = await FsProvider.open({ root, changeFeed: false });
    expect((await collect(await q.read('d4/f49.txt'))).toString()).toBe('v49');
    await q.close();
  });

  it("looks at each folder of a batch's paths once", async () => {
    const root = await tempRoot();
    const p = await FsProvider.open({ root, changeFeed: false, batchLog: true });
    await p.mkdir('a/b/c');
    const lstats = vi.spyOn(fs.promises, 'lstat');
    syncBuiltinESMExports();
    try {
      const out = await p.writeMany(
        Array.from({ length: 40 }, (_, i) => ({
          path: `a/b/c/d${i % 8}/f${i}.txt`,
          bytes: Buffer.from(`v${i}`),
        })),
      );
      expect(out.every((e) => !(e instanceof Error))).toBe(true);
      // a, a/b, a/b/c and the 8 new folders: 11, where each of the 8 parents' chains from the
      // root was looked at in full before (32). The new files are stat'd on their descriptors.
      const seen = lstats.mock.calls.map((c) => nodePath.relative(root, String(c[0])));
      expect(seen.sort()).toEqual([
        'a',
        'a/b',
        'a/b/c',
        ...Array.from({ length: 8 }, (_, i) => `a/b/c/d${i}`),
      ]);
    } finally {
      lstats.mockRestore();
      syncBuiltinESMExports();
    }
    expect((await collect(await p.read('a/b/c/d7/f39.txt'))).toString()).toBe('v39');
    await p.close();
  });

  it('keeps a bounded number of hashes in memory, and hashes again what it let go', async () => {
    const root = await tempRoot();
    const p = await FsProvider.open({ root, hashCacheEntries: 8, changeFeed: false });
    const cache = (p as unknown as { hashCache: { size: number } }).hashCache;
    const out = await p.writeMany(
      Array.from({ length: 40 }, (_, i) => ({ path: `h/f${i}.txt`, bytes: Buffer.from(`content ${i}`) })),
    );
    expect(out.every((e) => !(e instanceof Error))).toBe(true);
    // One entry per file written grew the proxy's heap without bound (issue #16).
    expect(cache.size).toBe(8);
    const sha = (s: string): string => createHash('sha256').update(s).digest('hex');
    expect((await p.stat('h/f0.txt')).hash?.value).toBe(sha('content 0')); // evicted: hashed again
    expect((await p.stat('h/f39.txt')).hash?.value).toBe(sha('content 39')); // cached
    expect(cache.size).toBe(8);
    await p.close();
  });

  it('notices content changed behind its back (revision and hash follow the disk)', async () => {
    const root = await tempRoot();
    const p = await FsProvider.open({ root });
    const before = await p.write('edited.txt', Buffer.from('one'));
    await new Promise((r) => setTimeout(r, 5));
    await fsp.writeFile(nodePath.join(root, 'edited.txt'), 'two!');
    const after = await p.stat('edited.txt');
    expect(after.revision).not.toBe(before.revision);
    expect(after.hash?.value).not.toBe(before.hash?.value);
    expect(after.size).toBe(4);
  });

  it('records the modification time it is given', async () => {
    const p = await FsProvider.open({ root: await tempRoot() });
    const when = Date.UTC(2020, 1, 2, 3, 4, 5);
    const e = await p.write('timed.txt', Buffer.from('t'), { modifiedMs: when });
    expect(e.modifiedMs).toBe(when);
  });

  it('declares the case sensitivity it detected', async () => {
    const p = await FsProvider.open({ root: await tempRoot() });
    // Linux tmpfs/ext4 here: case-sensitive; the probe must have found that.
    expect(p.features.caseSensitive).toBe(true);
  });

  // With the write-ahead log (batchLog), new files are written in place, others through a temp file.
  it.each([false, true])(
    'writeMany writes each file atomically, reports each failure separately, and never follows a symlink out (batchLog %s)',
    async (batchLog) => {
      const root = await tempRoot();
      const outside = await tempRoot();
      const p = await FsProvider.open({ root, batchLog });
      await p.write('a/old.txt', Buffer.from('old'));
      await p.mkdir('a/folder');
      await fsp.symlink(outside, nodePath.join(root, 'link'));
      const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);
      const out = await p.writeMany(
        [
          { path: 'a/old.txt', bytes: bytes('new'), modifiedMs: 1_700_000_000_000 },
          { path: 'a/b/c/new.txt', bytes: bytes('fresh') },
          { path: 'a/folder', bytes: bytes('x') },
          { path: 'link/evil.txt', bytes: bytes('x') },
          { path: 'a/bad-hash.txt', bytes: bytes('x'), sha256: '0'.repeat(64) },
          { path: 'a/empty.txt', bytes: new Uint8Array(0) },
        ],
        { concurrency: 3 },
      );
      expect(out.map((r) => (r instanceof Error ? r.name : r.path))).toEqual([
        'a/old.txt',
        'a/b/c/new.txt',
        'AlreadyExistsError',
        'InvalidPathError',
        'InvalidArgumentError',
        'a/empty.txt',
      ]);
      expect(Buffer.from(await collect(await p.read('a/old.txt'))).toString()).toBe('new');
      expect(Buffer.from(await collect(await p.read('a/b/c/new.txt'))).toString()).toBe('fresh');
      const st = await p.stat('a/old.txt');
      expect(st.modifiedMs).toBe(1_700_000_000_000);
      expect(st.revision).toBe((out[0] as { revision: string }).revision);
      expect(st.hash?.value).toBe(createHash('sha256').update('new').digest('hex'));
      expect((await p.stat('a/b/c/new.txt')).revision).toBe((out[1] as { revision: string }).revision);
      expect(await fsp.readdir(outside)).toEqual([]);
      expect((await p.stat('a/bad-hash.txt').catch((e: unknown) => e)) instanceof Error).toBe(true);
      // No temp file is left behind.
      expect(await fsp.readdir(nodePath.join(root, FS_STATE_DIR, 'tmp'))).toEqual([]);
      await p.close();
    },
  );
});

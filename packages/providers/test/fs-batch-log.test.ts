// The batch write's write-ahead log (fs/batch-log.ts, issue #16): one sync per batch instead
// of one per file, the files synced together at a checkpoint, and a replay at open after a
// crash. A crash is played by leaving the provider unclosed and undoing on disk what the page
// cache would have lost (files removed or cut), then opening the folder again.
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { FS_STATE_DIR, FsProvider } from '../src/adapters/fs.ts';
import { decodeRecords } from '../src/adapters/fs/batch-log.ts';
import { countSyncs } from '../src/testing/count-syncs.ts';

async function tempRoot(): Promise<string> {
  return fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-fs-log-'));
}

const logDir = (root: string): string => nodePath.join(root, FS_STATE_DIR, 'batch-log');
const files = (n: number, tag: string): { path: string; bytes: Buffer; modifiedMs: number }[] =>
  Array.from({ length: n }, (_, i) => ({
    path: `d${i % 4}/f${i}.txt`,
    bytes: Buffer.from(`${tag}-${i}-`.repeat(1 + (i % 7))),
    modifiedMs: 1_700_000_000_000 + i * 1000,
  }));

describe('fs batch write-ahead log', () => {
  it('syncs a batch once instead of once per file and folder', async () => {
    const root = await tempRoot();
    const plain = await FsProvider.open({ root: nodePath.join(root, 'plain') });
    const logged = await FsProvider.open({
      root: nodePath.join(root, 'logged'),
      batchLog: { checkpointMs: 60_000 },
    });
    const batch = files(200, 'a');
    const without = await countSyncs(async () => {
      expect((await plain.writeMany(batch)).filter((r) => r instanceof Error)).toEqual([]);
    });
    const first = await countSyncs(async () => {
      expect((await logged.writeMany(batch)).filter((r) => r instanceof Error)).toEqual([]);
    });
    const second = await countSyncs(async () => {
      expect((await logged.writeMany(files(200, 'b'))).filter((r) => r instanceof Error)).toEqual([]);
    });
    // Without the log: an fsync per file and per folder (200 + 4).
    expect(without).toBe(204);
    // With it: the new segment's folder and the record (first batch), then the record alone.
    expect(first).toBe(2);
    expect(second).toBe(1);
    expect(logged.batchLogStats).toMatchObject({ appends: 2, checkpoints: 0 });
    for (const f of files(200, 'b'))
      expect(await fsp.readFile(nodePath.join(root, 'logged', f.path))).toEqual(f.bytes);
    // Closing checkpoints: the files synced together, the segment gone.
    await logged.close();
    expect(logged.batchLogStats?.checkpoints).toBe(1);
    expect(await fsp.readdir(logDir(nodePath.join(root, 'logged')))).toEqual([]);
    await plain.close();
  });

  it('replays at open what a crash lost, in log order, and then deletes the log', async () => {
    const root = await tempRoot();
    const p = await FsProvider.open({ root, batchLog: { checkpointMs: 60_000 } });
    const a = files(50, 'a');
    const b = files(50, 'b').slice(0, 20); // the same paths again: the newer record wins
    await p.writeMany(a);
    await p.writeMany(b);
    // The crash: files the page cache held are gone or cut, a folder vanished with them.
    await fsp.rm(nodePath.join(root, 'd1'), { recursive: true });
    const cut = a.slice(30, 40).filter((f) => !f.path.startsWith('d1/'));
    for (const f of cut) await fsp.truncate(nodePath.join(root, f.path), 1);
    const q = await FsProvider.open({ root, batchLog: { checkpointMs: 60_000 } });
    // d1 held 13 of the 50 files; each written once, at its last logged content.
    expect(cut.length).toBe(8);
    expect(q.batchLogStats?.replayed).toBe(13 + 8);
    const want = new Map<string, { bytes: Buffer; modifiedMs: number }>();
    for (const f of [...a, ...b]) want.set(f.path, f);
    for (const [path, f] of want) {
      expect(await fsp.readFile(nodePath.join(root, path))).toEqual(f.bytes);
      expect((await q.stat(path)).modifiedMs).toBe(f.modifiedMs);
    }
    expect(await fsp.readdir(logDir(root))).toEqual([]);
    await q.close();
  });

  it('checkpoints before another mutation of a logged path, so a replay never undoes it', async () => {
    const root = await tempRoot();
    const p = await FsProvider.open({ root, batchLog: { checkpointMs: 60_000 } });
    await p.writeMany([
      { path: 'x.txt', bytes: Buffer.from('v1') },
      { path: 'gone/y.txt', bytes: Buffer.from('y') },
      { path: 'moved/z.txt', bytes: Buffer.from('z') },
    ]);
    // Not a logged path: no checkpoint.
    await p.write('other.txt', Buffer.from('o'));
    expect(p.batchLogStats?.checkpoints).toBe(0);
    await p.write('x.txt', Buffer.from('v2'));
    expect(p.batchLogStats?.checkpoints).toBe(1);
    await p.writeMany([{ path: 'gone/y2.txt', bytes: Buffer.from('y2') }]);
    await p.remove('gone'); // a folder above a logged file
    await p.writeMany([{ path: 'moved/w.txt', bytes: Buffer.from('w') }]);
    await p.move('moved', 'there');
    expect(p.batchLogStats?.checkpoints).toBe(3);
    // Crash (never closed), then open: the single write, the removal and the move stand.
    const q = await FsProvider.open({ root, batchLog: true });
    expect(q.batchLogStats?.replayed).toBe(0);
    expect(await fsp.readFile(nodePath.join(root, 'x.txt'), 'utf8')).toBe('v2');
    await expect(fsp.stat(nodePath.join(root, 'gone'))).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(fsp.stat(nodePath.join(root, 'moved'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await fsp.readFile(nodePath.join(root, 'there', 'w.txt'), 'utf8')).toBe('w');
    await q.close();
  });

  it('counts a folder several levels above a logged file as logged, and a name that only starts like one not', async () => {
    const root = await tempRoot();
    const p = await FsProvider.open({ root, batchLog: { checkpointMs: 60_000 } });
    await p.writeMany([{ path: 'deep/a/b/c/d.txt', bytes: Buffer.from('d') }]);
    // Names that share a beginning with a logged folder, not below it: no checkpoint.
    await p.write('deep/a/bx', Buffer.from('x'));
    await p.write('deep/a/b/c/d.txt.bak', Buffer.from('x'));
    expect(p.batchLogStats?.checkpoints).toBe(0);
    await p.remove('deep/a'); // three levels above the logged file
    expect(p.batchLogStats?.checkpoints).toBe(1);
    const q = await FsProvider.open({ root, batchLog: true });
    expect(q.batchLogStats?.replayed).toBe(0);
    await expect(fsp.stat(nodePath.join(root, 'deep', 'a'))).rejects.toMatchObject({ code: 'ENOENT' });
    await q.close();
  });

  it('writes a path given twice in one batch in item order (the last one stays)', async () => {
    const root = await tempRoot();
    const p = await FsProvider.open({ root, batchLog: { checkpointMs: 60_000 } });
    const out = await p.writeMany([
      { path: 'twice.txt', bytes: Buffer.from('first') },
      { path: 'other.txt', bytes: Buffer.from('o') },
      { path: 'twice.txt', bytes: Buffer.from('second') },
    ]);
    expect(out.filter((r) => r instanceof Error)).toEqual([]);
    expect(await fsp.readFile(nodePath.join(root, 'twice.txt'), 'utf8')).toBe('second');
    expect((await p.stat('twice.txt')).revision).toBe((out[2] as { revision: string }).revision);
    await p.close();
  });

  it('checkpoints by itself after its delay', async () => {
    const root = await tempRoot();
    const p = await FsProvider.open({ root, batchLog: { checkpointMs: 10 } });
    await p.writeMany(files(10, 'a'));
    await vi.waitFor(() => expect(p.batchLogStats?.checkpoints).toBe(1), { timeout: 10_000 });
    expect(await fsp.readdir(logDir(root))).toEqual([]);
    await p.close();
  });

  it('ignores a record cut short (never acknowledged) and the rest of its segment', async () => {
    const root = await tempRoot();
    const p = await FsProvider.open({ root, batchLog: { checkpointMs: 60_000 } });
    await p.writeMany([{ path: 'one.txt', bytes: Buffer.from('one') }]);
    await p.writeMany([{ path: 'two.txt', bytes: Buffer.from('two') }]);
    const [seg] = await fsp.readdir(logDir(root));
    const file = nodePath.join(logDir(root), seg!);
    const whole = await fsp.readFile(file);
    expect(decodeRecords(whole).map((r) => r.map((i) => i.path))).toEqual([['one.txt'], ['two.txt']]);
    await fsp.truncate(file, whole.byteLength - 3);
    await fsp.rm(nodePath.join(root, 'one.txt'));
    await fsp.rm(nodePath.join(root, 'two.txt'));
    const q = await FsProvider.open({ root, batchLog: true });
    expect(q.batchLogStats?.replayed).toBe(1);
    expect(await fsp.readFile(nodePath.join(root, 'one.txt'), 'utf8')).toBe('one');
    await expect(fsp.stat(nodePath.join(root, 'two.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
    await q.close();
  });
});

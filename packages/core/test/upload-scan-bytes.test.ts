/**
 * A bundle upload sends the bytes its scan read of a small file instead of reading the file
 * again (issue #16: every small file was opened and read twice), but only when a stat of the
 * path shows the very file the scan read, unchanged since before the scan began
 * (scan-bytes.ts, upload-read.ts sameAsScanned): a file rewritten since (its size and mtime put
 * back: only the ctime tells), or replaced by a symbolic link to a file outside the folder, is
 * read from disk, confined to the folder, as before. And the cache stays within its bytes.
 *
 * The files must be older than the upload's timestamp margin (RACY_MS, 2 s) when the scan
 * begins, or nothing is taken from the scan: the test waits that long once.
 */
import type { BigIntStats } from 'node:fs';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openedConfined } from '../src/confined-open.ts';
import { STALE_MS, ScanBytes } from '../src/scan-bytes.ts';
import type { SyncContext } from '../src/sync/context.ts';
import { RACY_MS } from '../src/sync/propagate/upload-read.ts';
import { FakeCloud, sha256 } from './support/fake-cloud.ts';

let cloud: FakeCloud | undefined;
const cleanup: string[] = [];
afterEach(async () => {
  await cloud?.close();
  cloud = undefined;
  for (const d of cleanup.splice(0)) await fsp.rm(d, { recursive: true, force: true });
});

describe("the scan's bytes in a bundle upload", () => {
  it('are sent for files unchanged since the scan; a file changed or swapped since is read again', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop');
    await d.engine.waitIdle();
    const ctx = (d.engine as unknown as { ctx: SyncContext }).ctx;
    const files = new Map(
      Array.from({ length: 12 }, (_, i) => [`docs/f${i}.txt`, `content of file ${i}`.padEnd(64, '.')]),
    );
    const mtime = Math.floor(Date.now() / 1000) - 60;
    for (const [p, c] of files) {
      await d.write(p, c);
      await fsp.utimes(d.abs(p), mtime, mtime);
    }
    const outside = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-outside-'));
    cleanup.push(outside);
    await fsp.writeFile(nodePath.join(outside, 'secret.txt'), 'a file outside the synced folder');
    await new Promise((resolve) => setTimeout(resolve, RACY_MS + 200));

    // Scanned and queued while offline: nothing leaves yet; the scan kept every file's bytes.
    d.offline = true;
    await d.sync().catch(() => undefined);
    expect(d.engine.journal.pendingOps().filter((q) => q.op.kind === 'put')).toHaveLength(files.size);
    expect(ctx.scanBytes.size).toBe(files.size);

    // Rewritten after the scan, same size, its mtime put back: only its ctime tells.
    const edited = 'docs/f3.txt';
    const newContent = 'REWRITTEN after the scan'.padEnd(64, '!');
    const fh = await fsp.open(d.abs(edited), 'r+');
    await fh.write(newContent, 0);
    await fh.close();
    await fsp.utimes(d.abs(edited), mtime, mtime);
    // Replaced by a symbolic link to a file outside the folder once the upload is about to
    // send it (after the pass's own scan, which would skip the link and cancel the put).
    const swapped = 'docs/f7.txt';
    const peek = ctx.scanBytes.peek.bind(ctx.scanBytes);
    ctx.scanBytes.peek = (p, hash) => {
      if (p === swapped) {
        fs.rmSync(d.abs(swapped));
        fs.symlinkSync(nodePath.join(outside, 'secret.txt'), d.abs(swapped));
      }
      return peek(p, hash);
    };

    const opened = openedConfined(ctx.paths);
    d.offline = false;
    await d.sync();
    const server = cloud.serverTree();
    for (const [p, c] of files) {
      if (p === swapped) continue;
      expect(server.get(p)).toBe(sha256(p === edited ? newContent : c));
    }
    // Neither the link's target nor the bytes the scan read before the swap: not sent (the
    // next scan skips the link with a warning).
    expect(server.get(swapped)).toBeUndefined();
    // Ten sent from the scan's bytes; only the rewritten one was opened again (the link's open
    // is refused: O_NOFOLLOW), and the rewritten one hashed again.
    expect([ctx.scanBytes.met, ctx.scanBytes.taken]).toEqual([files.size, files.size - 2]);
    expect(openedConfined(ctx.paths) - opened).toBe(1);
    expect(ctx.scanHashes.trusted).toBe(files.size - 2);
    expect(ctx.scanHashes.hashed).toBe(1);
    expect(ctx.scanBytes.size).toBe(0);
    await d.sync();
    expect(cloud.serverTree().get(swapped)).toBeUndefined();
    expect(cloud.serverTree().size).toBe(files.size); // 11 files and the folder docs/
  });

  it('are let go, not taken, once no scan hash is trusted', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop');
    await d.engine.waitIdle();
    const ctx = (d.engine as unknown as { ctx: SyncContext }).ctx;
    for (let i = 0; i < 5; i++) await d.write(`f${i}.txt`, `file ${i}`);
    d.offline = true;
    await d.sync().catch(() => undefined);
    expect(ctx.scanBytes.size).toBe(5);
    ctx.scanHashes.distrust(); // as after a failed bundle holding files sent under it
    d.offline = false;
    await d.sync();
    for (let i = 0; i < 5; i++) expect(cloud.serverTree().get(`f${i}.txt`)).toBe(sha256(`file ${i}`));
    expect([ctx.scanBytes.taken, ctx.scanBytes.size]).toEqual([0, 0]);
  });

  it('keeps at most its bytes, what the upload meets next first, and hands out copies', () => {
    const stat = {} as BigIntStats;
    let now = 0;
    const bytes = new ScanBytes(64, 32, () => now); // two slabs of 32 bytes
    const scratch = Buffer.alloc(16);
    const keep = (i: number): void => {
      scratch.fill(i);
      bytes.keep(`f${i}`, `/abs/f${i}`, `h${i}`, scratch, stat);
    };
    const alloc = (n: number): Buffer => Buffer.alloc(n);
    const take = (i: number): Buffer | undefined => {
      const kept = bytes.peek(`f${i}`, `h${i}`);
      return kept && bytes.take(kept, alloc);
    };
    for (let i = 0; i < 4; i++) keep(i); // both slabs full: [f0 f1] [f2 f3]
    // No room: the oldest slab still holds what the upload takes next.
    keep(4);
    expect(take(4)).toBeUndefined();
    const f0 = take(0);
    expect(f0).toEqual(Buffer.alloc(16, 0));
    keep(5);
    expect(bytes.full).toBe(2);
    // Its last file taken, the first slab is written over; the copy handed out is the caller's.
    expect(take(1)).toEqual(Buffer.alloc(16, 1));
    keep(5);
    keep(6); // [f5 f6] [f2 f3]
    expect(f0).toEqual(Buffer.alloc(16, 0));
    keep(7);
    expect(bytes.full).toBe(3);
    // The upload took from a later slab: what it passed (f2, f3) is not coming, and goes.
    expect(take(5)).toEqual(Buffer.alloc(16, 5));
    keep(7); // [f5 f6] [f7]
    expect(bytes.forgotten).toBe(2);
    expect(take(2)).toBeUndefined();
    // A full slab left untaken for STALE_MS is written over all the same.
    keep(8);
    keep(9);
    expect(bytes.full).toBe(4);
    now += STALE_MS;
    keep(9);
    expect(bytes.forgotten).toBe(3); // f6
    expect(take(6)).toBeUndefined();
    expect(take(9)).toEqual(Buffer.alloc(16, 9));
    // Another hash (the put is not of this read) hands nothing out, and forgets the entry.
    expect(bytes.peek('f7', 'other')).toBeUndefined();
    expect(take(7)).toBeUndefined();
    keep(10);
    expect(bytes.size).toBe(2);
    bytes.drop('f10');
    expect(take(10)).toBeUndefined();
    // Too large for a slab: not kept, and an older read of the path is forgotten.
    expect(bytes.size).toBe(1); // f8
    bytes.keep('f8', '/abs/f8', 'h8b', Buffer.alloc(33), stat);
    expect(take(8)).toBeUndefined();
    expect(bytes.size).toBe(0);
  });
});

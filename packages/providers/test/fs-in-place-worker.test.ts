// A logged batch's in-place writes run in worker threads (fs/in-place-worker.ts, issue #16):
// open, write, futimes, fstat and close of each new file were five thread-pool round trips on
// the event loop, ~95 µs of the proxy's one thread per small file. The test counts the
// file-system requests the event loop itself makes for a batch (async_hooks: FSREQCALLBACK,
// FSREQPROMISE) — it fails without the workers (5 or more per file) — and checks that what
// lands on disk, and what the provider answers, is what the thread-pool path gave.
import { createHook } from 'node:async_hooks';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { describe, expect, it } from 'vitest';
import { collect } from '../src/body.ts';
import { FsProvider } from '../src/adapters/fs.ts';
import { AlreadyExistsError } from '../src/errors.ts';
import { InPlacePool, writeInPlaceMany } from '../src/adapters/fs/in-place-worker.ts';

const N = 200;
const MTIME = 1_650_000_000_000;

async function fsRequestsDuring(run: () => Promise<void>): Promise<number> {
  let n = 0;
  const hook = createHook({
    init(_id, type) {
      if (type === 'FSREQCALLBACK' || type === 'FSREQPROMISE') n++;
    },
  });
  hook.enable();
  try {
    await run();
  } finally {
    hook.disable();
  }
  return n;
}

describe('fs tier: in-place writes in worker threads', () => {
  it('writes a batch with few file-system requests on the event loop, the same files and entries', async () => {
    const root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-fs-inplace-'));
    const p = await FsProvider.open({ root, batchLog: { checkpointMs: 60_000 } });
    try {
      await p.mkdir('d');
      await p.write('d/old', Buffer.from('old'));
      await p.mkdir('d/folder');
      const items = Array.from({ length: N }, (_, i) => ({
        path: `d/f${i}`,
        bytes: Buffer.from(`file ${i} `.repeat(1 + (i % 50))),
        modifiedMs: MTIME + i * 1000,
      }));
      // An existing file (overwritten through a temp file) and a folder in the way.
      items.push({ path: 'd/old', bytes: Buffer.from('new'), modifiedMs: MTIME });
      items.push({ path: 'd/folder', bytes: Buffer.from('x'), modifiedMs: MTIME });
      let out: Awaited<ReturnType<FsProvider['writeMany']>> = [];
      const requests = await fsRequestsDuring(async () => {
        out = await p.writeMany(items, { concurrency: 8 });
      });
      // Without the workers: 5 per new file (open, write, futimes, fstat, close) and more.
      expect(requests).toBeLessThan(N);
      expect(out.at(-1)).toBeInstanceOf(AlreadyExistsError);
      for (const [i, item] of items.slice(0, -1).entries()) {
        const e = out[i]!;
        if (e instanceof Error) throw e;
        const st = await fsp.lstat(nodePath.join(root, item.path));
        expect(st.mtimeMs).toBe(item.modifiedMs);
        expect(await fsp.readFile(nodePath.join(root, item.path))).toEqual(item.bytes);
        const now = await p.stat(item.path);
        expect(now.revision).toBe(e.revision);
        expect(now.size).toBe(item.bytes.byteLength);
        expect(Buffer.from(await collect(await p.read(item.path)))).toEqual(item.bytes);
      }
    } finally {
      await p.close();
      await fsp.rm(root, { recursive: true, force: true });
    }
  });

  it('answers per file: written, something there, or the error met (nothing left of a failed file)', async () => {
    const root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-fs-inplace-'));
    try {
      fs.writeFileSync(nodePath.join(root, 'there'), 'x');
      const r = await writeInPlaceMany([
        { abs: nodePath.join(root, 'new'), bytes: Buffer.from('hello'), modifiedMs: MTIME, mode: 0o600 },
        { abs: nodePath.join(root, 'there'), bytes: Buffer.from('y'), mode: 0o600 },
        { abs: nodePath.join(root, 'no-such-dir', 'f'), bytes: Buffer.from('z'), mode: 0o600 },
      ]);
      const st = r[0];
      if (st === undefined || st === 'exists' || st instanceof Error)
        throw new Error(`not a stat: ${String(st)}`);
      expect(st.isFile()).toBe(true);
      expect(st.size).toBe(5n);
      expect(st.mtimeMs).toBe(BigInt(MTIME));
      expect((st.mode & 0o777n).toString(8)).toBe('600');
      // The worker's stat (WorkerStats, not a borrowed prototype) answers as Node's own does.
      const real = fs.lstatSync(nodePath.join(root, 'new'), { bigint: true });
      for (const k of ['ino', 'size', 'mode', 'mtimeNs', 'ctimeNs', 'mtimeMs', 'ctimeMs'] as const)
        expect(st[k]).toBe(real[k]);
      expect(st.mtime.getTime()).toBe(real.mtime.getTime());
      expect([st.isDirectory(), st.isSymbolicLink()]).toEqual([false, false]);
      expect(r[1]).toBe('exists');
      expect(fs.readFileSync(nodePath.join(root, 'there'), 'utf8')).toBe('x');
      expect(r[2]).toBeInstanceOf(Error);
      expect((r[2] as NodeJS.ErrnoException).code).toBe('ENOENT');
    } finally {
      await fsp.rm(root, { recursive: true, force: true });
    }
  });

  it('starts no worker until a write and ends a worker idle for idleMs (the next write starts one again)', async () => {
    const root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-fs-inplace-'));
    const pool = new InPlacePool({ size: 2, idleMs: 50 });
    try {
      expect([pool.running, pool.started]).toEqual([0, 0]);
      const batch = (tag: string) =>
        Array.from({ length: 40 }, (_, i) => ({
          abs: nodePath.join(root, `${tag}${i}`),
          bytes: Buffer.from(`${tag} ${i}`),
          mode: 0o600,
        }));
      const first = await pool.writeMany(batch('a'));
      expect(first.every((r) => typeof r === 'object' && !(r instanceof Error) && r.isFile())).toBe(true);
      // 40 files: two shares, two threads started (one may already have ended: idle 50 ms).
      expect(pool.started).toBe(2);
      expect(pool.running).toBeGreaterThanOrEqual(1);
      await expect.poll(() => pool.running, { timeout: 10_000 }).toBe(0);
      const second = await pool.writeMany(batch('b').slice(0, 3));
      expect(second.filter((r) => r instanceof Error)).toEqual([]);
      expect(pool.started).toBe(3); // 3 files: one share, a thread started again
      expect(pool.running).toBe(1);
      expect(fs.readFileSync(nodePath.join(root, 'b2'), 'utf8')).toBe('b 2');
      await expect.poll(() => pool.running, { timeout: 10_000 }).toBe(0);
    } finally {
      await fsp.rm(root, { recursive: true, force: true });
    }
  });

  it('a write right after an idle stop is not failed by the stopped worker ending (found by reading 04df680)', async () => {
    const root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-fs-inplace-'));
    const pool = new InPlacePool({ size: 1, idleMs: 5 });
    try {
      // The stopped worker's 'exit' comes a little after terminate(): a write sent at once
      // goes to a new worker, whose share must not be failed by the old one's end.
      for (let round = 0; round < 5; round++) {
        const item = { abs: nodePath.join(root, `f${round}`), bytes: Buffer.from(`r${round}`), mode: 0o600 };
        const first = await pool.writeMany([item]);
        expect(first.filter((r) => r instanceof Error)).toEqual([]);
        while (pool.running > 0) await new Promise((resolve) => setTimeout(resolve, 1));
        const again = await pool.writeMany([{ ...item, abs: `${item.abs}-again` }]);
        expect(again.filter((r) => r instanceof Error)).toEqual([]);
        expect(fs.readFileSync(`${item.abs}-again`, 'utf8')).toBe(`r${round}`);
        while (pool.running > 0) await new Promise((resolve) => setTimeout(resolve, 1));
      }
    } finally {
      await fsp.rm(root, { recursive: true, force: true });
    }
  });

  it('a worker dying mid-write fails its share with a clear error; the other share and later writes stand', async () => {
    const root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-fs-inplace-'));
    // Each worker exits after 5 items of a share: the test sends one share of 20 (fails) and,
    // after, shares below that (answered by a new worker).
    const pool = new InPlacePool({ size: 1, idleMs: 60_000, exitAfterItems: 5 });
    try {
      const items = Array.from({ length: 20 }, (_, i) => ({
        abs: nodePath.join(root, `f${i}`),
        bytes: Buffer.from(`file ${i}`),
        mode: 0o600,
      }));
      const r = await pool.writeMany(items);
      expect(r).toHaveLength(20);
      for (const x of r) {
        expect(x).toBeInstanceOf(Error);
        expect((x as Error).message).toMatch(/in-place write worker exited \(code 70\)/);
      }
      // The items written before the crash are whole (never part-written) and stay; a retry
      // meets them as 'exists' (the temp-and-rename path then replaces them).
      for (let i = 0; i < 5; i++) expect(fs.readFileSync(items[i]!.abs, 'utf8')).toBe(`file ${i}`);
      expect(fs.existsSync(items[5]!.abs)).toBe(false);
      expect(pool.running).toBe(0);
      const again = await pool.writeMany(items.slice(3, 8));
      expect(again[0]).toBe('exists');
      expect(again[1]).toBe('exists');
      for (const x of again.slice(2))
        expect(typeof x === 'object' && !(x instanceof Error) && x.isFile()).toBe(true);
      expect(fs.readFileSync(items[7]!.abs, 'utf8')).toBe('file 7');
    } finally {
      await fsp.rm(root, { recursive: true, force: true });
    }
  });

  it('a dead worker fails only its own share of a batch', async () => {
    const root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-fs-inplace-'));
    // 39 items: shares of 20 and 19; a worker exits before its 20th item, so only the first
    // share's worker dies.
    const pool = new InPlacePool({ size: 2, idleMs: 60_000, exitAfterItems: 19 });
    try {
      const items = Array.from({ length: 39 }, (_, i) => ({
        abs: nodePath.join(root, `f${i}`),
        bytes: Buffer.from(`f${i}`),
        mode: 0o600,
      }));
      const r = await pool.writeMany(items);
      for (const x of r.slice(0, 20)) expect(x).toBeInstanceOf(Error);
      for (const [i, x] of r.slice(20).entries()) {
        expect(typeof x === 'object' && !(x instanceof Error) && x.isFile()).toBe(true);
        expect(fs.readFileSync(items[20 + i]!.abs, 'utf8')).toBe(`f${20 + i}`);
      }
      expect(pool.running).toBe(1);
    } finally {
      await fsp.rm(root, { recursive: true, force: true });
    }
  });
});

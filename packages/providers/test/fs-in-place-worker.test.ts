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
import { writeInPlaceMany } from '../src/adapters/fs/in-place-worker.ts';

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
      expect(r[1]).toBe('exists');
      expect(fs.readFileSync(nodePath.join(root, 'there'), 'utf8')).toBe('x');
      expect(r[2]).toBeInstanceOf(Error);
      expect((r[2] as NodeJS.ErrnoException).code).toBe('ENOENT');
    } finally {
      await fsp.rm(root, { recursive: true, force: true });
    }
  });
});

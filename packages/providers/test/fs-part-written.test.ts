// With the write-ahead log (FsProviderOptions.batchLog) a batch writes each new file in place,
// without a temp name (fs/write-many.ts writeInPlace): the file is on disk, part-written,
// until its bytes and time are. Nothing read through the provider may see it so — not a
// listing (the proxy's reconcile, the kept versions' collector), not a stat (the kept
// versions' "already there"), not a read — before it is whole (issue #16).
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { describe, expect, it } from 'vitest';
import { collect } from '../src/body.ts';
import { FsProvider } from '../src/adapters/fs.ts';

const SIZE = 256 * 1024;
const MTIME = 1_600_000_000_000;

function bytesOf(i: number): Buffer {
  const b = Buffer.alloc(SIZE, i & 0xff);
  b.writeUInt32LE(i, 0);
  return b;
}

describe('fs tier: a file part-written in place', () => {
  it('is not listed, stat-ed or read through the provider until it is whole', async () => {
    const root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-fs-part-'));
    const p = await FsProvider.open({ root, batchLog: { checkpointMs: 60_000 } });
    await p.mkdir('d');
    const full = new Map<string, string>();
    let caught = 0;
    const bad: string[] = [];
    // Batches until the disk has shown part-written files often enough. The test looks at the
    // disk synchronously for a while each turn of the event loop: a file it finds there was
    // created (open(2) done on the thread pool) while the batch's JavaScript, which must run
    // to write its bytes, was held — so it is part-written (empty) when found, and the
    // provider is asked about it at once.
    for (let round = 0; round < 20 && caught < 5; round++) {
      const items = Array.from({ length: 16 }, (_, k) => {
        const i = round * 100 + k;
        const bytes = bytesOf(i);
        full.set(`d/f${i}`, createHash('sha256').update(bytes).digest('hex'));
        return { path: `d/f${i}`, bytes, modifiedMs: MTIME };
      });
      let done = false;
      const writing = p.writeMany(items, { concurrency: 8 }).finally(() => (done = true));
      while (!done) {
        let partial: string | undefined;
        for (const until = Date.now() + 10; partial === undefined && Date.now() < until;)
          for (const it of items) {
            const st = fs.statSync(nodePath.join(root, it.path), { throwIfNoEntry: false });
            if (st && (st.size < SIZE || st.mtimeMs !== MTIME)) partial = it.path;
          }
        if (partial === undefined) {
          await new Promise((resolve) => setImmediate(resolve));
          continue;
        }
        caught++;
        const [listed, stat, read] = await Promise.all([
          (async () => {
            const out = [];
            for await (const e of p.list('d')) out.push(e);
            return out;
          })(),
          p.stat(partial).catch(() => undefined),
          p.read(partial).then(collect, () => undefined),
        ]);
        for (const e of listed)
          if (e.kind === 'file' && (e.size !== SIZE || e.modifiedMs !== MTIME))
            bad.push(`listed ${e.path} at ${e.size} bytes`);
        if (stat && (stat.size !== SIZE || stat.hash?.value !== full.get(stat.path)))
          bad.push(`stat ${stat.path} at ${stat.size} bytes`);
        if (read && createHash('sha256').update(read).digest('hex') !== full.get(partial))
          bad.push(`read ${partial} at ${read.byteLength} bytes`);
      }
      expect((await writing).filter((r) => r instanceof Error)).toEqual([]);
    }
    // The race was met (else the test proves nothing), and never lost.
    expect(caught).toBeGreaterThan(0);
    expect(bad).toEqual([]);
    await p.close();
    await fsp.rm(root, { recursive: true, force: true });
  }, 60_000);
});

// How many workers write a batch in place (fs/in-place-worker.ts, issue #16): one on a local
// disk, where a create is CPU work in the kernel and parallel creates contend; several on a
// mount far away (EFS, NFS), where one worker would spend its time blocked on round trips.
// The pool tells the two apart by the time its lone worker is blocked per file — wall time
// less time on a CPU and waiting for one, from the kernel's scheduler statistics — so these
// tests need Linux's /proc/thread-self/schedstat (elsewhere the pool stays at one worker).
// A slow mount is simulated by the pool's test hook: each item first waits, blocked.
import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { InPlacePool, SLOW_ITEM_MS } from '../src/adapters/fs/in-place-worker.ts';

const hasSchedstat = fs.existsSync('/proc/thread-self/schedstat');
let root = '';
const burners: ChildProcess[] = [];

afterEach(async () => {
  for (const b of burners.splice(0)) b.kill('SIGKILL');
  if (root) await fsp.rm(root, { recursive: true, force: true });
  root = '';
});

function batch(tag: string, n: number): { abs: string; bytes: Buffer; mode: number }[] {
  return Array.from({ length: n }, (_, i) => ({
    abs: nodePath.join(root, `${tag}${i}`),
    bytes: Buffer.from(`${tag} ${i}`),
    mode: 0o600,
  }));
}

function allWritten(r: Awaited<ReturnType<InPlacePool['writeMany']>>): boolean {
  return r.every((x) => typeof x === 'object' && !(x instanceof Error) && x.isFile());
}

describe.skipIf(!hasSchedstat)('fs tier: in-place pool width (Linux scheduler statistics)', () => {
  it('spreads batches over maxSize workers once one worker is blocked per file, and comes back to one', async () => {
    root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-fs-width-'));
    let latencyMs = SLOW_ITEM_MS + 1;
    const pool = new InPlacePool({
      maxSize: 4,
      idleMs: 60_000,
      probeEvery: 2,
      latencyMsPerItem: () => latencyMs,
    });
    expect(pool.width).toBe(1);
    // A slow mount: the first batch is written by one worker, blocked ~3 ms a file.
    expect(allWritten(await pool.writeMany(batch('a', 128)))).toBe(true);
    expect(pool.changes).toEqual({ spread: 1, narrowed: 0 });
    expect(pool.width).toBe(4);
    expect(pool.started).toBe(1);
    // The next batch goes to four workers.
    expect(allWritten(await pool.writeMany(batch('b', 128)))).toBe(true);
    expect(pool.started).toBe(4);
    expect(fs.readFileSync(nodePath.join(root, 'b127'), 'utf8')).toBe('b 127');
    // The mount is quick again: the second batch since spreading is a probe — its first files
    // written by one worker alone — and the pool comes back to one worker.
    latencyMs = 0;
    expect(allWritten(await pool.writeMany(batch('c', 128)))).toBe(true);
    expect(pool.changes).toEqual({ spread: 1, narrowed: 1 });
    expect(pool.width).toBe(1);
    expect(fs.readdirSync(root)).toHaveLength(3 * 128);
  });

  it('does not take a loaded CPU for a slow mount: waiting for a CPU is not blocked time', async () => {
    root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-fs-width-'));
    // Three processes spinning on this machine's cores, and a worker that spins too: each
    // file takes well over SLOW_ITEM_MS of wall time, most of it waiting for a CPU.
    for (let i = 0; i < Math.max(3, os.availableParallelism() + 1); i++)
      burners.push(spawn(process.execPath, ['-e', 'for (;;);'], { stdio: 'ignore' }));
    const pool = new InPlacePool({ maxSize: 4, idleMs: 60_000, spinMsPerItem: SLOW_ITEM_MS * 2 });
    const started = performance.now();
    expect(allWritten(await pool.writeMany(batch('a', 32)))).toBe(true);
    expect(allWritten(await pool.writeMany(batch('b', 32)))).toBe(true);
    // (Each file took at least the spin: the files were not quick.)
    expect(performance.now() - started).toBeGreaterThanOrEqual(64 * SLOW_ITEM_MS * 2);
    expect(pool.changes).toEqual({ spread: 0, narrowed: 0 });
    expect(pool.width).toBe(1);
  });

  it('keeps a fixed count (WEFT_FS_INPLACE_WORKERS, size) whatever the mount', async () => {
    root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-fs-width-'));
    const pool = new InPlacePool({ size: 1, idleMs: 60_000, latencyMsPerItem: SLOW_ITEM_MS + 1 });
    expect(allWritten(await pool.writeMany(batch('a', 64)))).toBe(true);
    expect(pool.changes).toEqual({ spread: 0, narrowed: 0 });
    expect(pool.width).toBe(1);
  });
});

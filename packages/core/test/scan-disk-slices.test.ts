/**
 * The scanner's stats and hashes on the event loop (scan-disk.ts) take a turn of the loop
 * once the calls made since the last turn add up to LOOP_SLICE_MS, whatever their count or
 * bytes (issue #16: reads that missed the OS's cache held the agent's loop ~100 ms of CPU in a
 * 100,000-file first scan, within the byte slice). Counted with a test clock that says each
 * call took a set time, never measured.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { describe, expect, it } from 'vitest';
import { LoopGate } from '../src/loop-gate.ts';
import { LOOP_SLICE_MS, STAT_SLICE, ScanDisk } from '../src/scan-disk.ts';
import type { DiskEntry } from '../src/scan-rows.ts';

const FILES = 40; // far fewer than STAT_SLICE, and than the hash slice's bytes

/** A clock that moves `stepMs` each time it is read: each call on the loop takes `stepMs`. */
function steppingClock(stepMs: number): () => number {
  let now = 0;
  return () => (now += stepMs);
}

/** Turns of the event loop taken while `work` runs. */
async function turnsDuring(work: () => Promise<unknown>): Promise<number> {
  let turns = 0;
  let running = true;
  const tick = (): void => {
    turns += 1;
    if (running) setImmediate(tick);
  };
  setImmediate(tick);
  await work();
  running = false;
  return turns;
}

async function folder(): Promise<{ dir: string; names: string[]; entries: DiskEntry[] }> {
  const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-slices-'));
  const names = Array.from({ length: FILES }, (_, i) => `f${i}.txt`);
  const entries: DiskEntry[] = [];
  for (const name of names) {
    await fsp.writeFile(nodePath.join(dir, name), `content of ${name}`);
    const st = await fsp.lstat(nodePath.join(dir, name), { bigint: true });
    entries.push({
      path: name,
      dir,
      name,
      kind: 'file',
      size: Number(st.size),
      mtimeNs: st.mtimeNs,
      inode: st.ino,
    });
  }
  return { dir, names, entries };
}

describe('the scan on the event loop', () => {
  it('takes a turn once its stats and hashes add up to LOOP_SLICE_MS, whatever their count', async () => {
    expect(FILES).toBeLessThan(STAT_SLICE);
    const { dir, names, entries } = await folder();
    // Each call "takes" half the slice: a turn every two calls, all of them on the loop.
    const half = LOOP_SLICE_MS / 2;
    const gate = new LoopGate();
    const disk = new ScanDisk(gate, () => {}, steppingClock(half));
    let stats: unknown[] = [];
    const statTurns = await turnsDuring(async () => (stats = await disk.statNames(dir, names)));
    expect(stats.filter((s) => s !== undefined)).toHaveLength(FILES);
    expect(statTurns).toBeGreaterThanOrEqual(FILES / 2 - 1);
    const hashTurns = await turnsDuring(() => disk.hashAll(entries, () => true));
    expect(entries.every((e) => e.hash !== undefined && /^[0-9a-f]{64}$/.test(e.hash))).toBe(true);
    expect(hashTurns).toBeGreaterThanOrEqual(FILES / 2 - 1);
    expect(gate.calls).toEqual({ onLoop: 2 * FILES, inPool: 0 });

    // The same calls, quick: no turn within the count and byte slices.
    const quick = new ScanDisk(
      new LoopGate(),
      () => {},
      () => 0,
    );
    for (const e of entries) delete e.hash;
    expect(await turnsDuring(() => quick.statNames(dir, names))).toBeLessThanOrEqual(1);
    expect(await turnsDuring(() => quick.hashAll(entries, () => true))).toBeLessThanOrEqual(1);
    await fsp.rm(dir, { recursive: true, force: true });
  });
});

/**
 * Quick filesystem calls on the event loop or through the thread pool (loop-gate.ts, issue
 * #16): durations are fed in, so the decisions are counted, never timed.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { describe, expect, it } from 'vitest';
import { readSmallFile } from '../src/local-fs.ts';
import { LoopGate, SLOW_RUN } from '../src/loop-gate.ts';

/** Ask the gate `n` times, each call on the loop taking `ms`; returns how many went on the loop. */
function calls(gate: LoopGate, n: number, ms: number): number {
  let onLoop = 0;
  for (let i = 0; i < n; i++) {
    if (!gate.onLoop()) continue;
    onLoop += 1;
    gate.took(ms);
  }
  return onLoop;
}

describe('loop gate', () => {
  it('keeps calls on the loop through a slow one now and then (a descheduled process)', () => {
    const gate = new LoopGate(20, 100);
    for (let i = 0; i < 50; i++) {
      expect(calls(gate, SLOW_RUN - 1, 500)).toBe(SLOW_RUN - 1);
      expect(calls(gate, 1, 1)).toBe(1);
    }
    expect(gate.calls.inPool).toBe(0);
  });

  it('sends calls to the pool after a run of slow ones, and probes the loop to come back', () => {
    const gate = new LoopGate(20, 100);
    expect(calls(gate, SLOW_RUN, 50)).toBe(SLOW_RUN);
    // A slow disk: one call in a hundred is tried on the loop, and it is still slow.
    expect(calls(gate, 1_000, 50)).toBe(10);
    expect(gate.calls).toEqual({ onLoop: SLOW_RUN + 10, inPool: 990 });
    // Quick again: the next probe brings the calls back to the loop.
    expect(calls(gate, 100, 1)).toBe(1);
    expect(calls(gate, 100, 1)).toBe(100);
  });

  it('runs the call where it decided and passes its errors on', async () => {
    const gate = new LoopGate(20, 100);
    await expect(
      gate.run(
        () => 'sync',
        async () => 'async',
      ),
    ).resolves.toBe('sync');
    const failure = Object.assign(new Error('gone'), { code: 'ENOENT' });
    await expect(
      gate.run(
        () => {
          throw failure;
        },
        async () => 'async',
      ),
    ).rejects.toBe(failure);
    for (let i = 0; i < SLOW_RUN; i++) gate.took(100);
    await expect(
      gate.run(
        () => 'sync',
        async () => 'async',
      ),
    ).resolves.toBe('async');
  });
});

describe('reading a small file for a bundle', () => {
  it('gives the same bytes and mtime on the loop as through the pool', async () => {
    const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-read-small-'));
    try {
      const files: [string, Buffer][] = [
        ['empty', Buffer.alloc(0)],
        ['small', Buffer.from('hello')],
        ['pooled', Buffer.alloc(3000, 1)], // below Buffer's pool size: a slice of a shared slab
        ['larger', Buffer.alloc(300 * 1024, 2)],
      ];
      const gate = new LoopGate(20, 100);
      for (const [name, bytes] of files) {
        const abs = nodePath.join(dir, name);
        await fsp.writeFile(abs, bytes);
        const st = await fsp.lstat(abs, { bigint: true });
        const onLoop = await readSmallFile(abs, gate);
        expect([Buffer.compare(onLoop.content, bytes), onLoop.mtimeMs]).toEqual([0, Number(st.mtimeMs)]);
      }
      expect(gate.calls).toEqual({ onLoop: 4, inPool: 0 });
      for (let i = 0; i < SLOW_RUN; i++) gate.took(100); // a slow disk: through the pool now
      const pooled = await readSmallFile(nodePath.join(dir, 'small'), gate);
      expect(pooled.content.toString()).toBe('hello');
      expect(gate.calls.inPool).toBe(1);
      await expect(readSmallFile(nodePath.join(dir, 'missing'), new LoopGate())).rejects.toMatchObject({
        code: 'ENOENT',
      });
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });
});

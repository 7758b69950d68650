/**
 * The loop tracer (WEFT_LOOP_TRACE_MS, loop-trace.ts) reports a stretch in which the loop
 * did not turn, with the CPU used meanwhile; turns of the loop alone report nothing. The
 * held stretch is made by spinning on the loop until the clock has moved 300 ms, so it is at
 * least that long however loaded the machine is.
 */
import { describe, expect, it } from 'vitest';
import { type LoopStall, watchLoop } from '../src/loop-trace.ts';

const turns = (n: number): Promise<void> =>
  n === 0 ? Promise.resolve() : new Promise((r) => setTimeout(() => void turns(n - 1).then(r), 1));

describe('the loop tracer', () => {
  it('reports a held loop with its CPU, and its monotonic times', async () => {
    const stalls: LoopStall[] = [];
    const stop = watchLoop(250, (s) => stalls.push(s));
    try {
      await new Promise((r) => setTimeout(r, 20)); // the watcher's first tick
      const before = Number(process.hrtime.bigint() / 1000n);
      const until = performance.now() + 300;
      while (performance.now() < until); // held: the loop cannot turn
      await new Promise((r) => setTimeout(r, 20));
      const held = stalls.filter((s) => s.toUs >= before + 300_000);
      expect(held.length).toBeGreaterThanOrEqual(1);
      const s = held[0] as LoopStall;
      expect(s.heldMs).toBeGreaterThanOrEqual(250);
      expect(s.toUs - s.fromUs).toBeGreaterThanOrEqual(300_000);
      expect(s.fromUs).toBeLessThanOrEqual(before);
      expect(s.cpuMs).toBeGreaterThan(0);
    } finally {
      stop();
    }
  });

  it('stops reporting once stopped', async () => {
    const stalls: LoopStall[] = [];
    const stop = watchLoop(1, (s) => stalls.push(s));
    stop();
    const until = performance.now() + 50;
    while (performance.now() < until);
    await turns(3);
    expect(stalls).toEqual([]);
  });
});

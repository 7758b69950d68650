/**
 * Quick filesystem calls on the event loop or through the thread pool (loop-gate.ts, issue
 * #16): durations are fed in, so the decisions are counted, never timed.
 */
import { describe, expect, it } from 'vitest';
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

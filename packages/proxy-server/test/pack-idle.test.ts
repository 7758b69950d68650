/**
 * The idle flush's wait, learnt from the stream of bundles (store/pack-idle.ts, issue #16): a
 * single bundle waits idleMs; a stream whose bundles overlap (an agent keeps two on their way)
 * waits idleMs / 10; a stream with gaps waits twice its longest gap, at most idleMs; a gap
 * longer than the wait costs one more flush and is learnt. On a fake clock and fake timers:
 * what is checked is when the flush comes in the packer's own time, never wall-clock time.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { IdleFlush } from '../src/store/pack-idle.ts';

describe('idle flush wait', () => {
  let clock = 0;
  let flushes = 0;
  let waiting = true;
  beforeEach(() => {
    vi.useFakeTimers();
    clock = 0;
    flushes = 0;
    waiting = true;
  });
  afterEach(() => {
    vi.useRealTimers();
  });
  const idle = (idleMs = 1000): IdleFlush =>
    new IdleFlush(
      idleMs,
      () => clock,
      () => waiting,
      () => {
        flushes++;
        waiting = false; // the flush takes what waits
      },
    );
  /** Let `ms` go by on both the packer's clock and the timers. */
  const pass = (ms: number): void => {
    clock += ms;
    vi.advanceTimersByTime(ms);
  };

  it('waits idleMs after a single bundle', () => {
    const f = idle();
    const end = f.busy();
    pass(500);
    end();
    expect(f.delayMs()).toBe(1000);
    pass(999);
    expect(flushes).toBe(0);
    pass(1);
    expect(flushes).toBe(1);
  });

  it('waits a tenth of idleMs after a stream of overlapping bundles, none while one is in flight', () => {
    const f = idle();
    let end = f.busy();
    for (let i = 0; i < 5; i++) {
      const next = f.busy(); // the next is on its way before the last one's answer
      pass(300);
      end();
      end = next;
      pass(300);
      expect(flushes).toBe(0);
    }
    end();
    expect(f.delayMs()).toBe(100);
    pass(99);
    expect(flushes).toBe(0);
    pass(1);
    expect(flushes).toBe(1);
    // The stream is over: the next one is learnt afresh.
    waiting = true;
    const one = f.busy();
    one();
    expect(f.delayMs()).toBe(1000);
  });

  it('waits twice the longest gap of the stream, at most idleMs', () => {
    const f = idle();
    f.busy()();
    pass(150);
    f.busy()();
    pass(80);
    f.busy()();
    expect(f.delayMs()).toBe(300);
    pass(299);
    expect(flushes).toBe(0);
    pass(1);
    expect(flushes).toBe(1);
    waiting = true;
    f.busy()();
    pass(700);
    f.busy()();
    expect(f.delayMs()).toBe(1000);
  });

  it('flushes once more for a gap longer than its wait, then waits for such gaps', () => {
    const f = idle();
    const a = f.busy();
    const b = f.busy();
    a();
    b();
    pass(150); // the wait was 100: a flush
    expect(flushes).toBe(1);
    // Then bundles one at a time, 150 ms apart (a client slower to fill them): the first one
    // alone waits idleMs, the next ones twice the gap — all of them in one more pack.
    waiting = true;
    for (let i = 0; i < 4; i++) {
      f.busy()();
      pass(150);
    }
    expect(flushes).toBe(1);
    expect(f.delayMs()).toBe(300);
    pass(150);
    expect(flushes).toBe(2);
  });

  it('takes a quiet of idleMs or more with nothing to flush as the end of a stream, not a gap', () => {
    const f = idle();
    waiting = false; // e.g. a stream of bundles whose files were all known
    const a = f.busy();
    const b = f.busy();
    a();
    b();
    pass(5000);
    waiting = true;
    const c = f.busy();
    const d = f.busy();
    c();
    d();
    expect(f.delayMs()).toBe(100);
    pass(100);
    expect(flushes).toBe(1);
  });

  it('never flushes with nothing waiting, nor with idleMs 0', () => {
    waiting = false;
    const f = idle();
    f.busy()();
    pass(5000);
    waiting = true;
    const off = idle(0);
    off.busy()();
    pass(5000);
    expect(flushes).toBe(0);
  });
});

/**
 * The storage watch (storage-usage.ts) on its own: what a QUOTA_EXCEEDED refusal does to the
 * status, how often usage is read while full (a doubling backoff, never the upload again),
 * and when uploads resume. Timers are faked: the schedule is checked, not the clock.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RemoteError } from '../src/remote/proxy-client.ts';
import { StatusModel } from '../src/status.ts';
import { StorageWatch, bytesInWords, isQuotaExceeded, usageLine } from '../src/storage-usage.ts';

const refusal = (usedBytes: number, limitBytes: number, neededBytes: number): RemoteError =>
  new RemoteError(507, 'QUOTA_EXCEEDED', 'Weft storage is full', { usedBytes, limitBytes, neededBytes });

describe('StorageWatch', () => {
  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(1_000_000);
  });
  afterEach(() => vi.useRealTimers());

  function setup(usage: { usedBytes: number; limitBytes: number | null }) {
    const status = new StatusModel('/f');
    const reads: number[] = [];
    let rooms = 0;
    const watch = new StorageWatch({
      usage: async () => {
        reads.push(Date.now());
        return { ...usage };
      },
      status,
      onRoom: () => void (rooms += 1),
      now: () => Date.now(),
      timings: { refreshMs: 600_000, activityMs: 1_000, fullCheckMs: 10_000, fullCheckMaxMs: 40_000 },
      random: () => 0.5,
    });
    const advance = async (ms: number): Promise<void> => {
      await vi.advanceTimersByTimeAsync(ms);
    };
    return { status, watch, reads, rooms: () => rooms, usage, advance };
  }

  it('reads usage at start and after activity, and shows it', async () => {
    const t = setup({ usedBytes: 100, limitBytes: null });
    t.watch.start();
    await t.advance(0);
    expect(t.status.get().storage).toEqual({ usedBytes: 100, limitBytes: null, checkedAtMs: 1_000_000 });
    t.usage.usedBytes = 300;
    t.status.activity({ kind: 'uploaded', path: 'a' });
    t.status.activity({ kind: 'uploaded', path: 'b' });
    await t.advance(999);
    expect(t.reads).toHaveLength(1); // activity settles first…
    await t.advance(1);
    expect(t.reads).toHaveLength(2); // …then one read for both
    expect(t.status.get().storage?.usedBytes).toBe(300);
    t.watch.dispose();
  });

  it('when full: re-reads on a doubling backoff, and resumes only once there is room', async () => {
    const t = setup({ usedBytes: 900, limitBytes: 1000 });
    t.watch.start();
    await t.advance(0);
    const e = refusal(900, 1000, 400);
    expect(isQuotaExceeded(e)).toBe(true);
    t.watch.refused(e);
    expect(t.watch.isFull).toBe(true);
    expect(t.status.get().storage?.full).toEqual({
      sinceMs: 1_000_000,
      neededBytes: 400,
      nextCheckMs: 1_007_500,
    });
    expect(t.watch.message(2)).toBe(
      'Weft storage is full (900 bytes of 1 KB used): 2 changes wait to upload. Downloads and deletes go on; ' +
        'delete files you no longer need or ask for more space, and Weft uploads again by itself.',
    );
    const before = t.reads.length;
    await t.advance(7_500 + 15_000 + 30_000 + 30_000);
    // Ceilings 10 s, 20 s, then at most 40 s (Weft's one retry policy), each wait drawn in
    // [ceiling/2, ceiling) — here three quarters: four reads, and still full.
    expect(t.reads.slice(before).map((r) => r - 1_000_000)).toEqual([7_500, 22_500, 52_500, 82_500]);
    expect(t.watch.isFull).toBe(true);
    expect(t.rooms()).toBe(0);
    // Space freed elsewhere (free space grows past what it was at the refusal): resume.
    t.usage.usedBytes = 800;
    await t.advance(30_000);
    expect(t.watch.isFull).toBe(false);
    expect(t.rooms()).toBe(1);
    expect(t.status.get().storage).toMatchObject({ usedBytes: 800, limitBytes: 1000 });
    expect(t.status.get().storage?.full).toBeUndefined();
    // Back to the slow refresh: nothing more for a while.
    const after = t.reads.length;
    await t.advance(599_999);
    expect(t.reads).toHaveLength(after);
    t.watch.dispose();
  });

  it('a raised or lifted quota is room; a read that fails keeps the state and tries again', async () => {
    const t = setup({ usedBytes: 1000, limitBytes: 1000 });
    t.watch.refused(refusal(1000, 1000, 5));
    t.usage.limitBytes = null;
    await t.watch.check();
    expect(t.watch.isFull).toBe(false);
    expect(t.rooms()).toBe(1);

    const failing = new StorageWatch({
      usage: () => Promise.reject(new Error('offline')),
      status: new StatusModel('/g'),
      onRoom: () => undefined,
      timings: { fullCheckMs: 10_000, fullCheckMaxMs: 40_000 },
    });
    failing.refused(refusal(10, 10, 1));
    await failing.check();
    expect(failing.isFull).toBe(true);
    failing.dispose();
    t.watch.dispose();
  });

  it('without a usage to read, a refusal waits out the backoff and then tries again', async () => {
    const status = new StatusModel('/h');
    let rooms = 0;
    const watch = new StorageWatch({
      usage: undefined,
      status,
      onRoom: () => void (rooms += 1),
      timings: { fullCheckMs: 10_000, fullCheckMaxMs: 40_000 },
      random: () => 0.5,
    });
    watch.refused(refusal(10, 10, 1));
    await vi.advanceTimersByTimeAsync(7_499);
    expect([watch.isFull, rooms]).toEqual([true, 0]);
    await vi.advanceTimersByTimeAsync(1);
    expect([watch.isFull, rooms]).toEqual([false, 1]);
    watch.dispose();
  });

  it('says bytes in words, and the usage line of `weft status`', () => {
    expect(bytesInWords(999)).toBe('999 bytes');
    expect(bytesInWords(5_000_000_000)).toBe('5 GB');
    expect(bytesInWords(2_140_000_000)).toBe('2.1 GB');
    const u = { usedBytes: 2_140_000_000, limitBytes: 5_000_000_000, checkedAtMs: 0 };
    expect(usageLine(u)).toBe('Weft storage: 2.1 GB of 5 GB used');
    expect(usageLine({ ...u, limitBytes: null })).toBe('Weft storage: 2.1 GB used');
    expect(usageLine({ ...u, full: { sinceMs: 0, neededBytes: 1, nextCheckMs: 0 } })).toBe(
      'Weft storage: 2.1 GB of 5 GB used (full: uploads wait)',
    );
  });
});

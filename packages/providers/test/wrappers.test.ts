import { describe, expect, it } from 'vitest';
import { MemoryProvider } from '../src/adapters/memory.ts';
import { AuthError, TransientError } from '../src/errors.ts';
import { hasChangeFeed, hasServerSideCopy, hasServerSideMove } from '../src/features.ts';
import { FaultInjectingProvider, failFirst } from '../src/testing/faults.ts';
import { Semaphore, withConcurrency } from '../src/wrappers/concurrency.ts';
import { wrapProvider } from '../src/wrappers/compose.ts';
import { TokenBucket, withPacer } from '../src/wrappers/pacer.ts';
import { RetryingProvider } from '../src/wrappers/retry.ts';
import type { Sleep } from '../src/wrappers/sleep.ts';

/** A virtual clock: sleep advances time instantly and records the wait. */
function virtualClock(): { now: () => number; sleep: Sleep; waits: number[] } {
  let t = 0;
  const waits: number[] = [];
  return {
    now: () => t,
    sleep: async (ms) => {
      waits.push(ms);
      t += ms;
    },
    waits,
  };
}

describe('TokenBucket', () => {
  it('allows a burst, then paces at the configured rate', async () => {
    const clock = virtualClock();
    const bucket = new TokenBucket({ requestsPerSecond: 10, burst: 3, ...clock });
    for (let i = 0; i < 3; i++) await bucket.take();
    expect(clock.waits).toEqual([]);
    await bucket.take();
    await bucket.take();
    expect(clock.now()).toBe(200); // 10/s → one token every 100 ms
  });

  it('pauses every caller after a Retry-After', async () => {
    const clock = virtualClock();
    const bucket = new TokenBucket({ requestsPerSecond: 1000, burst: 10, ...clock });
    bucket.pause(5000);
    await bucket.take();
    expect(clock.now()).toBe(5000);
  });

  it('a paced provider pauses on a transient error with retryAfterMs', async () => {
    const clock = virtualClock();
    const inner = new FaultInjectingProvider(new MemoryProvider(), failFirst(1, ['stat'], 750));
    const paced = withPacer(inner, { requestsPerSecond: 1000, burst: 5, ...clock });
    await expect(paced.stat('x')).rejects.toBeInstanceOf(TransientError);
    await expect(paced.stat('x')).rejects.toThrow(/not found/);
    expect(clock.now()).toBeGreaterThanOrEqual(750);
  });
});

describe('Semaphore', () => {
  it('never runs more than the limit at once and serves waiters in order', async () => {
    const sem = new Semaphore(2);
    let active = 0;
    let peak = 0;
    const order: number[] = [];
    await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        sem.run(async () => {
          active += 1;
          peak = Math.max(peak, active);
          await new Promise((r) => setImmediate(r));
          order.push(i);
          active -= 1;
        }),
      ),
    );
    expect(peak).toBe(2);
    expect(order).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(sem.inFlight).toBe(0);
  });

  it('a waiting caller can be aborted', async () => {
    const sem = new Semaphore(1);
    await sem.acquire();
    const controller = new AbortController();
    const waiting = sem.acquire(controller.signal);
    controller.abort(new Error('gave up'));
    await expect(waiting).rejects.toThrow('gave up');
    sem.release();
    expect(sem.inFlight).toBe(0);
  });

  it('limits provider calls', async () => {
    const p = withConcurrency(new MemoryProvider(), 1);
    await Promise.all([p.write('a', Buffer.from('a')), p.write('b', Buffer.from('b'))]);
    expect((await p.stat('b')).size).toBe(1);
  });
});

describe('RetryingProvider', () => {
  it('does not retry non-transient errors', async () => {
    let calls = 0;
    const inner = new FaultInjectingProvider(new MemoryProvider(), {
      before: () => {
        calls += 1;
        return new AuthError('token expired');
      },
    });
    const p = new RetryingProvider(inner, { sleep: async () => undefined });
    await expect(p.stat('x')).rejects.toBeInstanceOf(AuthError);
    expect(calls).toBe(1);
  });

  it('caps a Retry-After at maxDelayMs and computes full-jitter backoff', () => {
    const p = new RetryingProvider(new MemoryProvider(), {
      baseDelayMs: 100,
      maxDelayMs: 1000,
      random: () => 0.999,
    });
    expect(p.delayFor(1, new TransientError('x', 60_000))).toBe(1000);
    expect(p.delayFor(1, new TransientError('x'))).toBe(99);
    expect(p.delayFor(4, new TransientError('x'))).toBe(799);
    expect(p.delayFor(10, new TransientError('x'))).toBe(999);
  });

  it('a listing whose first page fails transiently is started again, not reported empty', async () => {
    const mem = new MemoryProvider();
    await mem.write('d/a.txt', Buffer.from('a'));
    await mem.write('d/b.txt', Buffer.from('b'));
    let failures = 1;
    // An adapter's listing is an async generator: the failed page throws from it.
    const flaky = Object.assign(Object.create(mem) as MemoryProvider, {
      list(dir: string, options?: { recursive?: boolean }) {
        const inner = mem.list(dir, options);
        return (async function* () {
          if (failures-- > 0) throw new TransientError('429 on the first page');
          yield* inner;
        })();
      },
    });
    const p = new RetryingProvider(flaky, { sleep: async () => undefined });
    const got: string[] = [];
    for await (const e of p.list('d')) got.push(e.path);
    expect(got.sort()).toEqual(['d/a.txt', 'd/b.txt']);
  });

  it('treats NotFound on a retried remove as done', async () => {
    const mem = new MemoryProvider();
    await mem.write('gone.txt', Buffer.from('x'));
    let first = true;
    // The first attempt deletes, then the response is "lost".
    const lossy = new FaultInjectingProvider(mem, {
      before: (info) => {
        if (info.op === 'remove' && first) {
          first = false;
          void mem.remove('gone.txt');
          return new TransientError('connection reset after the server acted');
        }
        return undefined;
      },
    });
    const p = new RetryingProvider(lossy, { sleep: async () => undefined });
    await p.remove('gone.txt');
    await expect(mem.stat('gone.txt')).rejects.toThrow(/not found/);
  });
});

describe('wrapProvider', () => {
  it('keeps the inner provider’s declared features and optional methods', () => {
    const wrapped = wrapProvider(new MemoryProvider(), {
      pacer: { requestsPerSecond: 100 },
      concurrency: 4,
      logger: { debug: () => undefined, warn: () => undefined },
    });
    expect(hasServerSideMove(wrapped)).toBe(true);
    expect(hasServerSideCopy(wrapped)).toBe(true);
    expect(hasChangeFeed(wrapped)).toBe(true);
    expect(wrapped.features.hashAlgorithm).toBe('sha256');
  });

  it('logs failures with the error code', async () => {
    const warnings: object[] = [];
    const wrapped = wrapProvider(new MemoryProvider(), {
      logger: { debug: () => undefined, warn: (o) => void warnings.push(o) },
      retry: { maxAttempts: 1 },
    });
    await expect(wrapped.stat('missing')).rejects.toThrow();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ op: 'stat', path: 'missing', code: 'NotFound' });
  });
});

describe('MemoryProvider options', () => {
  it('case-insensitive mode treats names that differ by case as one file', async () => {
    const p = new MemoryProvider({ caseSensitive: false });
    await p.write('Docs/Readme.md', Buffer.from('one'));
    await p.write('docs/README.MD', Buffer.from('two'));
    const all = [];
    for await (const e of p.list('', { recursive: true })) all.push(e.path);
    expect(all).toEqual(['Docs', 'Docs/Readme.md']);
  });

  it('enforces a quota', async () => {
    const p = new MemoryProvider({ quotaBytes: 10 });
    await p.write('a', Buffer.alloc(8));
    await expect(p.write('b', Buffer.alloc(3))).rejects.toThrow(/quota/);
    await p.write('a', Buffer.alloc(2));
    await p.write('b', Buffer.alloc(8));
  });

  it('expired cursors ask for a reset', async () => {
    const p = new MemoryProvider({ maxChangeLog: 3 });
    const c = await p.latestCursor();
    for (let i = 0; i < 5; i++) await p.write(`f${i}`, Buffer.from('x'));
    const page = await p.changes(c);
    expect(page.reset).toBe(true);
    const again = await p.changes(page.cursor);
    expect(again).toMatchObject({ reset: false, changes: [] });
  });
});

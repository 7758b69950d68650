import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Backoff, backoffDelay, parseRetryAfter } from '../src/backoff.ts';

const policyArb = fc.record({
  baseMs: fc.integer({ min: 0, max: 10_000 }),
  capMs: fc.integer({ min: 0, max: 600_000 }),
  jitter: fc.constantFrom('full' as const, 'equal' as const, 'none' as const),
});

describe('backoffDelay', () => {
  it('stays within [0, cap] and within its jitter band of base·2^(n-1)', () => {
    fc.assert(
      fc.property(
        policyArb,
        fc.integer({ min: 1, max: 200 }),
        fc.double({ min: 0, max: 0.999999, noNaN: true }),
        (p, n, r) => {
          const d = backoffDelay(p, n, { random: () => r });
          const ceiling = Math.min(p.capMs, p.baseMs * 2 ** (n - 1));
          expect(d).toBeGreaterThanOrEqual(0);
          expect(d).toBeLessThanOrEqual(p.capMs);
          expect(Number.isInteger(d)).toBe(true);
          if (p.jitter === 'none') expect(d).toBe(ceiling);
          if (p.jitter === 'equal') expect(d).toBeGreaterThanOrEqual(Math.floor(ceiling / 2));
          if (p.jitter !== 'none') expect(d).toBeLessThanOrEqual(ceiling);
        },
      ),
    );
  });

  it('doubles its ceiling each attempt until the cap', () => {
    const p = { baseMs: 100, capMs: 1000, jitter: 'none' as const };
    expect([1, 2, 3, 4, 5, 6, 100].map((n) => backoffDelay(p, n))).toEqual([
      100, 200, 400, 800, 1000, 1000, 1000,
    ]);
  });

  it('full jitter can retry at once; equal jitter never does', () => {
    const zero = { random: () => 0 };
    expect(backoffDelay({ baseMs: 1000, capMs: 60_000 }, 3, zero)).toBe(0);
    expect(backoffDelay({ baseMs: 1000, capMs: 60_000, jitter: 'equal' }, 3, zero)).toBe(2000);
  });

  it('takes a Retry-After instead of the computed delay, capped', () => {
    const p = { baseMs: 100, capMs: 30_000, jitter: 'none' as const };
    expect(backoffDelay(p, 1, { retryAfterMs: 5000 })).toBe(5000);
    expect(backoffDelay(p, 1, { retryAfterMs: 0 })).toBe(0);
    expect(backoffDelay(p, 1, { retryAfterMs: 3_600_000 })).toBe(30_000);
    // Unusable values fall back to the policy.
    expect(backoffDelay(p, 2, { retryAfterMs: Number.NaN })).toBe(200);
    expect(backoffDelay(p, 2, { retryAfterMs: -5 })).toBe(200);
  });

  it('refuses a negative policy', () => {
    expect(() => backoffDelay({ baseMs: -1, capMs: 10 }, 1)).toThrow(RangeError);
  });
});

describe('Backoff', () => {
  it('counts failures, and a reset starts over', () => {
    const b = new Backoff({ baseMs: 50, capMs: 400, jitter: 'none' });
    expect([b.next(), b.next(), b.next(), b.next(), b.next()]).toEqual([50, 100, 200, 400, 400]);
    expect(b.failures).toBe(5);
    b.reset();
    expect(b.failures).toBe(0);
    expect(b.next()).toBe(50);
    expect(b.next(1234)).toBe(400); // a Retry-After, capped
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2026-11-24T10:00:00Z');
  it('reads delay-seconds and HTTP-dates', () => {
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
    expect(parseRetryAfter('Tue, 24 Nov 2026 10:00:30 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Tue, 24 Nov 2026 09:00:00 GMT', now)).toBe(0);
  });
  it('ignores what is neither', () => {
    for (const v of [undefined, null, '', '-1', '1.5', 'soon', '12abc'])
      expect(parseRetryAfter(v as string | null | undefined, now)).toBeUndefined();
  });
});

import { describe, expect, it } from 'vitest';
import { TURN_EVERY, readAhead } from '../src/read-ahead.ts';

/** A call that resolves when told to, counting how many run at once. */
function gate() {
  let running = 0;
  let most = 0;
  const waiting: (() => void)[] = [];
  return {
    get most() {
      return most;
    },
    get running() {
      return running;
    },
    call: async <T>(value: T, fail = false): Promise<T> => {
      running += 1;
      most = Math.max(most, running);
      await new Promise<void>((r) => waiting.push(r));
      running -= 1;
      if (fail) throw new Error(`failed on ${String(value)}`);
      return value;
    },
    /** Let every waiting call finish, after a turn of the event loop. */
    releaseAll: async (): Promise<void> => {
      await new Promise((r) => setImmediate(r));
      for (const r of waiting.splice(0)) r();
    },
  };
}

describe('readAhead', () => {
  it('yields every result in item order with at most `depth` calls in flight', async () => {
    const g = gate();
    const items = Array.from({ length: 50 }, (_, i) => i);
    const out: number[] = [];
    const pump = setInterval(() => void g.releaseAll(), 1);
    try {
      // Calls finish in any order: later ones wait less.
      for await (const v of readAhead(items, 4, (i) =>
        i % 3 === 0 ? g.call(i) : new Promise<number>((r) => setTimeout(() => r(i), 50 - i)),
      ))
        out.push(v);
    } finally {
      clearInterval(pump);
    }
    expect(out).toEqual(items);
    expect(g.most).toBeLessThanOrEqual(4);
  });

  it('starts `depth` calls before the first result is used, and no more', async () => {
    const g = gate();
    const it = readAhead([1, 2, 3, 4, 5, 6], 3, (i) => g.call(i));
    const first = it.next();
    await new Promise((r) => setImmediate(r));
    expect(g.running).toBe(3);
    await g.releaseAll();
    expect((await first).value).toBe(1);
    await new Promise((r) => setImmediate(r));
    expect(g.running).toBe(1); // the fourth started when the first was taken
    await g.releaseAll();
    const rest: number[] = [];
    const pump = setInterval(() => void g.releaseAll(), 1);
    for await (const v of it) rest.push(v);
    clearInterval(pump);
    expect(rest).toEqual([2, 3, 4, 5, 6]);
  });

  it('throws a failure when its turn comes, after the results before it', async () => {
    const seen: number[] = [];
    const run = async (): Promise<void> => {
      for await (const v of readAhead([1, 2, 3, 4], 4, async (i) => {
        if (i === 3) throw new Error('unreadable 3');
        return i;
      }))
        seen.push(v);
    };
    await expect(run()).rejects.toThrow('unreadable 3');
    expect(seen).toEqual([1, 2]);
  });

  it('leaves no rejection unheard when the consumer stops early', async () => {
    const unheard: unknown[] = [];
    const onUnhandled = (e: unknown): void => void unheard.push(e);
    process.on('unhandledRejection', onUnhandled);
    try {
      for await (const v of readAhead([1, 2, 3], 3, async (i) => {
        if (i > 1) throw new Error(`failed ${i}`);
        return i;
      })) {
        expect(v).toBe(1);
        break;
      }
      await new Promise((r) => setTimeout(r, 20));
      expect(unheard).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('refuses a depth that is not a positive integer', async () => {
    await expect(readAhead([1], 0, async (i) => i).next()).rejects.toThrow(RangeError);
  });

  it('gives the event loop a turn at least every TURN_EVERY results, even when every call is done at once', async () => {
    // Calls that resolve at once (a small file read on the event loop): without the turns the
    // consumer and the calls ran in microtasks alone and held the agent's UI for a whole
    // bundle's files (issue #16). Counted: the results taken between two turns of the loop.
    const items = Array.from({ length: 10 * TURN_EVERY }, (_, i) => i);
    const perTurn: number[] = [0];
    let watching = true;
    const watch = (): void => {
      perTurn.push(0);
      if (watching) setImmediate(watch);
    };
    setImmediate(watch);
    const out: number[] = [];
    for await (const v of readAhead(items, 16, async (i) => i)) {
      out.push(v);
      perTurn[perTurn.length - 1] = (perTurn.at(-1) ?? 0) + 1;
    }
    watching = false;
    expect(out).toEqual(items);
    expect(Math.max(...perTurn)).toBeLessThanOrEqual(TURN_EVERY);
    expect(perTurn.filter((n) => n > 0).length).toBeGreaterThanOrEqual(10);
  });
});

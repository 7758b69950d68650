import { describe, expect, it } from 'vitest';
import { MemoryProvider } from '../src/adapters/memory.ts';
import { collect } from '../src/body.ts';
import { FaultInjectingProvider, failFirst } from '../src/testing/faults.ts';
import { CountingProvider, LIST_PAGE, type RequestClass } from '../src/wrappers/counting.ts';
import { RetryingProvider } from '../src/wrappers/retry.ts';

function tally() {
  const t: Record<RequestClass, { requests: number; bytes: number }> = {
    put: { requests: 0, bytes: 0 },
    get: { requests: 0, bytes: 0 },
    delete: { requests: 0, bytes: 0 },
  };
  const sink = (kind: RequestClass, requests: number, bytes: number): void => {
    t[kind].requests += requests;
    t[kind].bytes += bytes;
  };
  return { t, sink };
}

async function* chunks(...parts: string[]): AsyncIterable<Uint8Array> {
  for (const p of parts) yield new TextEncoder().encode(p);
}

describe('CountingProvider', () => {
  it('countsEachCallByBillingClassWithItsPayload', async () => {
    const { t, sink } = tally();
    const p = new CountingProvider(new MemoryProvider(), sink);
    await p.write('a', new Uint8Array(10));
    await p.write('b', () => chunks('hello', ' world'));
    await p.stat('a');
    expect(await collect(await p.read('b', { offset: 6, length: 5 }))).toHaveLength(5);
    await p.mkdir('d');
    await p.remove('a');
    expect(t).toEqual({
      put: { requests: 3, bytes: 21 },
      get: { requests: 2, bytes: 5 },
      delete: { requests: 1, bytes: 0 },
    });
  });

  it('countsAMoveAsACopyAndADelete', async () => {
    const { t, sink } = tally();
    const mem = new MemoryProvider();
    await mem.write('x', new Uint8Array(3));
    const p = new CountingProvider(mem, sink);
    expect(p.move).toBeDefined();
    await p.move!('x', 'y');
    expect(t.put.requests).toBe(1);
    expect(t.delete.requests).toBe(1);
  });

  it('countsOneListRequestPerPageOfEntries', async () => {
    const mem = new MemoryProvider();
    for (let i = 0; i < 2 * LIST_PAGE + 1; i++) await mem.write(`f${i}`, new Uint8Array(0));
    const { t, sink } = tally();
    const p = new CountingProvider(mem, sink);
    let n = 0;
    for await (const _ of p.list('')) n++;
    expect(n).toBe(2 * LIST_PAGE + 1);
    expect(t.put.requests).toBe(3);
    const empty = tally();
    for await (const _ of new CountingProvider(new MemoryProvider(), empty.sink).list('')) n++;
    expect(empty.t.put.requests).toBe(1);
  });

  it('countsEveryAttemptBelowRetry', async () => {
    const { t, sink } = tally();
    const faulty = new FaultInjectingProvider(new MemoryProvider(), failFirst(2, ['stat']));
    const p = new RetryingProvider(new CountingProvider(faulty, sink), { sleep: async () => undefined });
    await expect(p.stat('missing')).rejects.toThrow(/not found/);
    expect(t.get.requests).toBe(3);
  });
});

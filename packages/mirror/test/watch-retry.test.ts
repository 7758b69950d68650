/**
 * A watched replica whose change notification keeps failing (a long-poll answering 503, a
 * 429 with Retry-After): the engine reads the feed instead each time and asks again after
 * a wait on Weft's one retry policy — exponential from pollIntervalMs with equal jitter,
 * capped at a minute, a Retry-After honoured, started over after a notification that went
 * through. The waits go through the injected timer: the test sees each one asked for and
 * ends it itself, so nothing here depends on how long anything takes.
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryProvider, TransientError } from '@weft/providers';
import { MirrorEngine } from '../src/engine.ts';
import { migrate } from '../src/store.ts';
import { manualTimer, readText, text } from './helpers.ts';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('a watched replica whose change notification fails', () => {
  it('is asked again after waits on the one retry policy; a Retry-After is honoured, capped', async () => {
    const db = new Database(':memory:');
    migrate(db);
    cleanups.push(() => {
      db.close();
    });
    const a = new MemoryProvider({ name: 'ann' });
    const b = new MemoryProvider({ name: 'ben' });
    // What each call of the watcher does, in order; then it waits for good (until stopped).
    const script: (() => Error | { changes: boolean })[] = [
      () => new TransientError('injected: 503'),
      () => new TransientError('injected: 503'),
      () => new TransientError('injected: 503'),
      () => new TransientError('injected: 429', 7000),
      () => new TransientError('injected: 429', 3_600_000),
      () => ({ changes: true }),
      () => new TransientError('injected: 503'),
    ];
    let calls = 0;
    const waiter = (_cursor: string, signal: AbortSignal): Promise<{ changes: boolean }> => {
      const step = script[calls++];
      if (step) {
        const r = step();
        return r instanceof Error ? Promise.reject(r) : Promise.resolve(r);
      }
      return new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('stopped'))));
    };
    const t = manualTimer();
    const engine = new MirrorEngine({
      shareId: 'w',
      db,
      pollIntervalMs: 1000,
      random: () => 0.5,
      timer: t.timer,
      replicas: [
        { id: 'a', member: 'ann', provider: a, root: '', waitForChanges: waiter },
        { id: 'b', member: 'ben', provider: b, root: '' },
      ],
    });
    await engine.quiesce(); // cursors saved: the watcher has something to ask after
    engine.start();
    cleanups.push(() => engine.stop());
    await a.write('x.txt', text('hello')); // a failed notification reads the feed instead

    const waits: number[] = [];
    for (let i = 0; i < 5; i++) {
      waits.push(await t.nextWait());
      t.fire();
    }
    // Ceilings 1, 2, 4 s, each wait three quarters of it (random 0.5 in [c/2, c)); then the
    // 7 s the service asked for; then an hour asked, capped at a minute.
    expect(waits).toEqual([750, 1500, 3000, 7000, 60_000]);
    // A notification that went through starts the count over.
    expect(await t.nextWait()).toBe(750);
    expect(calls).toBe(7);
    t.fire();
    expect(t.asked).toEqual([750, 1500, 3000, 7000, 60_000, 750]);
    expect(await readText(b, 'x.txt')).toBe('hello');
  });
});

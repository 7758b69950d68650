import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { BandwidthEstimator, OpScheduler } from '../src/scheduler.ts';

/** A controllable operation: it starts when the scheduler says, ends when the test says. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

describe('bandwidth estimate (Eq. 4)', () => {
  it('isTheHarmonicMeanOfTheLastFive', () => {
    const bw = new BandwidthEstimator(5, 1);
    for (const [bytes, ms] of [
      [1000, 1],
      [1000, 1],
      [1000, 1],
      [1000, 1],
      [1000, 1],
      [100, 1],
      [400, 1],
    ])
      bw.record(bytes!, ms!);
    // last five: 1000, 1000, 1000, 100, 400 → 5 / (3/1000 + 1/100 + 1/400)
    expect(bw.bytesPerMs()).toBeCloseTo(5 / (3 / 1000 + 1 / 100 + 1 / 400), 9);
  });
});

describe('ordered apply with FOP (Eq. 6)', () => {
  it('aBurstOfLargeUploadsDoesNotDelayALaterMkdirOrSmallSave', async () => {
    let clock = 0;
    const started: string[] = [];
    const s = new OpScheduler({
      concurrency: 1,
      now: () => clock,
      bandwidth: new BandwidthEstimator(5, 1000),
      onStart: (i) => started.push(i.paths.join('>')),
    });
    const gates = new Map<string, ReturnType<typeof gate>>();
    const submit = (path: string, bytes: number) => {
      const g = gate();
      gates.set(path, g);
      clock += 1;
      return s.submit({ namespace: 'u', paths: [path], bytes, run: () => g.promise.then(() => path) });
    };
    const done: Promise<string>[] = [];
    for (let i = 0; i < 5; i++) done.push(submit(`big${i}.iso`, 500 * 1024 * 1024));
    done.push(submit('new-folder', 0));
    done.push(submit('notes.txt', 2000));
    // Only the first large upload started; the later mkdir and small save jump the queue.
    expect(started).toEqual(['big0.iso']);
    gates.get('big0.iso')?.open();
    await done[0];
    await Promise.resolve();
    expect(started).toEqual(['big0.iso', 'new-folder']);
    gates.get('new-folder')?.open();
    await done[5];
    await Promise.resolve();
    expect(started).toEqual(['big0.iso', 'new-folder', 'notes.txt']);
    for (const g of gates.values()) g.open();
    await Promise.all(done);
    expect(started.slice(3)).toEqual(['big1.iso', 'big2.iso', 'big3.iso', 'big4.iso']);
  });

  it('relatedOperationsNeverReorderAndWaitForEachOther', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            // Several paths in one op, as a bundle has (their shared folders indexed once).
            paths: fc.uniqueArray(fc.constantFrom('a', 'a/b', 'a/b/c', 'a/b/g', 'd', 'd/e', 'd/e/h', 'f'), {
              minLength: 1,
              maxLength: 3,
            }),
            bytes: fc.constantFrom(0, 10, 1e9),
          }),
          { minLength: 1, maxLength: 25 },
        ),
        fc.array(fc.nat(), { maxLength: 60 }),
        async (ops, finishOrder) => {
          let clock = 0;
          const s = new OpScheduler({ concurrency: 3, now: () => ++clock });
          const log: { i: number; event: 'start' | 'end' }[] = [];
          const gates: ReturnType<typeof gate>[] = [];
          const promises = ops.map((op, i) => {
            const g = gate();
            gates.push(g);
            return s.submit({
              namespace: 'n',
              paths: op.paths,
              bytes: op.bytes,
              run: async () => {
                log.push({ i, event: 'start' });
                await g.promise;
                log.push({ i, event: 'end' });
              },
            });
          });
          // Finish running operations in an arbitrary order until all are done.
          let k = 0;
          while (log.filter((l) => l.event === 'end').length < ops.length) {
            const running = log.filter(
              (l) => l.event === 'start' && !log.some((m) => m.i === l.i && m.event === 'end'),
            );
            const pick = running[(finishOrder[k++ % Math.max(1, finishOrder.length)] ?? 0) % running.length];
            if (!pick) throw new Error('deadlock: nothing running');
            gates[pick.i]?.open();
            await promises[pick.i];
            await new Promise((r) => setImmediate(r));
          }
          const near = (x: string, y: string) => x === y || x.startsWith(y + '/') || y.startsWith(x + '/');
          const related = (x: readonly string[], y: readonly string[]) =>
            x.some((p) => y.some((q) => near(p, q)));
          for (let i = 0; i < ops.length; i++) {
            for (let j = i + 1; j < ops.length; j++) {
              if (!related(ops[i]!.paths, ops[j]!.paths)) continue;
              const endI = log.findIndex((l) => l.i === i && l.event === 'end');
              const startJ = log.findIndex((l) => l.i === j && l.event === 'start');
              expect(endI).toBeLessThan(startJ); // stop-and-wait, arrival order
            }
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('op observer (the op log of the cluster tests)', () => {
  it('reportsEachOpOnceWithItsTimesAndOutcome', async () => {
    const seen: {
      paths: readonly string[];
      arrivedMs: number;
      startedMs: number;
      endedMs: number;
      result: unknown;
    }[] = [];
    const s = new OpScheduler({ concurrency: 1, onDone: (d) => seen.push(d) });
    const first = gate();
    const a = s.submit({
      namespace: 'n',
      paths: ['a'],
      bytes: 0,
      run: () => first.promise.then(() => ({ seq: 1 })),
    });
    const b = s.submit({
      namespace: 'n',
      paths: ['a/b'],
      bytes: 0,
      run: () => Promise.reject(new Error('refused')),
    });
    first.open();
    await a;
    await expect(b).rejects.toThrow('refused');
    expect(seen.map((d) => d.paths)).toEqual([['a'], ['a/b']]);
    expect(seen[0]!.result).toEqual({ seq: 1 });
    expect((seen[1]!.result as Error).message).toBe('refused');
    for (const d of seen) expect(d.arrivedMs <= d.startedMs && d.startedMs <= d.endedMs).toBe(true);
    expect(seen[0]!.endedMs <= seen[1]!.startedMs).toBe(true);
  });

  it('anObserverThatThrowsDoesNotChangeTheOutcome', async () => {
    const s = new OpScheduler({
      onDone: () => {
        throw new Error('disk full');
      },
    });
    await expect(s.submit({ namespace: 'n', paths: ['x'], bytes: 0, run: async () => 7 })).resolves.toBe(7);
  });
});

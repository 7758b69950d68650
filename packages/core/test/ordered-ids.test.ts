import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { OrderedIds } from '../src/ordered-ids.ts';

describe('ordered ids', () => {
  it('behaves as a sorted set under any sequence of adds, deletes and queries', () => {
    const action = fc.oneof(
      fc.record({ add: fc.integer({ min: 0, max: 60 }) }),
      fc.record({ del: fc.integer({ min: 0, max: 60 }) }),
      fc.record({ below: fc.integer({ min: -1, max: 62 }) }),
    );
    fc.assert(
      // Short runs too, so that runs split, empty and go on every few operations.
      fc.property(
        fc.array(action, { maxLength: 200 }),
        fc.constantFrom(2, 3, 4, 512),
        (actions, runLength) => {
          const set = new OrderedIds(runLength);
          const model = new Set<number>();
          for (const a of actions) {
            if ('add' in a) {
              set.add(a.add);
              model.add(a.add);
            } else if ('del' in a) {
              expect(set.delete(a.del)).toBe(model.delete(a.del));
            } else {
              const below = [...model].filter((x) => x < a.below);
              expect(set.maxBelow(a.below)).toBe(below.length ? Math.max(...below) : undefined);
            }
            expect(set.size).toBe(model.size);
          }
          expect([...set]).toEqual([...model].sort((x, y) => x - y));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('stays compact when keys arrive in ascending order (the queue appends)', () => {
    const set = new OrderedIds();
    for (let i = 0; i < 200_000; i++) set.add(i);
    expect(set.maxBelow(150_000)).toBe(149_999);
    // Appended members fill their runs: 512 numbers to an array, not an object per member.
    expect(set.runCount).toBe(Math.ceil(200_000 / 512));
    for (let i = 0; i < 200_000; i += 2) set.delete(i);
    expect(set.maxBelow(150_000)).toBe(149_999);
    expect(set.maxBelow(149_999)).toBe(149_997);
    expect(set.size).toBe(100_000);
    for (let i = 1; i < 200_000; i += 2) set.delete(i);
    expect([set.size, set.runCount, set.maxBelow(200_000)]).toEqual([0, 0, undefined]);
  });

  it('splits a full run when a member goes in the middle, and drops emptied runs', () => {
    const set = new OrderedIds(4);
    for (const k of [10, 20, 30, 40]) set.add(k);
    expect(set.runCount).toBe(1);
    set.add(25); // into the full run: it splits
    expect([set.runCount, [...set]]).toEqual([2, [10, 20, 25, 30, 40]]);
    for (const k of [30, 40, 25]) set.delete(k);
    expect([set.runCount, set.maxBelow(100), set.maxBelow(20)]).toEqual([1, 20, 10]);
    expect(() => new OrderedIds(1)).toThrow(RangeError);
  });
});

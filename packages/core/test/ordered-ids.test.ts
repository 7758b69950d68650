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
      fc.property(fc.array(action, { maxLength: 200 }), (actions) => {
        const set = new OrderedIds();
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
      }),
      { numRuns: 2000 },
    );
  });

  it('stays shallow when keys arrive in ascending order (the queue appends)', () => {
    const set = new OrderedIds();
    for (let i = 0; i < 200_000; i++) set.add(i); // a list-shaped tree would overflow the stack in split
    expect(set.maxBelow(150_000)).toBe(149_999);
    for (let i = 0; i < 200_000; i += 2) set.delete(i);
    expect(set.maxBelow(150_000)).toBe(149_999);
    expect(set.maxBelow(149_999)).toBe(149_997);
    expect(set.size).toBe(100_000);
  });
});

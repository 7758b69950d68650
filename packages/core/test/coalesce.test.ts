import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CoalescingQueue, coalesceAll } from '../src/coalesce.ts';
import type { Op } from '../src/ops.ts';

type Node = { kind: 'file'; content: string } | { kind: 'dir' };
type Tree = Map<string, Node>;

const parentOf = (p: string): string => (p.includes('/') ? p.slice(0, p.lastIndexOf('/')) : '');
const inside = (p: string, d: string): boolean => p === d || p.startsWith(d + '/');

/** The model remote: what applying an operation does to a tree. */
function apply(tree: Tree, op: Op): void {
  const ensureParents = (p: string): void => {
    for (let q = parentOf(p); q !== ''; q = parentOf(q)) if (!tree.has(q)) tree.set(q, { kind: 'dir' });
  };
  const removeSubtree = (p: string): void => {
    for (const k of [...tree.keys()]) if (inside(k, p)) tree.delete(k);
  };
  switch (op.kind) {
    case 'put':
      ensureParents(op.path);
      tree.set(op.path, { kind: 'file', content: op.hash });
      break;
    case 'mkdir':
      ensureParents(op.path);
      if (!tree.has(op.path)) tree.set(op.path, { kind: 'dir' });
      break;
    case 'delete':
      removeSubtree(op.path);
      break;
    case 'move': {
      const moved = [...tree.entries()].filter(([k]) => inside(k, op.from));
      if (moved.length === 0) break;
      removeSubtree(op.from);
      removeSubtree(op.to);
      ensureParents(op.to);
      for (const [k, v] of moved) tree.set(op.to + k.slice(op.from.length), v);
      break;
    }
  }
}

function applyAll(initial: Tree, ops: readonly Op[]): Tree {
  const t = new Map(initial);
  for (const op of ops) apply(t, op);
  return t;
}

function snapshot(t: Tree): string[] {
  return [...t.entries()].map(([k, v]) => (v.kind === 'dir' ? `d:${k}` : `f:${k}=${v.content}`)).sort();
}

const NAMES = ['a', 'b', 'c'];
const ALL_PATHS = NAMES.flatMap((x) => [
  x,
  ...NAMES.map((y) => `${x}/${y}`),
  ...NAMES.flatMap((y) => NAMES.map((z) => `${x}/${y}/${z}`)),
]);

/**
 * Generate a valid local history: each step is an operation a scanner would emit for a
 * change a person made on a real filesystem (parents exist, moves not into themselves).
 */
function history(seed: number[], initial: Tree): Op[] {
  const local = new Map(initial);
  const ops: Op[] = [];
  let k = 0;
  const pick = <T>(xs: readonly T[]): T | undefined =>
    xs.length === 0 ? undefined : xs[(seed[k++ % seed.length] ?? 0) % xs.length];
  const parentOk = (p: string): boolean => parentOf(p) === '' || local.get(parentOf(p))?.kind === 'dir';
  for (let step = 0; step < seed.length / 3; step++) {
    const kind = pick(['put', 'put', 'mkdir', 'delete', 'move', 'move'] as const);
    let op: Op | undefined;
    if (kind === 'put') {
      const p = pick(ALL_PATHS.filter((x) => parentOk(x) && local.get(x)?.kind !== 'dir'));
      if (p) op = { kind: 'put', path: p, hash: `v${step}`, size: step, created: !local.has(p) };
    } else if (kind === 'mkdir') {
      // Also of a folder that exists: the engine queues one again when a folder deleted
      // there holds new files here (row D19).
      const p = pick(ALL_PATHS.filter((x) => parentOk(x) && local.get(x)?.kind !== 'file'));
      if (p) op = { kind: 'mkdir', path: p, created: !local.has(p) };
    } else if (kind === 'delete') {
      const p = pick([...local.keys()].sort());
      if (p) op = { kind: 'delete', path: p };
    } else {
      const from = pick([...local.keys()].sort());
      if (from) {
        const fromIsDir = local.get(from)?.kind === 'dir';
        const to = pick(
          ALL_PATHS.filter(
            (x) =>
              !inside(x, from) &&
              !inside(from, x) &&
              parentOk(x) &&
              (!local.has(x) || (!fromIsDir && local.get(x)?.kind === 'file')),
          ),
        );
        if (to) op = { kind: 'move', from, to, replaces: local.has(to) };
      }
    }
    if (op) {
      apply(local, op);
      ops.push(op);
    }
  }
  return ops;
}

const initialTree = fc.subarray(ALL_PATHS, { maxLength: 10 }).map((paths) => {
  const t: Tree = new Map();
  for (const p of paths.sort()) {
    for (let q = parentOf(p); q !== ''; q = parentOf(q)) t.set(q, { kind: 'dir' });
    if (!t.has(p)) t.set(p, p.length % 2 ? { kind: 'file', content: 'orig' } : { kind: 'dir' });
  }
  // A file that got children above becomes a folder.
  for (const p of [...t.keys()])
    if ([...t.keys()].some((q) => q.startsWith(p + '/'))) t.set(p, { kind: 'dir' });
  return t;
});

/**
 * Paths put twice within one window of creates (puts and mkdirs): the push sends such a
 * window's small files as one bundle, and a bundle may hold a path only once.
 */
function duplicatePutsInAWindow(ops: readonly Op[]): string[] {
  const out: string[] = [];
  let seen = new Set<string>();
  for (const op of ops) {
    if (op.kind === 'put') {
      if (seen.has(op.path)) out.push(op.path);
      seen.add(op.path);
    } else if (op.kind !== 'mkdir') seen = new Set();
  }
  return out;
}

describe('coalescing queue', () => {
  it('applying the coalesced queue gives the same remote state as applying every operation', () => {
    fc.assert(
      fc.property(initialTree, fc.array(fc.nat(1000), { minLength: 3, maxLength: 90 }), (initial, seed) => {
        const ops = history(seed, initial);
        const coalesced = coalesceAll(ops);
        expect(coalesced.length).toBeLessThanOrEqual(ops.length);
        expect(snapshot(applyAll(initial, coalesced))).toEqual(snapshot(applyAll(initial, ops)));
        expect(duplicatePutsInAWindow(coalesced)).toEqual([]);
      }),
      { numRuns: 5000 },
    );
  });

  it('eliminates the redundant requests the rules name', () => {
    const put = (path: string, hash: string, created = false): Op => ({
      kind: 'put',
      path,
      hash,
      size: 1,
      created,
    });
    expect(coalesceAll([put('f', '1'), put('f', '2'), put('f', '3')])).toEqual([put('f', '3')]);
    expect(coalesceAll([put('f', '1', true), { kind: 'delete', path: 'f' }])).toEqual([]);
    expect(coalesceAll([put('f', '1'), { kind: 'delete', path: 'f' }])).toEqual([
      { kind: 'delete', path: 'f' },
    ]);
    expect(
      coalesceAll([
        { kind: 'mkdir', path: 'd', created: true },
        { kind: 'delete', path: 'd' },
      ]),
    ).toEqual([]);
    expect(
      coalesceAll([
        { kind: 'move', from: 'a', to: 'b', replaces: false },
        { kind: 'move', from: 'b', to: 'c', replaces: false },
      ]),
    ).toEqual([{ kind: 'move', from: 'a', to: 'c', replaces: false }]);
    expect(
      coalesceAll([
        put('d/x', '1'),
        { kind: 'delete', path: 'd/y' },
        { kind: 'mkdir', path: 'd/z', created: true },
        { kind: 'delete', path: 'd' },
      ]),
    ).toEqual([{ kind: 'delete', path: 'd' }]);
    // Unrelated work in between does not block a merge.
    expect(coalesceAll([put('f', '1'), put('g', '1'), put('f', '2')])).toEqual([
      put('g', '1'),
      put('f', '2'),
    ]);
  });

  it('a put meets its earlier put past a mkdir of its folder queued again in between (R10)', () => {
    const put = (hash: string, created: boolean): Op => ({
      kind: 'put',
      path: 'd/x',
      hash,
      size: 1,
      created,
    });
    const mkdir: Op = { kind: 'mkdir', path: 'd', created: true };
    expect(coalesceAll([mkdir, put('1', true), mkdir, put('2', false)])).toEqual([
      mkdir,
      mkdir,
      put('2', true),
    ]);
  });

  it('keeps a related operation as a barrier', () => {
    const ops: Op[] = [
      { kind: 'put', path: 'a/x', hash: '1', size: 1, created: false },
      { kind: 'move', from: 'a/x', to: 'y', replaces: false },
      { kind: 'delete', path: 'a' },
    ];
    expect(coalesceAll(ops)).toEqual(ops);
  });
});

describe('coalescing queue positions', () => {
  it('reports every change by position, so a table mirrored from them equals the queue', () => {
    fc.assert(
      fc.property(
        initialTree,
        fc.array(fc.nat(1000), { minLength: 3, maxLength: 90 }),
        fc.array(fc.nat(20), { maxLength: 30 }),
        (initial, seed, removals) => {
          const ops = history(seed, initial);
          const q = new CoalescingQueue();
          const mirror = new Map<number, Op>();
          const sync = (): void => {
            for (const [id, op] of q.takeChanges()) {
              if (op === undefined) mirror.delete(id);
              else mirror.set(id, op);
            }
          };
          ops.forEach((op, i) => {
            q.push(op);
            // Now and then the first waiting operation is sent (engine: completeOp).
            if (removals.includes(i)) q.remove(q.entries().next().value?.id ?? -1);
            if (i % 3 === 0) sync();
          });
          sync();
          const entries = [...q.entries()];
          expect([...mirror.entries()].sort((a, b) => a[0] - b[0])).toEqual(entries.map((e) => [e.id, e.op]));
          // Positions ascend along the queue, and a fresh queue built from them is the same.
          for (let i = 1; i < entries.length; i++)
            expect(entries[i]?.id).toBeGreaterThan(entries[i - 1]?.id ?? 0);
          expect(new CoalescingQueue(entries).items).toEqual(q.items);
          // The moves after any position are the queue's (Journal.whereNow carries a queued
          // file's path through them).
          const moves = entries.filter((e) => e.op.kind === 'move');
          for (const at of [0, ...entries.map((e) => e.id)])
            expect(q.movesAfter(at)).toEqual(moves.filter((m) => m.id > at));
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('never hands out a position twice, even one whose operation is gone', () => {
    const q = new CoalescingQueue([{ id: 7, op: { kind: 'mkdir', path: 'a', created: true } }], 10);
    q.push({ kind: 'mkdir', path: 'b', created: true });
    expect([...q.entries()].map((e) => e.id)).toEqual([7, 10]);
    expect(q.remove(10)).toBe(true);
    expect(q.remove(10)).toBe(false);
    q.push({ kind: 'mkdir', path: 'c', created: true });
    expect([...q.entries()].map((e) => e.id)).toEqual([7, 11]);
    expect(
      () =>
        new CoalescingQueue([
          { id: 2, op: { kind: 'mkdir', path: 'a', created: true } },
          { id: 2, op: { kind: 'mkdir', path: 'b', created: true } },
        ]),
    ).toThrow(/ascend/);
  });
});

/**
 * The queue's cost per push must not grow with the queue (issue #16: every put into a
 * folder whose mkdir was queued re-coalesced and re-indexed the whole queue). Measured as
 * the reads of the operations' own fields, which any walk over the queue has to make —
 * so the test counts work without timing anything.
 */
describe('coalescing queue cost', () => {
  function counted(op: Op, reads: { n: number }): Op {
    const fields = Object.entries(op);
    const o = {};
    for (const [k, v] of fields) {
      Object.defineProperty(o, k, {
        enumerable: true,
        get: () => {
          reads.n += 1;
          return v as unknown;
        },
      });
    }
    return o as Op;
  }

  /** What a first scan of a tree emits: each folder's mkdir, then the files in it (sorted). */
  function scanShaped(files: number): Op[] {
    const ops: Op[] = [];
    for (let d = 0; ops.length < files; d++) {
      ops.push({ kind: 'mkdir', path: `top/d${d}`, created: true });
      for (let f = 0; f < 500; f++)
        ops.push({ kind: 'put', path: `top/d${d}/f${f}`, hash: 'h', size: 1, created: true });
    }
    return ops;
  }

  /** Reads of operation fields while pushing `ops` one by one. */
  function readsToPush(ops: readonly Op[]): number {
    const reads = { n: 0 };
    const inputs = ops.map((op) => counted(op, reads));
    reads.n = 0;
    const q = new CoalescingQueue();
    for (const op of inputs) q.push(op);
    expect(q.items).toHaveLength(ops.length);
    return reads.n;
  }

  it('does work linear in the operations pushed, not quadratic', () => {
    const small = readsToPush(scanShaped(1_000));
    const large = readsToPush(scanShaped(8_000));
    // 8× the operations: linear work is ≤ 8× (plus slack for deeper indexes); the old
    // whole-queue re-coalescing did ~64×.
    expect(large / small).toBeLessThan(10);
    // And a bounded number of reads per operation (it indexes its paths, looks them up).
    expect(large / 8_000).toBeLessThan(12);
  });

  it('absorbs a deleted folder in work proportional to what it absorbs, not to the queue', () => {
    const reads = { n: 0 };
    const q = new CoalescingQueue();
    for (const op of scanShaped(20_000)) q.push(counted(op, reads));
    reads.n = 0;
    q.push(counted({ kind: 'delete', path: 'top/d3' }, reads));
    const work = reads.n;
    const inD3 = (o: Op): boolean =>
      o.kind !== 'move' && (o.path === 'top/d3' || o.path.startsWith('top/d3/'));
    expect(q.items.filter(inD3)).toEqual([]); // mkdir (created) + 500 puts inside: all gone
    expect(q.size).toBe(20_040 - 501);
    // Some reads per absorbed operation (501 of them); walking the queue would read every
    // one of its 20,040 operations at least twice.
    expect(work).toBeLessThan(501 * 12);
  });
});

describe('coalescing queue memory', () => {
  it('holds an ordered set per folder with something inside, not one per queued file (issue #16)', () => {
    const q = new CoalescingQueue();
    const put = (path: string): Op => ({ kind: 'put', path, hash: 'h', size: 1, created: false });
    for (let i = 0; i < 1000; i++) q.push(put(`d${i % 10}/f${i}`));
    expect(q.size).toBe(1000);
    expect(q.orderedSets).toBe(10);
    // A path queued twice (a put after a delete of it: R3 makes the edit a delete, then the
    // new put stays behind it) gets its set; gone, it goes.
    q.push({ kind: 'delete', path: 'd0/f0', revision: 'r' });
    q.push(put('d0/f0'));
    expect(q.items.filter((o) => 'path' in o && o.path === 'd0/f0').map((o) => o.kind)).toEqual([
      'delete',
      'put',
    ]);
    expect(q.orderedSets).toBe(11);
    for (const { id, op } of [...q.entries()]) if ('path' in op && op.path === 'd0/f0') q.remove(id);
    expect(q.orderedSets).toBe(10);
  });
});

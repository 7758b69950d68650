/**
 * Local redundant request elimination (HyCloud §III-C, CoCloud §III-D).
 *
 * While operations wait (debounce window, offline, or the server asked us to slow down),
 * a new operation is merged into the queue: it walks back past operations on unrelated
 * paths (those commute) to the nearest related one and applies the first rule that fits;
 * if none fits, that operation is a barrier and the new one is appended.
 *
 *   R1  put p        + put p          → put p (the later content; keeps `created`)
 *   R2  put p (created) + delete p    → nothing
 *   R3  put p        + delete p       → delete p
 *   R4  mkdir p (created) + delete p  → nothing (after R5 absorbed everything inside p)
 *   R5  any op wholly inside p + delete p → delete p (deleting a folder absorbs its content)
 *   R6  mkdir p      + mkdir p        → mkdir p
 *   R7  move a→b (b was empty) + move b→c → move a→c
 *   R8  move a→b     + delete b       → delete a, then delete b
 *   R9  delete p     + delete p       → delete p
 *
 * The property test (test/coalesce.test.ts) checks, for thousands of random operation
 * sequences over a small path space with folders and moves, that applying the coalesced
 * queue to a model remote yields exactly the state that applying every operation does.
 */
import { type Op, opPaths, opsRelated, related } from './ops.ts';

function inside(p: string, dir: string): boolean {
  return p.startsWith(dir + '/');
}

/** Coalesce `op` into `queue` (not modified); returns the new queue. */
export function coalesce(queue: readonly Op[], op: Op): Op[] {
  const q = [...queue];
  let current: Op | undefined = op;
  let i = q.length - 1;
  while (current !== undefined && i >= 0) {
    const earlier = q[i] as Op;
    if (!opsRelated(earlier, current)) {
      i -= 1;
      continue;
    }
    const merged = merge(earlier, current);
    if (merged === undefined) break; // barrier
    q.splice(i, 1, ...merged.replaceEarlier);
    current = merged.carry;
    if (merged.stop) {
      if (current) q.push(current);
      return q;
    }
    i -= 1;
  }
  if (current) q.push(current);
  return q;
}

interface Merge {
  /** What replaces the earlier operation in place (possibly nothing). */
  readonly replaceEarlier: Op[];
  /** The new operation, possibly changed, still to be placed (undefined: it vanished). */
  readonly carry: Op | undefined;
  /** Place `carry` at the end now without looking further back. */
  readonly stop?: boolean;
}

function merge(earlier: Op, op: Op): Merge | undefined {
  switch (op.kind) {
    case 'put':
      // R1
      if (earlier.kind === 'put' && earlier.path === op.path) {
        return { replaceEarlier: [], carry: { ...op, created: earlier.created } };
      }
      return undefined;
    case 'mkdir':
      // R6
      if (earlier.kind === 'mkdir' && earlier.path === op.path)
        return { replaceEarlier: [], carry: earlier, stop: true };
      return undefined;
    case 'delete': {
      const p = op.path;
      // R9
      if (earlier.kind === 'delete' && earlier.path === p)
        return { replaceEarlier: [], carry: earlier, stop: true };
      // R5: wholly inside the deleted folder.
      if (opPaths(earlier).every((x) => inside(x, p))) return { replaceEarlier: [], carry: op };
      if (earlier.kind === 'put' && earlier.path === p) {
        return earlier.created ? { replaceEarlier: [], carry: undefined } : { replaceEarlier: [], carry: op }; // R2 / R3
      }
      if (earlier.kind === 'mkdir' && earlier.path === p) {
        return earlier.created ? { replaceEarlier: [], carry: undefined } : { replaceEarlier: [], carry: op }; // R4
      }
      // R8: the moved thing ends up deleted: delete it at its origin instead.
      if (earlier.kind === 'move' && earlier.to === p && !related(earlier.from, p)) {
        return { replaceEarlier: [{ kind: 'delete', path: earlier.from }], carry: op, stop: true };
      }
      return undefined;
    }
    case 'move':
      // R7
      if (
        earlier.kind === 'move' &&
        earlier.to === op.from &&
        !earlier.replaces &&
        !related(earlier.from, op.to)
      ) {
        return {
          replaceEarlier: [{ kind: 'move', from: earlier.from, to: op.to, replaces: op.replaces }],
          carry: undefined,
        };
      }
      return undefined;
  }
}

function ancestorsOf(p: string): string[] {
  const out: string[] = [];
  for (let i = p.indexOf('/'); i >= 0; i = p.indexOf('/', i + 1)) out.push(p.slice(0, i));
  return out;
}

/**
 * A queue that coalesces as operations arrive, fast for the common case: an operation on
 * paths unrelated to everything queued is appended after an index look-up (O(depth))
 * instead of a walk over the whole queue.
 */
export class CoalescingQueue {
  private ops: Op[];
  private exact = new Map<string, number>();
  private inner = new Map<string, number>();

  constructor(initial: readonly Op[] = []) {
    this.ops = [...initial];
    this.reindex();
  }

  get items(): readonly Op[] {
    return this.ops;
  }

  private bump(map: Map<string, number>, key: string, by: number): void {
    const n = (map.get(key) ?? 0) + by;
    if (n === 0) map.delete(key);
    else map.set(key, n);
  }

  private index(op: Op, by: number): void {
    for (const p of opPaths(op)) {
      this.bump(this.exact, p, by);
      for (const a of ancestorsOf(p)) this.bump(this.inner, a, by);
    }
  }

  private reindex(): void {
    this.exact.clear();
    this.inner.clear();
    for (const op of this.ops) this.index(op, 1);
  }

  private touchesQueue(op: Op): boolean {
    for (const p of opPaths(op)) {
      if (this.exact.has(p) || this.inner.has(p)) return true;
      for (const a of ancestorsOf(p)) if (this.exact.has(a)) return true;
    }
    return false;
  }

  push(op: Op): void {
    if (!this.touchesQueue(op)) {
      this.ops.push(op);
      this.index(op, 1);
      return;
    }
    this.ops = coalesce(this.ops, op);
    this.reindex();
  }
}

/** Coalesce a whole sequence, in order. */
export function coalesceAll(ops: readonly Op[]): Op[] {
  const q = new CoalescingQueue();
  for (const op of ops) q.push(op);
  return [...q.items];
}

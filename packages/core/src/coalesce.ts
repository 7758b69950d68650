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
 *   R6  mkdir p      + mkdir p        → mkdir p (the queued one, where it is)
 *   R7  move a→b (b was empty) + move b→c → move a→c
 *   R8  move a→b     + delete b       → delete a (with b's revision), then delete b
 *   R9  delete p     + delete p       → delete p (the queued one, where it is)
 *   R10 mkdir d      + put d/…/p      → the put walks on past the mkdir (they commute:
 *       the put makes its folders), so one path never has two puts in a create window
 *
 * The walk never visits an unrelated operation: the queue indexes every operation by each
 * of its paths and under each ancestor folder of them, in ordered sets of queue positions
 * (ordered-ids.ts), so "the nearest related operation before position i" is a handful of
 * O(log n) look-ups (the path itself, its ancestors, what lies inside it). A push costs
 * O(depth · log n) plus the operations it absorbs, each of which it removes — never a pass
 * over the queue (issue #16: a first scan of 10,000 files spent ~46 s re-coalescing it).
 *
 * The property test (test/coalesce.test.ts) checks, for thousands of random operation
 * sequences over a small path space with folders and moves, that applying the coalesced
 * queue to a model remote yields exactly the state that applying every operation does; a
 * second test bounds the work per push by counting reads of the operations' fields.
 */
import { type Op, opPaths, related } from './ops.ts';
import { OrderedIds } from './ordered-ids.ts';

function inside(p: string, dir: string): boolean {
  return p.startsWith(dir + '/');
}

function ancestorsOf(p: string): string[] {
  const out: string[] = [];
  for (let i = p.indexOf('/'); i >= 0; i = p.indexOf('/', i + 1)) out.push(p.slice(0, i));
  return out;
}

/** A queued operation and its position (ascending along the queue, never reused). */
export interface QueueEntry {
  readonly id: number;
  readonly op: Op;
}

/**
 * The queue. Positions are numbers that only grow: a new operation takes the next one, a
 * merged one keeps the earlier's, so a caller can mirror the queue in a table keyed by
 * position (the journal does) by applying `takeChanges()`.
 */
export class CoalescingQueue {
  /** Position → operation, in queue order (positions are inserted ascending). */
  private readonly byId = new Map<number, Op>();
  /**
   * Path → positions of the operations touching exactly that path: the position itself while
   * there is one (nearly every path: an ordered set and its node per queued file were a fifth
   * of the queue's memory at 100,000 files; issue #16), an ordered set from the second on.
   */
  private readonly atPath = new Map<string, number | OrderedIds>();
  /** Folder → positions of the operations touching a path strictly inside it. */
  private readonly under = new Map<string, OrderedIds>();
  /** Positions of the queued moves (few: where a queued file is now is carried through them). */
  private readonly moves = new OrderedIds();
  /** Positions changed since the last takeChanges: the operation now there, or undefined if gone. */
  private changes = new Map<number, Op | undefined>();
  private next: number;

  /**
   * @param initial operations already queued, in order: bare (positions 1, 2, …) or with
   *   their positions (ascending).
   * @param nextId the least position a new operation may take (e.g. one past every
   *   position ever handed out, so none is reused).
   */
  constructor(initial: readonly Op[] | readonly QueueEntry[] = [], nextId = 1) {
    let last = 0;
    initial.forEach((x, i) => {
      const e: QueueEntry = 'op' in x ? x : { id: i + 1, op: x };
      if (e.id <= last) throw new Error(`queue positions must ascend (${e.id} after ${last})`);
      last = e.id;
      this.insert(e.id, e.op);
    });
    this.next = Math.max(nextId, last + 1);
  }

  /** The operations in queue order (a copy: O(n)). */
  get items(): Op[] {
    return [...this.byId.values()];
  }

  get size(): number {
    return this.byId.size;
  }

  /** The operations with their positions, in queue order. */
  *entries(): IterableIterator<QueueEntry> {
    for (const [id, op] of this.byId) yield { id, op };
  }

  /** Ordered sets the indexes hold (their memory; tests): one per folder with something queued inside, and one per path queued more than once. */
  get orderedSets(): number {
    let n = this.under.size;
    for (const at of this.atPath.values()) if (typeof at !== 'number') n += 1;
    return n;
  }

  get(id: number): Op | undefined {
    return this.byId.get(id);
  }

  /**
   * The moves queued after position `id`, in queue order: O(moves), not O(queue), so asking
   * it once per queued file stays linear in the files (issue #16).
   */
  movesAfter(id: number): QueueEntry[] {
    const out: QueueEntry[] = [];
    if (this.moves.size === 0) return out;
    for (const m of this.moves) if (m > id) out.push({ id: m, op: this.byId.get(m) as Op });
    return out;
  }

  /** Merge `op` into the queue (rules R1–R10). */
  push(op: Op): void {
    let current: Op | undefined = op;
    let before = Number.POSITIVE_INFINITY;
    for (;;) {
      const id = this.nearestRelated(current, before);
      if (id === undefined) break;
      const earlier = this.byId.get(id) as Op;
      const merged = merge(earlier, current);
      if (merged === undefined) break; // barrier
      if (merged.replaceEarlier === undefined) this.remove(id);
      else if (merged.replaceEarlier !== earlier) this.replace(id, merged.replaceEarlier);
      current = merged.carry;
      if (current === undefined || merged.stop) break;
      before = id;
    }
    if (current !== undefined) {
      const id = this.next++;
      this.insert(id, current);
      this.changes.set(id, current);
    }
  }

  /** Drop the operation at `id` (sent, or abandoned); false if it is not queued. */
  remove(id: number): boolean {
    const op = this.byId.get(id);
    if (op === undefined) return false;
    this.unindex(id, op);
    this.byId.delete(id);
    this.changes.set(id, undefined);
    return true;
  }

  /** What changed since the last call, by position: the operation now there, or undefined if gone. */
  takeChanges(): Map<number, Op | undefined> {
    const out = this.changes;
    this.changes = new Map();
    return out;
  }

  private replace(id: number, op: Op): void {
    this.unindex(id, this.byId.get(id) as Op);
    this.byId.set(id, op); // an existing key keeps its place in the Map's order
    this.index(id, op);
    this.changes.set(id, op);
  }

  private insert(id: number, op: Op): void {
    this.byId.set(id, op);
    this.index(id, op);
  }

  private index(id: number, op: Op): void {
    const paths = opPaths(op);
    if (paths.length === 2) this.moves.add(id); // only a move has two paths
    for (const p of paths) {
      const at = this.atPath.get(p);
      if (at === undefined) this.atPath.set(p, id);
      else if (typeof at !== 'number') at.add(id);
      else if (at !== id) {
        const set = new OrderedIds();
        set.add(at);
        set.add(id);
        this.atPath.set(p, set);
      }
      for (const a of ancestorsOf(p)) setOf(this.under, a).add(id);
    }
  }

  private unindex(id: number, op: Op): void {
    const paths = opPaths(op);
    if (paths.length === 2) this.moves.delete(id);
    for (const p of paths) {
      const at = this.atPath.get(p);
      if (at === id) this.atPath.delete(p);
      else if (at !== undefined && typeof at !== 'number') {
        at.delete(id);
        if (at.size === 0) this.atPath.delete(p);
      }
      for (const a of ancestorsOf(p)) dropFrom(this.under, a, id);
    }
  }

  /**
   * The last position before `before` whose operation is related to `op`: one touching
   * one of op's paths, an ancestor folder of one, or something inside one.
   */
  private nearestRelated(op: Op, before: number): number | undefined {
    let best: number | undefined;
    const consider = (set: number | OrderedIds | undefined): void => {
      const id = typeof set === 'number' ? (set < before ? set : undefined) : set?.maxBelow(before);
      if (id !== undefined && (best === undefined || id > best)) best = id;
    };
    for (const p of opPaths(op)) {
      consider(this.atPath.get(p));
      consider(this.under.get(p));
      for (const a of ancestorsOf(p)) consider(this.atPath.get(a));
    }
    return best;
  }
}

function setOf(map: Map<string, OrderedIds>, key: string): OrderedIds {
  let s = map.get(key);
  if (s === undefined) {
    s = new OrderedIds();
    map.set(key, s);
  }
  return s;
}

function dropFrom(map: Map<string, OrderedIds>, key: string, id: number): void {
  const s = map.get(key);
  if (s === undefined) return;
  s.delete(id);
  if (s.size === 0) map.delete(key);
}

/** Coalesce `op` into `queue` (not modified); returns the new queue. */
export function coalesce(queue: readonly Op[], op: Op): Op[] {
  const q = new CoalescingQueue(queue);
  q.push(op);
  return q.items;
}

/** Coalesce a whole sequence, in order. */
export function coalesceAll(ops: readonly Op[]): Op[] {
  const q = new CoalescingQueue();
  for (const op of ops) q.push(op);
  return q.items;
}

interface Merge {
  /** What replaces the earlier operation in place (undefined: it is dropped). */
  readonly replaceEarlier: Op | undefined;
  /** The new operation, possibly changed, still to be placed (undefined: it vanished). */
  readonly carry: Op | undefined;
  /** Append `carry` now without looking further back. */
  readonly stop?: boolean;
}

function merge(earlier: Op, op: Op): Merge | undefined {
  switch (op.kind) {
    case 'put':
      // R1
      if (earlier.kind === 'put' && earlier.path === op.path) {
        return { replaceEarlier: undefined, carry: { ...op, created: earlier.created } };
      }
      // R10: a put walks on past a mkdir of a folder above it (the folder exists either
      // way), so a put queued again behind a re-queued mkdir still meets its earlier put.
      if (earlier.kind === 'mkdir' && inside(op.path, earlier.path))
        return { replaceEarlier: earlier, carry: op };
      return undefined;
    case 'mkdir':
      // R6
      if (earlier.kind === 'mkdir' && earlier.path === op.path)
        return { replaceEarlier: earlier, carry: undefined };
      return undefined;
    case 'delete': {
      const p = op.path;
      // R9
      if (earlier.kind === 'delete' && earlier.path === p)
        return { replaceEarlier: earlier, carry: undefined };
      // R5: wholly inside the deleted folder.
      if (opPaths(earlier).every((x) => inside(x, p))) return { replaceEarlier: undefined, carry: op };
      if (earlier.kind === 'put' && earlier.path === p) {
        return earlier.created
          ? { replaceEarlier: undefined, carry: undefined }
          : { replaceEarlier: undefined, carry: op }; // R2 / R3
      }
      if (earlier.kind === 'mkdir' && earlier.path === p) {
        return earlier.created
          ? { replaceEarlier: undefined, carry: undefined }
          : { replaceEarlier: undefined, carry: op }; // R4
      }
      // R8: the moved thing ends up deleted: delete it at its origin instead.
      if (earlier.kind === 'move' && earlier.to === p && !related(earlier.from, p)) {
        // It keeps the revision the delete names (the moved thing's): a delete at the origin
        // without one would remove whatever another device put there since (seed 1070).
        const atOrigin: Op =
          op.revision === undefined
            ? { kind: 'delete', path: earlier.from }
            : { kind: 'delete', path: earlier.from, revision: op.revision };
        return { replaceEarlier: atOrigin, carry: op, stop: true };
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
          replaceEarlier: { kind: 'move', from: earlier.from, to: op.to, replaces: op.replaces },
          carry: undefined,
        };
      }
      return undefined;
  }
}

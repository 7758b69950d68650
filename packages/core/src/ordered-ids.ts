/**
 * A set of integers kept in order, with the one query the coalescing queue needs: the
 * largest member below a bound. A treap (a binary search tree whose nodes also carry a
 * random priority, heap-ordered), so insert, delete and the query take O(log n) expected
 * whatever the order of the keys. The queue's keys mostly arrive in ascending order, which
 * would degrade a plain binary search tree to a list.
 */

interface Node {
  readonly key: number;
  readonly priority: number;
  left: Node | undefined;
  right: Node | undefined;
}

/** Deterministic priorities (xorshift32): runs are reproducible. */
let seed = 0x9e3779b9;
function nextPriority(): number {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return seed >>> 0;
}

/** Split into keys < key and keys ≥ key. */
function split(t: Node | undefined, key: number): [Node | undefined, Node | undefined] {
  if (t === undefined) return [undefined, undefined];
  if (t.key < key) {
    const [l, r] = split(t.right, key);
    t.right = l;
    return [t, r];
  }
  const [l, r] = split(t.left, key);
  t.left = r;
  return [l, t];
}

/** Join two treaps, every key of `a` below every key of `b`. */
function join(a: Node | undefined, b: Node | undefined): Node | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  if (a.priority > b.priority) {
    a.right = join(a.right, b);
    return a;
  }
  b.left = join(a, b.left);
  return b;
}

export class OrderedIds {
  private root: Node | undefined;
  private count = 0;

  get size(): number {
    return this.count;
  }

  has(key: number): boolean {
    let t = this.root;
    while (t !== undefined) {
      if (key === t.key) return true;
      t = key < t.key ? t.left : t.right;
    }
    return false;
  }

  add(key: number): void {
    if (this.has(key)) return;
    const node: Node = { key, priority: nextPriority(), left: undefined, right: undefined };
    const [l, r] = split(this.root, key);
    this.root = join(join(l, node), r);
    this.count += 1;
  }

  delete(key: number): boolean {
    let parent: Node | undefined;
    let t = this.root;
    while (t !== undefined && t.key !== key) {
      parent = t;
      t = key < t.key ? t.left : t.right;
    }
    if (t === undefined) return false;
    const replacement = join(t.left, t.right);
    if (parent === undefined) this.root = replacement;
    else if (parent.left === t) parent.left = replacement;
    else parent.right = replacement;
    this.count -= 1;
    return true;
  }

  /** The largest member strictly below `bound`, if any. */
  maxBelow(bound: number): number | undefined {
    let best: number | undefined;
    let t = this.root;
    while (t !== undefined) {
      if (t.key < bound) {
        best = t.key;
        t = t.right;
      } else t = t.left;
    }
    return best;
  }

  /** Members in ascending order. */
  *[Symbol.iterator](): IterableIterator<number> {
    const stack: Node[] = [];
    let t = this.root;
    while (t !== undefined || stack.length > 0) {
      while (t !== undefined) {
        stack.push(t);
        t = t.left;
      }
      const n = stack.pop() as Node;
      yield n.key;
      t = n.right;
    }
  }
}

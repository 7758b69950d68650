/**
 * Operations the engine sends to the remote. The scanner is their only producer; the
 * queue (coalesce.ts) may merge or cancel them while they wait.
 *
 * `created` records that nothing existed at the path on the remote side just before this
 * operation (known from the journal: no synced revision). It is what lets a create
 * followed by a delete cancel out entirely.
 */
export type Op =
  | {
      readonly kind: 'put';
      readonly path: string;
      readonly hash: string;
      readonly size: number;
      readonly created: boolean;
    }
  | { readonly kind: 'mkdir'; readonly path: string; readonly created: boolean }
  | {
      readonly kind: 'delete';
      readonly path: string;
      /** For a file: the synced revision being deleted, so a newer remote edit is not lost. */
      readonly revision?: string;
    }
  | {
      readonly kind: 'move';
      readonly from: string;
      readonly to: string;
      /** Something (a file) was at `to` and the move replaced it. */
      readonly replaces: boolean;
    };

/** The paths an operation touches (for a move, both ends). */
export function opPaths(op: Op): readonly string[] {
  return op.kind === 'move' ? [op.from, op.to] : [op.path];
}

function within(p: string, dir: string): boolean {
  return p === dir || p.startsWith(dir + '/');
}

/** Two paths are related when one is the other or lies inside it. */
export function related(a: string, b: string): boolean {
  return within(a, b) || within(b, a);
}

/** Operations on unrelated paths commute: their order does not change the result. */
export function opsRelated(a: Op, b: Op): boolean {
  for (const x of opPaths(a)) for (const y of opPaths(b)) if (related(x, y)) return true;
  return false;
}

export function describeOp(op: Op): string {
  return op.kind === 'move' ? `move ${op.from} -> ${op.to}` : `${op.kind} ${op.path}`;
}

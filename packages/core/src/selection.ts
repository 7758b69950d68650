/**
 * Selective sync, the pure part: which folders of the Weft storage this device keeps.
 *
 * The person chooses folders to leave out (top-level or nested); everything else is kept.
 * A path is left out when it or one of its ancestors is in the set — a lookup per ancestor,
 * O(depth) set lookups per path whatever the size of the set. Each left-out folder is in one
 * of three states (persisted in the journal, selective-sync.ts):
 *
 * - `leaving`: just unselected. It still syncs both ways until its pending local changes are
 *   uploaded; then its local copy is removed (freeing the space) and it becomes `excluded`.
 *   Nothing is ever deleted on the server.
 * - `excluded`: not on this disk. Remote changes under it are not downloaded, the scanner
 *   does not look there.
 * - `including`: selected again; its content is being downloaded. Synced as usual.
 *
 * `planSelection` turns the current states and a newly requested set into the next states.
 */
import { normalizePath } from '@weft/providers/paths';

export type SelectionState = 'leaving' | 'excluded' | 'including';

/** A requested selection that cannot be applied (nothing was changed). */
export class SelectionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SelectionError';
  }
}

/** Most folders one device may leave out (a bound on what the journal and the UI carry). */
export const MAX_EXCLUDED = 10_000;

/** `p` itself or its nearest ancestor that `has` holds, walking up one segment at a time. */
export function selfOrAncestor(p: string, has: (q: string) => boolean): string | undefined {
  if (has(p)) return p;
  for (let i = p.lastIndexOf('/'); i > 0; i = p.lastIndexOf('/', i - 1)) {
    const up = p.slice(0, i);
    if (has(up)) return up;
  }
  return undefined;
}

/**
 * Validate and normalise the folders to leave out: each a relative provider path (not the
 * root), NFC; duplicates and folders inside another listed folder are dropped. Sorted.
 * Throws SelectionError naming the first bad path.
 */
export function normalizeExcluded(paths: readonly unknown[]): string[] {
  if (!Array.isArray(paths)) throw new SelectionError('the folders to leave out must be a list of paths');
  if (paths.length > MAX_EXCLUDED)
    throw new SelectionError(`at most ${MAX_EXCLUDED} folders can be left out, got ${paths.length}`);
  const set = new Set<string>();
  for (const raw of paths) {
    if (typeof raw !== 'string') throw new SelectionError(`not a path: ${JSON.stringify(raw)}`);
    let p: string;
    try {
      p = normalizePath(raw.endsWith('/') ? raw.slice(0, -1) : raw);
    } catch (e) {
      throw new SelectionError(`cannot leave out ${JSON.stringify(raw)}: ${(e as Error).message}`);
    }
    if (p === '') throw new SelectionError('the whole folder cannot be left out; pause syncing instead');
    set.add(p);
  }
  const out: string[] = [];
  for (const p of set) {
    const parent = p.includes('/') ? p.slice(0, p.lastIndexOf('/')) : '';
    if (parent === '' || selfOrAncestor(parent, (q) => set.has(q)) === undefined) out.push(p);
  }
  return out.sort();
}

/** The states of the left-out folders, with the per-path questions discovery asks. */
export class Selection {
  private readonly states: ReadonlyMap<string, SelectionState>;

  constructor(entries: Iterable<readonly [string, SelectionState]> = []) {
    this.states = new Map(entries);
  }

  /**
   * Not synced at all here: under a folder whose local copy is gone (`excluded`). Asked of
   * every path a scan finds (IgnoreRules): with nothing left out, no walk up the path.
   */
  isExcluded(p: string): boolean {
    if (this.states.size === 0) return false;
    return selfOrAncestor(p, (q) => this.states.get(q) === 'excluded') !== undefined;
  }

  /** Left out by the person's choice (`leaving` or `excluded`). */
  isDeselected(p: string): boolean {
    if (this.states.size === 0) return false;
    return (
      selfOrAncestor(p, (q) => {
        const s = this.states.get(q);
        return s === 'leaving' || s === 'excluded';
      }) !== undefined
    );
  }

  /** The folders the person left out (sorted). */
  deselected(): string[] {
    return [...this.states]
      .filter(([, s]) => s !== 'including')
      .map(([p]) => p)
      .sort();
  }

  /** Folders in `state` (sorted). */
  inState(state: SelectionState): string[] {
    return [...this.states]
      .filter(([, s]) => s === state)
      .map(([p]) => p)
      .sort();
  }

  state(p: string): SelectionState | undefined {
    return this.states.get(p);
  }

  entries(): [string, SelectionState][] {
    return [...this.states].sort((a, b) => (a[0] < b[0] ? -1 : 1));
  }

  get size(): number {
    return this.states.size;
  }
}

/**
 * The next states when the person asks to leave out exactly `requested` (normalised):
 *
 * - a folder already left out keeps its state (an `including` one goes back to `leaving`:
 *   part of it may be here already);
 * - a newly left-out folder inside an `excluded` one is `excluded` (nothing of it is here);
 *   any other newly left-out folder is `leaving` (its files are here until they go);
 * - an `excluded` folder no longer left out becomes `including` (downloaded again; folders
 *   still left out inside it stay out); a `leaving` one is simply kept;
 * - an `including` folder not inside a left-out one stays `including` until downloaded.
 */
export function planSelection(
  current: ReadonlyMap<string, SelectionState>,
  requested: readonly string[],
): Map<string, SelectionState> {
  const wanted = new Set(normalizeExcluded(requested));
  const next = new Map<string, SelectionState>();
  const inWanted = (p: string): boolean => selfOrAncestor(p, (q) => wanted.has(q)) !== undefined;
  for (const p of wanted) {
    const was = current.get(p);
    if (was === 'leaving' || was === 'excluded') next.set(p, was);
    else if (was === 'including') next.set(p, 'leaving');
    else {
      const parent = p.includes('/') ? p.slice(0, p.lastIndexOf('/')) : '';
      const covering =
        parent === '' ? undefined : selfOrAncestor(parent, (q) => current.get(q) === 'excluded');
      next.set(p, covering !== undefined ? 'excluded' : 'leaving');
    }
  }
  for (const [p, was] of current) {
    if (wanted.has(p)) continue;
    if (inWanted(p)) continue; // covered by a folder left out now: that one decides
    if (was === 'excluded' || was === 'including') next.set(p, 'including');
  }
  return next;
}

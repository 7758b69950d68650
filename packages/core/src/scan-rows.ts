/**
 * What the scanner (scanner.ts) compares and how: a disk entry against its journal row, the
 * row a new entry gets, the path sets of a scope, and the names the server reserves.
 */
import type { FileRow, IndexRow } from './journal/journal.ts';

/** An entry found on disk, as the scan holds it. */
export interface DiskEntry {
  path: string;
  /** Where it is on disk: its folder (one string shared by the folder's entries) and name. */
  dir: string;
  name: string;
  kind: 'file' | 'dir';
  size: number;
  mtimeNs: bigint;
  inode: bigint;
  /** Its content's hash when it was hashed, or 'unsettled' (changed meanwhile) or 'gone'. */
  hash?: string;
}

/** A file unchanged by every cheap measure: its row's size, mtime and inode, and a hash known. */
export function unchanged(e: DiskEntry, row: IndexRow): boolean {
  return (
    e.kind === 'file' &&
    row.kind === 'file' &&
    row.size === e.size &&
    row.mtimeNs === e.mtimeNs &&
    row.inode === e.inode &&
    row.hashed
  );
}

/** The scope entries not inside another (each journal row is read once). */
export function outermost(scope: readonly string[]): string[] {
  if (scope.includes('')) return [''];
  const out = new Set<string>();
  for (const s of [...new Set(scope)].sort()) if (!selfOrAncestorIn(s, out)) out.add(s);
  return [...out];
}

/** A journal row as the scan holds it: `storedAt`, where its whole row is, once found moved. */
export type Known = IndexRow & { readonly storedAt?: string };

export function properAncestorIn(p: string, set: ReadonlySet<string>): boolean {
  if (set.size === 0) return false;
  for (let i = p.indexOf('/'); i >= 0; i = p.indexOf('/', i + 1)) if (set.has(p.slice(0, i))) return true;
  return false;
}

export function selfOrAncestorIn(p: string, set: ReadonlySet<string>): boolean {
  return set.has(p) || properAncestorIn(p, set);
}

export function newRow(e: DiskEntry, hash: string | null): FileRow {
  return {
    path: e.path,
    kind: e.kind,
    size: e.size,
    mtimeNs: e.mtimeNs,
    inode: e.inode,
    hash,
    syncedRev: null,
    syncedHash: null,
    signature: null,
    signatureBlock: null,
  };
}

/** The server's link files end in this (proxy-server store/link-file.ts): names it refuses. */
const RESERVED_SUFFIX = '.weftlink';

/** Why the server refuses a name it reserves for itself, or undefined. */
export function reservedNameReason(name: string): string | undefined {
  // Asked of every name a scan finds: look at the end only (a character that lowercases
  // into ASCII is one UTF-16 unit, so this is the whole name's lowercase's end).
  const at = name.length - RESERVED_SUFFIX.length;
  return at >= 0 && name.charCodeAt(at) === 0x2e && name.slice(at).toLowerCase() === RESERVED_SUFFIX
    ? `names ending in ${RESERVED_SUFFIX} are reserved by the server and are not synced`
    : undefined;
}

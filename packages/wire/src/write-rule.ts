/**
 * The server's rules for conditional writes, pure, shared by the proxy (HybridStore and its
 * bundle ingest) and the client's in-memory proxy (MemoryServer), so the fake cannot drift.
 *
 * The rule every content write at a path follows — a single write (writeFile) and each
 * entry of a bundle (writeFiles) alike — as one pure function of what is at the path now,
 * the base revision the client wrote against (docs/formats/api.md "Conditional writes")
 * and the content's SHA-256:
 *
 * | at the path now             | base                        | decision                    |
 * |-----------------------------|-----------------------------|-----------------------------|
 * | a folder                    | any                         | refuse (ALREADY_EXISTS)     |
 * | a file with the same SHA-256| any                         | unchanged (no conflict)     |
 * | nothing                     | any                         | write                       |
 * | a file, other content       | undefined (unconditional)   | write                       |
 * | a file, other content       | its revision                | write                       |
 * | a file, content in `own`    | any                         | write                       |
 * | a file, other content       | null (must not exist)       | conflict: conflicted copy   |
 * | a file, other content       | another revision            | conflict: conflicted copy   |
 *
 * Same content already current is never a conflict (Syncthing's rule).
 *
 * `own`: contents this device sent to the path before and never heard the answer for (its
 * agent was killed with the write on the wire, and the server finished it after the new
 * agent had read the feed; issue #16). A file holding one of them is the device's own
 * write, as good as its base: writing over it loses nothing the device has not seen.
 */
import type { ConflictReport } from './api.ts';

export type WriteDecision =
  | { readonly action: 'refuse-folder' }
  | { readonly action: 'unchanged' }
  | { readonly action: 'write' }
  | {
      readonly action: 'conflict';
      /** The client's base (null: it expected no file there). */
      readonly baseRevision: string | null;
      readonly serverRevision: string;
    };

export interface WriteTarget {
  readonly kind: 'file' | 'dir';
  readonly revision: string;
  readonly sha256?: string | undefined;
}

export function decideWrite(
  current: WriteTarget | undefined,
  base: string | null | undefined,
  sha256: string,
  own?: readonly string[],
): WriteDecision {
  if (current?.kind === 'dir') return { action: 'refuse-folder' };
  if (current === undefined) return { action: 'write' };
  if (current.sha256 === sha256) return { action: 'unchanged' };
  if (base === undefined || base === current.revision || isOwn(current, own)) return { action: 'write' };
  return { action: 'conflict', baseRevision: base, serverRevision: current.revision };
}

/** The report of a conflict decision: the client's content went to `conflictPath`. */
export function conflictReport(
  path: string,
  conflictPath: string,
  d: Extract<WriteDecision, { action: 'conflict' }>,
): ConflictReport {
  return {
    path,
    conflictPath,
    kind: 'write-write',
    baseRevision: d.baseRevision,
    serverRevision: d.serverRevision,
  };
}

/**
 * A delete against `base` (docs/formats/api.md "Conditional writes"): a file there with
 * another revision is kept and the delete is dropped (delete-modified); nothing there, a
 * folder, an unconditional delete or the base revision itself: the delete goes ahead.
 */
export function deleteConflict(
  path: string,
  current: WriteTarget | undefined,
  base: string | null | undefined,
  own?: readonly string[],
): ConflictReport | undefined {
  if (typeof base !== 'string' || current?.kind !== 'file' || current.revision === base) return undefined;
  if (isOwn(current, own)) return undefined;
  return {
    path,
    conflictPath: '',
    kind: 'delete-modified',
    baseRevision: base,
    serverRevision: current.revision,
  };
}

/** A file holding content the writer sent and never heard back about (see decideWrite). */
function isOwn(current: WriteTarget, own: readonly string[] | undefined): boolean {
  return current.sha256 !== undefined && own !== undefined && own.includes(current.sha256);
}

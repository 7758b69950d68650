/** The entries of a share's ordered log. Paths are relative to each replica's root. */

export type Op =
  /** A file's content at `path` is now `sha256` (content in the log row until applied). */
  | {
      readonly type: 'file';
      readonly path: string;
      readonly revision: string;
      readonly sha256: string;
      readonly size: number;
    }
  /** A folder exists at `path`. */
  | { readonly type: 'dir'; readonly path: string }
  /**
   * Whatever was at `path` (file or folder with its content) is gone. `files` lists the
   * versions the origin had there when it deleted (path relative to `path`, '' for a deleted
   * file itself → SHA-256): only those are removed elsewhere; anything the deleter had not
   * seen (a concurrent edit or new file) is kept.
   */
  | { readonly type: 'delete'; readonly path: string; readonly files?: Readonly<Record<string, string>> }
  /**
   * `from` was moved to `to` on the origin. `revisions` maps each moved file (relative to
   * `to`, '' for a moved file itself) to its revision and hash on the origin afterwards.
   */
  | {
      readonly type: 'move';
      readonly from: string;
      readonly to: string;
      readonly kind: 'file' | 'dir';
      readonly revisions: Readonly<Record<string, { readonly revision: string; readonly sha256: string }>>;
      /** The versions the origin had under `from` before the move (as in a delete's `files`). */
      readonly files?: Readonly<Record<string, string>>;
    };

export interface LoggedOp {
  readonly seq: number;
  /** The replica the change was made on (already applied there). */
  readonly origin: string;
  readonly op: Op;
  readonly data: Uint8Array | undefined;
  readonly doneTargets: readonly string[];
  readonly createdMs: number;
}

/** Paths an op touches; a folder-level op is a barrier (see drain.ts). */
export function opPath(op: Op): string {
  return op.type === 'move' ? op.from : op.path;
}

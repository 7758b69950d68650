/**
 * The journal changes one propagation made, as data: a propagator (sync/propagate/*) writes
 * the disk and asks the server, and returns what the journal must record of it; the loop
 * that drove it commits the list in one transaction (`commitChanges`). So a crash either
 * finds the whole effect of an item recorded or none of it, and the engine itself never
 * writes the journal's tables.
 *
 * The methods have the names and meaning of the Journal's own. Two kinds of write are not
 * changes and stay direct calls: those that must be durable before a request goes (the
 * contents about to be sent, `markSent`; a large upload's transfer, `saveTransfer`), and
 * the feed position and held paths discovery keeps (`setMeta`).
 */
import type { Op } from '../ops.ts';
import type { FileRow, Journal } from './journal.ts';

export type JournalChange =
  | { readonly kind: 'upsert'; readonly row: FileRow }
  | {
      readonly kind: 'synced';
      readonly path: string;
      readonly rev: string;
      readonly hash: string;
      readonly signature: Buffer | null;
      readonly signatureBlock: number | null;
    }
  | { readonly kind: 'delete'; readonly path: string }
  | { readonly kind: 'delete-under'; readonly path: string }
  | { readonly kind: 'move'; readonly from: string; readonly to: string }
  | { readonly kind: 'enqueue'; readonly ops: readonly Op[] }
  | { readonly kind: 'complete-op'; readonly id: number }
  | { readonly kind: 'clear-sent'; readonly path: string }
  | { readonly kind: 'clear-transfer'; readonly path: string }
  | {
      readonly kind: 'local-name';
      readonly path: string;
      readonly localName: string;
      readonly reason: string;
    }
  | { readonly kind: 'forget-local-names'; readonly path: string }
  | {
      readonly kind: 'delta-history';
      readonly path: string;
      readonly probs: readonly number[];
      readonly n: number;
    };

export class JournalChanges {
  private readonly list: JournalChange[] = [];

  /** The changes, in the order they were made. */
  get changes(): readonly JournalChange[] {
    return this.list;
  }

  get size(): number {
    return this.list.length;
  }

  /** Take on another propagation's changes after these. */
  add(other: JournalChanges | undefined): this {
    if (other) this.list.push(...other.list);
    return this;
  }

  upsertFile(row: FileRow): this {
    this.list.push({ kind: 'upsert', row });
    return this;
  }

  /** The row at `path` (if any) was synced at `rev` with content `hash` (Journal.setSynced). */
  setSynced(
    path: string,
    rev: string,
    hash: string,
    signature: Buffer | null = null,
    signatureBlock: number | null = null,
  ): this {
    this.list.push({ kind: 'synced', path, rev, hash, signature, signatureBlock });
    return this;
  }

  deleteFile(path: string): this {
    this.list.push({ kind: 'delete', path });
    return this;
  }

  deleteFilesUnder(path: string): this {
    this.list.push({ kind: 'delete-under', path });
    return this;
  }

  moveFiles(from: string, to: string): this {
    this.list.push({ kind: 'move', from, to });
    return this;
  }

  enqueue(ops: readonly Op[]): this {
    if (ops.length > 0) this.list.push({ kind: 'enqueue', ops });
    return this;
  }

  completeOp(id: number): this {
    this.list.push({ kind: 'complete-op', id });
    return this;
  }

  clearSent(path: string): this {
    this.list.push({ kind: 'clear-sent', path });
    return this;
  }

  clearTransfer(path: string): this {
    this.list.push({ kind: 'clear-transfer', path });
    return this;
  }

  recordLocalName(path: string, localName: string, reason: string): this {
    this.list.push({ kind: 'local-name', path, localName, reason });
    return this;
  }

  forgetLocalNamesUnder(path: string): this {
    this.list.push({ kind: 'forget-local-names', path });
    return this;
  }

  setDeltaHistory(path: string, probs: readonly number[], n: number): this {
    this.list.push({ kind: 'delta-history', path, probs, n });
    return this;
  }

  /** Does any change touch the local names (the status lists them)? */
  get touchesLocalNames(): boolean {
    return this.list.some((c) => c.kind === 'local-name' || c.kind === 'forget-local-names');
  }
}

/**
 * Record `changes` in one transaction, in order; nothing of them if one fails. Runs of
 * cleared sent marks and synced columns (without a signature) are written a statement per
 * run (of up to 64 rows: journal/rows.ts), not one per file (a bundle's outcomes, issue
 * #16): each touches its own table, and the completed operations between them only the
 * queue (written when the transaction ends),
 * so only the order among the same kind matters, which a run keeps; any other change ends
 * the run first.
 */
export function commitChanges(journal: Journal, changes: JournalChanges): void {
  if (changes.size === 0) return;
  journal.transaction(() => {
    let cleared: string[] = [];
    let synced: { path: string; rev: string; hash: string }[] = [];
    const flush = (): void => {
      if (cleared.length > 0) journal.clearSentMany(cleared);
      if (synced.length > 0) journal.setSyncedMany(synced);
      cleared = [];
      synced = [];
    };
    for (const c of changes.changes) {
      if (c.kind === 'clear-sent') cleared.push(c.path);
      else if (c.kind === 'synced' && c.signature === null && c.signatureBlock === null)
        synced.push({ path: c.path, rev: c.rev, hash: c.hash });
      else if (c.kind === 'complete-op') apply(journal, c);
      else {
        flush();
        apply(journal, c);
      }
    }
    flush();
  });
}

function apply(journal: Journal, c: JournalChange): void {
  switch (c.kind) {
    case 'upsert':
      return journal.upsertFile(c.row);
    case 'synced':
      return journal.setSynced(c.path, c.rev, c.hash, c.signature, c.signatureBlock);
    case 'delete':
      return journal.deleteFile(c.path);
    case 'delete-under':
      return journal.deleteFilesUnder(c.path);
    case 'move':
      return journal.moveFiles(c.from, c.to);
    case 'enqueue':
      journal.enqueueMany(c.ops);
      return;
    case 'complete-op':
      return journal.completeOp(c.id, () => undefined);
    case 'clear-sent':
      return journal.clearSent(c.path);
    case 'clear-transfer':
      return journal.clearTransfer(c.path);
    case 'local-name':
      return journal.recordLocalName(c.path, c.localName, c.reason);
    case 'forget-local-names':
      return journal.forgetLocalNamesUnder(c.path);
    case 'delta-history':
      return journal.setDeltaHistory(c.path, c.probs, c.n);
  }
}

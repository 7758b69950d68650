/**
 * What a scan (scanner.ts) is asked and what it answers: its options, its result, and the
 * error of a scan asked to stop.
 */
import type { LocalPaths } from './local-path.ts';
import type { Op } from './ops.ts';

export interface ScanOptions {
  /** Only look at these subtrees (provider paths); default: everything. */
  readonly scope?: readonly string[];
  /** Files modified more recently than this are left for later. Default 1000 ms. */
  readonly settleMs?: number;
  /** The disk folds case: report names that differ only by case (a renamed-case file). Default false. */
  readonly detectCaseClashes?: boolean;
  readonly now?: () => number;
  /** How local names map to remote ones. Default: this host's rules, long names from the journal. */
  readonly paths?: LocalPaths;
  /**
   * Checked between files and folders: once it returns true the scan stops and throws
   * ScanStopped (a partial walk must never read as deletions). The engine's stop().
   */
  readonly shouldStop?: () => boolean;
  /**
   * Called as the scan goes, each time it has compared CHUNK_ENTRIES more entries, with the
   * operations found so far (the array grows; moves first, then in path order; deletions
   * only in the result) and the writer of their index rows (ScanResult.commitThrough): the
   * caller may queue ops[0, n) with commitThrough(n) and send them while the scan goes on.
   * It may return how many it took for good (n): the scanner then lets go of ops[0, n) — their
   * places stay, empty, so indexes hold — and a first scan of 1,000,000 files holds only the
   * operations not yet taken, not ~200 B for every file found (issue #16).
   */
  readonly found?: (
    ops: readonly Op[],
    commitThrough: (end: number) => void,
  ) => Promise<number | void> | number | void;
}

/** The scan was asked to stop (ScanOptions.shouldStop) before it finished; nothing was written. */
export class ScanStopped extends Error {
  constructor() {
    super('scan stopped');
    this.name = 'ScanStopped';
  }
}

/** Entries hashed and compared between two turns of the event loop (and two calls of ScanOptions.found). */
export const CHUNK_ENTRIES = 1_000;
export interface ScanResult {
  /** With ScanOptions.found, the operations it took for good are empty places here. */
  readonly ops: Op[];
  readonly unsettled: string[];
  readonly warnings: string[];
  readonly scannedFiles: number;
  /** Files (not folders) that vanished from disk in this scan, counting those inside deleted folders. */
  readonly deletedFiles: number;
  /** Files the journal knew in the scanned scope before this scan. */
  readonly knownFilesBefore: number;
  /** Entries found under an encoded local name (recorded in the journal by `commit`). */
  readonly storedAs: number;
  /** Files whose content was read to hash it (0 when every stat matched the journal). */
  readonly hashedFiles: number;
  /**
   * Entries (found on disk, or rows of the journal) the comparison still held once the
   * journal was read: those that changed, appeared or went — 0 for a no-change rescan.
   */
  readonly heldForComparison: number;
  /**
   * Writes the index rows this scan found. The scanner changes nothing itself: the caller
   * runs this in the same transaction that queues `ops` (Journal.enqueueMany), so a crash
   * can never record a change without the operation that sends it.
   */
  readonly commit: () => void;
  /**
   * Writes the index rows that belong with `ops[0, end)` and were not written yet: each row
   * goes with the operation before which the scanner found it, so queueing the operations
   * in batches, each batch's rows in its transaction, keeps the same guarantee.
   */
  readonly commitThrough: (end: number) => void;
}

/**
 * Local discovery: the scanner (scanner.ts, the only producer of operations) walks the
 * dirty subtrees, and what it found goes into the durable queue, coalesced, in batches that
 * yield to the event loop (enqueueScan, issue #16) — unless it would delete more than the
 * mass-delete guard allows: then it is queued but the folder pauses until the person answers.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { type Observation, decide } from '../../decisions.ts';
import { JournalChanges } from '../../journal/changes.ts';
import { PARTIAL_PREFIX } from '../../local-fs.ts';
import type { Op } from '../../ops.ts';
import { ENQUEUE_BATCH, type ScanResult, ScanStopped, enqueueScan, scan } from '../../scanner.ts';
import type { EarlyPush } from '../early-push.ts';
import type { SyncContext } from '../context.ts';

export interface LocalDiscoveryOptions {
  readonly folder: string;
  /** Files younger than this are left for a later scan. */
  readonly settleMs: number;
  /** Pause when a scan deletes more than this share of the files it knew… */
  readonly massDeleteFraction: number;
  /** …or more than this many files (at least 10). */
  readonly massDeleteCount: number;
  /** The engine is stopping: the scan throws ScanStopped, the enqueue stops between batches. */
  readonly stopped: () => boolean;
}

/**
 * Scan `scope` and queue what changed. `queued`: done; `mass-delete`: queued, and the
 * folder must pause for the person's answer; `stopped`: stopping, the next scan finds the rest.
 */
export async function discoverLocal(
  ctx: SyncContext,
  scope: readonly string[],
  o: LocalDiscoveryOptions,
  early?: EarlyPush,
): Promise<'queued' | 'mass-delete' | 'stopped'> {
  ctx.status.update({ state: 'scanning' });
  // The puts' hashes are read after this: an upload may trust them (propagate/upload-read.ts).
  const startedMs = Date.now();
  // With a push beside the scan (early-push.ts), what it has found is queued as it goes.
  let done = 0;
  let eliminated = 0;
  // Returns how many operations are queued for good: the scanner lets go of them. In
  // transactions of ENQUEUE_BATCH operations (with their rows), a turn of the event loop
  // between them: a chunk's 1,000 in one held the agent's loop 50–80 ms of CPU (issue #16).
  const found = async (ops: readonly Op[], commitThrough: (end: number) => void): Promise<number> => {
    if (!early || ops.length === done) return done;
    while (done < ops.length) {
      if (o.stopped()) return done;
      const end = Math.min(ops.length, done + ENQUEUE_BATCH);
      const kept = ops.slice(done, end).filter(sendsIt);
      ctx.scanHashes.add(kept, startedMs);
      const before = ctx.journal.pendingCount();
      const queued = ctx.journal.enqueueMany(kept, () => commitThrough(end));
      eliminated += kept.length - (queued - before);
      done = end;
      ctx.status.update({ pendingOperations: queued });
      early.queued();
      if (done < ops.length) await new Promise<void>((resolve) => setImmediate(resolve));
    }
    await early.room(); // the scan stays a bounded number of operations ahead of the push
    return done;
  };
  const scanned = await scan(o.folder, ctx.journal, ctx.ignore, {
    scope,
    settleMs: o.settleMs,
    now: ctx.now,
    detectCaseClashes: ctx.caseInsensitive,
    shouldStop: o.stopped,
    paths: ctx.paths,
    ...(early ? { found } : {}),
  });
  ctx.trace('scan', scanned.ops);
  ctx.scanHashes.add(done === 0 ? scanned.ops : scanned.ops.slice(done), startedMs);
  // What is left to queue: the operations found after the last early batch (and their rows).
  const rest: ScanResult =
    done === 0
      ? scanned
      : {
          ...scanned,
          ops: scanned.ops.slice(done),
          commitThrough: (end) => scanned.commitThrough(end === Number.POSITIVE_INFINITY ? end : done + end),
        };
  const result = decideScanned(rest);
  for (const w of result.warnings) ctx.status.warn(w);
  if (isMassDelete(result.deletedFiles, result.knownFilesBefore, o)) {
    await early?.finish(true); // nothing of this scan's deletes goes before the person's answer
    if (!(await enqueueScan(ctx.journal, result, { shouldStop: o.stopped })).complete) return 'stopped';
    ctx.status.update({
      state: 'paused',
      error: `This sync would delete ${result.ops.filter((op) => op.kind === 'delete').length} items. Confirm to continue, or restore them.`,
    });
    return 'mass-delete';
  }
  // In batches, yielding between them: the UI and SIGTERM are answered meanwhile (issue #16).
  const queued = await enqueueScan(ctx.journal, result, {
    shouldStop: o.stopped,
    onBatch: (n) => {
      ctx.status.update({ pendingOperations: n });
      early?.queued();
    },
  });
  if (!queued.complete) return 'stopped';
  if (result.storedAs > 0) ctx.showLocalNames();
  ctx.status.save('operationsEliminated', eliminated + queued.eliminated);
  if (result.unsettled.length > 0) setTimeout(() => ctx.markDirty(result.unsettled), o.settleMs).unref();
  return 'queued';
}

/**
 * What the scan found changed here, as the decision table sees it: one observation per
 * operation's path, the remote side as last synced (the pull ran first; what it brought is
 * in the journal), so a new file or folder is D2, an edit D7, a delete D11. Each operation
 * is asked of the table and kept only when its row says to send it; a move is no row (the
 * server answers it: D24–D26).
 */
function decideScanned(result: ScanResult): ScanResult {
  const keep: number[] = [];
  result.ops.forEach((op, i) => {
    if (sendsIt(op)) keep.push(i);
  });
  if (keep.length === result.ops.length) return result;
  // The rows found before a dropped operation still go with the next kept one.
  return {
    ...result,
    ops: keep.map((i) => result.ops[i] as Op),
    commitThrough: (end) =>
      result.commitThrough(end >= keep.length ? Number.POSITIVE_INFINITY : (keep[end] as number)),
  };
}

/** Whether the decision table's row for a scanned operation says to send it (decideScanned). */
function sendsIt(op: Op): boolean {
  const seen = observe(op);
  return seen === undefined || decide(seen).action === (op.kind === 'delete' ? 'delete-remote' : 'upload');
}

/** The base the scan compared with, where an operation does not carry its hash. */
const SYNCED = 'as synced';
/** A folder's content marker (a folder has no hash). */
const FOLDER = 'a folder';

/** The observation of an operation's path: the base as the journal had it, the remote side the same. */
function observe(op: Op): Observation | undefined {
  switch (op.kind) {
    case 'put':
      return op.created
        ? { path: op.path, base: undefined, local: op.hash, remote: undefined, kind: { local: 'file' } }
        : { path: op.path, base: SYNCED, local: op.hash, remote: SYNCED, kind: { local: 'file' } };
    case 'mkdir':
      return op.created
        ? { path: op.path, base: undefined, local: FOLDER, remote: undefined, kind: { local: 'dir' } }
        : undefined;
    case 'delete':
      return { path: op.path, base: SYNCED, local: undefined, remote: SYNCED, kind: {} };
    case 'move':
      return undefined;
  }
}

function isMassDelete(deletedFiles: number, knownFiles: number, o: LocalDiscoveryOptions): boolean {
  if (deletedFiles === 0) return false;
  const count = Math.max(10, o.massDeleteCount);
  return (
    deletedFiles > count ||
    (deletedFiles >= 10 && deletedFiles / Math.max(1, knownFiles) > o.massDeleteFraction)
  );
}

/**
 * The person chose to restore after a mass delete: drop the queued deletes and forget the
 * feed position, so the next pull lists the folder and brings the files back.
 */
export function restoreMassDelete(ctx: SyncContext): void {
  const dropped = new JournalChanges();
  for (const q of ctx.journal.pendingOps()) if (q.op.kind === 'delete') dropped.completeOp(q.id);
  ctx.commit(dropped);
  ctx.journal.setMeta('cursor', '');
}

/** Does the filesystem under `dir` fold case? (A probe file looked up by another case.) */
export async function probeCaseInsensitive(dir: string): Promise<boolean> {
  // The temp-file prefix keeps the probe invisible to the watcher and the scanner.
  const probe = nodePath.join(dir, `${PARTIAL_PREFIX}CaseProbe`);
  await fsp.writeFile(probe, '');
  try {
    await fsp.access(nodePath.join(dir, `${PARTIAL_PREFIX}caseprobe`));
    return true;
  } catch {
    return false;
  } finally {
    await fsp.rm(probe, { force: true });
  }
}

export { ScanStopped };

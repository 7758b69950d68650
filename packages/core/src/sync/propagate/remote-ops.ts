/**
 * Propagation, local → remote namespace: queued mkdirs, deletes and moves sent as one
 * `ops` request (D2 for a folder, D11, a local move); each operation leaves the queue with
 * its effect, the whole request's in one transaction; a refusal is then mended by
 * sync/refusals.ts (D23–D26).
 */
import type { FileOp } from '@weft/wire';
import { JournalChanges } from '../../journal/changes.ts';
import type { FileRow } from '../../journal/journal.ts';
import type { Op } from '../../ops.ts';
import { RemoteError } from '../../remote/proxy-client.ts';
import type { SyncContext } from '../context.ts';
import { repairFailedOp } from '../refusals.ts';
import { noteServerConflict } from './conflict.ts';

export async function sendOps(ctx: SyncContext, run: readonly { id: number; op: Op }[]): Promise<void> {
  const wire: FileOp[] = [];
  /** Where each queued operation's wire operations start; a narrowed delete may have several or none. */
  const starts: number[] = [];
  // Contents sent to a path to delete whose answer never came: a file holding one is ours.
  const deletes = run.flatMap(({ op }) => (op.kind === 'delete' && op.revision ? [op.path] : []));
  const unanswered = ctx.journal.unanswered(deletes);
  for (const { op } of run) {
    starts.push(wire.length);
    switch (op.kind) {
      case 'mkdir':
        wire.push({ op: 'mkdir', path: op.path });
        break;
      case 'delete': {
        const narrowed = op.revision ? undefined : await narrowFolderDelete(ctx, op.path);
        if (narrowed) wire.push(...narrowed.map((path): FileOp => ({ op: 'delete', path })));
        else {
          const own = unanswered.get(op.path);
          wire.push({
            op: 'delete',
            path: op.path,
            ...(op.revision ? { baseRevision: op.revision } : {}),
            ...(own ? { own } : {}),
          });
        }
        break;
      }
      case 'move':
        wire.push({ op: 'move', from: op.from, to: op.to });
        break;
      case 'put':
        throw new Error('puts go through bundles or transfers');
    }
  }
  starts.push(wire.length);
  const answers = wire.length > 0 ? await ctx.client.ops(wire) : [];
  // One result per queued operation: a narrowed delete's first refusal, else its last answer.
  const results = run.map((_, i) => {
    const mine = answers.slice(starts[i], starts[i + 1]);
    return mine.find((r) => r.status !== 'applied') ?? mine.at(-1) ?? { status: 'applied' as const, seq: 0 };
  });
  ctx.trace(
    'ops',
    wire.map((w, i) => ({ ...w, result: results[i] })),
  );
  const failed: { op: Op; code: string }[] = [];
  // Each operation leaves the queue with its effect; the request's in one transaction.
  const out = new JournalChanges();
  const upserted = new Map<string, FileRow>();
  run.forEach((q, i) => {
    const r = results[i];
    out.completeOp(q.id);
    // Gone there: what was sent to it and never answered can no longer be its content.
    if (r?.status === 'applied' && q.op.kind === 'delete') out.clearSent(q.op.path);
    if (r?.status === 'applied' && (q.op.kind === 'mkdir' || q.op.kind === 'move') && r.entry) {
      const path = q.op.kind === 'mkdir' ? q.op.path : q.op.to;
      const row = upserted.get(path) ?? ctx.journal.getFile(path);
      // A moved file whose content is not our base was edited there meanwhile: its
      // revision is not ours to take. The base stays, so our queued edit meets theirs
      // as a conflict (D23), and the pull brings theirs down (D8) or keeps both (D10).
      const newerThere = row?.kind === 'file' && r.entry.kind === 'file' && r.entry.sha256 !== row.syncedHash;
      if (row && !newerThere) {
        const next = { ...row, syncedRev: r.entry.revision };
        upserted.set(path, next);
        out.upsertFile(next);
        // A folder made here, recorded synced: a pull steps over its echo (own-changes.ts).
        // A move's echo is read as before (the rows under a moved folder are not all ours).
        if (q.op.kind === 'mkdir') ctx.ownChanges.note(r.seq);
      }
    }
  });
  ctx.commit(out);
  run.forEach((q, i) => {
    const r = results[i];
    if (r?.status === 'error')
      ctx.status.activity({ kind: 'error', path: describe(q.op), detail: r.error.message });
    if (r?.status === 'applied') {
      // A folder made here is added, not moved (issue #19: a copied tree showed "Moved").
      const kind = q.op.kind === 'delete' ? 'deleted' : q.op.kind === 'mkdir' ? 'added' : 'moved';
      ctx.status.activity({ kind, path: describe(q.op) });
    }
    if (r?.status === 'conflict') noteServerConflict(ctx, q.op, r);
    if (r?.status === 'error') failed.push({ op: q.op, code: r.error.code });
  });
  for (const f of failed) await repairFailedOp(ctx, f.op, f.code);
}

/**
 * A folder delete queued here, sent after the pull brought down what another device put
 * into that folder meanwhile (D3: the rows under it are synced again): the server would
 * delete those too. Only what this device does not hold as synced goes — each top-most
 * such entry under the folder, the folder itself kept. Undefined: nothing came down into
 * it, the plain delete stands.
 */
async function narrowFolderDelete(ctx: SyncContext, p: string): Promise<string[] | undefined> {
  const kept = new Set<string>();
  for (const r of ctx.journal.filesUnder(p)) {
    if (r.path === p || r.syncedRev === null) continue;
    // The synced entry and every folder between it and p.
    for (let q = r.path; q !== p; q = q.slice(0, q.lastIndexOf('/'))) kept.add(q);
  }
  if (kept.size === 0) return undefined;
  const listing = await ctx.client.list(p, true).catch((e: unknown) => {
    // Gone there, or no longer a folder: nothing of ours to delete.
    if (e instanceof RemoteError && (e.code === 'NOT_FOUND' || e.code === 'NOT_A_FOLDER'))
      return { entries: [] };
    throw e;
  });
  const gone: string[] = [];
  for (const e of [...listing.entries].sort((a, b) => (a.path < b.path ? -1 : 1))) {
    if (e.path === p || kept.has(e.path) || gone.some((g) => e.path.startsWith(g + '/'))) continue;
    gone.push(e.path);
  }
  return gone;
}

function describe(op: Op): string {
  return op.kind === 'move' ? op.to : op.path;
}

/**
 * Propagation, local → remote namespace: queued mkdirs, deletes and moves sent as one
 * `ops` request (D2 for a folder, D11, a local move), each outcome recorded with its queue
 * entry in one transaction; a refusal is mended by sync/refusals.ts (D23–D26).
 */
import type { FileOp } from '@weft/wire';
import type { Op } from '../../ops.ts';
import type { SyncContext } from '../context.ts';
import { repairFailedOp } from '../refusals.ts';
import { noteServerConflict } from './conflict.ts';

export async function sendOps(ctx: SyncContext, run: readonly { id: number; op: Op }[]): Promise<void> {
  const wire: FileOp[] = run.map(({ op }) => {
    switch (op.kind) {
      case 'mkdir':
        return { op: 'mkdir', path: op.path };
      case 'delete':
        return { op: 'delete', path: op.path, ...(op.revision ? { baseRevision: op.revision } : {}) };
      case 'move':
        return { op: 'move', from: op.from, to: op.to };
      case 'put':
        throw new Error('puts go through bundles or transfers');
    }
  });
  const results = await ctx.client.ops(wire);
  ctx.trace(
    'ops',
    wire.map((w, i) => ({ ...w, result: results[i] })),
  );
  const failed: { op: Op; code: string }[] = [];
  run.forEach((q, i) => {
    const r = results[i];
    ctx.journal.completeOp(q.id, () => {
      if (!r) return;
      if (r.status === 'applied' && (q.op.kind === 'mkdir' || q.op.kind === 'move') && r.entry) {
        const path = q.op.kind === 'mkdir' ? q.op.path : q.op.to;
        const row = ctx.journal.getFile(path);
        // A moved file whose content is not our base was edited there meanwhile: its
        // revision is not ours to take. The base stays, so our queued edit meets theirs
        // as a conflict (D23), and the pull brings theirs down (D8) or keeps both (D10).
        const newerThere =
          row?.kind === 'file' && r.entry.kind === 'file' && r.entry.sha256 !== row.syncedHash;
        if (row && !newerThere) ctx.journal.upsertFile({ ...row, syncedRev: r.entry.revision });
      }
      if (r.status === 'error')
        ctx.status.activity({ kind: 'error', path: describe(q.op), detail: r.error.message });
    });
    if (r?.status === 'applied') {
      ctx.status.activity({ kind: q.op.kind === 'delete' ? 'deleted' : 'moved', path: describe(q.op) });
    }
    if (r?.status === 'conflict') noteServerConflict(ctx, q.op, r);
    if (r?.status === 'error') failed.push({ op: q.op, code: r.error.code });
  });
  for (const f of failed) await repairFailedOp(ctx, f.op, f.code);
}

function describe(op: Op): string {
  return op.kind === 'move' ? op.to : op.path;
}

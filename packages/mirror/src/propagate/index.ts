/** The propagators: one log entry applied to one target replica, by the entry's kind. */
import type { EngineContext, Replica } from '../context.ts';
import { MissingContentError } from '../errors.ts';
import type { LoggedOp } from '../ops.ts';
import { applyDelete } from './delete.ts';
import { applyDir } from './dir.ts';
import { applyFile } from './file.ts';
import { applyMove } from './move.ts';

export { applyDelete, removeDuplicates } from './delete.ts';

export async function applyTo(ctx: EngineContext, t: Replica, logged: LoggedOp): Promise<void> {
  const { op } = logged;
  switch (op.type) {
    case 'file':
      if (!logged.data) throw new MissingContentError(`log entry ${logged.seq} has no content`);
      return applyFile(ctx, t, op.path, op.sha256, logged.data, logged);
    case 'dir':
      return applyDir(ctx, t, op.path);
    case 'delete':
      return applyDelete(ctx, t, op.path, op.files);
    case 'move':
      return applyMove(ctx, t, op, logged);
  }
}

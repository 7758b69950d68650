/** Propagating a folder: made on the target (a file already there stays; nothing else to do). */
import type { EngineContext, Replica } from '../context.ts';
import { isAlreadyExists } from '../provider-failures.ts';
import { fullPath } from '../replica-view.ts';
import type { KnownEntry } from '../store.ts';

export async function applyDir(ctx: EngineContext, t: Replica, path: string): Promise<void> {
  try {
    await t.provider.mkdir(fullPath(t, path));
  } catch (e) {
    if (!isAlreadyExists(e)) throw e;
    ctx.log.warn({ replica: t.id, path }, 'a file is where a folder goes; left as it is');
    return;
  }
  const k: KnownEntry = { kind: 'dir', revision: '', sha256: '' };
  await ctx.store.setKnown(t.id, path, k);
  ctx.view.setSeen(t, path, k);
  ctx.stats.applied += 1;
}

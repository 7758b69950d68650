/**
 * The local → remote half of a pass: the durable queue sent in order, each kind by its
 * propagator. A window of creates (puts and mkdirs, no deletes or moves) sends all its
 * folders first, then all its files — within such a window the two kinds commute — small
 * files in bundles, large ones one by one; a run of other operations goes as one request.
 * Server conflicts met on the way are mended after each request (D23).
 */
import { MAX_BUNDLE_BYTES } from '@weft/wire';
import type { Op } from '../ops.ts';
import type { SyncContext } from './context.ts';
import { sendOps } from './propagate/remote-ops.ts';
import { uploadBundles } from './propagate/upload-bundle.ts';
import { ReadSlabs } from './propagate/read-slabs.ts';
import { uploadLarge } from './propagate/upload-large.ts';
import { resolveServerConflicts } from './refusals.ts';

export interface PushControl {
  /** Paused by the person or the mass-delete guard: stop sending (checked between requests). */
  readonly paused: () => boolean;
  /** The engine is stopping: return between requests. */
  readonly stopped: () => boolean;
  /** Weft storage is full: uploads wait, other operations go (storage-usage.ts). */
  readonly storageFull: () => boolean;
  /**
   * Sending while the scan still queues (early-push.ts): resolves true once more is queued,
   * false once the scan is over. Asked when the queue is empty, and when all it holds is
   * less than a bundle's worth of creates (then sent once the scan is over).
   */
  readonly more?: () => Promise<boolean>;
  /**
   * With `more`: whether the scan may still queue creates. While it may, a run of small files
   * ends with its last full bundle; the part-filled rest stays queued for the next run, with
   * what the scan queues next (else each run ended with a part-filled bundle and waited for
   * every bundle on its way: issue #16).
   */
  readonly scanning?: () => boolean;
}

/** While the scan goes on, creates wait until there are this many bytes of them (a bundle's worth). */
const EARLY_WINDOW_BYTES = MAX_BUNDLE_BYTES;

export async function push(ctx: SyncContext, control: PushControl): Promise<void> {
  for (;;) {
    if (control.paused() || control.stopped()) return;
    const queue = [...ctx.journal.pendingOps()];
    if (queue.length === 0) {
      if (control.more && (await control.more())) continue;
      return;
    }
    if (control.storageFull()) return pushWhileFull(ctx, queue);
    // While the scan goes on its status stays "scanning".
    ctx.status.update(
      control.more
        ? { pendingOperations: queue.length }
        : { state: 'syncing', pendingOperations: queue.length },
    );
    const window: typeof queue = [];
    let bytes = 0;
    for (const q of queue) {
      if (q.op.kind !== 'put' && q.op.kind !== 'mkdir') break;
      window.push(q);
      if (q.op.kind === 'put') bytes += q.op.size;
    }
    if (
      control.more &&
      window.length === queue.length &&
      bytes < EARLY_WINDOW_BYTES &&
      (await control.more())
    )
      continue;
    if (window.length === 0) {
      const run: typeof queue = [];
      for (const q of queue) {
        if (q.op.kind === 'put' || q.op.kind === 'mkdir' || run.length >= 500) break;
        run.push(q);
      }
      await sendOps(ctx, run);
      await resolveServerConflicts(ctx);
      continue;
    }
    const mkdirs = window.filter((q) => q.op.kind === 'mkdir');
    for (let i = 0; i < mkdirs.length; i += 500) await sendOps(ctx, mkdirs.slice(i, i + 500));
    // Small or large by the size the scan hashed: no stat (and no second resolve of the path)
    // per file before its read — 100,000 of them were a tenth of a first sync's agent CPU
    // (issue #16). A file that grew to large since is handed back by the bundle upload.
    const small: typeof queue = [];
    const large: typeof queue = [];
    for (const q of window) if (q.op.kind === 'put') (q.op.size >= ctx.small ? large : small).push(q);
    // All of them in one stream of full bundles, BUNDLES_IN_FLIGHT on their way while the next
    // fills; a stop lands between requests. (In slices of 2,000 files, each slice ended with a
    // part-filled bundle and waited for every bundle on its way: a 10,029-file drop sent a
    // bundle at a time, with idle gaps on both sides; issue #16.)
    if (control.stopped()) return;
    const holdTail = window.length === queue.length && (control.scanning?.() ?? false);
    large.push(...(await uploadBundles(ctx, small, new ReadSlabs(), control.stopped, holdTail)));
    if (control.stopped()) return;
    await resolveServerConflicts(ctx);
    for (const q of large) {
      if (control.paused() || control.stopped()) return;
      ctx.commit(await uploadLarge(ctx, q.id, q.op as Extract<Op, { kind: 'put' }>));
      await resolveServerConflicts(ctx);
    }
  }
}

/**
 * Weft storage is full: uploads stay queued; send, in queue order, the operations that
 * cannot depend on a waiting upload (deletes free space; moves and folders add none): those
 * on paths unrelated to every upload, or other operation, held back before them.
 */
async function pushWhileFull(ctx: SyncContext, queue: readonly { id: number; op: Op }[]): Promise<void> {
  const held: string[] = [];
  const related = (a: string, b: string): boolean =>
    a === b || a.startsWith(b + '/') || b.startsWith(a + '/') || a === '' || b === '';
  const send: { id: number; op: Op }[] = [];
  for (const q of queue) {
    const paths = q.op.kind === 'move' ? [q.op.from, q.op.to] : [q.op.path];
    if (q.op.kind === 'put' || paths.some((p) => held.some((h) => related(p, h)))) held.push(...paths);
    else send.push(q);
  }
  for (let i = 0; i < send.length; i += 500) await sendOps(ctx, send.slice(i, i + 500));
  await resolveServerConflicts(ctx);
}

/**
 * The local → remote half of a pass: the durable queue sent in order, each kind by its
 * propagator. A window of creates (puts and mkdirs, no deletes or moves) sends all its
 * folders first, then all its files — within such a window the two kinds commute — small
 * files in bundles, large ones beside them (large-lane.ts); a run of other operations goes
 * as one request, once no large upload is on its way. Server conflicts met on the way are
 * mended after each request (D23).
 */
import { MAX_BUNDLE_BYTES } from '@weft/wire';
import type { Op } from '../ops.ts';
import type { SyncContext } from './context.ts';
import { LargeLane } from './large-lane.ts';
import { BundleFlight } from './propagate/bundle-flight.ts';
import { sendOps } from './propagate/remote-ops.ts';
import { uploadBundles } from './propagate/upload-bundle.ts';
import { ReadSlabs } from './propagate/read-slabs.ts';
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
  /** The bundles on their way, when the caller watches them (early-push.ts `room()`). */
  readonly bundles?: BundleFlight;
}

/** While the scan goes on, creates wait until there are this many bytes of them (a bundle's worth). */
const EARLY_WINDOW_BYTES = MAX_BUNDLE_BYTES;

/**
 * What one push has on its way: large uploads (large-lane.ts) and bundles (bundle-flight.ts),
 * both kept across its windows of creates, and the read buffers its bundles reuse.
 */
interface OnTheirWay {
  readonly lane: LargeLane;
  readonly bundles: BundleFlight;
  readonly slabs: ReadSlabs;
}

export async function push(ctx: SyncContext, control: PushControl): Promise<void> {
  const lane = new LargeLane(ctx, () => control.paused() || control.stopped());
  const bundles = control.bundles ?? new BundleFlight();
  let failure: { error: unknown } | undefined;
  try {
    await pushWith(ctx, control, { lane, bundles, slabs: new ReadSlabs() });
  } catch (error) {
    failure = { error };
  }
  // Never return with an upload on its way (the next push would send it again).
  await bundles.settle().catch((error: unknown) => (failure ??= { error }));
  await lane.settle();
  if (failure) throw failure.error;
  lane.check();
  if (!control.paused() && !control.stopped()) await resolveServerConflicts(ctx);
}

/** Wait until nothing is on its way: what comes next may depend on it. */
async function drain(way: OnTheirWay): Promise<void> {
  try {
    await way.bundles.settle();
  } finally {
    await way.lane.drain();
  }
}

type Put = { id: number; op: Extract<Op, { kind: 'put' }> };

async function pushWith(ctx: SyncContext, control: PushControl, way: OnTheirWay): Promise<void> {
  const { lane, bundles } = way;
  const more = (): Promise<boolean> => (control.more ? control.more() : Promise.resolve(false));
  for (;;) {
    lane.check();
    if (control.paused() || control.stopped()) return;
    // What is on its way (or about to be) is not sent again.
    const queue = [...ctx.journal.pendingOps()].filter((q) => !lane.has(q.id) && !bundles.has(q.id));
    if (queue.length === 0) {
      if (control.more && (await more())) continue;
      if (!lane.busy && bundles.size === 0) return;
      await drain(way);
      await resolveServerConflicts(ctx);
      continue;
    }
    if (control.storageFull()) {
      await drain(way);
      return pushWhileFull(ctx, queue);
    }
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
    if (control.more && window.length === queue.length && bytes < EARLY_WINDOW_BYTES && (await more()))
      continue;
    if (window.length === 0) {
      const run: typeof queue = [];
      for (const q of queue) {
        if (q.op.kind === 'put' || q.op.kind === 'mkdir' || run.length >= 500) break;
        run.push(q);
      }
      // A delete or a move may touch a file on its way: that goes first.
      await drain(way);
      await resolveServerConflicts(ctx);
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
    const large: Put[] = [];
    for (const q of window) if (q.op.kind === 'put') (q.op.size >= ctx.small ? large : small).push(q as Put);
    if (control.stopped()) return;
    // Large files go beside the bundles, not after them (issue #16: a 2.1 MiB file's transfer,
    // commit and signature stopped a 10,029-file drop's bundles for ~3 s). A path met twice in
    // the window (a journal written before R10), or a put of a path on its way, waits for what
    // is on its way.
    const paths = new Set<string>();
    for (const q of window) if (q.op.kind === 'put') paths.add(q.op.path);
    let twice = paths.size < small.length + large.length;
    for (const q of window) if (q.op.kind === 'put' && lane.holds(q.op.path)) twice = true;
    for (const q of large) if (bundles.holds(q.op.path)) twice = true;
    if (twice) await drain(way);
    if (!twice) for (const q of large) lane.add(q);
    // All of them in one stream of full bundles, BUNDLES_IN_FLIGHT on their way while the next
    // fills; a stop lands between requests. (In slices of 2,000 files, each slice ended with a
    // part-filled bundle and waited for every bundle on its way: a 10,029-file drop sent a
    // bundle at a time, with idle gaps on both sides; issue #16.)
    const holdTail = window.length === queue.length && (control.scanning?.() ?? false);
    // The bundles of this window may still be on their way as the next one begins.
    const grown = await uploadBundles(ctx, small, way.slabs, control.stopped, holdTail, bundles);
    if (control.stopped()) return;
    await resolveServerConflicts(ctx);
    if (twice) {
      // One at a time, in queue order, after the bundles: as before the lane.
      await bundles.settle();
      for (const q of [...large, ...(grown as Put[])]) {
        lane.add(q);
        await lane.drain();
        await resolveServerConflicts(ctx);
      }
    } else for (const q of grown as Put[]) lane.add(q);
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

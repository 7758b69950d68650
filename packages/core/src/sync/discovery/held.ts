/**
 * Remote changes held back while a local move waits in the queue. Until a move `from → to`
 * made here reaches the server, the journal's rows at `to` describe what the server holds
 * at `from`, and the server's `to` is not what those rows were synced from: a remote change
 * at (or above, or under) either end is about another entry than the rows say. Decided now
 * it would go wrong — a file another device put at `to` taken for an edit of ours (D8, our
 * moved file replaced by theirs), a stale delete of `to` trashing ours, a new file at
 * `from` brought back beside ours.
 *
 * So the pull holds such changes: it remembers their paths (in the journal, so a restart
 * keeps them) and leaves them to the push, which sends the move (or meets the taken name,
 * D24). Each held path that no queued move touches any longer — after the scan, which may
 * have merged the move into a delete, and again after the push — is made to match the
 * server as it is then (remote.ts releaseHeld → repairPath: what it holds comes down, what
 * it lacks goes, edits kept). With no move queued, nothing is held.
 */
import { related } from '../../ops.ts';
import type { SyncContext } from '../context.ts';

const KEY = 'heldPaths';

/** The ends of every queued move, or undefined when no move waits. */
function queuedMoveEnds(ctx: SyncContext): string[] | undefined {
  const ends: string[] = [];
  // The queue's index of moves, not a walk of the queue (100,000 queued files each pull).
  for (const { op } of ctx.journal.queuedMoves()) if (op.kind === 'move') ends.push(op.from, op.to);
  return ends.length > 0 ? ends : undefined;
}

/**
 * A predicate for this pull: true for a change at these paths that a queued move holds
 * (remembered for after the push). A path at or under a move's end is remembered as that
 * end (its repair compares the whole subtree), one above it as itself. Cheap when no move
 * waits.
 */
export function holdForQueuedMoves(ctx: SyncContext): (...paths: string[]) => boolean {
  const ends = queuedMoveEnds(ctx);
  if (ends === undefined) return () => false;
  const held = new Set(heldPaths(ctx));
  return (...paths) => {
    if (!paths.some((p) => ends.some((e) => related(p, e)))) return false;
    let grew = false;
    for (const p of paths) {
      const key = ends.find((e) => p === e || p.startsWith(e + '/')) ?? p;
      if (held.has(key)) continue;
      held.add(key);
      grew = true;
      ctx.trace('held', { path: key });
    }
    if (grew) ctx.journal.setMeta(KEY, JSON.stringify([...held].sort()));
    return true;
  };
}

function heldPaths(ctx: SyncContext): string[] {
  const raw = ctx.journal.getMeta(KEY);
  return raw ? (JSON.parse(raw) as string[]) : [];
}

/**
 * The held paths to release now: those no queued move touches any more. Paths a move still
 * waits on (paused, storage full, stopped) stay held.
 */
export function releasable(ctx: SyncContext): string[] {
  const held = heldPaths(ctx);
  if (held.length === 0) return [];
  const ends = queuedMoveEnds(ctx) ?? [];
  return held.filter((p) => !ends.some((e) => related(p, e)));
}

/** `p` matches the server again: no longer held. */
export function released(ctx: SyncContext, p: string): void {
  ctx.journal.setMeta(KEY, JSON.stringify(heldPaths(ctx).filter((h) => h !== p)));
}

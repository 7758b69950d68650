/**
 * The bookkeeping of a log entry at its origin (the decision of the mirror engine): the
 * origin's books (`known`) take in the change it made, the share's head moves, and the
 * answer says whether and how the entry propagates. Pure over the store: no provider call.
 */
import type { EngineContext } from './context.ts';
import type { LoggedOp } from './ops.ts';
import type { ShareStore } from './store.ts';
import { isUnder, rebase } from './tree-paths.ts';

/**
 * false: nothing to propagate; true: apply to the other replicas; 'origin-too': a delete
 * that must also be applied at the origin, or a move that left duplicates there to remove
 * (see drain.ts applyOp).
 */
export type Propagation = boolean | 'origin-too';

/**
 * Forget `path` on a replica after a delete: the files listed in `files` (all, without a
 * list) and folders left without known files; with `head`, the share's head likewise.
 */
export async function forgetDeleted(
  store: ShareStore,
  replica: string,
  path: string,
  files: Readonly<Record<string, string>> | undefined,
  head: boolean,
  replicaToo = true,
): Promise<void> {
  const listed = (p: string, sha: string): boolean => {
    if (!files) return true;
    return files[p === path ? '' : p.slice(path.length + 1)] === sha;
  };
  const forget = async (
    entries: { path: string; kind: 'file' | 'dir'; sha256: string }[],
    drop: (p: string) => Promise<void>,
  ): Promise<void> => {
    const kept = entries
      .filter((k) => !listed(k.path, k.kind === 'dir' ? 'dir' : k.sha256))
      .map((k) => k.path);
    for (const k of entries) if (!kept.some((f) => isUnder(f, k.path))) await drop(k.path);
  };
  if (replicaToo)
    await forget(await store.knownUnder(replica, path), (p) => store.setKnown(replica, p, undefined));
  if (head) await forget(await store.headUnder(path), (p) => store.setHead(p, undefined));
}

/**
 * Record the origin's new state and the share head (see Propagation), and — in the same
 * transaction — the entry's own progress: done when nothing propagates, else done at its
 * origin (not for 'origin-too': the origin's write follows, drain.ts). Recording the
 * progress apart from the books would not survive a crash in between: the next engine would
 * book the entry again, find the share's head already at its version (its own first pass)
 * and propagate nothing — a file that never reaches the other members, with nothing pending
 * (the controller failover of issue #18).
 */
export function applyAtOrigin(ctx: EngineContext, logged: LoggedOp): Promise<Propagation> {
  return ctx.store.transaction(async (store): Promise<Propagation> => {
    const p = await bookAtOrigin(ctx, store, logged);
    if (p === false) await store.markDone(logged.seq);
    else if (p === true)
      await store.markTargetDone(logged.seq, [...new Set([...logged.doneTargets, logged.origin])]);
    return p;
  });
}

async function bookAtOrigin(ctx: EngineContext, store: ShareStore, logged: LoggedOp): Promise<Propagation> {
  const { facts } = ctx;
  const { op, origin } = logged;
  switch (op.type) {
    case 'file': {
      // A state of the origin the engine has since replaced (a conditional write or
      // remove made after this entry was read from the feed): not propagated.
      if ((await store.touchedAt(origin, op.path)) >= logged.seq) return false;
      const head = await store.head(op.path);
      if (head?.kind === 'file') facts.previousHead.set(logged.seq, head.sha256);
      await store.setKnown(origin, op.path, { kind: 'file', revision: op.revision, sha256: op.sha256 });
      if (head?.kind === 'file' && head.sha256 === op.sha256) return false;
      await store.setHead(op.path, { kind: 'file', sha256: op.sha256 });
      return true;
    }
    case 'dir': {
      if ((await store.touchedAt(origin, op.path)) >= logged.seq) return false;
      const head = await store.head(op.path);
      await store.setKnown(origin, op.path, { kind: 'dir', revision: '', sha256: '' });
      if (head?.kind === 'dir') return false;
      await store.setHead(op.path, { kind: 'dir', sha256: '' });
      return true;
    }
    case 'delete': {
      // Propagated even when the head has nothing there: a replica may still hold a
      // version kept by an earlier conflict (an edit that won over a move or delete).
      if (await store.touchedUnderSince(origin, op.path, logged.seq)) {
        await forgetDeleted(store, origin, op.path, op.files, true, false);
        return 'origin-too';
      }
      await forgetDeleted(store, origin, op.path, op.files, true);
      return true;
    }
    case 'move': {
      // Only what the origin moved (op.files) moves in our books; a version the engine
      // wrote there after the move was read from the feed stays where it is.
      const listed = (path: string, kind: 'file' | 'dir', sha: string): boolean =>
        !op.files ||
        op.files[path === op.from ? '' : path.slice(op.from.length + 1)] === (kind === 'dir' ? 'dir' : sha);
      const all = await store.knownUnder(origin, op.from);
      const touched = new Map<string, number>();
      for (const k of all) if (k.kind === 'file') touched.set(k.path, await store.touchedAt(origin, k.path));
      // A file the engine wrote there after the move was read is not what the member
      // moved, even with the same content (another member's copy of it): it stays in
      // the books where it is and, being a duplicate of what moved, is removed there.
      const duplicates = all.filter(
        (k) =>
          k.kind === 'file' && (touched.get(k.path) ?? 0) >= logged.seq && listed(k.path, 'file', k.sha256),
      );
      const keptKnown = all
        .filter((k) => !listed(k.path, k.kind, k.sha256) || duplicates.includes(k))
        .map((k) => k.path);
      const known = all.filter((k) => !keptKnown.some((f) => isUnder(f, k.path)));
      for (const k of known) await store.setKnown(origin, k.path, undefined);
      for (const k of known) {
        const to = rebase(k.path, op.from, op.to);
        const rel = op.kind === 'file' ? '' : to.slice(op.to.length + 1);
        const rev = op.revisions[rel];
        if (k.kind === 'file' && !rev) continue;
        await store.setKnown(origin, to, rev ? { kind: 'file', ...rev } : k);
      }
      await store.setKnown(
        origin,
        op.to,
        op.kind === 'file'
          ? {
              kind: 'file',
              revision: op.revisions['']?.revision ?? '',
              sha256: op.revisions['']?.sha256 ?? '',
            }
          : { kind: 'dir', revision: '', sha256: '' },
      );
      const allHead = await store.headUnder(op.from);
      const keptHead = allHead.filter((h) => !listed(h.path, h.kind, h.sha256)).map((h) => h.path);
      const head = allHead.filter((h) => !keptHead.some((f) => isUnder(f, h.path)));
      const headFiles = allHead.filter((h) => h.kind === 'file');
      const moved = Object.keys(op.revisions);
      if (
        headFiles.length === moved.length &&
        headFiles.every((h) => {
          const rel = op.kind === 'file' ? '' : h.path.slice(op.from.length + 1);
          return op.revisions[rel]?.sha256 === h.sha256;
        })
      ) {
        facts.nativeOk.add(logged.seq);
      }
      for (const h of head) await store.setHead(h.path, undefined);
      for (const h of head) await store.setHead(rebase(h.path, op.from, op.to), h);
      if (op.kind === 'dir') await store.setHead(op.to, { kind: 'dir', sha256: '' });
      // What the origin holds at the destination is what the move propagates: the
      // share's version there, and the origin's known state, whatever we knew before.
      for (const [rel, rev] of Object.entries(op.revisions)) {
        const to = rel === '' ? op.to : `${op.to}/${rel}`;
        await store.setHead(to, { kind: 'file', sha256: rev.sha256 });
        await store.setKnown(origin, to, { kind: 'file', revision: rev.revision, sha256: rev.sha256 });
      }
      if (duplicates.length === 0) return true;
      facts.movedDuplicates.set(logged.seq, duplicates);
      return 'origin-too';
    }
  }
}

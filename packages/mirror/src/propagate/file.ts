/**
 * Propagating a file version to a target: a write conditional on the revision the engine
 * last knew there (or on nothing being there). When the condition fails and the target
 * holds neither the known version nor the incoming one, someone edited concurrently: theirs
 * stays in place and the incoming one is written as a conflicted copy, which is itself
 * appended to the log and so reaches every replica.
 */
import type { Entry } from '@weft/providers';
import { conflictedCopyPath } from '@weft/wire';
import { type EngineContext, type Replica, memberOf } from '../context.ts';
import { isAlreadyExists, isNotFound, isPreconditionFailed } from '../provider-failures.ts';
import type { LoggedOp } from '../ops.ts';
import { fullPath, snapshot } from '../replica-view.ts';
import type { KnownEntry } from '../store.ts';

/** A write of ours on `t`: into its books, its view, and the revisions whose echo is dropped. */
export async function recordWrite(
  ctx: EngineContext,
  t: Replica,
  path: string,
  e: Entry,
  sha256: string,
): Promise<void> {
  const k: KnownEntry = { kind: 'file', revision: e.revision, sha256 };
  await ctx.store.transaction(async (tx) => {
    await tx.setKnown(t.id, path, k);
    await tx.touch(t.id, path);
  });
  ctx.view.setSeen(t, path, { ...k, hash: e.hash?.value });
  ctx.view.addOurs(t, path, e.revision);
  ctx.stats.applied += 1;
}

export async function applyFile(
  ctx: EngineContext,
  t: Replica,
  path: string,
  sha256: string,
  data: Uint8Array,
  logged: LoggedOp,
): Promise<void> {
  let base = await ctx.store.known(t.id, path);
  const full = fullPath(t, path);
  if (base?.kind === 'file' && base.sha256 === sha256) {
    // The books already record this version there (its write was recorded, the entry's
    // progress not: a crash in between): not written twice if the target still holds it.
    const cur = await snapshot(t, path, false);
    if (cur?.kind === 'file' && cur.revision === base.revision) return;
  }
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      if (base?.kind === 'dir') break; // a folder where the file goes: conflict
      const e = await t.provider.write(
        full,
        data,
        base
          ? { ifRevision: base.revision, sha256, size: data.byteLength }
          : { ifNotExists: true, sha256, size: data.byteLength },
      );
      await recordWrite(ctx, t, path, e, sha256);
      return;
    } catch (e) {
      if (!isPreconditionFailed(e) && !isNotFound(e) && !isAlreadyExists(e)) throw e;
    }
    const cur = await snapshot(t, path, true);
    if (!cur) {
      base = undefined; // deleted concurrently: the edit wins
      continue;
    }
    if (cur.kind === 'dir') break;
    if (cur.sha256 === sha256) {
      // Already there (a write whose answer was lost, or the same edit made twice).
      await ctx.store.setKnown(t.id, path, { kind: 'file', revision: cur.revision, sha256 });
      ctx.view.setSeen(t, path, { kind: 'file', revision: cur.revision, sha256, hash: cur.hash });
      return;
    }
    if (!base && cur.sha256 === ctx.facts.previousHead.get(logged.seq)) {
      // The target holds the share's previous version though we had lost track of it
      // (e.g. it moved there on the target itself): not a concurrent edit.
      base = { kind: 'file', revision: cur.revision, sha256: cur.sha256 };
      continue;
    }
    if (base && cur.sha256 === base.sha256) {
      base = { ...base, revision: cur.revision }; // only the revision moved (e.g. a move changed the eTag)
      continue;
    }
    break; // a concurrent edit: theirs stays, ours becomes a conflicted copy
  }
  await writeConflictCopy(ctx, t, path, sha256, data, logged);
}

/** The copy's name for this entry: the same on every target, never another entry's. */
async function copyName(
  ctx: EngineContext,
  path: string,
  logged: LoggedOp,
  skip: ReadonlySet<string>,
): Promise<string> {
  const mine = (await ctx.store.copiesOf(logged.seq)).filter((c) => !skip.has(c));
  const dir = path.includes('/') ? path.slice(0, path.lastIndexOf('/') + 1) : '';
  const existing = mine.find((c) => c.startsWith(dir) && !c.slice(dir.length).includes('/'));
  if (existing) return existing;
  return ctx.store.transaction(async (tx) => {
    // The candidates in order (conflictedCopyPath), each checked against the books.
    const taken = new Set(skip);
    for (;;) {
      const c = conflictedCopyPath(path, new Date(logged.createdMs), memberOf(ctx, logged.origin), (x) =>
        taken.has(x),
      );
      if ((await tx.head(c)) === undefined && (await tx.reserveCopy(logged.seq, c))) return c;
      taken.add(c);
    }
  });
}

async function writeConflictCopy(
  ctx: EngineContext,
  t: Replica,
  path: string,
  sha256: string,
  data: Uint8Array,
  logged: LoggedOp,
): Promise<void> {
  const skip = new Set<string>();
  for (;;) {
    const copy = await copyName(ctx, path, logged, skip);
    try {
      const e = await t.provider.write(fullPath(t, copy), data, {
        ifNotExists: true,
        sha256,
        size: data.byteLength,
      });
      // Seen and ours (no echo), but not yet `known`: the copy's own log entry records
      // it at its origin, so nothing is conditioned on it before the share has it.
      ctx.view.setSeen(t, copy, { kind: 'file', revision: e.revision, sha256, hash: e.hash?.value });
      ctx.view.addOurs(t, copy, e.revision);
      ctx.stats.applied += 1;
      ctx.stats.conflicts += 1;
      // The copy is a new file of the share: it goes to every replica through the log.
      await ctx.store.append(
        t.id,
        { type: 'file', path: copy, revision: e.revision, sha256, size: data.byteLength },
        data,
        logged.createdMs,
      );
      ctx.log.info({ replica: t.id, path, copy }, 'concurrent edit: conflicted copy');
      return;
    } catch (e) {
      if (!isAlreadyExists(e)) throw e;
      const cur = await snapshot(t, copy, true);
      if (cur?.kind === 'file' && cur.sha256 === sha256) {
        ctx.view.setSeen(t, copy, { kind: 'file', revision: cur.revision, sha256, hash: cur.hash });
        return;
      }
      skip.add(copy);
      if (skip.size > 50) throw e;
    }
  }
}

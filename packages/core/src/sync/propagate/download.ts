/**
 * Propagation, remote → local content: small files in bundles, large ones by rsync delta
 * (our old version's signature goes up, the patch comes down) or whole; every write is
 * temp + fsync + rename, and a local edit made while the bytes travelled is never
 * overwritten (the decision is taken again just before the rename). Folders are created
 * here too (mkdir). Rows D3, D8, D14, D21 of docs/sync-decisions.md end here.
 */
import { createReadStream } from 'node:fs';
import * as fsp from 'node:fs/promises';
import {
  RsyncFormatError,
  patch as rsyncPatch,
  signature as rsyncSignature,
  suggestStrongLength,
} from '@weft/rsync-wasm';
import { openOldFile } from '@weft/rsync-wasm/node';
import { type DecodedDeltaContainer, type EntryInfo, MAX_BUNDLE_BYTES } from '@weft/wire';
import { chooseBlockSize } from '../../adaptive.ts';
import { conflictCopyPath } from '../../conflict-name.ts';
import { stated } from '../../decisions.ts';
import { JournalChanges } from '../../journal/changes.ts';
import type { FileRow } from '../../journal/journal.ts';
import { atomicWrite } from '../../local-fs.ts';
import { RemoteError } from '../../remote/proxy-client.ts';
import type { SyncContext } from '../context.ts';
import { adoptAsEditOf } from './conflict.ts';

/** A file to bring down, with what the decision to do so was based on. */
export interface Download {
  readonly entry: EntryInfo;
  /** The local content the decision saw (undefined: absent). */
  readonly local: string | undefined;
  /** The decision-table row that asked for it. */
  readonly row: string;
}

/**
 * Small files in bundles of up to 2,000 paths; what the server defers comes whole. Each
 * file's journal changes go to `commit` as it lands (the caller records them at once).
 */
export async function downloadSmall(
  ctx: SyncContext,
  downloads: readonly Download[],
  commit: (changes: JournalChanges) => void,
): Promise<void> {
  for (let i = 0; i < downloads.length; i += 2000) {
    const chunk = downloads.slice(i, i + 2000);
    const byPath = new Map(chunk.map((d) => [d.entry.path, d]));
    let pending = chunk.map((d) => d.entry.path);
    while (pending.length > 0) {
      const { bundle, deferred } = await ctx.client.downloadBundle(pending);
      if (bundle.entries.length > 1) ctx.status.save('requestsSavedByBundling', bundle.entries.length - 1);
      for (const be of bundle.entries) {
        const d = byPath.get(be.path);
        if (!d) continue;
        await ctx.guarded(d.entry.path, async () =>
          commit(
            await writeDownloaded(ctx, {
              path: d.entry.path,
              content: be.content,
              sha256: be.sha256,
              revision: be.rev ?? d.entry.revision,
              mtimeMs: be.mtimeMs,
              expectedLocal: d.local,
              row: d.row,
            }),
          ),
        );
      }
      // Every other path was deferred with its reason: a large file comes by GET /v1/files;
      // no room left in this bundle, or changed while read: ask again; absent: the feed tells.
      const retry: string[] = [];
      for (const { path: p, reason } of deferred) {
        const d = byPath.get(p);
        if (!d || reason === 'absent') continue;
        if (reason === 'large' || d.entry.size >= MAX_BUNDLE_BYTES / 2) {
          await ctx.guarded(p, async () => commit(await downloadLarge(ctx, d)));
        } else retry.push(p);
      }
      pending = retry;
      if (bundle.entries.length === 0) break;
    }
  }
}

/** A large file: by delta download when we hold an old version, else whole. Returns its journal changes. */
export async function downloadLarge(ctx: SyncContext, d: Download): Promise<JournalChanges> {
  const { entry, local } = d;
  const abs = await ctx.at(entry.path);
  const sha = entry.sha256 ?? '';
  if (local !== undefined && sha !== '') {
    try {
      // Server-side diff first: the server diffs against its own copy of our version (a kept
      // version, or content we uploaded), so no signature goes up; a server that holds none
      // (DELTA_BASE_UNKNOWN), or an older one, is sent our signature instead.
      const fromServer = await ctx.client.serverDelta?.(entry.path, local).catch((e: unknown) => {
        if (e instanceof RemoteError) return undefined;
        throw e;
      });
      const { container, signatureBytes } = fromServer
        ? { container: fromServer, signatureBytes: 0 }
        : await deltaAgainstOurSignature(ctx, entry, abs, local);
      // The server holds a later version than the feed entry (the container names no
      // revision): recording it as `entry.revision` would pair that revision with other
      // content, and a rename of that revision would then carry the wrong file. A later
      // change in the feed brings it.
      if (container.targetSha256 !== sha) return new JournalChanges();
      const old = await openOldFile(abs);
      let written: JournalChanges;
      try {
        written = await writeDownloaded(ctx, {
          path: entry.path,
          content: rsyncPatch(old, container.delta, { maxOutputBytes: container.targetSize }),
          sha256: container.targetSha256,
          revision: entry.revision,
          mtimeMs: entry.mtimeMs,
          expectedLocal: local,
          row: d.row,
        });
      } finally {
        await old.close();
      }
      ctx.status.save(
        'deltaBytesSaved',
        Math.max(0, entry.size - container.delta.byteLength - signatureBytes),
      );
      return written;
    } catch (e) {
      // The server cannot build a delta (base unknown), or the patched result failed the
      // delta's checksum (a false block match, or our copy changed since): the whole file.
      const falseMatch = e instanceof RsyncFormatError && e.code === 'CHECKSUM_MISMATCH';
      if (!(e instanceof RemoteError) && !falseMatch) throw e;
    }
  }
  const dl = await ctx.client.download(entry.path).catch(unlessGone);
  if (!dl) return new JournalChanges(); // gone from the server since: a later change in the feed says where
  return writeDownloaded(ctx, {
    path: entry.path,
    content: dl.body,
    sha256: dl.sha256 || sha,
    revision: dl.revision || entry.revision,
    mtimeMs: entry.mtimeMs,
    expectedLocal: local,
    row: d.row,
  });
}

/** Delta download (HyCloud §III-B) against the signature of our copy, sent to the server. */
async function deltaAgainstOurSignature(
  ctx: SyncContext,
  entry: EntryInfo,
  abs: string,
  local: string,
): Promise<{ container: DecodedDeltaContainer; signatureBytes: number }> {
  // Its block size comes from the file's history, or (none yet) from its size: about √size,
  // so the signature stays a small share of what travels (adaptive.ts initialBlockSize).
  const oldSize = (await fsp.stat(abs)).size;
  const blockSize = chooseBlockSize(ctx.history(entry.path), oldSize);
  // The strong hash as long as rsync sizes it for this file and block, plus a byte (a false
  // block match ~2⁻¹⁸ per file, not rsync's 2⁻¹⁰), capped at the default 8: 4 + 3..8
  // bytes a block instead of 4 + 8. A false match fails the delta's whole-file checksum,
  // and the file then comes whole (downloadLarge).
  const strongLength = Math.min(8, suggestStrongLength(Math.max(oldSize, entry.size), blockSize) + 1);
  const sigChunks: Uint8Array[] = [];
  for await (const c of rsyncSignature(createReadStream(abs) as AsyncIterable<Uint8Array>, {
    blockSize,
    strongLength,
  })) {
    sigChunks.push(c);
  }
  const sig = Buffer.concat(sigChunks);
  return {
    container: await ctx.client.downloadDelta(entry.path, local, sig),
    signatureBytes: sig.byteLength,
  };
}

/**
 * Write downloaded content in place — or beside it, when the person edited it meanwhile.
 * Returns the journal changes: the new base, or (beside it) ours as an edit of theirs.
 */
export async function writeDownloaded(
  ctx: SyncContext,
  w: {
    path: string;
    content: Uint8Array | AsyncIterable<Uint8Array>;
    sha256: string;
    revision: string;
    mtimeMs: number;
    /** The local content the decision to download was based on (undefined: absent). */
    expectedLocal: string | undefined;
    row: string;
  },
): Promise<JournalChanges> {
  const out = new JournalChanges();
  const p = w.path;
  const abs = await ctx.at(p);
  if (ctx.caseInsensitive && ctx.caseClash(p)) {
    // On this disk the name would land on another file that differs only by case: keep
    // ours, leave theirs on the server, and say so.
    const d = ctx.decide(stated(p, 'case-clash'));
    if (d.action === 'skip') {
      ctx.status.warn(`not downloaded: ${p} differs only by case from a file already here`);
      return out;
    }
  }
  const parentRel = p.includes('/') ? p.slice(0, p.lastIndexOf('/')) : '';
  // A local file where a parent folder must go: keep it (the scanner uploads it as a conflict).
  if (parentRel !== '') {
    const pst = await fsp.lstat(await ctx.at(parentRel)).catch(() => undefined);
    if (pst && !pst.isDirectory()) return out;
  }
  let previous: string | undefined;
  let landedAt = p;
  let row = w.row;
  const st = await atomicWrite(abs, w.content, {
    mtimeMs: w.mtimeMs,
    beforeRename: async () => {
      // The person may have changed the file since we decided: decide again against what
      // the decision saw, and never replace an edit made meanwhile.
      const now = await ctx.localHash(ctx.journal.getFile(p), p);
      if (now !== w.expectedLocal) {
        // The content the download was decided on stands as the base: an edit since is ours.
        const again = ctx.decide(
          { path: p, base: w.expectedLocal, local: now, remote: w.sha256, kind: { remote: 'file' } },
          { stage: 'write' },
        );
        row = again.id;
        if (again.action !== 'download' && again.action !== 'record' && again.action !== 'nothing') {
          landedAt = conflictCopyPath(p, 'another device', new Date(ctx.now()), ctx.taken);
          return ctx.at(landedAt);
        }
      }
      previous = await ctx.trash.keepCopy(abs, ctx.paths.localRel(p));
    },
  });
  ctx.noteLocalName(landedAt, out);
  if (landedAt !== p) {
    // Theirs became the conflicted copy; ours stays and now counts as an edit of theirs.
    out.add(await adoptAsEditOf(ctx, p, w.revision, w.sha256));
    ctx.markDirty([landedAt]);
    ctx.status.conflict(p, landedAt, row);
    return out;
  }
  // HyCloud Eq. 1: after a large download, measure every candidate block size in idle time.
  if (previous && Number(st.size) >= ctx.small)
    ctx.idleEstimates.push({ path: p, oldCopy: previous, newFile: abs });
  const size = Number(st.size);
  // A large file's signature is kept, as after an upload: an edit made here then goes up as
  // a delta without first fetching the server's signature (issue #16).
  const kept = size >= ctx.small ? await keptSignature(ctx, p, abs, st) : undefined;
  out.upsertFile({
    path: p,
    kind: 'file',
    size,
    mtimeNs: st.mtimeNs,
    inode: st.ino,
    hash: w.sha256,
    syncedRev: w.revision,
    syncedHash: w.sha256,
    signature: kept?.bytes ?? null,
    signatureBlock: kept?.block ?? null,
  });
  ctx.status.update({ bytesDownloaded: ctx.status.get().bytesDownloaded + size });
  ctx.status.activity({ kind: 'downloaded', path: p, row });
  return out;
}

/**
 * The rsync signature of a file just written, at the block size its history (or size)
 * picks; undefined if the file changed while it was read (a signature must describe the
 * synced content exactly).
 */
async function keptSignature(
  ctx: SyncContext,
  p: string,
  abs: string,
  st: import('node:fs').BigIntStats,
): Promise<{ bytes: Buffer; block: number } | undefined> {
  const block = chooseBlockSize(ctx.history(p), Number(st.size));
  const parts: Uint8Array[] = [];
  try {
    for await (const c of rsyncSignature(createReadStream(abs) as AsyncIterable<Uint8Array>, {
      blockSize: block,
    }))
      parts.push(c);
    const now = await fsp.lstat(abs, { bigint: true });
    if (now.size !== st.size || now.mtimeNs !== st.mtimeNs || now.ino !== st.ino) return undefined;
  } catch {
    return undefined;
  }
  return { bytes: Buffer.concat(parts), block };
}

/** Both sides agree on `entry` (or ours wins and is queued): it becomes the new base. */
export function recordSynced(
  entry: EntryInfo,
  row: FileRow | undefined,
  local: string | undefined,
  out = new JournalChanges(),
): JournalChanges {
  if (local === undefined) return out;
  const base: FileRow = row ?? {
    path: entry.path,
    kind: 'file',
    size: entry.size,
    mtimeNs: 0n,
    inode: 0n,
    hash: local,
    syncedRev: null,
    syncedHash: null,
    signature: null,
    signatureBlock: null,
  };
  const same = base.syncedHash !== null && base.syncedHash === entry.sha256;
  // A signature belongs to the synced content it was made from: a new base voids it.
  return out.upsertFile({
    ...base,
    syncedRev: entry.revision,
    syncedHash: entry.sha256 ?? null,
    ...(same ? {} : { signature: null, signatureBlock: null }),
  });
}

/**
 * A remote folder: create it here and record it synced; a local file in the way stays (the
 * scanner reports it; one made here and never sent was moved on to a conflicted copy
 * first, D27: discovery/remote.ts). Returns the journal changes.
 */
export async function makeLocalDir(ctx: SyncContext, entry: EntryInfo): Promise<JournalChanges> {
  const out = new JournalChanges();
  if (entry.kind !== 'dir') return out;
  const row = ctx.journal.getFile(entry.path);
  if (row?.kind === 'dir' && row.syncedRev !== null) return out;
  const abs = await ctx.at(entry.path);
  const st = await fsp.lstat(abs).catch(() => undefined);
  if (st && !st.isDirectory()) return out; // a local file is in the way: the scanner reports it
  await fsp.mkdir(abs, { recursive: true });
  const now = await fsp.lstat(abs, { bigint: true });
  ctx.noteLocalName(entry.path, out);
  return out.upsertFile({
    path: entry.path,
    kind: 'dir',
    size: 0,
    mtimeNs: now.mtimeNs,
    inode: now.ino,
    hash: null,
    syncedRev: entry.revision,
    syncedHash: null,
    signature: null,
    signatureBlock: null,
  });
}

/** A download of something the server no longer has yields nothing; other errors stand. */
export function unlessGone(e: unknown): undefined {
  if (e instanceof RemoteError && e.status === 404) return undefined;
  throw e;
}

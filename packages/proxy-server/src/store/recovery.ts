/**
 * Crash recovery (the "repaired by reconcile()" of hybrid.ts's write order): the
 * filesystem tier is the truth for every namespace, so after a crash between writing a
 * tier file and recording it, the index is brought in line with the tier — entries whose
 * tier file changed (or appeared) are re-read and recorded, entries whose file vanished are
 * deleted, and a path found in both its small and its large form keeps the newer one.
 */
import type { Logger } from 'pino';
import { collect, type Entry, type FsProvider } from '@weft/providers';
import { ignoreNotFound } from './ignore-not-found.ts';
import { decodeLinkFile, isLinkName, LINK_EXTENSION, type LinkFile } from './link-file.ts';
import type { ChangeInput, MetadataStore } from './metadata.ts';
import { MAX_STUB_BYTES } from './pack-stub.ts';

export interface RecoveryDeps {
  readonly fs: FsProvider;
  readonly meta: MetadataStore;
  readonly log: Logger;
  /** The tier path of `path` in `userId`'s namespace. */
  nsPath(userId: string, path: string): string;
  ensureNamespace(userId: string): Promise<void>;
  /** Record changes in one transaction (no device: a repair). */
  record(userId: string, changes: ChangeInput[]): Promise<void>;
  /** The stub a small file's dropped copy left (pack-stub.ts), or undefined: not a stub. */
  packedStub?(bytes: Uint8Array): Promise<{ sha256: string; size: number; mtimeMs: number } | undefined>;
}

/**
 * Bring `userId`'s index in line with the filesystem tier; returns the number of changes
 * recorded (0: nothing was out of line).
 */
export async function reconcileNamespace(d: RecoveryDeps, userId: string): Promise<number> {
  await d.ensureNamespace(userId);
  const root = d.nsPath(userId, '');
  const seen = new Map<string, Entry>();
  const links = new Map<string, Entry>();
  for await (const e of d.fs.list(root, { recursive: true })) {
    const rel = e.path.slice(root.length + 1);
    if (e.kind === 'file' && isLinkName(rel)) links.set(rel.slice(0, -LINK_EXTENSION.length), e);
    else seen.set(rel, e);
  }
  // The index as it stands, read once (one query, not one per path).
  const index = new Map((await d.meta.listEntries(userId, '', true)).map((e) => [e.path, e]));
  const changes: ChangeInput[] = [];
  for (const [rel, le] of links) {
    const small = seen.get(rel);
    if (small) {
      // Both forms exist (crash while replacing one with the other): the newer wins.
      const loser = small.modifiedMs >= le.modifiedMs && small.kind === 'file' ? le : small;
      if (loser === le) {
        await d.fs.remove(le.path).catch(ignoreNotFound);
        continue;
      }
      await d.fs.remove(small.path).catch(ignoreNotFound);
      seen.delete(rel);
    }
    const known = index.get(rel);
    if (known?.fsRevision === le.revision) continue;
    let link: LinkFile;
    try {
      link = decodeLinkFile(await collect(await d.fs.read(le.path)));
    } catch (e) {
      d.log.warn({ userId, path: rel, err: e }, 'unreadable link file removed');
      await d.fs.remove(le.path).catch(ignoreNotFound);
      continue;
    }
    changes.push({
      type: 'upsert',
      entry: {
        path: rel,
        kind: 'file',
        size: link.size,
        mtimeMs: link.mtimeMs,
        sha256: link.sha256,
        tier: 'large',
        fsRevision: le.revision,
      },
    });
  }
  for (const [rel, e] of seen) {
    const known = index.get(rel);
    if (known?.fsRevision === e.revision && known.kind === e.kind) continue;
    if (e.kind === 'dir') {
      changes.push({
        type: 'upsert',
        entry: {
          path: rel,
          kind: 'dir',
          size: 0,
          mtimeMs: Math.floor(e.modifiedMs),
          fsRevision: e.revision,
        },
      });
    } else {
      const st = await d.fs.stat(e.path);
      // A small file whose copy was dropped for its pack: its stub names the content.
      const stub =
        d.packedStub && st.size <= MAX_STUB_BYTES
          ? await d.packedStub(await collect(await d.fs.read(e.path)))
          : undefined;
      if (stub) {
        changes.push({
          type: 'upsert',
          entry: {
            path: rel,
            kind: 'file',
            size: stub.size,
            mtimeMs: stub.mtimeMs,
            sha256: stub.sha256,
            tier: 'small',
            fsRevision: st.revision,
          },
        });
        continue;
      }
      changes.push({
        type: 'upsert',
        entry: {
          path: rel,
          kind: 'file',
          size: st.size,
          mtimeMs: Math.floor(st.modifiedMs),
          sha256: st.hash?.value,
          tier: 'small',
          fsRevision: st.revision,
        },
      });
    }
  }
  const present = new Set([...seen.keys(), ...links.keys()]);
  const gone = [...index.values()]
    .filter((e) => !present.has(e.path))
    .map((e) => e.path)
    .filter((p, _i, all) => !all.some((q) => q !== p && p.startsWith(q + '/')));
  for (const p of gone) changes.push({ type: 'delete', path: p });
  // Parents before children so the index never holds an orphan.
  changes.sort((a, b) => depth(a) - depth(b));
  await d.record(userId, changes);
  if (changes.length > 0)
    d.log.warn({ userId, repaired: changes.length }, 'index reconciled with the filesystem tier');
  return changes.length;
}

/** Parents before children for upserts, children before parents for deletes. */
function depth(c: ChangeInput): number {
  const p = c.type === 'upsert' ? c.entry.path : c.path;
  return c.type === 'delete' ? 1e6 - p.split('/').length : p.split('/').length;
}

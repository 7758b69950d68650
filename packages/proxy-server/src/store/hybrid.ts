/**
 * The hybrid store (HyCloud §II-A, §III-B): the filesystem tier holds each namespace's tree
 * (`ns/<user>/…`) with small files as real files and a link file per large file; the object
 * tier holds large files as immutable objects named by their SHA-256, shared by every
 * namespace. The metadata store indexes the tree (revisions, hashes), keeps the change
 * feed and the object reference counts.
 *
 * Write order, so that a crash at any point leaves every file at its old or its new
 * version and never a reference to a missing object:
 *   1. large content: object uploaded (provider write is atomic), object row recorded;
 *   2. the namespace file or link file written atomically (temp + fsync + rename);
 *   3. one metadata transaction: index rows, refcounts, change records.
 * A crash between 2 and 3 is repaired by reconcile() at startup (the tier is the truth);
 * an object uploaded but never linked is an orphan, collected after the grace period.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { Logger } from 'pino';
import {
  collect,
  type Entry,
  type FsProvider,
  type Provider,
  NotFoundError,
  ancestors,
} from '@weft/providers';
import type { ChangeRecord, ConflictReport, EntryInfo, OpResult } from '@weft/wire';
import { conflictedCopyPath } from '@weft/wire';
import { ApiError } from '../errors.ts';
import type { ProxyMetrics } from '../metrics.ts';
import {
  decodeLinkFile,
  encodeLinkFile,
  isLinkName,
  LINK_CHUNK_BYTES,
  LINK_EXTENSION,
  LINK_VERSION,
  type LinkFile,
  objectKey,
} from './link-file.ts';
import type { ChangeInput, EntryRow, MetadataStore } from './metadata.ts';
import { publicEntry } from './sqlite.ts';
import type { RelayCache } from './relay-cache.ts';

/** Content to store: bytes in memory, or a local file (staged upload, patched delta). */
export type Content = { readonly bytes: Uint8Array } | { readonly file: string; readonly size: number };

export interface Writer {
  readonly userId: string;
  readonly deviceId: string;
  readonly deviceName: string;
}

export interface HybridStoreOptions {
  readonly fs: FsProvider;
  readonly objects: Provider;
  readonly meta: MetadataStore;
  readonly relay: RelayCache;
  readonly stagingDir: string;
  readonly smallFileBytes: number;
  readonly log: Logger;
  readonly metrics: ProxyMetrics;
  readonly onChanges: (userId: string, records: ChangeRecord[]) => void;
  /** Bandwidth samples for the scheduler's estimate (Eq. 4). */
  readonly onObjectTransfer: (bytes: number, ms: number) => void;
  readonly now?: () => number;
}

const NOOP_SEQ = 0;

export function checkUserPath(path: string): void {
  for (const seg of path.split('/')) {
    if (isLinkName(seg)) throw new ApiError('INVALID_PATH', `names ending in ${LINK_EXTENSION} are reserved`);
  }
}

export class HybridStore {
  private readonly fs: FsProvider;
  private readonly objects: Provider;
  readonly meta: MetadataStore;
  readonly relay: RelayCache;
  /** Objects being linked right now: GC must not delete them even at refcount 0. */
  private readonly pinned = new Map<string, number>();
  private readonly now: () => number;

  constructor(private readonly o: HybridStoreOptions) {
    this.fs = o.fs;
    this.objects = o.objects;
    this.meta = o.meta;
    this.relay = o.relay;
    this.now = o.now ?? Date.now;
  }

  nsPath(userId: string, path: string): string {
    return path === '' ? `ns/${userId}` : `ns/${userId}/${path}`;
  }

  private record(userId: string, changes: ChangeInput[], w: Writer | undefined): ChangeRecord[] {
    if (changes.length === 0) return [];
    const records = this.meta.applyChanges(userId, changes, w?.deviceId, this.now());
    this.o.onChanges(userId, records);
    return records;
  }

  async ensureNamespace(userId: string): Promise<void> {
    this.meta.ensureUser(userId, this.now());
    await this.fs.mkdir(this.nsPath(userId, ''));
  }

  // ------------------------------------------------------------------ reads

  stat(userId: string, path: string): EntryInfo | undefined {
    const e = this.meta.getEntry(userId, path);
    return e ? publicEntry(e) : undefined;
  }

  list(userId: string, dir: string, recursive: boolean): EntryInfo[] {
    if (dir !== '') {
      const d = this.meta.getEntry(userId, dir);
      if (!d) throw new ApiError('NOT_FOUND', 'not found');
      if (d.kind !== 'dir') throw new ApiError('NOT_A_FOLDER', 'not a folder');
    }
    return this.meta.listEntries(userId, dir, recursive).map(publicEntry);
  }

  /** A readable byte range of a file; large files come through the relay cache. */
  async openRead(
    userId: string,
    entry: EntryInfo,
    range: { start: number; end: number } | undefined,
  ): Promise<{ stream: AsyncIterable<Uint8Array>; release: () => void }> {
    if (entry.tier === 'large' && entry.sha256) {
      const { file, release } = await this.stageObject(entry.sha256, entry.size);
      const stream = createReadStream(file, range ? { start: range.start, end: range.end } : {});
      stream.once('close', release);
      return { stream, release };
    }
    const stream = await this.fs.read(
      this.nsPath(userId, entry.path),
      range ? { offset: range.start, length: range.end - range.start + 1 } : {},
    );
    return { stream, release: () => undefined };
  }

  /** Pin a local copy of an object (relay cache). */
  async stageObject(sha256: string, size: number): Promise<{ file: string; release: () => void }> {
    const before = this.relay.stats.misses;
    const got = await this.relay.acquire(sha256, objectKey(sha256), size);
    this.o.metrics.relayLookups.inc({ result: this.relay.stats.misses > before ? 'miss' : 'hit' });
    const s = this.relay.stats;
    this.o.metrics.relayHitRatio.set(s.hits / Math.max(1, s.hits + s.misses));
    this.o.metrics.relayBytes.set(s.bytes);
    return got;
  }

  /** The whole content of a small file, or of any object, as bytes (for deltas of small files). */
  async readAll(userId: string, entry: EntryInfo): Promise<Uint8Array> {
    const { stream, release } = await this.openRead(userId, entry, undefined);
    try {
      return await collect(stream);
    } finally {
      release();
    }
  }

  /** A local file or buffer holding content with this SHA-256, if the server has it. */
  findContent(
    userId: string,
    path: string,
    sha256: string,
  ): { entry?: EntryInfo; objectSize?: number } | undefined {
    const cur = this.meta.getEntry(userId, path);
    if (cur?.sha256 === sha256) return { entry: publicEntry(cur) };
    const size = this.meta.userLargeContent(userId, sha256);
    if (size !== undefined && this.meta.getObject(sha256)) return { objectSize: size };
    return undefined;
  }

  // ------------------------------------------------------------------ writes

  /** Create missing ancestors (tier and index); a file in the way is ALREADY_EXISTS. */
  private async ensureParents(userId: string, path: string, out: ChangeInput[]): Promise<void> {
    for (const dir of ancestors(path)) {
      const e = this.meta.getEntry(userId, dir);
      if (e?.kind === 'dir') continue;
      if (e) throw new ApiError('ALREADY_EXISTS', `a file is in the way of folder ${dir}`, { path: dir });
      await this.fs.mkdir(this.nsPath(userId, dir));
      const st = await this.fs.stat(this.nsPath(userId, dir));
      out.push({
        type: 'upsert',
        entry: {
          path: dir,
          kind: 'dir',
          size: 0,
          mtimeMs: Math.floor(st.modifiedMs),
          fsRevision: st.revision,
        },
      });
    }
  }

  private async contentSha(c: Content): Promise<string> {
    if ('bytes' in c) return createHash('sha256').update(c.bytes).digest('hex');
    const h = createHash('sha256');
    for await (const chunk of createReadStream(c.file)) h.update(chunk as Buffer);
    return h.digest('hex');
  }

  private contentSize(c: Content): number {
    return 'bytes' in c ? c.bytes.byteLength : c.size;
  }

  private async chunkList(c: Content): Promise<LinkFile['chunks']> {
    const out: LinkFile['chunks'] = [];
    const size = this.contentSize(c);
    if ('bytes' in c) {
      for (let off = 0; off < size; off += LINK_CHUNK_BYTES) {
        const piece = c.bytes.subarray(off, Math.min(size, off + LINK_CHUNK_BYTES));
        out.push({
          offset: off,
          length: piece.byteLength,
          sha256: createHash('sha256').update(piece).digest('hex'),
        });
      }
      return out;
    }
    let off = 0;
    for await (const piece of createReadStream(c.file, { highWaterMark: LINK_CHUNK_BYTES })) {
      const b = piece as Buffer;
      out.push({ offset: off, length: b.byteLength, sha256: createHash('sha256').update(b).digest('hex') });
      off += b.byteLength;
    }
    return out;
  }

  /** Upload content to the object tier unless an object with that hash exists. */
  async putObject(sha256: string, c: Content): Promise<void> {
    const size = this.contentSize(c);
    const existing = this.meta.getObject(sha256);
    if (existing) {
      try {
        await this.objects.stat(objectKey(sha256));
        return; // dedup: a copy is a new reference, not a new upload
      } catch (e) {
        if (!(e instanceof NotFoundError)) throw e;
      }
    }
    const started = performance.now();
    const body = 'bytes' in c ? c.bytes : () => createReadStream(c.file) as AsyncIterable<Uint8Array>;
    await this.objects.write(objectKey(sha256), body, { size, sha256 });
    const ms = performance.now() - started;
    this.o.onObjectTransfer(size, ms);
    this.o.metrics.transferSeconds.observe({ kind: 'object-put' }, ms / 1000);
    this.o.metrics.bytes.inc({ tier: 'object', direction: 'in' }, size);
    this.meta.addObject(sha256, size, this.now());
  }

  private pin(sha: string): () => void {
    this.pinned.set(sha, (this.pinned.get(sha) ?? 0) + 1);
    return () => {
      const n = (this.pinned.get(sha) ?? 1) - 1;
      if (n <= 0) this.pinned.delete(sha);
      else this.pinned.set(sha, n);
    };
  }

  /**
   * Write a file's content at `path`, conditional on `base` (see api.md): on a revision
   * mismatch with different content the client's version goes to a conflicted copy.
   * `sha256` is what the client declared; content that does not match is refused.
   */
  async writeFile(
    w: Writer,
    path: string,
    content: Content,
    sha256: string,
    mtimeMs: number,
    base: string | null | undefined,
    knownSha?: boolean,
  ): Promise<OpResult> {
    checkUserPath(path);
    const actual = knownSha ? sha256 : await this.contentSha(content);
    if (actual !== sha256)
      throw new ApiError('HASH_MISMATCH', 'SHA-256 of the content does not match the declared one');
    const cur = this.meta.getEntry(w.userId, path);
    if (cur?.kind === 'dir') throw new ApiError('ALREADY_EXISTS', 'a folder exists at that path', { path });
    const stale =
      base !== undefined && (base === null ? cur !== undefined : cur !== undefined && cur.revision !== base);
    if (cur && cur.sha256 === sha256 && (stale || base === undefined || cur.revision === base)) {
      // Same content already current: nothing to do (and no conflict — Syncthing's rule).
      return { status: 'applied', entry: publicEntry(cur), seq: NOOP_SEQ };
    }
    if (stale && cur) {
      const conflictPath = await this.freeConflictPath(w, path);
      const res = await this.storeFile(w, conflictPath, content, sha256, mtimeMs);
      const conflict: ConflictReport = {
        path,
        conflictPath,
        kind: 'write-write',
        baseRevision: base,
        serverRevision: cur.revision,
      };
      return { status: 'conflict', conflict, ...(res.entry ? { entry: res.entry } : {}), seq: res.seq };
    }
    const res = await this.storeFile(w, path, content, sha256, mtimeMs);
    return { status: 'applied', ...(res.entry ? { entry: res.entry } : {}), seq: res.seq };
  }

  private async freeConflictPath(w: Writer, path: string): Promise<string> {
    const when = new Date(this.now());
    let candidate = conflictedCopyPath(path, when, w.deviceName);
    for (let i = 2; this.meta.getEntry(w.userId, candidate); i++) {
      candidate = conflictedCopyPath(path, when, `${w.deviceName} ${i}`);
    }
    return candidate;
  }

  private async storeFile(
    w: Writer,
    path: string,
    content: Content,
    sha256: string,
    mtimeMs: number,
  ): Promise<{ entry?: EntryInfo; seq: number }> {
    const changes: ChangeInput[] = [];
    await this.ensureParents(w.userId, path, changes);
    const size = this.contentSize(content);
    const ns = this.nsPath(w.userId, path);
    const before = this.meta.getEntry(w.userId, path);
    let entryRow: Omit<EntryRow, 'revision'>;
    if (size < this.o.smallFileBytes) {
      const body =
        'bytes' in content
          ? content.bytes
          : () => createReadStream(content.file) as AsyncIterable<Uint8Array>;
      const e = await this.fs.write(ns, body, { size, sha256, modifiedMs: mtimeMs });
      this.o.metrics.bytes.inc({ tier: 'fs', direction: 'in' }, size);
      if (before?.tier === 'large') await this.fs.remove(ns + LINK_EXTENSION).catch(ignoreNotFound);
      entryRow = { path, kind: 'file', size, mtimeMs, sha256, tier: 'small', fsRevision: e.revision };
    } else {
      const unpin = this.pin(sha256);
      try {
        await this.putObject(sha256, content);
        const link: LinkFile = {
          weftLink: LINK_VERSION,
          sha256,
          size,
          mtimeMs,
          object: objectKey(sha256),
          chunks: await this.chunkList(content),
          signature: null,
        };
        const e = await this.fs.write(ns + LINK_EXTENSION, encodeLinkFile(link), { modifiedMs: mtimeMs });
        if (before?.tier === 'small') await this.fs.remove(ns).catch(ignoreNotFound);
        entryRow = { path, kind: 'file', size, mtimeMs, sha256, tier: 'large', fsRevision: e.revision };
        changes.push({ type: 'upsert', entry: entryRow });
        const records = this.record(w.userId, changes, w);
        return lastEntry(records);
      } finally {
        unpin();
      }
    }
    changes.push({ type: 'upsert', entry: entryRow });
    return lastEntry(this.record(w.userId, changes, w));
  }

  /** Make an existing object current at `path` (dedup commit: no bytes sent). */
  async linkObject(
    w: Writer,
    path: string,
    sha256: string,
    size: number,
    mtimeMs: number,
    base: string | null | undefined,
  ): Promise<OpResult> {
    const obj = this.meta.getObject(sha256);
    if (!obj || obj.size !== size)
      throw new ApiError('OBJECT_UNKNOWN', 'the server has no object with that SHA-256 and size; upload it');
    const unpin = this.pin(sha256);
    try {
      if (size < this.o.smallFileBytes) {
        const { file, release } = await this.stageObject(sha256, size);
        try {
          const bytes = await fsp.readFile(file);
          return await this.writeFile(w, path, { bytes }, sha256, mtimeMs, base, true);
        } finally {
          release();
        }
      }
      const { file, release } = await this.stageObject(sha256, size);
      try {
        return await this.writeFile(w, path, { file, size }, sha256, mtimeMs, base, true);
      } finally {
        release();
      }
    } finally {
      unpin();
    }
  }

  async mkdir(w: Writer, path: string): Promise<OpResult> {
    checkUserPath(path);
    const cur = this.meta.getEntry(w.userId, path);
    if (cur?.kind === 'dir') return { status: 'applied', entry: publicEntry(cur), seq: NOOP_SEQ };
    if (cur) throw new ApiError('ALREADY_EXISTS', 'a file exists at that path', { path });
    const changes: ChangeInput[] = [];
    await this.ensureParents(w.userId, path, changes);
    await this.fs.mkdir(this.nsPath(w.userId, path));
    const st = await this.fs.stat(this.nsPath(w.userId, path));
    changes.push({
      type: 'upsert',
      entry: { path, kind: 'dir', size: 0, mtimeMs: Math.floor(st.modifiedMs), fsRevision: st.revision },
    });
    const { entry, seq } = lastEntry(this.record(w.userId, changes, w));
    return { status: 'applied', ...(entry ? { entry } : {}), seq };
  }

  private tierPath(userId: string, e: EntryRow | EntryInfo): string {
    const ns = this.nsPath(userId, e.path);
    return e.kind === 'file' && e.tier === 'large' ? ns + LINK_EXTENSION : ns;
  }

  async remove(w: Writer, path: string, base: string | null | undefined): Promise<OpResult> {
    checkUserPath(path);
    const cur = this.meta.getEntry(w.userId, path);
    if (!cur) return { status: 'applied', seq: NOOP_SEQ }; // already gone: idempotent
    if (typeof base === 'string' && cur.kind === 'file' && cur.revision !== base) {
      return {
        status: 'conflict',
        conflict: {
          path,
          conflictPath: '',
          kind: 'delete-modified',
          baseRevision: base,
          serverRevision: cur.revision,
        },
        entry: publicEntry(cur),
        seq: NOOP_SEQ,
      };
    }
    await this.fs.remove(this.tierPath(w.userId, cur)).catch(ignoreNotFound);
    const records = this.record(w.userId, [{ type: 'delete', path }], w);
    return { status: 'applied', seq: records.at(-1)?.seq ?? NOOP_SEQ };
  }

  async move(w: Writer, from: string, to: string): Promise<OpResult> {
    checkUserPath(from);
    checkUserPath(to);
    if (from === to) throw new ApiError('BAD_REQUEST', 'source and destination are the same');
    if (to.startsWith(from + '/')) throw new ApiError('BAD_REQUEST', 'cannot move a folder inside itself');
    const src = this.meta.getEntry(w.userId, from);
    if (!src) throw new ApiError('NOT_FOUND', 'source not found', { path: from });
    if (this.meta.getEntry(w.userId, to))
      throw new ApiError('ALREADY_EXISTS', 'destination exists', { path: to });
    const changes: ChangeInput[] = [];
    await this.ensureParents(w.userId, to, changes);
    const suffix = src.kind === 'file' && src.tier === 'large' ? LINK_EXTENSION : '';
    // One rename on the filesystem tier, whatever the folder holds.
    const moved = await this.fs.move(
      this.nsPath(w.userId, from) + suffix,
      this.nsPath(w.userId, to) + suffix,
    );
    changes.push({ type: 'move', from, path: to });
    const records = this.record(w.userId, changes, w);
    this.meta.setFsRevision(w.userId, to, moved.revision);
    const last = records.at(-1);
    const entry = this.stat(w.userId, to);
    return { status: 'applied', ...(entry ? { entry } : {}), seq: last?.seq ?? NOOP_SEQ };
  }

  async copy(w: Writer, from: string, to: string): Promise<OpResult> {
    checkUserPath(from);
    checkUserPath(to);
    if (to === from || to.startsWith(from + '/'))
      throw new ApiError('BAD_REQUEST', 'cannot copy onto or inside itself');
    const src = this.meta.getEntry(w.userId, from);
    if (!src) throw new ApiError('NOT_FOUND', 'source not found', { path: from });
    if (this.meta.getEntry(w.userId, to))
      throw new ApiError('ALREADY_EXISTS', 'destination exists', { path: to });
    const changes: ChangeInput[] = [];
    await this.ensureParents(w.userId, to, changes);
    const suffix = src.kind === 'file' && src.tier === 'large' ? LINK_EXTENSION : '';
    // A large file's copy is a copy of its link file: a new reference, not a new upload.
    await this.fs.copy(this.nsPath(w.userId, from) + suffix, this.nsPath(w.userId, to) + suffix);
    const rows = [src, ...(src.kind === 'dir' ? this.meta.listEntries(w.userId, from, true) : [])];
    for (const r of rows) {
      const target = to + r.path.slice(from.length);
      const st = await this.fs.stat(this.tierPath(w.userId, { ...r, path: target }));
      const { revision: _r, ...rest } = r;
      changes.push({ type: 'upsert', entry: { ...rest, path: target, fsRevision: st.revision } });
    }
    const { entry: _e, seq } = lastEntry(this.record(w.userId, changes, w));
    const entry = this.stat(w.userId, to);
    return { status: 'applied', ...(entry ? { entry } : {}), seq };
  }

  // ------------------------------------------------------------------ recovery and GC

  /**
   * Bring the index in line with the filesystem tier after a crash: entries whose tier
   * file changed (or appeared) are re-read and recorded, entries whose file vanished are
   * deleted, duplicate small/large forms of one path are resolved, refcounts recomputed.
   */
  async reconcile(userId: string): Promise<number> {
    await this.ensureNamespace(userId);
    const root = this.nsPath(userId, '');
    const seen = new Map<string, Entry>();
    const links = new Map<string, Entry>();
    for await (const e of this.fs.list(root, { recursive: true })) {
      const rel = e.path.slice(root.length + 1);
      if (e.kind === 'file' && isLinkName(rel)) links.set(rel.slice(0, -LINK_EXTENSION.length), e);
      else seen.set(rel, e);
    }
    const changes: ChangeInput[] = [];
    for (const [rel, le] of links) {
      const small = seen.get(rel);
      if (small) {
        // Both forms exist (crash while replacing one with the other): the newer wins.
        const loser = small.modifiedMs >= le.modifiedMs && small.kind === 'file' ? le : small;
        if (loser === le) {
          await this.fs.remove(le.path).catch(ignoreNotFound);
          continue;
        }
        await this.fs.remove(small.path).catch(ignoreNotFound);
        seen.delete(rel);
      }
      const known = this.meta.getEntry(userId, rel);
      if (known?.fsRevision === le.revision) continue;
      let link: LinkFile;
      try {
        link = decodeLinkFile(await collect(await this.fs.read(le.path)));
      } catch (e) {
        this.o.log.warn({ userId, path: rel, err: e }, 'unreadable link file removed');
        await this.fs.remove(le.path).catch(ignoreNotFound);
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
      const known = this.meta.getEntry(userId, rel);
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
        const st = await this.fs.stat(e.path);
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
    const gone = this.meta
      .listEntries(userId, '', true)
      .filter((e) => !present.has(e.path))
      .map((e) => e.path)
      .filter((p, _i, all) => !all.some((q) => q !== p && p.startsWith(q + '/')));
    for (const p of gone) changes.push({ type: 'delete', path: p });
    // Parents before children so the index never holds an orphan.
    changes.sort((a, b) => depth(a) - depth(b));
    this.record(userId, changes, undefined);
    if (changes.length > 0)
      this.o.log.warn({ userId, repaired: changes.length }, 'index reconciled with the filesystem tier');
    return changes.length;
  }

  /**
   * Delete objects unreferenced for longer than the grace period, orphan objects (uploaded
   * but never recorded) older than it, and abandoned transfers.
   */
  async gc(graceMs: number): Promise<{ objects: number; orphans: number; transfers: number }> {
    const cutoff = this.now() - graceMs;
    let objects = 0;
    for (const o of this.meta.collectableObjects(cutoff)) {
      if (this.pinned.has(o.sha256)) continue;
      await this.objects.remove(objectKey(o.sha256)).catch(ignoreNotFound);
      this.meta.deleteObject(o.sha256);
      await this.relay.forget(o.sha256);
      objects += 1;
    }
    let orphans = 0;
    try {
      for await (const e of this.objects.list('objects', { recursive: true })) {
        if (e.kind !== 'file') continue;
        const sha = e.path.slice(e.path.lastIndexOf('/') + 1);
        if (this.meta.getObject(sha) || this.pinned.has(sha) || e.modifiedMs >= cutoff) continue;
        await this.objects.remove(e.path).catch(ignoreNotFound);
        orphans += 1;
      }
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
    }
    let transfers = 0;
    for (const t of this.meta.transfersOlderThan(cutoff)) {
      await fsp.rm(nodePath.join(this.o.stagingDir, t.id), { force: true });
      this.meta.deleteTransfer(t.id);
      transfers += 1;
    }
    return { objects, orphans, transfers };
  }

  async stagingFile(id: string): Promise<string> {
    await fsp.mkdir(this.o.stagingDir, { recursive: true });
    return nodePath.join(this.o.stagingDir, id);
  }

  tempFile(): string {
    return nodePath.join(this.o.stagingDir, `tmp-${randomBytes(12).toString('hex')}`);
  }

  async clearTemps(): Promise<void> {
    await fsp.mkdir(this.o.stagingDir, { recursive: true });
    for (const n of await fsp.readdir(this.o.stagingDir)) {
      if (n.startsWith('tmp-')) await fsp.rm(nodePath.join(this.o.stagingDir, n), { force: true });
    }
  }
}

function depth(c: ChangeInput): number {
  const p = c.type === 'upsert' ? c.entry.path : c.path;
  return c.type === 'delete' ? 1e6 - p.split('/').length : p.split('/').length;
}

function lastEntry(records: ChangeRecord[]): { entry?: EntryInfo; seq: number } {
  const last = records.at(-1);
  if (!last) return { seq: NOOP_SEQ };
  return last.type === 'delete' ? { seq: last.seq } : { entry: last.entry, seq: last.seq };
}

function ignoreNotFound(e: unknown): void {
  if (e instanceof NotFoundError) return;
  throw e;
}

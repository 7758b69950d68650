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
 *
 * Beside it: the write rule every content write follows (@weft/wire write-rule.ts), bundle ingest
 * (batch-write.ts), rsync signatures (signatures.ts), crash recovery (recovery.ts) and
 * garbage collection (gc.ts), kept versions (version-keep.ts, version-index.ts, version-gc.ts).
 *
 * Longer than ~600 lines on purpose: every namespace write (write, link, mkdir, remove, move,
 * copy) stays in this one class so that the write order above is enforced in one place;
 * everything that is not a namespace write lives in the files named above.
 */
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { Logger } from 'pino';
import { collect, type FsProvider, type Provider, NotFoundError, ancestors } from '@weft/providers';
import type { ChangeRecord, EntryInfo, OpResult } from '@weft/wire';
import { conflictedCopyPath, conflictReport, decideWrite, deleteConflict } from '@weft/wire';
import { ApiError } from '../errors.ts';
import type { ProxyMetrics } from '../metrics.ts';
import { encodeLinkFile, LINK_EXTENSION, LINK_VERSION, type LinkFile, objectKey } from './link-file.ts';
import { type ChangeInput, type EntryRow, type MetadataStore, publicEntry } from './metadata.ts';
import type { RelayCache } from './relay-cache.ts';
import { QuotaLedger } from './quota.ts';
import { collectGarbage, type GcResult } from './gc.ts';
import { ignoreNotFound } from './ignore-not-found.ts';
import { reconcileNamespace } from './recovery.ts';
import { readFsCopy } from './pack-stub.ts';
import { type BatchFile, makeDir, writeBatchFiles } from './batch-write.ts';
import { checkNewPath, checkUserPath } from './paths.ts';
import { lastEntry, NOOP_SEQ } from './op-results.ts';
import { chunkList, type Content, contentSha, contentSize } from './content.ts';
import { contentSignature, putSignature, signatureOf, type SignatureDeps } from './signatures.ts';
import type { VersionRow } from './version-index.ts';
import { keepVersionContent, readVersionContent, type VersionKeepDeps } from './version-keep.ts';
import { collectVersions } from './version-gc.ts';

export type { BatchFile } from './batch-write.ts';
export { checkNewPath, checkUserPath } from './paths.ts';

export type { Content } from './content.ts';

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
  /** The user's storage quota in bytes, undefined for none (default: none for anyone). */
  readonly quotaLimit?: (userId: string) => number | undefined;
  /**
   * A small file's bytes (or range) from its pack when its filesystem-tier copy may have been
   * dropped (packs.ts readDropped); undefined: read the filesystem tier.
   */
  readonly readPacked?: (
    sha256: string,
    range: { start: number; end: number } | undefined,
  ) => Promise<Uint8Array | undefined>;
  /** Recovery: the stub of a dropped copy, or undefined (pack-stub.ts decodeStub). */
  readonly packedStub?: (
    bytes: Uint8Array,
  ) => Promise<{ sha256: string; size: number; mtimeMs: number } | undefined>;
  /** How long replaced and deleted file versions are kept (version-gc.ts); 0 or absent: none. */
  readonly versionRetentionMs?: number;
}

export class HybridStore {
  private readonly fs: FsProvider;
  private readonly objects: Provider;
  readonly meta: MetadataStore;
  readonly relay: RelayCache;
  /** Objects being linked right now: GC must not delete them even at refcount 0. */
  private readonly pinned = new Map<string, number>();
  private readonly now: () => number;
  /** Per-user quotas: every write that adds bytes to a namespace reserves them here first. */
  readonly quota: QuotaLedger;

  constructor(private readonly o: HybridStoreOptions) {
    this.fs = o.fs;
    this.objects = o.objects;
    this.meta = o.meta;
    this.relay = o.relay;
    this.now = o.now ?? Date.now;
    this.quota = new QuotaLedger(o.meta, o.quotaLimit ?? (() => undefined));
  }

  /** Bytes a file of `size` at `path` adds to the namespace (the file it replaces is freed). */
  async growthAt(userId: string, path: string, size: number): Promise<number> {
    const cur = await this.meta.getEntry(userId, path);
    return size - (cur?.kind === 'file' ? cur.size : 0);
  }

  nsPath(userId: string, path: string): string {
    return path === '' ? `ns/${userId}` : `ns/${userId}/${path}`;
  }

  /** Whether replaced and deleted versions are kept (config `versions.retentionDays` > 0). */
  get keepsVersions(): boolean {
    return (this.o.versionRetentionMs ?? 0) > 0;
  }

  /**
   * Put aside the bytes of the small files among `rows` that are about to be overwritten or
   * deleted, so that they stay restorable (version-keep.ts).
   */
  async keepContent(userId: string, rows: readonly (EntryRow | EntryInfo)[]): Promise<() => void> {
    if (!this.keepsVersions) return () => undefined;
    return keepVersionContent(this.versionDeps(), userId, rows);
  }

  /** The bytes of a kept version: a stream, or a local file (large) to pass on as content. */
  versionContent(v: VersionRow): Promise<{ content: Content; release: () => void }> {
    return readVersionContent(this.versionDeps(), v);
  }

  private versionDeps(): VersionKeepDeps {
    return {
      fs: this.fs,
      pin: (sha) => this.pin(sha),
      readAll: (u, e) => this.readAll(u, e),
      stageObject: (sha, size) => this.stageObject(sha, size),
    };
  }

  private async record(
    userId: string,
    changes: ChangeInput[],
    w: Writer | undefined,
  ): Promise<ChangeRecord[]> {
    if (changes.length === 0) return [];
    const records = await this.meta.applyChanges(
      userId,
      changes,
      w?.deviceId,
      this.now(),
      w !== undefined && this.keepsVersions,
    );
    this.o.onChanges(userId, records);
    return records;
  }

  async ensureNamespace(userId: string): Promise<void> {
    await this.meta.ensureUser(userId, this.now());
    await this.fs.mkdir(this.nsPath(userId, ''));
  }

  // ------------------------------------------------------------------ reads

  async stat(userId: string, path: string): Promise<EntryInfo | undefined> {
    const e = await this.meta.getEntry(userId, path);
    return e ? publicEntry(e) : undefined;
  }

  async list(userId: string, dir: string, recursive: boolean): Promise<EntryInfo[]> {
    if (dir !== '') {
      const d = await this.meta.getEntry(userId, dir);
      if (!d) throw new ApiError('NOT_FOUND', 'not found');
      if (d.kind !== 'dir') throw new ApiError('NOT_A_FOLDER', 'not a folder');
    }
    return (await this.meta.listEntries(userId, dir, recursive)).map(publicEntry);
  }

  /** A readable byte range of a file; large files come through the relay cache. */
  async openRead(
    userId: string,
    entry: EntryInfo,
    range: { start: number; end: number } | undefined,
  ): Promise<{ stream: AsyncIterable<Uint8Array>; release: () => void }> {
    if (entry.tier === 'large' && entry.sha256) {
      // A range of an object the relay cache does not hold is read from the object tier
      // directly: staging a many-GiB object to serve a few bytes of it costs its whole size
      // in time and disk (and lets a client make the server fetch any object it can name).
      if (range && !(await this.relay.has(entry.sha256))) {
        const stream = await this.objects.read(objectKey(entry.sha256), {
          offset: range.start,
          length: range.end - range.start + 1,
        });
        return { stream, release: () => undefined };
      }
      const { file, release } = await this.stageObject(entry.sha256, entry.size);
      const stream = createReadStream(file, range ? { start: range.start, end: range.end } : {});
      stream.once('close', release);
      return { stream, release };
    }
    const packed = entry.sha256 ? await this.o.readPacked?.(entry.sha256, range) : undefined;
    if (packed) return { stream: oneChunk(packed), release: () => undefined };
    const ns = this.nsPath(userId, entry.path);
    const { packedStub, readPacked } = this.o;
    // A stub the pack index does not know is resolved from its pack, never served (pack-stub.ts).
    const stream =
      packedStub && readPacked
        ? await readFsCopy({ fs: this.fs, packedStub, readPacked }, ns, entry, range)
        : await this.fs.read(ns, range ? { offset: range.start, length: range.end - range.start + 1 } : {});
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
  async findContent(
    userId: string,
    path: string,
    sha256: string,
  ): Promise<{ entry?: EntryInfo; objectSize?: number } | undefined> {
    const cur = await this.meta.getEntry(userId, path);
    if (cur?.sha256 === sha256) return { entry: publicEntry(cur) };
    const size = await this.meta.userLargeContent(userId, sha256);
    if (size !== undefined && (await this.meta.getObject(sha256))) return { objectSize: size };
    return undefined;
  }

  // ------------------------------------------------------------------ writes

  /** Create missing ancestors (tier and index); a file in the way is ALREADY_EXISTS. */
  private async ensureParents(userId: string, path: string, out: ChangeInput[]): Promise<void> {
    for (const dir of ancestors(path)) {
      const e = await this.meta.getEntry(userId, dir);
      if (e?.kind === 'dir') continue;
      if (e) throw new ApiError('ALREADY_EXISTS', `a file is in the way of folder ${dir}`, { path: dir });
      out.push(await makeDir(this.fs, this.nsPath(userId, dir), dir));
    }
  }

  /** Upload content to the object tier unless an object with that hash exists. */
  async putObject(sha256: string, c: Content): Promise<void> {
    const size = contentSize(c);
    const existing = await this.meta.getObject(sha256);
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
    await this.meta.addObject(sha256, size, this.now());
  }

  /** The rsync signature of a large file's current content (signatures.ts). */
  signatureOf(
    userId: string,
    entry: EntryInfo,
  ): Promise<{ bytes: Uint8Array; blockSize: number; sha256: string }> {
    return signatureOf(this.signatureDeps(), userId, entry);
  }

  /** The rsync signature of large content held here (stored beside its object, or made now). */
  contentSignature(sha256: string, size: number): Promise<Uint8Array> {
    return contentSignature(this.signatureDeps(), sha256, size);
  }

  private signatureDeps(): SignatureDeps {
    return {
      fs: this.fs,
      objects: this.objects,
      log: this.o.log,
      metrics: this.o.metrics,
      nsPath: (u, p) => this.nsPath(u, p),
      pin: (sha) => this.pin(sha),
      stageObject: (sha, size) => this.stageObject(sha, size),
    };
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
    checkNewPath(path);
    const actual = knownSha ? sha256 : await contentSha(content);
    if (actual !== sha256)
      throw new ApiError('HASH_MISMATCH', 'SHA-256 of the content does not match the declared one');
    const cur = await this.meta.getEntry(w.userId, path);
    const d = decideWrite(cur, base, sha256);
    if (d.action === 'refuse-folder')
      throw new ApiError('ALREADY_EXISTS', 'a folder exists at that path', { path });
    if (d.action === 'unchanged' && cur) return { status: 'applied', entry: publicEntry(cur), seq: NOOP_SEQ };
    if (d.action === 'conflict') {
      const conflictPath = await this.conflictPathFor(w, path, () => false);
      const res = await this.storeFile(w, conflictPath, content, sha256, mtimeMs);
      const conflict = conflictReport(path, conflictPath, d);
      return { status: 'conflict', conflict, ...(res.entry ? { entry: res.entry } : {}), seq: res.seq };
    }
    const res = await this.storeFile(w, path, content, sha256, mtimeMs);
    return { status: 'applied', ...(res.entry ? { entry: res.entry } : {}), seq: res.seq };
  }

  /**
   * Apply a bundle's files in one go (batch-write.ts): one metadata transaction for the
   * whole batch, each entry decided by the same write rule as writeFile.
   */
  writeFiles(w: Writer, items: readonly BatchFile[]): Promise<OpResult[]> {
    return writeBatchFiles(
      {
        fs: this.fs,
        meta: this.meta,
        log: this.o.log,
        metrics: this.o.metrics,
        smallFileBytes: this.o.smallFileBytes,
        quota: this.quota,
        growthAt: (u, p, n) => this.growthAt(u, p, n),
        nsPath: (u, p) => this.nsPath(u, p),
        record: (u, changes, writer) => this.record(u, changes, writer),
        conflictPathFor: (writer, p, taken) => this.conflictPathFor(writer, p, taken),
        keepContent: (u, rows) => this.keepContent(u, rows),
        writeFile: (writer, p, content, sha, mtimeMs, base) =>
          this.writeFile(writer, p, content, sha, mtimeMs, base, true),
      },
      w,
      items,
    );
  }

  /** A conflicted-copy name free in the index and not taken by `taken`. */
  private async conflictPathFor(w: Writer, path: string, taken: (p: string) => boolean): Promise<string> {
    const when = new Date(this.now());
    let candidate = conflictedCopyPath(path, when, w.deviceName);
    for (let i = 2; taken(candidate) || (await this.meta.getEntry(w.userId, candidate)); i++) {
      candidate = conflictedCopyPath(path, when, `${w.deviceName} ${i}`);
    }
    return candidate;
  }

  /** Every content write ends here: its growth is reserved against the quota before anything is stored. */
  private async storeFile(
    w: Writer,
    path: string,
    content: Content,
    sha256: string,
    mtimeMs: number,
  ): Promise<{ entry?: EntryInfo; seq: number }> {
    const held = await this.quota.reserve(
      w.userId,
      await this.growthAt(w.userId, path, contentSize(content)),
    );
    try {
      return await this.storeFileReserved(w, path, content, sha256, mtimeMs);
    } finally {
      held.release();
    }
  }

  private async storeFileReserved(
    w: Writer,
    path: string,
    content: Content,
    sha256: string,
    mtimeMs: number,
  ): Promise<{ entry?: EntryInfo; seq: number }> {
    const changes: ChangeInput[] = [];
    await this.ensureParents(w.userId, path, changes);
    const before = await this.meta.getEntry(w.userId, path);
    const unkeep = before && before.sha256 !== sha256 ? await this.keepContent(w.userId, [before]) : () => {};
    try {
      return await this.storeNew(w, path, content, sha256, mtimeMs, changes, before);
    } finally {
      unkeep();
    }
  }

  private async storeNew(
    w: Writer,
    path: string,
    content: Content,
    sha256: string,
    mtimeMs: number,
    changes: ChangeInput[],
    before: EntryRow | undefined,
  ): Promise<{ entry?: EntryInfo; seq: number }> {
    const size = contentSize(content);
    const ns = this.nsPath(w.userId, path);
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
        const signature = (await putSignature(this.signatureDeps(), sha256, content))?.ref ?? null;
        const link: LinkFile = {
          weftLink: LINK_VERSION,
          sha256,
          size,
          mtimeMs,
          object: objectKey(sha256),
          chunks: await chunkList(content),
          signature,
        };
        const e = await this.fs.write(ns + LINK_EXTENSION, encodeLinkFile(link), { modifiedMs: mtimeMs });
        if (before?.tier === 'small') await this.fs.remove(ns).catch(ignoreNotFound);
        entryRow = { path, kind: 'file', size, mtimeMs, sha256, tier: 'large', fsRevision: e.revision };
        changes.push({ type: 'upsert', entry: entryRow });
        const records = await this.record(w.userId, changes, w);
        return lastEntry(records);
      } finally {
        unpin();
      }
    }
    changes.push({ type: 'upsert', entry: entryRow });
    return lastEntry(await this.record(w.userId, changes, w));
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
    // Only content this user has held itself may be linked (uploaded, or received into its
    // namespace through a share): a hash alone proves nothing. An object that exists but is
    // another user's, one of another size and one that does not exist all get the same
    // answer, so the answer says nothing about other users' content.
    const held = await this.meta.userLargeContent(w.userId, sha256);
    if (held === undefined || held !== size || !(await this.meta.getObject(sha256)))
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
    checkNewPath(path);
    const cur = await this.meta.getEntry(w.userId, path);
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
    const { entry, seq } = lastEntry(await this.record(w.userId, changes, w));
    return { status: 'applied', ...(entry ? { entry } : {}), seq };
  }

  private tierPath(userId: string, e: EntryRow | EntryInfo): string {
    const ns = this.nsPath(userId, e.path);
    return e.kind === 'file' && e.tier === 'large' ? ns + LINK_EXTENSION : ns;
  }

  async remove(w: Writer, path: string, base: string | null | undefined): Promise<OpResult> {
    checkUserPath(path);
    const cur = await this.meta.getEntry(w.userId, path);
    if (!cur) return { status: 'applied', seq: NOOP_SEQ }; // already gone: idempotent
    const conflict = deleteConflict(path, cur, base);
    if (conflict) return { status: 'conflict', conflict, entry: publicEntry(cur), seq: NOOP_SEQ };
    const unkeep = await this.keepContent(w.userId, [
      cur,
      ...(cur.kind === 'dir' ? await this.meta.listEntries(w.userId, path, true) : []),
    ]);
    try {
      await this.fs.remove(this.tierPath(w.userId, cur)).catch(ignoreNotFound);
      const records = await this.record(w.userId, [{ type: 'delete', path }], w);
      return { status: 'applied', seq: records.at(-1)?.seq ?? NOOP_SEQ };
    } finally {
      unkeep();
    }
  }

  async move(w: Writer, from: string, to: string): Promise<OpResult> {
    checkUserPath(from);
    checkNewPath(to);
    if (from === to) throw new ApiError('BAD_REQUEST', 'source and destination are the same');
    if (to.startsWith(from + '/')) throw new ApiError('BAD_REQUEST', 'cannot move a folder inside itself');
    const src = await this.meta.getEntry(w.userId, from);
    if (!src) throw new ApiError('NOT_FOUND', 'source not found', { path: from });
    if (await this.meta.getEntry(w.userId, to))
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
    const records = await this.record(w.userId, changes, w);
    await this.meta.setFsRevision(w.userId, to, moved.revision);
    const last = records.at(-1);
    const entry = await this.stat(w.userId, to);
    return { status: 'applied', ...(entry ? { entry } : {}), seq: last?.seq ?? NOOP_SEQ };
  }

  async copy(w: Writer, from: string, to: string): Promise<OpResult> {
    checkUserPath(from);
    checkNewPath(to);
    if (to === from || to.startsWith(from + '/'))
      throw new ApiError('BAD_REQUEST', 'cannot copy onto or inside itself');
    const src = await this.meta.getEntry(w.userId, from);
    if (!src) throw new ApiError('NOT_FOUND', 'source not found', { path: from });
    if (await this.meta.getEntry(w.userId, to))
      throw new ApiError('ALREADY_EXISTS', 'destination exists', { path: to });
    const rows = [src, ...(src.kind === 'dir' ? await this.meta.listEntries(w.userId, from, true) : [])];
    // A copy adds every file it copies to the namespace's usage (dedup or not).
    const held = await this.quota.reserve(
      w.userId,
      rows.reduce((n, r) => n + (r.kind === 'file' ? r.size : 0), 0),
    );
    const changes: ChangeInput[] = [];
    let seq: number;
    try {
      await this.ensureParents(w.userId, to, changes);
      const suffix = src.kind === 'file' && src.tier === 'large' ? LINK_EXTENSION : '';
      // A large file's copy is a copy of its link file: a new reference, not a new upload.
      await this.fs.copy(this.nsPath(w.userId, from) + suffix, this.nsPath(w.userId, to) + suffix);
      for (const r of rows) {
        const target = to + r.path.slice(from.length);
        const st = await this.fs.stat(this.tierPath(w.userId, { ...r, path: target }));
        const { revision: _r, ...rest } = r;
        changes.push({ type: 'upsert', entry: { ...rest, path: target, fsRevision: st.revision } });
      }
      seq = lastEntry(await this.record(w.userId, changes, w)).seq;
    } finally {
      held.release();
    }
    const entry = await this.stat(w.userId, to);
    return { status: 'applied', ...(entry ? { entry } : {}), seq };
  }

  // ------------------------------------------------------------------ recovery and GC (own files)

  /** Crash recovery of one namespace (recovery.ts): the filesystem tier is the truth. */
  reconcile(userId: string): Promise<number> {
    return reconcileNamespace(
      {
        fs: this.fs,
        meta: this.meta,
        log: this.o.log,
        nsPath: (u, p) => this.nsPath(u, p),
        ensureNamespace: (u) => this.ensureNamespace(u),
        record: async (u, changes) => void (await this.record(u, changes, undefined)),
        ...(this.o.packedStub ? { packedStub: this.o.packedStub } : {}),
      },
      userId,
    );
  }

  /**
   * Garbage collection with a grace period of `graceMs`: versions past their retention first
   * (version-gc.ts), then objects, orphans and transfers (gc.ts).
   */
  async gc(graceMs: number): Promise<GcResult & { versions: number }> {
    const versions = await collectVersions(
      {
        fs: this.fs,
        versions: this.meta.versions,
        isPinned: (sha) => this.pinned.has(sha),
        now: this.now,
      },
      this.o.versionRetentionMs ?? 0,
      graceMs,
    );
    const r = await collectGarbage(
      {
        objects: this.objects,
        meta: this.meta,
        relay: this.relay,
        stagingDir: this.o.stagingDir,
        isPinned: (sha) => this.pinned.has(sha),
        now: this.now,
      },
      graceMs,
    );
    return { ...r, versions };
  }

  /** The store's clock (ms since the epoch). */
  clock(): number {
    return this.now();
  }

  async stagingFile(id: string): Promise<string> {
    await fsp.mkdir(this.o.stagingDir, { recursive: true, mode: 0o700 });
    return nodePath.join(this.o.stagingDir, id);
  }

  tempFile(): string {
    return nodePath.join(this.o.stagingDir, `tmp-${randomBytes(12).toString('hex')}`);
  }

  async clearTemps(): Promise<void> {
    await fsp.mkdir(this.o.stagingDir, { recursive: true, mode: 0o700 });
    for (const n of await fsp.readdir(this.o.stagingDir)) {
      if (n.startsWith('tmp-')) await fsp.rm(nodePath.join(this.o.stagingDir, n), { force: true });
    }
  }
}

async function* oneChunk(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

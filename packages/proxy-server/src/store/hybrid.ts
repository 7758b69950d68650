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
 * (batch-write.ts), the object tier's writes (object-tier.ts: step 1 and a large file's step 2),
 * the namespace writes that move no content (tree-ops.ts: mkdir, remove, move, copy), reads
 * (read-path.ts), rsync signatures (signatures.ts), crash recovery (recovery.ts), garbage
 * collection (gc.ts), kept versions (version-keep.ts, version-index.ts, version-gc.ts) and the
 * staging folder (staging.ts). This class holds the content writes (writeFile and the steps it
 * takes in order), the pins GC respects, and hands each module the part of the store it needs.
 */
import { createReadStream } from 'node:fs';
import { collect, type FsProvider, type Provider, ancestors } from '@weft/providers';
import type { ChangeRecord, EntryInfo, OpResult } from '@weft/wire';
import { conflictedCopyPath, conflictReport, decideWrite } from '@weft/wire';
import { ApiError } from '../errors.ts';
import { LINK_EXTENSION } from './link-file.ts';
import { type ChangeInput, type EntryRow, type MetadataStore, publicEntry } from './metadata.ts';
import type { RelayCache } from './relay-cache.ts';
import { QuotaLedger } from './quota.ts';
import { collectGarbage, type GcResult } from './gc.ts';
import { ignoreNotFound } from './ignore-not-found.ts';
import { reconcileNamespace } from './recovery.ts';
import { openRead, type ReadDeps, stageObject } from './read-path.ts';
import { linkObject, putObject, type ObjectTierDeps, writeLargeFile } from './object-tier.ts';
import { copy, mkdir, move, remove, type TreeOpsDeps } from './tree-ops.ts';
import { clearTemps, stagingFile, tempFile } from './staging.ts';
import type { HybridStoreOptions, Writer } from './hybrid-options.ts';
import { type BatchFile, makeDir, writeBatchFiles } from './batch-write.ts';
import { checkNewPath } from './paths.ts';
import { lastEntry, NOOP_SEQ } from './op-results.ts';
import { type Content, contentSha, contentSize } from './content.ts';
import { contentSignature, signatureOf, type SignatureDeps } from './signatures.ts';
import type { VersionRow } from './version-index.ts';
import { keepVersionContent, readVersionContent, type VersionKeepDeps } from './version-keep.ts';
import { collectVersions } from './version-gc.ts';

export type { BatchFile } from './batch-write.ts';
export { checkNewPath, checkUserPath } from './paths.ts';

export type { Content } from './content.ts';
export type { HybridStoreOptions, Writer } from './hybrid-options.ts';

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
  private readonly readDeps: ReadDeps;

  constructor(private readonly o: HybridStoreOptions) {
    this.fs = o.fs;
    this.objects = o.objects;
    this.meta = o.meta;
    this.relay = o.relay;
    this.now = o.now ?? Date.now;
    this.quota = new QuotaLedger(o.meta, o.quotaLimit ?? (() => undefined));
    this.readDeps = {
      fs: o.fs,
      objects: o.objects,
      relay: o.relay,
      metrics: o.metrics,
      nsPath: (u, p) => this.nsPath(u, p),
      readPacked: o.readPacked,
      packedStub: o.packedStub,
    };
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

  /** A readable byte range of a file; large files come through the relay cache (read-path.ts). */
  openRead(
    userId: string,
    entry: EntryInfo,
    range: { start: number; end: number } | undefined,
  ): Promise<{ stream: AsyncIterable<Uint8Array>; release: () => void }> {
    return openRead(this.readDeps, userId, entry, range);
  }

  /** Pin a local copy of an object (relay cache). */
  stageObject(sha256: string, size: number): Promise<{ file: string; release: () => void }> {
    return stageObject(this.readDeps, sha256, size);
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

  /** Upload content to the object tier unless an object with that hash exists (object-tier.ts). */
  putObject(sha256: string, c: Content): Promise<void> {
    return putObject(this.objectDeps(), sha256, c);
  }

  private objectDeps(): ObjectTierDeps {
    return {
      fs: this.fs,
      objects: this.objects,
      meta: this.meta,
      metrics: this.o.metrics,
      onObjectTransfer: this.o.onObjectTransfer,
      now: this.now,
      signatures: this.signatureDeps(),
    };
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
    own?: readonly string[],
  ): Promise<OpResult> {
    checkNewPath(path);
    const actual = knownSha ? sha256 : await contentSha(content);
    if (actual !== sha256)
      throw new ApiError('HASH_MISMATCH', 'SHA-256 of the content does not match the declared one');
    const cur = await this.meta.getEntry(w.userId, path);
    const d = decideWrite(cur, base, sha256, own);
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
        writeFile: (writer, p, content, sha, mtimeMs, base, own) =>
          this.writeFile(writer, p, content, sha, mtimeMs, base, true, own),
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
        entryRow = await writeLargeFile(this.objectDeps(), ns, path, content, sha256, mtimeMs, before);
        changes.push({ type: 'upsert', entry: entryRow });
        return lastEntry(await this.record(w.userId, changes, w));
      } finally {
        unpin();
      }
    }
    changes.push({ type: 'upsert', entry: entryRow });
    return lastEntry(await this.record(w.userId, changes, w));
  }

  /** Make an existing object current at `path` (dedup commit: no bytes sent; object-tier.ts). */
  linkObject(
    w: Writer,
    path: string,
    sha256: string,
    size: number,
    mtimeMs: number,
    base: string | null | undefined,
    own?: readonly string[],
  ): Promise<OpResult> {
    return linkObject(
      {
        meta: this.meta,
        smallFileBytes: this.o.smallFileBytes,
        pin: (sha) => this.pin(sha),
        stageObject: (sha, n) => this.stageObject(sha, n),
        writeFile: (content, known) => this.writeFile(w, path, content, sha256, mtimeMs, base, known, own),
      },
      w.userId,
      sha256,
      size,
    );
  }

  // Namespace writes that move no content (tree-ops.ts).

  mkdir(w: Writer, path: string): Promise<OpResult> {
    return mkdir(this.treeDeps(), w, path);
  }

  remove(
    w: Writer,
    path: string,
    base: string | null | undefined,
    own?: readonly string[],
  ): Promise<OpResult> {
    return remove(this.treeDeps(), w, path, base, own);
  }

  move(w: Writer, from: string, to: string): Promise<OpResult> {
    return move(this.treeDeps(), w, from, to);
  }

  copy(w: Writer, from: string, to: string): Promise<OpResult> {
    return copy(this.treeDeps(), w, from, to);
  }

  private treeDeps(): TreeOpsDeps {
    return {
      fs: this.fs,
      meta: this.meta,
      quota: this.quota,
      nsPath: (u, p) => this.nsPath(u, p),
      record: (u, changes, w) => this.record(u, changes, w),
      ensureParents: (u, p, out) => this.ensureParents(u, p, out),
      keepContent: (u, rows) => this.keepContent(u, rows),
      stat: (u, p) => this.stat(u, p),
    };
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

  /** The path of staging file `id` (staging.ts). */
  stagingFile(id: string): Promise<string> {
    return stagingFile(this.o.stagingDir, id);
  }

  tempFile(): string {
    return tempFile(this.o.stagingDir);
  }

  clearTemps(): Promise<void> {
    return clearTemps(this.o.stagingDir);
  }
}

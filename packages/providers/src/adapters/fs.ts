/**
 * A local directory as a provider — the filesystem tier (Amazon EFS in production).
 *
 * Writes are atomic: data goes to a temp file under the state folder (same filesystem),
 * is fsynced, then renamed (or hard-linked, for must-not-exist writes) into place; the
 * parent folder is fsynced. A failed or aborted write removes its temp file. With the
 * write-ahead log (`batchLog`) a batch writes a new file in place instead (fs/write-many.ts);
 * until it is whole, this provider's listings, stats and reads of it wait for it
 * (`writingInPlace`), so through the provider it still appears whole or not at all.
 *
 * Revisions are derived from (inode, ctime, mtime, size): every write makes a new inode
 * and ctime, so a revision never repeats for different content in practice.
 *
 * The change feed is a journal this provider appends to after each change it makes
 * (`.weft-fs/changes.jsonl`). Changes made to the directory by other programs are not in
 * it — the proxy owns its tier; a periodic listing catches anything else.
 *
 * Also here: fs/options.ts (how it is opened), fs/temp-file.ts (a write's and a copy's temp
 * file; a transfer's checks), fs/read.ts (listings, stats and reads), fs/journal.ts (that journal and its
 * cursors), fs/write-many.ts (the batch write), fs/batch-log.ts (the batch write's write-ahead log: one sync per batch),
 * fs/write-ahead.ts (that log wired into this provider: open and replay, checkpoint before
 * another mutation), fs/util.ts (revisions, the case probe, Node errors in the contract's
 * terms, the features).
 */
import { randomBytes } from 'node:crypto';
import type { BigIntStats } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import {
  AlreadyExistsError,
  InvalidArgumentError,
  InvalidPathError,
  NotFoundError,
  NotSupportedError,
  PreconditionFailedError,
  ProviderError,
} from '../errors.ts';
import type { Features } from '../features.ts';
import { KeyedMutex } from '../keyed-mutex.ts';
import { caseFoldKey, isWithin, normalizeEntryPath, parentPath } from '../paths.ts';
import type {
  Body,
  ChangePage,
  Entry,
  ListOptions,
  Provider,
  ReadOptions,
  RemoveOptions,
  TransferOptions,
  WriteOptions,
} from '../provider.ts';
import { replaceMany, type ReplaceManyItem } from './fs/replace-many.ts';
import type { BatchLogStats } from './fs/batch-log.ts';
import { HashCache } from './fs/hash-cache.ts';
import { FS_STATE_DIR, FsReader } from './fs/read.ts';
import { FsJournal } from './fs/journal.ts';
import { type BatchTarget, type WriteManyItem, writeMany } from './fs/write-many.ts';
import { WriteAhead, writeAheadDir } from './fs/write-ahead.ts';
import type { FsProviderOptions } from './fs/options.ts';
import { checkTransfer, copyToTemp, writeTemp } from './fs/temp-file.ts';

export type { WriteManyItem } from './fs/write-many.ts';
export type { ReplaceManyItem } from './fs/replace-many.ts';
import { classify, fsFeatures, fsyncDir, isAbort, probeCaseSensitive, revisionOf } from './fs/util.ts';

export { FS_STATE_DIR } from './fs/read.ts';
export type { FsProviderOptions } from './fs/options.ts';

export class FsProvider implements Provider {
  readonly name: string;
  features!: Features;
  private readonly root: string;
  private realRoot = '';
  private readonly mutex = new KeyedMutex();
  /** The change feed's journal (absent with `changeFeed: false`). */
  private changeLog: FsJournal | undefined;
  /** The batch write's write-ahead log, when opened with `batchLog` (fs/write-ahead.ts). */
  private wal: WriteAhead | undefined;
  private tmpDir = '';
  private readonly hashCache: HashCache;
  /** Listings, stats and reads (fs/read.ts); made once the root and its rules are known. */
  private reader!: FsReader;
  /**
   * The files a logged batch is writing in place now (fs/write-many.ts: no temp name), by
   * lock key, each until it is whole: a listing, stat or read that meets one waits for that
   * write and looks again, so none sees a part-written file (issue #16).
   */
  private readonly writingInPlace = new Map<string, Promise<unknown>>();
  private portable = false;
  private readonly dirMode: number;
  private readonly fileMode: number;

  private constructor(private readonly options: FsProviderOptions) {
    this.root = nodePath.resolve(options.root);
    this.name = `fs:${this.root}`;
    this.dirMode = options.private ? 0o700 : 0o777;
    this.fileMode = options.private ? 0o600 : 0o644;
    this.hashCache = new HashCache(options.hashCacheEntries);
  }

  /** Open (creating if needed) a directory as a provider. */
  static async open(options: FsProviderOptions): Promise<FsProvider> {
    const p = new FsProvider(options);
    await p.init();
    return p;
  }

  private async init(): Promise<void> {
    await fsp.mkdir(this.root, { recursive: true, mode: this.dirMode });
    if (this.options.private) await fsp.chmod(this.root, 0o700);
    this.realRoot = await fsp.realpath(this.root);
    const state = nodePath.join(this.realRoot, FS_STATE_DIR);
    this.tmpDir = nodePath.join(state, 'tmp');
    await fsp.mkdir(this.tmpDir, { recursive: true, mode: this.dirMode });
    // Temp files left by a crash are garbage: their writes never completed.
    for (const name of await fsp.readdir(this.tmpDir)) {
      await fsp.rm(nodePath.join(this.tmpDir, name), { recursive: true, force: true });
    }
    const caseSensitive = await probeCaseSensitive(state);
    this.portable = this.options.portable ?? !caseSensitive;
    this.features = fsFeatures(caseSensitive, this.options.changeFeed !== false);
    this.reader = new FsReader({
      name: this.name,
      realRoot: this.realRoot,
      portable: this.portable,
      hashCache: this.hashCache,
      writingInPlace: this.writingInPlace,
      resolve: (p) => this.resolve(p),
      lockKey: (p) => this.lockKey(p),
    });
    const journal = nodePath.join(state, 'changes.jsonl');
    if (this.options.changeFeed === false) {
      // A journal from when the feed was on is stale from now on: gone, not left to mislead.
      await fsp.rm(journal, { force: true });
    } else {
      this.changeLog = new FsJournal(journal, this.tmpDir, this.fileMode, this.options.maxJournal ?? 200_000);
      for (const l of await this.changeLog.load()) {
        if (l.t === 'u' && l.e?.hash)
          this.hashCache.set(l.p, { revision: l.e.revision, sha256: l.e.hash.value });
      }
    }
    if (this.options.batchLog)
      this.wal = await WriteAhead.open(
        writeAheadDir(state),
        {
          realRoot: this.realRoot,
          fileMode: this.fileMode,
          dirMode: this.dirMode,
          resolve: (p) => this.resolve(p),
          unloggedTarget: () => this.batchTarget(false),
        },
        this.options.batchLog === true ? {} : this.options.batchLog,
      );
  }

  /** What the batch write's log counted (undefined without `batchLog`). */
  get batchLogStats(): Readonly<BatchLogStats> | undefined {
    return this.wal?.stats;
  }

  /** Validate a path and map it to an absolute filesystem path inside the root. */
  private resolve(p: string): string {
    const first = p.split('/')[0] ?? '';
    if (caseFoldKey(first) === caseFoldKey(FS_STATE_DIR)) {
      throw new InvalidPathError(`${this.name}: '${FS_STATE_DIR}' is reserved`, p);
    }
    return nodePath.join(this.realRoot, ...p.split('/'));
  }

  private norm(path: string): string {
    return normalizeEntryPath(path, { portable: this.portable });
  }

  /** A folder's real path must stay inside the root (a symlink must not lead out). */
  private async assertInside(abs: string): Promise<void> {
    let real: string;
    try {
      real = await fsp.realpath(abs);
    } catch (e) {
      throw classify(e, this.name, abs);
    }
    if (real !== this.realRoot && !real.startsWith(this.realRoot + nodePath.sep)) {
      throw new InvalidPathError(`${this.name}: ${abs} leads outside the root`, abs);
    }
  }

  private lockKey(p: string): string {
    return this.features.caseSensitive ? p : caseFoldKey(p);
  }

  list(dir: string, options: ListOptions = {}): AsyncIterable<Entry> {
    return this.reader.list(dir, options);
  }

  async stat(path: string): Promise<Entry> {
    return this.reader.stat(this.norm(path));
  }

  /**
   * `stat` without hashing: the entry's `hash` only when the hash cache knows it for the
   * file's current revision. For a caller that needs only to know the file is there (or its
   * size): `stat` reads the whole file when its hash has left the cache (issue #16: the
   * proxy's kept versions, a folder's delete checking thousands of them).
   */
  async statWithoutHash(path: string): Promise<Entry> {
    return this.reader.statWithoutHash(this.norm(path));
  }

  /** Files whose bytes `stat` read to hash them (tests). */
  get hashReads(): number {
    return this.reader.hashReads;
  }

  async read(path: string, options: ReadOptions = {}): Promise<AsyncIterable<Uint8Array>> {
    return this.reader.read(this.norm(path), options);
  }

  async write(path: string, body: Body, options: WriteOptions = {}): Promise<Entry> {
    const p = this.norm(path);
    const abs = this.resolve(p);
    const tmp = nodePath.join(this.tmpDir, randomBytes(12).toString('hex'));
    try {
      const sha256 = await writeTemp(tmp, body, options, {
        name: this.name,
        path: p,
        fileMode: this.fileMode,
        assertRoot: () => this.reader.assertRoot(),
      });
      if (options.sha256 !== undefined && options.sha256.toLowerCase() !== sha256) {
        throw new InvalidArgumentError(`${this.name}: SHA-256 of the bytes received for ${p} does not match`);
      }
      // A logged batch must not be replayed over this write (fs/batch-log.ts).
      await this.wal?.beforeTouch([this.lockKey(p)]);
      return await this.mutex.run([this.lockKey(p)], async () => {
        await this.prepareParents(p);
        const existing = await this.reader.lstatEntry(p);
        if (existing?.isDirectory()) throw new AlreadyExistsError(`${this.name}: a folder exists at ${p}`);
        if (options.ifRevision !== undefined) {
          if (!existing) throw new NotFoundError(`${this.name}: conditional write to missing ${p}`);
          const current = revisionOf(existing);
          if (current !== options.ifRevision) {
            throw new PreconditionFailedError(`${this.name}: ${p} changed (now ${current})`, current);
          }
        }
        if (options.ifNotExists) {
          // link(2) fails with EEXIST atomically, even against other processes.
          await fsp.link(tmp, abs).catch((e: unknown) => {
            throw classify(e, this.name, p);
          });
          await fsp.unlink(tmp);
        } else {
          await fsp.rename(tmp, abs).catch((e: unknown) => {
            throw classify(e, this.name, p);
          });
        }
        await fsyncDir(nodePath.dirname(abs));
        const st = await fsp.lstat(abs, { bigint: true });
        const entry = await this.toEntryWithHash(p, st, sha256);
        this.changeLog?.record({ type: 'upsert', path: p, entry });
        return entry;
      });
    } catch (e) {
      await fsp.rm(tmp, { force: true });
      throw e instanceof ProviderError || isAbort(e) ? e : classify(e, this.name, p);
    }
  }

  /**
   * Write many small files at once (the proxy's bundle ingest). Every file goes the way
   * `write` goes — temp file, fsync, rename — but the temp files are written and fsynced
   * in parallel (at most `concurrency` at a time), renamed into place one after another,
   * and each parent folder is fsynced once. Each file is still atomic on its own: a crash
   * leaves it at its old or its new content. Returns, per item in order, its entry or the
   * error that item met (one failure does not stop the others). Unconditional writes only.
   */
  async writeMany(
    items: readonly WriteManyItem[],
    options: { readonly concurrency?: number } = {},
  ): Promise<(Entry | Error)[]> {
    return writeMany(this.batchTarget(true), items, options);
  }

  /**
   * Replace many files, each only while it is still the revision given (the packer's drop of
   * small files for their stubs): atomically each, with ONE sync for the batch when the
   * write-ahead log is on (fs/replace-many.ts). Per item in order: its new entry, a
   * PreconditionFailedError (changed or gone since), or the error met.
   */
  async replaceMany(
    items: readonly ReplaceManyItem[],
    options: { readonly concurrency?: number } = {},
  ): Promise<(Entry | Error)[]> {
    return replaceMany(this.batchTarget(true), items, options.concurrency);
  }

  private batchTarget(logged: boolean): BatchTarget {
    return {
      name: this.name,
      tmpDir: this.tmpDir,
      fileMode: this.fileMode,
      mutex: this.mutex,
      norm: (path) => this.norm(path),
      resolve: (p) => this.resolve(p),
      lockKey: (p) => this.lockKey(p),
      inPlace: (key, write) => {
        const w = write();
        this.writingInPlace.set(key, w);
        return w.finally(() => {
          if (this.writingInPlace.get(key) === w) this.writingInPlace.delete(key);
        });
      },
      prepareParents: (p, known) => this.prepareParents(p, known),
      entryWithHash: (p, st, sha256) => this.toEntryWithHash(p, st, sha256),
      record: (change) => this.changeLog?.record(change),
      ...(logged && this.wal ? { log: this.wal.log } : {}),
    };
  }

  private async toEntryWithHash(p: string, st: BigIntStats, sha256: string): Promise<Entry> {
    this.hashCache.set(p, { revision: revisionOf(st), sha256 });
    return this.reader.toEntry(p, st, false);
  }

  /**
   * Create the missing parents of `p` (recording each new folder) and check they stay inside
   * the root. `known`: the folders of the same batch looked at or being looked at, each once
   * (a bundle's parents share their ancestors: issue #16); this call's are added.
   */
  private async prepareParents(p: string, known?: Map<string, Promise<void>>): Promise<void> {
    const parent = parentPath(p);
    if (parent === '') return;
    const segments = parent.split('/');
    for (let i = 1; i <= segments.length; i++) {
      const dir = segments.slice(0, i).join('/');
      if (!known) {
        await this.prepareDir(dir);
        continue;
      }
      let ready = known.get(dir);
      if (!ready) {
        ready = this.prepareDir(dir);
        known.set(dir, ready);
      }
      await ready;
    }
    await this.assertInside(this.resolve(parent));
  }

  /** Folder `dir` there (made and recorded if missing), not a file or a symbolic link. */
  private async prepareDir(dir: string): Promise<void> {
    const st = await fsp.lstat(this.resolve(dir)).catch((e: unknown) => {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw classify(e, this.name, dir);
    });
    if (st?.isDirectory()) return;
    if (st?.isSymbolicLink()) throw new InvalidPathError(`${this.name}: ${dir} is a symbolic link`, dir);
    if (st) throw new AlreadyExistsError(`${this.name}: a file is in the way of folder ${dir}`);
    try {
      await fsp.mkdir(this.resolve(dir), { mode: this.dirMode });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw classify(e, this.name, dir);
      return;
    }
    if (this.changeLog) {
      const created = await fsp.lstat(this.resolve(dir), { bigint: true });
      this.changeLog.record({
        type: 'upsert',
        path: dir,
        entry: await this.reader.toEntry(dir, created, false),
      });
    }
  }

  async remove(path: string, options: RemoveOptions = {}): Promise<void> {
    const p = this.norm(path);
    await this.wal?.beforeTouch([this.lockKey(p)]);
    await this.mutex.run([this.lockKey(p)], async () => {
      const st = await this.reader.lstatEntry(p);
      if (!st) throw new NotFoundError(`${this.name}: not found: ${p}`);
      if (options.ifRevision !== undefined && revisionOf(st) !== options.ifRevision) {
        throw new PreconditionFailedError(`${this.name}: ${p} changed`, revisionOf(st));
      }
      await this.assertInside(nodePath.dirname(this.resolve(p)));
      // Move aside first so the removal is atomic for readers, then delete at leisure.
      const aside = nodePath.join(this.tmpDir, randomBytes(12).toString('hex'));
      await fsp.rename(this.resolve(p), aside).catch((e: unknown) => {
        throw classify(e, this.name, p);
      });
      this.changeLog?.record({ type: 'delete', path: p });
      await fsp.rm(aside, { recursive: true, force: true });
    });
  }

  async mkdir(path: string): Promise<void> {
    const p = this.norm(path);
    await this.mutex.run([this.lockKey(p)], async () => {
      const st = await this.reader.lstatEntry(p);
      if (st?.isDirectory()) return;
      if (st) throw new AlreadyExistsError(`${this.name}: a file exists at ${p}`);
      await this.prepareParents(p);
      try {
        await fsp.mkdir(this.resolve(p), { mode: this.dirMode });
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'EEXIST') {
          const again = await this.reader.lstatEntry(p);
          if (again?.isDirectory()) return;
        }
        throw classify(e, this.name, p);
      }
      if (this.changeLog) {
        const created = await fsp.lstat(this.resolve(p), { bigint: true });
        this.changeLog.record({
          type: 'upsert',
          path: p,
          entry: await this.reader.toEntry(p, created, false),
        });
      }
    });
  }

  private checkTransfer(f: string, t: string, options: TransferOptions): Promise<{ src: BigIntStats }> {
    return checkTransfer(this.reader, this.name, (p) => this.lockKey(p), f, t, options);
  }

  async move(from: string, to: string, options: TransferOptions = {}): Promise<Entry> {
    const f = this.norm(from);
    const t = this.norm(to);
    await this.wal?.beforeTouch([this.lockKey(f), this.lockKey(t)]);
    return this.mutex.run([this.lockKey(f), this.lockKey(t)], async () => {
      await this.checkTransfer(f, t, options);
      await this.prepareParents(t);
      await this.assertInside(nodePath.dirname(this.resolve(f)));
      const hashes = new Map<string, string>();
      for (const [k, v] of this.hashCache.entries())
        if (isWithin(k, f)) hashes.set(t + k.slice(f.length), v.sha256);
      await fsp.rename(this.resolve(f), this.resolve(t)).catch((e: unknown) => {
        throw classify(e, this.name, t);
      });
      await fsyncDir(nodePath.dirname(this.resolve(t)));
      this.changeLog?.record({ type: 'delete', path: f });
      const entries = await this.reader.subtreeEntries(t);
      for (const e of entries) {
        const sha = hashes.get(e.path);
        if (sha !== undefined) this.hashCache.set(e.path, { revision: e.revision, sha256: sha });
      }
      const withHashes = await Promise.all(
        entries.map(async (e) =>
          e.kind === 'file' ? this.reader.toEntry(e.path, await this.bigStat(e.path), false) : e,
        ),
      );
      for (const e of withHashes) this.changeLog?.record({ type: 'upsert', path: e.path, entry: e });
      const root = withHashes[0];
      if (!root) throw new NotFoundError(`${this.name}: not found: ${t}`);
      return root;
    });
  }

  private bigStat(p: string): Promise<BigIntStats> {
    return fsp.lstat(this.resolve(p), { bigint: true });
  }

  async copy(from: string, to: string, options: TransferOptions = {}): Promise<Entry> {
    const f = this.norm(from);
    const t = this.norm(to);
    if (this.lockKey(f) === this.lockKey(t)) throw new AlreadyExistsError(`${this.name}: ${t} exists`);
    await this.wal?.beforeTouch([this.lockKey(t)]);
    return this.mutex.run([this.lockKey(f), this.lockKey(t)], async () => {
      const { src } = await this.checkTransfer(f, t, options);
      await this.prepareParents(t);
      const carried = await this.reader.knownHashesUnder(f, t);
      const tmp = nodePath.join(this.tmpDir, randomBytes(12).toString('hex'));
      try {
        await copyToTemp(this.resolve(f), src, tmp);
        await fsp.rename(tmp, this.resolve(t));
      } catch (e) {
        await fsp.rm(tmp, { recursive: true, force: true });
        throw classify(e, this.name, t);
      }
      await fsyncDir(nodePath.dirname(this.resolve(t)));
      const entries = (await this.reader.subtreeEntries(t)).map((e) => {
        const sha256 = e.kind === 'file' ? carried.get(e.path) : undefined;
        if (sha256 === undefined) return e;
        this.hashCache.set(e.path, { revision: e.revision, sha256 });
        return { ...e, hash: { algorithm: 'sha256', value: sha256 } } satisfies Entry;
      });
      for (const e of entries) this.changeLog?.record({ type: 'upsert', path: e.path, entry: e });
      const root = entries[0];
      if (!root) throw new NotFoundError(`${this.name}: not found: ${t}`);
      return root;
    });
  }

  async latestCursor(): Promise<string> {
    return this.feed().latestCursor();
  }

  async changes(cursor: string, options: { limit?: number } = {}): Promise<ChangePage> {
    return this.feed().changes(cursor, options);
  }

  private feed(): FsJournal {
    if (!this.changeLog) throw new NotSupportedError(`${this.name}: opened without a change feed`);
    return this.changeLog;
  }

  async close(): Promise<void> {
    await this.wal?.close();
    await this.changeLog?.flushed();
  }
}

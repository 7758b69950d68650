/**
 * The filesystem provider's read side (fs.ts): listings, stats and reads, each of a file
 * seen whole — a file a logged batch is writing in place (`writingInPlace`, fs/write-many.ts)
 * is waited for, then looked at again — and the SHA-256s kept by revision (fs/hash-cache.ts).
 * A path is "not found" only while the root is there (`assertRoot`).
 */
import { createHash } from 'node:crypto';
import { type BigIntStats, constants as fsc, createReadStream } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { readRange, throwIfAborted } from '../../body.ts';
import { NotFoundError, TransientError } from '../../errors.ts';
import { isWithin, normalizePath } from '../../paths.ts';
import type { Entry, ListOptions, ReadOptions } from '../../provider.ts';
import type { HashCache } from './hash-cache.ts';
import { classify, revisionOf } from './util.ts';

/** Reserved top-level name holding the journal and temp files; never listed, never writable. */
export const FS_STATE_DIR = '.weft-fs';

/** What the read side needs of the provider, fixed once it is open. */
export interface FsReadContext {
  readonly name: string;
  readonly realRoot: string;
  readonly portable: boolean;
  readonly hashCache: HashCache;
  /** The files being written in place now, by lock key, each until it is whole. */
  readonly writingInPlace: ReadonlyMap<string, Promise<unknown>>;
  /** A provider path to its absolute path inside the root (rejects the state folder). */
  resolve(p: string): string;
  lockKey(p: string): string;
}

export class FsReader {
  /** Files whose bytes were read to hash them (a stat past the hash cache; tests). */
  hashReads = 0;

  constructor(private readonly c: FsReadContext) {}

  async toEntry(p: string, st: BigIntStats, withHash: boolean): Promise<Entry> {
    const revision = revisionOf(st);
    if (st.isDirectory()) {
      return { path: p, kind: 'dir', size: 0, modifiedMs: Number(st.mtimeMs), revision };
    }
    const base: Entry = {
      path: p,
      kind: 'file',
      size: Number(st.size),
      modifiedMs: Number(st.mtimeMs),
      revision,
    };
    if (!withHash) {
      const cached = this.c.hashCache.get(p);
      return cached?.revision === revision
        ? { ...base, hash: { algorithm: 'sha256', value: cached.sha256 } }
        : base;
    }
    return { ...base, hash: { algorithm: 'sha256', value: await this.hashOf(p, revision) } };
  }

  private async hashOf(p: string, revision: string): Promise<string> {
    const cached = this.c.hashCache.get(p);
    if (cached?.revision === revision) return cached.sha256;
    this.hashReads += 1;
    const h = createHash('sha256');
    for await (const chunk of createReadStream(this.c.resolve(p))) h.update(chunk as Buffer);
    const sha256 = h.digest('hex');
    this.c.hashCache.set(p, { revision, sha256 });
    return sha256;
  }

  async *list(dir: string, options: ListOptions = {}): AsyncIterable<Entry> {
    const d = normalizePath(dir, { portable: this.c.portable });
    const abs = d === '' ? this.c.realRoot : this.c.resolve(d);
    if (d !== '') {
      const st = await fsp.lstat(abs).catch((e: unknown) => {
        throw classify(e, this.c.name, d);
      });
      if (!st.isDirectory()) throw new NotFoundError(`${this.c.name}: not a folder: ${d}`);
    }
    yield* this.walk(d, abs, options);
  }

  async *walk(d: string, abs: string, options: ListOptions): AsyncIterable<Entry> {
    let names: string[];
    try {
      names = (await fsp.readdir(abs)).sort();
    } catch (e) {
      throw classify(e, this.c.name, d);
    }
    for (const name of names) {
      throwIfAborted(options.signal);
      if (d === '' && name === FS_STATE_DIR) continue;
      let rel: string;
      try {
        rel = normalizePath(d === '' ? name : `${d}/${name}`);
      } catch {
        continue; // a name our rules cannot represent (written by another program): skipped
      }
      let st: BigIntStats;
      try {
        st = await this.lstatWhole(nodePath.join(abs, name), rel);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue; // removed meanwhile
        throw classify(e, this.c.name, rel);
      }
      if (!st.isFile() && !st.isDirectory()) continue; // symlinks, sockets, devices: not synced
      yield await this.toEntry(rel, st, false);
      if (st.isDirectory() && options.recursive) yield* this.walk(rel, nodePath.join(abs, name), options);
    }
  }

  /** lstat of `abs` (provider path `p`), after any in-place write of it (writingInPlace). */
  private async lstatWhole(abs: string, p: string): Promise<BigIntStats> {
    for (;;) {
      const st = await fsp.lstat(abs, { bigint: true });
      const writing = this.c.writingInPlace.get(this.c.lockKey(p));
      if (writing === undefined) return st;
      await writing.catch(() => undefined);
    }
  }

  async lstatEntry(p: string): Promise<BigIntStats | undefined> {
    try {
      const st = await this.lstatWhole(this.c.resolve(p), p);
      return st.isFile() || st.isDirectory() ? st : undefined;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') {
        await this.assertRoot();
        return undefined;
      }
      throw classify(e, this.c.name, p);
    }
  }

  /**
   * A path is "not found" only while the root is there: a root folder deleted, or a mount
   * point with nothing mounted (no state folder of ours in it), is unavailable instead, so
   * a health check does not count it as answering.
   */
  async assertRoot(): Promise<void> {
    const st = await fsp.lstat(nodePath.join(this.c.realRoot, FS_STATE_DIR)).catch(() => undefined);
    if (!st?.isDirectory())
      throw new TransientError(
        `${this.c.name}: the folder is missing or not mounted (no ${FS_STATE_DIR} in it)`,
      );
  }

  /** The entry at normalized path `p`, with its SHA-256. */
  async stat(p: string): Promise<Entry> {
    const st = await this.lstatEntry(p);
    if (!st) throw new NotFoundError(`${this.c.name}: not found: ${p}`);
    return this.toEntry(p, st, true);
  }

  /** The entry at normalized path `p`, its SHA-256 only if known without reading the file. */
  async statWithoutHash(p: string): Promise<Entry> {
    const st = await this.lstatEntry(p);
    if (!st) throw new NotFoundError(`${this.c.name}: not found: ${p}`);
    return this.toEntry(p, st, false);
  }

  /** The bytes of the file at normalized path `p`. */
  async read(p: string, options: ReadOptions = {}): Promise<AsyncIterable<Uint8Array>> {
    const abs = this.c.resolve(p);
    const { offset, length } = readRange(options);
    const handle = await fsp.open(abs, fsc.O_RDONLY | fsc.O_NOFOLLOW).catch(async (e: unknown) => {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') await this.assertRoot();
      throw classify(e, this.c.name, p);
    });
    const st = await handle.stat();
    const writing = this.c.writingInPlace.get(this.c.lockKey(p));
    if (writing !== undefined) {
      // Opened while a logged batch writes it in place: read it once it is whole.
      await handle.close();
      await writing.catch(() => undefined);
      return this.read(p, options);
    }
    if (!st.isFile()) {
      await handle.close();
      throw new NotFoundError(`${this.c.name}: not a file: ${p}`);
    }
    if (length === 0 || offset >= st.size) {
      await handle.close();
      return (async function* () {})();
    }
    const end = length === undefined ? undefined : offset + length - 1;
    // Chunks of up to 1 MiB, but no larger than the file: each read of the stream allocates
    // a whole chunk, and 1 MiB per small file read made the packer's flush of 10,000 files
    // spend seconds in the garbage collector (issue #16).
    const wanted = (length ?? st.size - offset) + 1; // +1: the first read also sees the end
    const highWaterMark = Math.min(1 << 20, Math.max(16 * 1024, wanted));
    return handle.createReadStream({ start: offset, end, signal: options.signal, highWaterMark });
  }

  /** Entries of a subtree, root first, for the journal. */
  async subtreeEntries(p: string): Promise<Entry[]> {
    const st = await fsp.lstat(this.c.resolve(p), { bigint: true });
    const out = [await this.toEntry(p, st, false)];
    if (st.isDirectory())
      for await (const e of this.walk(p, this.c.resolve(p), { recursive: true })) out.push(e);
    return out;
  }

  /**
   * The hashes known of `f` and the files below it that still hold (their revision unchanged),
   * by the path each gets under `t`: a copy carries them, so the proxy's stat of every file
   * it copied does not read the file again to hash it (issue #16).
   */
  async knownHashesUnder(f: string, t: string): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    const candidates = [...this.c.hashCache.entries()].filter(([k]) => isWithin(k, f));
    for (const [k, v] of candidates) {
      const st = await fsp.lstat(this.c.resolve(k), { bigint: true }).catch(() => undefined);
      if (st?.isFile() && revisionOf(st) === v.revision) out.set(t + k.slice(f.length), v.sha256);
    }
    return out;
  }
}

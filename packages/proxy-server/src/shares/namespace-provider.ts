/**
 * A user's namespace in the proxy's own store, seen through the provider contract: the
 * replica of a share member who keeps the share in Weft storage. Every write goes through
 * the proxy's scheduler (stop-and-wait per path with the user's own devices) and is recorded
 * in the namespace's change feed like any device's, so the member's Weft clients hear about
 * mirror writes through the feed they already follow.
 *
 * Conditional writes are exact: the precondition is checked and the write made inside the
 * scheduler's slot for that path, so nothing of the user's can come in between
 * (`conditionalWrite: true`). The store never makes a conflicted copy for the mirror: a
 * lost precondition is reported as PreconditionFailed / AlreadyExists / NotFound and the
 * mirror engine decides.
 *
 * The change feed leaves out the records this replica's own writer made (its device id):
 * those are the mirror's own writes, i.e. echoes.
 */
import { createHash } from 'node:crypto';
import {
  AlreadyExistsError,
  type Body,
  type ChangePage,
  type Change,
  type Entry,
  type Features,
  type ListOptions,
  NotFoundError,
  PreconditionFailedError,
  type Provider,
  type ReadOptions,
  type RemoveOptions,
  type TransferOptions,
  type WriteOptions,
  collect,
  normalizeEntryPath,
  normalizePath,
  openBody,
} from '@weft/providers';
import { type EntryInfo, type OpResult, entryFromInfo, providerErrorFor, settleOpResult } from '@weft/wire';
import { ApiError } from '../errors.ts';
import type { OpScheduler } from '../scheduler.ts';
import type { HybridStore, Writer } from '../store/hybrid.ts';

const CURSOR_PREFIX = 'weftns1:';

export interface NamespaceProviderOptions {
  readonly store: HybridStore;
  readonly scheduler: OpScheduler;
  /** The namespace (user id) and the device id the mirror's writes are recorded under. */
  readonly writer: Writer;
  /** Resolves when the namespace records a change after `seq` (the proxy's feed hub). */
  readonly waitForSeq?: (seq: number, signal: AbortSignal) => Promise<void>;
}

const toEntry = entryFromInfo;

/** Store errors as the provider contract's errors. */
function classify(e: unknown, path: string): unknown {
  return e instanceof ApiError ? (providerErrorFor(e.code, e.message, path, e) ?? e) : e;
}

function settled(r: OpResult, path: string): EntryInfo | undefined {
  return settleOpResult(r, path, (code, message) => new ApiError(code, message));
}

export class NamespaceProvider implements Provider {
  readonly name: string;
  readonly features: Features = {
    move: 'files-and-folders',
    copy: 'files-and-folders',
    changeFeed: true,
    conditionalWrite: true,
    rangeRead: true,
    caseSensitive: true,
    setModTime: true,
    maxSingleUploadBytes: Number.MAX_SAFE_INTEGER,
    hashAlgorithm: 'sha256',
    hashInListing: true,
    folders: 'real',
  };
  private readonly user: string;

  constructor(private readonly o: NamespaceProviderOptions) {
    this.user = o.writer.userId;
    this.name = `weft:${this.user}`;
  }

  private run<T>(paths: string[], bytes: number, fn: () => Promise<T>): Promise<T> {
    return this.o.scheduler.submit({ namespace: this.user, paths, bytes, run: fn });
  }

  async *list(dir: string, options: ListOptions = {}): AsyncIterable<Entry> {
    const d = normalizePath(dir);
    let entries: EntryInfo[];
    try {
      entries = await this.o.store.list(this.user, d, options.recursive ?? false);
    } catch (e) {
      throw classify(e, d);
    }
    for (const e of entries) yield toEntry(e);
  }

  async stat(path: string): Promise<Entry> {
    const p = normalizePath(path);
    if (p === '') return { path: '', kind: 'dir', size: 0, modifiedMs: 0, revision: '' };
    const e = await this.o.store.stat(this.user, p);
    if (!e) throw new NotFoundError(`weft: ${p}: not found`);
    return toEntry(e);
  }

  async read(path: string, options: ReadOptions = {}): Promise<AsyncIterable<Uint8Array>> {
    const p = normalizeEntryPath(path);
    const e = await this.o.store.stat(this.user, p);
    if (!e || e.kind !== 'file') throw new NotFoundError(`weft: ${p}: no such file`);
    const start = options.offset ?? 0;
    if (start >= e.size) return (async function* () {})();
    const end = options.length === undefined ? e.size - 1 : Math.min(e.size - 1, start + options.length - 1);
    const range = start === 0 && end === e.size - 1 ? undefined : { start, end };
    const { stream } = await this.o.store.openRead(this.user, e, range);
    return stream;
  }

  async write(path: string, body: Body, options: WriteOptions = {}): Promise<Entry> {
    const p = normalizeEntryPath(path);
    const bytes = await collect(openBody(body));
    if (options.size !== undefined && options.size !== bytes.byteLength)
      throw new Error(`weft: ${p}: ${bytes.byteLength} bytes received, ${options.size} declared`);
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    if (options.sha256 !== undefined && options.sha256 !== sha256)
      throw new Error(`weft: ${p}: content does not match the declared SHA-256`);
    const entry = await this.run([p], bytes.byteLength, async () => {
      const cur = await this.o.store.stat(this.user, p);
      if (options.ifNotExists && cur) throw new AlreadyExistsError(`weft: ${p}: exists`);
      if (options.ifRevision !== undefined) {
        if (!cur) throw new NotFoundError(`weft: ${p}: not found`);
        if (cur.revision !== options.ifRevision)
          throw new PreconditionFailedError(`weft: ${p}: revision moved`, cur.revision);
      }
      if (cur?.kind === 'dir') throw new AlreadyExistsError(`weft: ${p}: a folder is there`);
      try {
        const r = await this.o.store.writeFile(
          this.o.writer,
          p,
          { bytes },
          sha256,
          options.modifiedMs ?? Date.now(),
          cur ? cur.revision : null,
          true,
        );
        return settled(r, p);
      } catch (e) {
        throw classify(e, p);
      }
    });
    const now = entry ?? (await this.o.store.stat(this.user, p));
    if (!now) throw new NotFoundError(`weft: ${p}: gone right after the write`);
    return toEntry(now);
  }

  async remove(path: string, options: RemoveOptions = {}): Promise<void> {
    const p = normalizeEntryPath(path);
    await this.run([p], 0, async () => {
      const cur = await this.o.store.stat(this.user, p);
      if (!cur) throw new NotFoundError(`weft: ${p}: not found`);
      if (options.ifRevision !== undefined && cur.revision !== options.ifRevision)
        throw new PreconditionFailedError(`weft: ${p}: revision moved`, cur.revision);
      try {
        settled(await this.o.store.remove(this.o.writer, p, undefined), p);
      } catch (e) {
        throw classify(e, p);
      }
    });
  }

  async mkdir(path: string): Promise<void> {
    const p = normalizePath(path);
    if (p === '') return;
    await this.run([p], 0, async () => {
      try {
        settled(await this.o.store.mkdir(this.o.writer, p), p);
      } catch (e) {
        throw classify(e, p);
      }
    });
  }

  async move(from: string, to: string, options: TransferOptions = {}): Promise<Entry> {
    const f = normalizeEntryPath(from);
    const t = normalizeEntryPath(to);
    const entry = await this.run([f, t], 0, async () => {
      const dest = await this.o.store.stat(this.user, t);
      if (dest && options.overwrite && dest.kind === 'file')
        settled(await this.o.store.remove(this.o.writer, t, undefined), t);
      try {
        return settled(await this.o.store.move(this.o.writer, f, t), f);
      } catch (e) {
        throw classify(e, f);
      }
    });
    const now = entry ?? (await this.o.store.stat(this.user, t));
    if (!now) throw new NotFoundError(`weft: ${t}: gone right after the move`);
    return toEntry(now);
  }

  async copy(from: string, to: string): Promise<Entry> {
    const f = normalizeEntryPath(from);
    const t = normalizeEntryPath(to);
    const entry = await this.run([f, t], 0, async () => {
      try {
        return settled(await this.o.store.copy(this.o.writer, f, t), f);
      } catch (e) {
        throw classify(e, f);
      }
    });
    const now = entry ?? (await this.o.store.stat(this.user, t));
    if (!now) throw new NotFoundError(`weft: ${t}: gone right after the copy`);
    return toEntry(now);
  }

  async latestCursor(): Promise<string> {
    return CURSOR_PREFIX + String(await this.o.store.meta.currentSeq(this.user));
  }

  private seqOf(cursor: string): number | undefined {
    if (!cursor.startsWith(CURSOR_PREFIX)) return undefined;
    const n = Number(cursor.slice(CURSOR_PREFIX.length));
    return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
  }

  async changes(cursor: string, options: { limit?: number } = {}): Promise<ChangePage> {
    const seq = this.seqOf(cursor);
    const current = await this.o.store.meta.currentSeq(this.user);
    if (seq === undefined || seq > current)
      return { changes: [], cursor: CURSOR_PREFIX + String(current), hasMore: false, reset: true };
    const records = await this.o.store.meta.changesSince(this.user, seq, options.limit ?? 1000);
    const out: Change[] = [];
    for (const r of records) {
      if (r.device === this.o.writer.deviceId) continue; // the mirror's own write: an echo
      if (r.type === 'delete') out.push({ type: 'delete', path: r.path });
      else if (r.type === 'upsert') out.push({ type: 'upsert', path: r.path, entry: toEntry(r.entry) });
      else {
        // A move: the old path's delete, then the new path and, for a folder, what is in
        // it now (the store records no per-child change).
        out.push({ type: 'delete', path: r.from });
        const now = await this.o.store.stat(this.user, r.path);
        if (!now) continue;
        out.push({ type: 'upsert', path: r.path, entry: toEntry(now) });
        if (now.kind === 'dir') {
          for (const e of await this.o.store.list(this.user, r.path, true))
            out.push({ type: 'upsert', path: e.path, entry: toEntry(e) });
        }
      }
    }
    const last = records.at(-1)?.seq ?? seq;
    return { changes: out, cursor: CURSOR_PREFIX + String(last), hasMore: last < current, reset: false };
  }

  /** The mirror engine's ChangeWaiter: resolves when the namespace records a change after the cursor. */
  async waitForChanges(cursor: string, signal: AbortSignal): Promise<{ changes: boolean }> {
    const seq = this.seqOf(cursor);
    if (seq === undefined || seq < (await this.o.store.meta.currentSeq(this.user))) return { changes: true };
    if (!this.o.waitForSeq) return { changes: true };
    await this.o.waitForSeq(seq, signal);
    return { changes: true };
  }
}

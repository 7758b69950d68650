/**
 * The reference provider: everything in memory, every feature, exact semantics.
 * Engine tests run on it; the conformance suite holds every other provider to it.
 */
import { checkBody, collect, clampRange, openBody, sha256Hex, throwIfAborted } from '../body.ts';
import {
  AlreadyExistsError,
  InvalidPathError,
  NotFoundError,
  PreconditionFailedError,
  QuotaExceededError,
} from '../errors.ts';
import type { Features } from '../features.ts';
import { ancestors, caseFoldKey, isWithin, normalizeEntryPath, normalizePath, parentPath } from '../paths.ts';
import type {
  Body,
  Change,
  ChangePage,
  Entry,
  ListOptions,
  Provider,
  ReadOptions,
  RemoveOptions,
  TransferOptions,
  WriteOptions,
} from '../provider.ts';
import { resetPage } from '../provider.ts';

export interface MemoryProviderOptions {
  readonly name?: string;
  /** Simulate a case-insensitive, case-preserving store (like macOS or Windows). Default true. */
  readonly caseSensitive?: boolean;
  /** Total bytes allowed; writes beyond it fail with QuotaExceededError. */
  readonly quotaBytes?: number;
  /** Changes kept for the feed; older cursors get `reset`. Default 100,000. */
  readonly maxChangeLog?: number;
  /** Clock, for tests. */
  readonly now?: () => number;
}

interface Node {
  path: string;
  kind: 'file' | 'dir';
  data: Buffer;
  modifiedMs: number;
  revision: string;
  sha256: string;
}

const CURSOR_PREFIX = 'mem1:';

export class MemoryProvider implements Provider {
  readonly name: string;
  readonly features: Features;
  private readonly nodes = new Map<string, Node>();
  private readonly log: { seq: number; change: Change }[] = [];
  private seq = 0;
  private revCounter = 0;
  private usedBytes = 0;
  private readonly now: () => number;

  constructor(private readonly options: MemoryProviderOptions = {}) {
    this.name = options.name ?? 'memory';
    this.now = options.now ?? Date.now;
    this.features = {
      move: 'files-and-folders',
      copy: 'files-and-folders',
      changeFeed: true,
      conditionalWrite: true,
      rangeRead: true,
      caseSensitive: options.caseSensitive ?? true,
      setModTime: true,
      maxSingleUploadBytes: Number.MAX_SAFE_INTEGER,
      hashAlgorithm: 'sha256',
      hashInListing: true,
      folders: 'real',
    };
  }

  private key(path: string): string {
    return this.features.caseSensitive ? path : caseFoldKey(path);
  }

  private get(path: string): Node | undefined {
    return this.nodes.get(this.key(path));
  }

  private entry(node: Node): Entry {
    if (node.kind === 'dir') {
      return { path: node.path, kind: 'dir', size: 0, modifiedMs: node.modifiedMs, revision: node.revision };
    }
    return {
      path: node.path,
      kind: 'file',
      size: node.data.byteLength,
      modifiedMs: node.modifiedMs,
      revision: node.revision,
      hash: { algorithm: 'sha256', value: node.sha256 },
    };
  }

  private nextRevision(): string {
    this.revCounter += 1;
    return `r${this.revCounter.toString(36)}`;
  }

  private record(change: Change): void {
    this.seq += 1;
    this.log.push({ seq: this.seq, change });
    const max = this.options.maxChangeLog ?? 100_000;
    if (this.log.length > max) this.log.splice(0, this.log.length - max);
  }

  private requireDir(dir: string): void {
    if (dir === '') return;
    const node = this.get(dir);
    if (!node) throw new NotFoundError(`${this.name}: folder not found: ${dir}`);
    if (node.kind !== 'dir') throw new NotFoundError(`${this.name}: not a folder: ${dir}`);
  }

  /** Create missing parent folders of `path`; a file in the way is AlreadyExists. */
  private ensureParents(path: string): void {
    for (const dir of ancestors(path)) {
      const node = this.get(dir);
      if (node && node.kind !== 'dir') {
        throw new AlreadyExistsError(`${this.name}: a file is in the way of folder ${dir}`);
      }
    }
    for (const dir of ancestors(path)) {
      if (!this.get(dir)) this.putDir(dir);
    }
  }

  private putDir(path: string): void {
    const node: Node = {
      path,
      kind: 'dir',
      data: Buffer.alloc(0),
      modifiedMs: this.now(),
      revision: '',
      sha256: '',
    };
    this.nodes.set(this.key(path), node);
    this.record({ type: 'upsert', path, entry: this.entry(node) });
  }

  /** Nodes at or below `path`, sorted by path. */
  private subtree(path: string): Node[] {
    const key = this.key(path);
    const out: Node[] = [];
    for (const [k, node] of this.nodes) if (isWithin(k, key)) out.push(node);
    return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }

  async *list(dir: string, options: ListOptions = {}): AsyncIterable<Entry> {
    const d = normalizePath(dir);
    this.requireDir(d);
    const key = this.key(d);
    const depth = d === '' ? 1 : d.split('/').length + 1;
    const matches = [...this.nodes.values()]
      .filter((n) => {
        const k = this.key(n.path);
        if (k === key || !isWithin(k, key)) return false;
        return options.recursive === true || n.path.split('/').length === depth;
      })
      .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
      .map((n) => this.entry(n));
    for (const e of matches) {
      throwIfAborted(options.signal);
      yield e;
    }
  }

  async stat(path: string): Promise<Entry> {
    const p = normalizeEntryPath(path);
    const node = this.get(p);
    if (!node) throw new NotFoundError(`${this.name}: not found: ${p}`);
    return this.entry(node);
  }

  async read(path: string, options: ReadOptions = {}): Promise<AsyncIterable<Uint8Array>> {
    const p = normalizeEntryPath(path);
    const node = this.get(p);
    if (!node || node.kind !== 'file') throw new NotFoundError(`${this.name}: no file at ${p}`);
    const { start, end } = clampRange(node.data.byteLength, options.offset, options.length);
    const slice = node.data.subarray(start, end);
    return (async function* () {
      const step = 1 << 20;
      for (let i = 0; i < slice.byteLength; i += step) yield slice.subarray(i, i + step);
    })();
  }

  private checkPrecondition(p: string, node: Node | undefined, ifRevision: string | undefined): void {
    if (ifRevision === undefined) return;
    if (!node) throw new NotFoundError(`${this.name}: conditional operation on missing ${p}`);
    if (node.revision !== ifRevision) {
      throw new PreconditionFailedError(
        `${this.name}: ${p} is at revision ${node.revision}, not ${ifRevision}`,
        node.revision,
      );
    }
  }

  async write(path: string, body: Body, options: WriteOptions = {}): Promise<Entry> {
    const p = normalizeEntryPath(path);
    // Receive everything before touching state: a failed or aborted stream changes nothing.
    const data = await collect(openBody(body), options.signal);
    throwIfAborted(options.signal);
    const digest = sha256Hex(data);
    checkBody(this.name, p, options, data.byteLength, digest);
    const existing = this.get(p);
    if (existing?.kind === 'dir') throw new AlreadyExistsError(`${this.name}: a folder exists at ${p}`);
    if (options.ifNotExists && existing) throw new AlreadyExistsError(`${this.name}: ${p} exists`);
    this.checkPrecondition(p, existing, options.ifRevision);
    const delta = data.byteLength - (existing?.data.byteLength ?? 0);
    if (this.options.quotaBytes !== undefined && this.usedBytes + delta > this.options.quotaBytes) {
      throw new QuotaExceededError(`${this.name}: quota of ${this.options.quotaBytes} bytes exceeded`);
    }
    this.ensureParents(p);
    const node: Node = {
      path: existing?.path ?? p,
      kind: 'file',
      data: Buffer.from(data),
      modifiedMs: options.modifiedMs ?? this.now(),
      revision: this.nextRevision(),
      sha256: digest,
    };
    this.usedBytes += delta;
    this.nodes.set(this.key(p), node);
    const entry = this.entry(node);
    this.record({ type: 'upsert', path: node.path, entry });
    return entry;
  }

  async remove(path: string, options: RemoveOptions = {}): Promise<void> {
    const p = normalizeEntryPath(path);
    const node = this.get(p);
    if (!node) throw new NotFoundError(`${this.name}: not found: ${p}`);
    this.checkPrecondition(p, node, options.ifRevision);
    for (const n of this.subtree(p)) {
      this.usedBytes -= n.data.byteLength;
      this.nodes.delete(this.key(n.path));
    }
    this.record({ type: 'delete', path: node.path });
  }

  async mkdir(path: string): Promise<void> {
    const p = normalizeEntryPath(path);
    const node = this.get(p);
    if (node?.kind === 'dir') return;
    if (node) throw new AlreadyExistsError(`${this.name}: a file exists at ${p}`);
    this.ensureParents(p);
    this.putDir(p);
  }

  private transferTarget(from: string, to: string, options: TransferOptions): { src: Node; dst: string } {
    const src = this.get(from);
    if (!src) throw new NotFoundError(`${this.name}: not found: ${from}`);
    if (isWithin(this.key(to), this.key(from)) && this.key(to) !== this.key(from)) {
      throw new InvalidPathError(`${this.name}: cannot put ${from} inside itself`, to);
    }
    const existing = this.get(to);
    if (existing && this.key(to) !== this.key(from)) {
      if (existing.kind === 'dir' || src.kind === 'dir' || !options.overwrite) {
        throw new AlreadyExistsError(`${this.name}: ${to} exists`);
      }
    }
    const parent = parentPath(to);
    if (parent !== '') {
      const pn = this.get(parent);
      if (pn && pn.kind !== 'dir') throw new AlreadyExistsError(`${this.name}: ${parent} is a file`);
    }
    return { src, dst: to };
  }

  private cloneSubtree(from: Node, to: string, keepRevision: boolean): Node[] {
    const created: Node[] = [];
    for (const n of this.subtree(from.path)) {
      const rel = n.path.slice(from.path.length);
      const node: Node = {
        ...n,
        path: to + rel,
        revision: n.kind === 'file' && !keepRevision ? this.nextRevision() : n.revision,
      };
      created.push(node);
    }
    return created;
  }

  async move(from: string, to: string, options: TransferOptions = {}): Promise<Entry> {
    const f = normalizeEntryPath(from);
    const t = normalizeEntryPath(to);
    const { src } = this.transferTarget(f, t, options);
    const moved = this.cloneSubtree(src, t, true);
    const replaced = this.get(t);
    if (replaced && this.key(t) !== this.key(f)) this.usedBytes -= replaced.data.byteLength;
    for (const n of this.subtree(src.path)) this.nodes.delete(this.key(n.path));
    this.ensureParents(t);
    for (const n of moved) this.nodes.set(this.key(n.path), n);
    this.record({ type: 'delete', path: src.path });
    for (const n of moved) this.record({ type: 'upsert', path: n.path, entry: this.entry(n) });
    const root = moved[0];
    if (!root) throw new NotFoundError(`${this.name}: not found: ${f}`);
    return this.entry(root);
  }

  async copy(from: string, to: string, options: TransferOptions = {}): Promise<Entry> {
    const f = normalizeEntryPath(from);
    const t = normalizeEntryPath(to);
    const { src } = this.transferTarget(f, t, options);
    if (this.key(t) === this.key(f)) throw new AlreadyExistsError(`${this.name}: ${t} exists`);
    const copies = this.cloneSubtree(src, t, false);
    const added = copies.reduce((sum, n) => sum + n.data.byteLength, 0);
    const replaced = this.get(t)?.data.byteLength ?? 0;
    if (
      this.options.quotaBytes !== undefined &&
      this.usedBytes + added - replaced > this.options.quotaBytes
    ) {
      throw new QuotaExceededError(`${this.name}: quota of ${this.options.quotaBytes} bytes exceeded`);
    }
    this.ensureParents(t);
    this.usedBytes += added - replaced;
    for (const n of copies) {
      this.nodes.set(this.key(n.path), n);
      this.record({ type: 'upsert', path: n.path, entry: this.entry(n) });
    }
    const root = copies[0];
    if (!root) throw new NotFoundError(`${this.name}: not found: ${f}`);
    return this.entry(root);
  }

  async latestCursor(): Promise<string> {
    return CURSOR_PREFIX + this.seq;
  }

  async changes(cursor: string, options: { limit?: number } = {}): Promise<ChangePage> {
    const after = parseSeqCursor(cursor, CURSOR_PREFIX);
    const oldest = this.log[0]?.seq ?? this.seq + 1;
    if (after === undefined || after > this.seq || after < oldest - 1) {
      return resetPage(CURSOR_PREFIX + this.seq);
    }
    const limit = options.limit ?? 1000;
    const start = this.log.findIndex((c) => c.seq > after);
    const page = start < 0 ? [] : this.log.slice(start, start + limit);
    const last = page.at(-1)?.seq ?? after;
    return {
      changes: page.map((c) => c.change),
      cursor: CURSOR_PREFIX + last,
      hasMore: last < this.seq,
      reset: false,
    };
  }
}

/** Parse a `<prefix><sequence>` cursor; undefined when it is not one of ours. */
export function parseSeqCursor(cursor: string, prefix: string): number | undefined {
  if (!cursor.startsWith(prefix)) return undefined;
  const rest = cursor.slice(prefix.length);
  if (!/^\d{1,15}$/.test(rest)) return undefined;
  return Number(rest);
}

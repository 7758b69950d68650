/**
 * The in-memory proxy's server side (see memory-store.ts for what it models and why): one
 * namespace per user — the index, the change log, large content held — and the write rules
 * of packages/proxy-server/src/store/hybrid.ts (conditional writes by the same pure rule,
 * @weft/wire write-rule.ts, conflicted copies,
 * parents created, bundles planned whole). `MemoryRemoteStore` (memory-store.ts) is one device's door to it.
 */
import { ancestors, normalizeEntryPath, normalizePath, unprintableNameReason } from '@weft/providers/paths';
import {
  type BundleEntry,
  type ChangeRecord,
  type ConflictReport,
  type EntryInfo,
  type ErrorCode,
  type OpResult,
  conflictedCopyPath,
  conflictReport,
  decideWrite,
  deleteConflict,
  sha256Hex,
} from '@weft/wire';
import { RemoteError } from './proxy-client.ts';

/** HTTP status of each error code, as the server answers it (proxy-server/src/errors.ts). */
const STATUS: Partial<Record<ErrorCode, number>> = {
  BAD_REQUEST: 400,
  INVALID_PATH: 400,
  INVALID_FORMAT: 400,
  NOT_FOUND: 404,
  ALREADY_EXISTS: 409,
  NOT_A_FOLDER: 409,
  HASH_MISMATCH: 422,
  DELTA_BASE_UNKNOWN: 409,
  TRANSFER_UNKNOWN: 404,
  TRANSFER_INCOMPLETE: 409,
  OBJECT_UNKNOWN: 409,
  INTERNAL: 500,
};

export function fail(code: ErrorCode, message: string, details?: Record<string, unknown>): never {
  throw new RemoteError(STATUS[code] ?? 400, code, message, details);
}

/** Names ending in the link-file extension are the server's own (store/link-file.ts). */
const LINK_EXTENSION = '.weftlink';
const NOOP_SEQ = 0;

export function checkPath(path: string, allowRoot = false): void {
  let n: string;
  try {
    n = allowRoot ? normalizePath(path) : normalizeEntryPath(path);
  } catch (e) {
    fail('INVALID_PATH', (e as Error).message);
  }
  if (n !== path) fail('INVALID_PATH', 'path is not in canonical (NFC) form');
  for (const seg of path.split('/'))
    if (seg.toLowerCase().endsWith(LINK_EXTENSION))
      fail('INVALID_PATH', `names ending in ${LINK_EXTENSION} are reserved`);
}

/** A path a write creates: also no control or bidi character (api.md "Names a write may create"). */
export function checkNewPath(path: string): void {
  checkPath(path);
  const why = unprintableNameReason(path);
  if (why) fail('INVALID_PATH', why);
}

/** SQLite's ORDER BY on TEXT: UTF-8 byte order. */
function byPath(a: { path: string }, b: { path: string }): number {
  return Buffer.compare(Buffer.from(a.path), Buffer.from(b.path));
}

/** Bytes per rsync block of a server-made signature (store/link-file.ts). */
export function signatureBlockSize(size: number): number {
  let b = 2048;
  while (b < 65536 && b * b < size) b *= 2;
  return b;
}

export interface Writer {
  readonly deviceId: string;
  readonly deviceName: string;
}

export interface Transfer {
  readonly id: string;
  readonly path: string;
  readonly size: number;
  readonly sha256: string;
  readonly mtimeMs: number;
  readonly data: Uint8Array;
  ranges: { offset: number; length: number }[];
}

type Change =
  | { type: 'upsert'; entry: Omit<EntryInfo, 'revision'> & { revision?: string } }
  | { type: 'delete'; path: string }
  | { type: 'move'; from: string; path: string };

/** One user's namespace: the index, the change log, and the large content the user has held. */
export class Namespace {
  readonly entries = new Map<string, EntryInfo>();
  /** Content of every file by path (small and large alike). */
  readonly content = new Map<string, Uint8Array>();
  readonly log: ChangeRecord[] = [];
  seq = 0;
  /** Large content this user has held (uploaded or linked): sha256 → size. */
  readonly held = new Map<string, number>();
  readonly transfers = new Map<string, Transfer>();
  readonly listeners = new Set<() => void>();

  subtree(path: string): EntryInfo[] {
    return [...this.entries.values()].filter((e) => e.path === path || e.path.startsWith(path + '/'));
  }

  list(dir: string, recursive: boolean): EntryInfo[] {
    const prefix = dir === '' ? '' : dir + '/';
    return [...this.entries.values()]
      .filter((e) => e.path.startsWith(prefix) && (recursive || !e.path.slice(prefix.length).includes('/')))
      .sort(byPath);
  }
}

export interface MemoryServerOptions {
  /** Files of this size and above are large (object tier, transfers, signatures). Default 2 MiB. */
  readonly smallFileBytes?: number;
  /** The clock of conflicted-copy names and folder mtimes. Default Date.now. */
  readonly now?: () => number;
  /**
   * Upload link speed: a request body of n bytes takes n / this seconds (real time), so the
   * engine's measured upload rate — and with it the delta-or-whole choice — is a real link's.
   * Default: no delay.
   */
  readonly uploadBytesPerSecond?: number;
}

/** The server's state and rules; MemoryServer (memory-store.ts) adds the devices' doors. */
export class MemoryServerState {
  readonly smallFileBytes: number;
  readonly uploadBytesPerSecond: number | undefined;
  private readonly now: () => number;
  private readonly namespaces = new Map<string, Namespace>();
  /** Large content by hash, shared by every namespace; kept after its last path goes (GC is not modelled). */
  private readonly objects = new Map<string, Uint8Array>();

  constructor(options: MemoryServerOptions = {}) {
    this.smallFileBytes = options.smallFileBytes ?? 2 * 1024 * 1024;
    this.now = options.now ?? Date.now;
    this.uploadBytesPerSecond = options.uploadBytesPerSecond;
  }

  /** @internal */
  ns(user: string): Namespace {
    let n = this.namespaces.get(user);
    if (!n) this.namespaces.set(user, (n = new Namespace()));
    return n;
  }

  /** The namespace's current sequence (what `whoami` reports). */
  seq(user: string): number {
    return this.ns(user).seq;
  }

  /** path → sha256 (files) or 'dir', what the server holds for `user`. */
  tree(user: string): Map<string, string> {
    return new Map(
      this.ns(user)
        .list('', true)
        .map((e) => [e.path, e.kind === 'dir' ? 'dir' : (e.sha256 ?? '?')]),
    );
  }

  /** The content of a file (test assertions). */
  read(user: string, path: string): Uint8Array | undefined {
    return this.ns(user).content.get(path);
  }

  // ---------------------------------------------------------------- writes (store/hybrid.ts)

  /** @internal One metadata transaction: records, index, listeners told. */
  record(n: Namespace, changes: Change[], w: Writer | undefined): ChangeRecord[] {
    const out: ChangeRecord[] = [];
    const device = w ? { device: w.deviceId, deviceName: w.deviceName } : {};
    for (const c of changes) {
      n.seq += 1;
      const seq = n.seq;
      if (c.type === 'upsert') {
        const entry: EntryInfo = { ...c.entry, revision: c.entry.revision ?? `r${seq}` };
        n.entries.set(entry.path, entry);
        out.push({ seq, type: 'upsert', path: entry.path, entry, ...device });
      } else if (c.type === 'delete') {
        for (const e of n.subtree(c.path)) {
          n.entries.delete(e.path);
          n.content.delete(e.path);
        }
        out.push({ seq, type: 'delete', path: c.path, ...device });
      } else {
        const rows = n.subtree(c.from);
        const bytes = rows.map((r) => n.content.get(r.path));
        for (const r of rows) {
          n.entries.delete(r.path);
          n.content.delete(r.path);
        }
        for (const e of n.subtree(c.path)) {
          n.entries.delete(e.path);
          n.content.delete(e.path);
        }
        let root: EntryInfo | undefined;
        rows.forEach((r, i) => {
          const moved = { ...r, path: c.path + r.path.slice(c.from.length) };
          n.entries.set(moved.path, moved);
          const b = bytes[i];
          if (b) n.content.set(moved.path, b);
          if (r.path === c.from) root = moved;
        });
        if (!root) throw new Error(`move of ${c.from}: not in the index`);
        out.push({ seq, type: 'move', from: c.from, path: c.path, entry: root, ...device });
      }
    }
    n.log.push(...out);
    if (out.length > 0) for (const l of [...n.listeners]) l();
    return out;
  }

  private lastEntry(records: ChangeRecord[]): { entry?: EntryInfo; seq: number } {
    const last = records.at(-1);
    if (!last) return { seq: NOOP_SEQ };
    return last.type === 'delete' ? { seq: last.seq } : { entry: last.entry, seq: last.seq };
  }

  private ensureParents(n: Namespace, path: string, out: Change[]): void {
    for (const dir of ancestors(path)) {
      const e = n.entries.get(dir) ?? planned(out, dir);
      if (e?.kind === 'dir') continue;
      if (e) fail('ALREADY_EXISTS', `a file is in the way of folder ${dir}`, { path: dir });
      out.push({ type: 'upsert', entry: { path: dir, kind: 'dir', size: 0, mtimeMs: this.now() } });
    }
  }

  private conflictPathFor(n: Namespace, w: Writer, path: string, taken: (p: string) => boolean): string {
    const when = new Date(this.now());
    let candidate = conflictedCopyPath(path, when, w.deviceName);
    for (let i = 2; n.entries.has(candidate) || taken(candidate); i++)
      candidate = conflictedCopyPath(path, when, `${w.deviceName} ${i}`);
    return candidate;
  }

  /** @internal */
  storeFile(
    n: Namespace,
    w: Writer,
    path: string,
    bytes: Uint8Array,
    sha256: string,
    mtimeMs: number,
  ): { entry?: EntryInfo; seq: number } {
    const changes: Change[] = [];
    this.ensureParents(n, path, changes);
    const large = bytes.byteLength >= this.smallFileBytes;
    if (large) {
      n.held.set(sha256, bytes.byteLength);
      this.objects.set(sha256, bytes);
    }
    changes.push({
      type: 'upsert',
      entry: { path, kind: 'file', size: bytes.byteLength, mtimeMs, sha256, tier: large ? 'large' : 'small' },
    });
    const res = this.lastEntry(this.record(n, changes, w));
    n.content.set(path, bytes);
    return res;
  }

  /** @internal Conditional write of one file (HybridStore.writeFile). */
  writeFile(
    n: Namespace,
    w: Writer,
    path: string,
    bytes: Uint8Array,
    sha256: string,
    mtimeMs: number,
    base: string | null | undefined,
    own?: readonly string[],
  ): OpResult {
    checkNewPath(path);
    if (sha256Hex(bytes) !== sha256)
      fail('HASH_MISMATCH', 'SHA-256 of the content does not match the declared one');
    const cur = n.entries.get(path);
    const d = decideWrite(cur, base, sha256, own);
    if (d.action === 'refuse-folder') fail('ALREADY_EXISTS', 'a folder exists at that path', { path });
    if (d.action === 'unchanged' && cur) return { status: 'applied', entry: cur, seq: NOOP_SEQ };
    if (d.action === 'conflict') {
      const conflictPath = this.conflictPathFor(n, w, path, () => false);
      const res = this.storeFile(n, w, conflictPath, bytes, sha256, mtimeMs);
      const conflict = conflictReport(path, conflictPath, d);
      return { status: 'conflict', conflict, ...(res.entry ? { entry: res.entry } : {}), seq: res.seq };
    }
    const res = this.storeFile(n, w, path, bytes, sha256, mtimeMs);
    return { status: 'applied', ...(res.entry ? { entry: res.entry } : {}), seq: res.seq };
  }

  /** @internal A bundle's files (HybridStore.writeFiles): planned whole, recorded in one go. */
  writeFiles(n: Namespace, w: Writer, items: readonly BundleEntry[]): OpResult[] {
    const results: (OpResult | undefined)[] = new Array<OpResult | undefined>(items.length);
    const failed = (i: number, e: unknown): void => {
      if (!(e instanceof RemoteError)) throw e;
      results[i] = {
        status: 'error',
        error: {
          code: e.code as ErrorCode,
          message: e.message,
          ...(e.details ? { details: e.details } : {}),
        },
      };
    };
    const planned = new Map<string, 'file' | 'dir'>();
    const kindAt = (p: string): 'file' | 'dir' | undefined => planned.get(p) ?? n.entries.get(p)?.kind;
    const newDirs: string[] = [];
    const jobs: { i: number; path: string; item: BundleEntry; conflict?: ConflictReport }[] = [];
    const large: number[] = [];
    for (const [i, item] of items.entries()) {
      try {
        checkNewPath(item.path);
        if (sha256Hex(item.content) !== item.sha256)
          fail('HASH_MISMATCH', 'SHA-256 of the content does not match the declared one');
        if (item.content.byteLength >= this.smallFileBytes) {
          large.push(i);
          continue;
        }
        // A folder this batch creates is in the way as much as one already there.
        const cur = n.entries.get(item.path);
        const d =
          planned.get(item.path) === 'dir'
            ? ({ action: 'refuse-folder' } as const)
            : decideWrite(cur, item.rev, item.sha256, item.own);
        if (d.action === 'refuse-folder')
          fail('ALREADY_EXISTS', 'a folder exists at that path', { path: item.path });
        if (d.action === 'unchanged' && cur) {
          results[i] = { status: 'applied', entry: cur, seq: NOOP_SEQ };
          continue;
        }
        let target = item.path;
        let conflict: ConflictReport | undefined;
        if (d.action === 'conflict') {
          target = this.conflictPathFor(n, w, item.path, (p) => planned.has(p));
          conflict = conflictReport(item.path, target, d);
        }
        const missing: string[] = [];
        for (const dir of ancestors(target)) {
          const k = kindAt(dir);
          if (k === 'dir') continue;
          if (k === 'file') fail('ALREADY_EXISTS', `a file is in the way of folder ${dir}`, { path: dir });
          missing.push(dir);
        }
        for (const dir of missing) {
          planned.set(dir, 'dir');
          newDirs.push(dir);
        }
        planned.set(target, 'file');
        jobs.push({ i, path: target, item, ...(conflict ? { conflict } : {}) });
      } catch (e) {
        failed(i, e);
      }
    }
    const changes: Change[] = newDirs.map((dir) => ({
      type: 'upsert',
      entry: { path: dir, kind: 'dir', size: 0, mtimeMs: this.now() },
    }));
    const first = changes.length;
    for (const j of jobs) {
      changes.push({
        type: 'upsert',
        entry: {
          path: j.path,
          kind: 'file',
          size: j.item.content.byteLength,
          mtimeMs: j.item.mtimeMs,
          sha256: j.item.sha256,
          tier: 'small',
        },
      });
    }
    const records = this.record(n, changes, w);
    jobs.forEach((j, k) => {
      n.content.set(j.path, j.item.content);
      const { entry, seq } = this.lastEntry(records.slice(first + k, first + k + 1));
      results[j.i] = j.conflict
        ? { status: 'conflict', conflict: j.conflict, ...(entry ? { entry } : {}), seq }
        : { status: 'applied', ...(entry ? { entry } : {}), seq };
    });
    for (const i of large) {
      const item = items[i] as BundleEntry;
      try {
        results[i] = this.writeFile(
          n,
          w,
          item.path,
          item.content,
          item.sha256,
          item.mtimeMs,
          item.rev,
          item.own,
        );
      } catch (e) {
        failed(i, e);
      }
    }
    return results.map((r) => r ?? { status: 'error', error: { code: 'INTERNAL', message: 'not applied' } });
  }

  /** @internal */
  mkdir(n: Namespace, w: Writer, path: string): OpResult {
    checkNewPath(path);
    const cur = n.entries.get(path);
    if (cur?.kind === 'dir') return { status: 'applied', entry: cur, seq: NOOP_SEQ };
    if (cur) fail('ALREADY_EXISTS', 'a file exists at that path', { path });
    const changes: Change[] = [];
    this.ensureParents(n, path, changes);
    changes.push({ type: 'upsert', entry: { path, kind: 'dir', size: 0, mtimeMs: this.now() } });
    const { entry, seq } = this.lastEntry(this.record(n, changes, w));
    return { status: 'applied', ...(entry ? { entry } : {}), seq };
  }

  /** @internal */
  remove(
    n: Namespace,
    w: Writer,
    path: string,
    base: string | null | undefined,
    own?: readonly string[],
  ): OpResult {
    checkPath(path);
    const cur = n.entries.get(path);
    if (!cur) return { status: 'applied', seq: NOOP_SEQ };
    const conflict = deleteConflict(path, cur, base, own);
    if (conflict) return { status: 'conflict', conflict, entry: cur, seq: NOOP_SEQ };
    const records = this.record(n, [{ type: 'delete', path }], w);
    return { status: 'applied', seq: records.at(-1)?.seq ?? NOOP_SEQ };
  }

  /** @internal */
  move(n: Namespace, w: Writer, from: string, to: string): OpResult {
    checkPath(from);
    checkNewPath(to);
    if (from === to) fail('BAD_REQUEST', 'source and destination are the same');
    if (to.startsWith(from + '/')) fail('BAD_REQUEST', 'cannot move a folder inside itself');
    if (!n.entries.has(from)) fail('NOT_FOUND', 'source not found', { path: from });
    if (n.entries.has(to)) fail('ALREADY_EXISTS', 'destination exists', { path: to });
    const changes: Change[] = [];
    this.ensureParents(n, to, changes);
    changes.push({ type: 'move', from, path: to });
    const records = this.record(n, changes, w);
    const entry = n.entries.get(to);
    return { status: 'applied', ...(entry ? { entry } : {}), seq: records.at(-1)?.seq ?? NOOP_SEQ };
  }

  /** @internal */
  copy(n: Namespace, w: Writer, from: string, to: string): OpResult {
    checkPath(from);
    checkNewPath(to);
    if (to === from || to.startsWith(from + '/')) fail('BAD_REQUEST', 'cannot copy onto or inside itself');
    const src = n.entries.get(from);
    if (!src) fail('NOT_FOUND', 'source not found', { path: from });
    if (n.entries.has(to)) fail('ALREADY_EXISTS', 'destination exists', { path: to });
    const rows = [src, ...(src.kind === 'dir' ? n.list(from, true) : [])];
    const changes: Change[] = [];
    this.ensureParents(n, to, changes);
    for (const r of rows) {
      const { revision: _r, ...rest } = r;
      changes.push({ type: 'upsert', entry: { ...rest, path: to + r.path.slice(from.length) } });
    }
    const bytes = rows.map((r) => n.content.get(r.path));
    const { seq } = this.lastEntry(this.record(n, changes, w));
    rows.forEach((r, i) => {
      const b = bytes[i];
      if (b) n.content.set(to + r.path.slice(from.length), b);
    });
    const entry = n.entries.get(to);
    return { status: 'applied', ...(entry ? { entry } : {}), seq };
  }

  /** @internal Large content this user has held, by hash (HybridStore.findContent's object half). */
  heldContent(n: Namespace, sha256: string): Uint8Array | undefined {
    return n.held.has(sha256) ? this.objects.get(sha256) : undefined;
  }
}

function planned(out: Change[], path: string): { kind: 'file' | 'dir' } | undefined {
  for (const c of out) if (c.type === 'upsert' && c.entry.path === path) return { kind: c.entry.kind };
  return undefined;
}

/**
 * Pack stubs (docs/formats/pack.md "Dropping the filesystem-tier copy"): once a small file's
 * pack is durable and indexed, the packer may replace the file's bytes on the filesystem tier
 * with a stub naming its content, so the namespace tree stays where it is (moves, copies and
 * deletes of the path work unchanged) while its bytes live only in the pack.
 *
 * A stub is `WEFTPACKED1\n` and one line of JSON: { sha256, size, mtimeMs, mac }, where `mac`
 * is an HMAC-SHA-256 under the proxy's stub key (a private file in the data directory) of the
 * other three. Recovery (recovery.ts) honours a stub only when its MAC verifies, so a client
 * cannot upload bytes that look like a stub and, after a crash, be handed someone else's content.
 *
 * Order, so that `kill -9` at any point loses nothing: (1) the pack is durable in the object
 * tier and (2) indexed (one transaction), (3) the content is recorded in `fs_dropped`
 * (reads of it go to the pack from here on), (4) the stub replaces the file atomically
 * (temp + fsync + rename, only if the file is still the revision that was packed), (5) the
 * index takes the stub's filesystem revision. A crash before (4) leaves the full copy (read
 * from the pack anyway); between (4) and (5) reconcile finds the stub and records it.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { collect, type FsProvider, PreconditionFailedError } from '@weft/providers';
import { ApiError } from '../errors.ts';
import type { FsRevisionChange, PackIndex } from './pack-index.ts';
import type { Sql } from './postgres-db.ts';
import type { PendingContent } from './packs.ts';

const MAGIC = 'WEFTPACKED1\n';
/** A stub is far smaller than this; larger files are never read as stubs. */
export const MAX_STUB_BYTES = 512;

export interface StubInfo {
  readonly sha256: string;
  readonly size: number;
  readonly mtimeMs: number;
}

/** The proxy's stub key: 32 random bytes in `<dataDir>/pack-stub.key`, made once (mode 0600). */
export async function loadStubKey(dataDir: string): Promise<Buffer> {
  const file = nodePath.join(dataDir, 'pack-stub.key');
  try {
    const key = await fsp.readFile(file);
    if (key.byteLength === 32) return key;
    throw new Error(`${file}: not a 32-byte key`);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const key = randomBytes(32);
  await fsp.writeFile(file, key, { mode: 0o600, flag: 'wx' }).catch(async (e: NodeJS.ErrnoException) => {
    if (e.code !== 'EEXIST') throw e;
  });
  return fsp.readFile(file);
}

/**
 * The stub key of proxies sharing a PostgreSQL database: one row there (pg-migrations/002),
 * made by the first process to ask, so every process recognises every other's stubs.
 */
export async function loadSharedStubKey(sql: Sql): Promise<Buffer> {
  await sql`INSERT INTO pack_stub_key (id, key) VALUES (1, ${randomBytes(32)}) ON CONFLICT (id) DO NOTHING`;
  const [row] = await sql<{ key: Buffer }[]>`SELECT key FROM pack_stub_key WHERE id = 1`;
  if (row?.key.byteLength !== 32) throw new Error('pack_stub_key: not a 32-byte key');
  return Buffer.from(row.key);
}

function mac(key: Buffer, s: StubInfo): string {
  return createHmac('sha256', key).update(`${s.sha256}\n${s.size}\n${s.mtimeMs}`).digest('hex');
}

export function encodeStub(key: Buffer, s: StubInfo): Uint8Array {
  const body = { sha256: s.sha256, size: s.size, mtimeMs: s.mtimeMs, mac: mac(key, s) };
  return new TextEncoder().encode(MAGIC + JSON.stringify(body) + '\n');
}

/** The stub's content, or undefined when `bytes` is not a stub made with `key`. */
export function decodeStub(key: Buffer, bytes: Uint8Array): StubInfo | undefined {
  if (bytes.byteLength > MAX_STUB_BYTES) return undefined;
  const text = Buffer.from(bytes).toString('utf8');
  if (!text.startsWith(MAGIC)) return undefined;
  let j: unknown;
  try {
    j = JSON.parse(text.slice(MAGIC.length));
  } catch {
    return undefined;
  }
  const o = j as Partial<StubInfo & { mac: string }>;
  if (
    typeof o.sha256 !== 'string' ||
    !/^[0-9a-f]{64}$/.test(o.sha256) ||
    !Number.isSafeInteger(o.size) ||
    !Number.isSafeInteger(o.mtimeMs) ||
    typeof o.mac !== 'string'
  )
    return undefined;
  const s: StubInfo = { sha256: o.sha256, size: o.size!, mtimeMs: o.mtimeMs! };
  const want = Buffer.from(mac(key, s), 'hex');
  const got = Buffer.from(o.mac, 'hex');
  return got.byteLength === want.byteLength && timingSafeEqual(got, want) ? s : undefined;
}

/**
 * Steps (4) and (5) for a pack's dropped files at once: each replaced by its stub if it is
 * still the revision that was packed (FsProvider.replaceMany: one sync for the batch with the
 * write-ahead log, no checkpoint first, no fsync per file), then the index takes the stubs'
 * revisions in one transaction. A file changed or removed since is left to its new content.
 * Returns how many were replaced; an error met by one file is thrown once the others are
 * recorded.
 */
export async function dropFsCopies(
  d: { fs: FsProvider; index: PackIndex; key: Buffer; nsPath: (user: string, path: string) => string },
  files: readonly PendingContent[],
): Promise<number> {
  const todo = files.filter(
    (f): f is PendingContent & { fsRevision: string; mtimeMs: number } =>
      f.fsRevision !== undefined && f.mtimeMs !== undefined,
  );
  if (todo.length === 0) return 0;
  const written = await d.fs.replaceMany(
    todo.map((f) => ({
      path: d.nsPath(f.userId, f.path),
      bytes: encodeStub(d.key, { sha256: f.sha256, size: f.size, mtimeMs: f.mtimeMs }),
      modifiedMs: f.mtimeMs,
      ifRevision: f.fsRevision,
    })),
  );
  const changes: FsRevisionChange[] = [];
  let failure: Error | undefined;
  for (const [k, r] of written.entries()) {
    const f = todo[k]!;
    // Changed or removed since it was packed (replaceMany says PreconditionFailed for both):
    // its new content is not this pack's business.
    if (r instanceof PreconditionFailedError) continue;
    if (r instanceof Error) failure ??= r;
    else changes.push({ userId: f.userId, path: f.path, from: f.fsRevision, to: r.revision });
  }
  await d.index.replaceFsRevisions(changes);
  if (failure) throw failure;
  return changes.length;
}

/**
 * A small file's bytes (or inclusive range) from the filesystem tier for a read, never a
 * stub's bytes as the file's: a stub the pack index does not know (a crash between writing it
 * and recording it, before reconciliation) is resolved to the content it names — its MAC
 * verified with the stub key (`packedStub`, which also records the dropped copy again), its
 * content the entry's, read from its pack and checked against that hash (`readPacked`) — and
 * when no pack holds that content the read fails with a 500, never with the stub's bytes.
 * Costs one extra read of MAX_STUB_BYTES + 1 bytes per small file read.
 */
export async function readFsCopy(
  d: {
    fs: FsProvider;
    packedStub: (bytes: Uint8Array) => Promise<StubInfo | undefined>;
    readPacked: (
      sha256: string,
      range: { start: number; end: number } | undefined,
    ) => Promise<Uint8Array | undefined>;
  },
  tierPath: string,
  entry: { readonly path: string; readonly size: number; readonly sha256?: string | undefined },
  range: { start: number; end: number } | undefined,
): Promise<AsyncIterable<Uint8Array>> {
  let head: Uint8Array;
  if (range) {
    head = await collect(await d.fs.read(tierPath, { offset: 0, length: MAX_STUB_BYTES + 1 }));
    if (head.byteLength > MAX_STUB_BYTES)
      return d.fs.read(tierPath, { offset: range.start, length: range.end - range.start + 1 });
  } else {
    // A whole read opens the file once: its first bytes tell a stub, and a longer file
    // streams on from where they end.
    const opened = await peekHead(await d.fs.read(tierPath, {}), MAX_STUB_BYTES + 1);
    if (opened.rest) return opened.rest;
    head = opened.head;
  }
  const stub = await d.packedStub(head);
  if (!stub) return oneChunk(range ? head.subarray(range.start, range.end + 1) : head);
  const packed =
    stub.sha256 === entry.sha256 && stub.size === entry.size
      ? await d.readPacked(stub.sha256, range)
      : undefined;
  if (packed) return oneChunk(packed);
  throw new ApiError(
    'INTERNAL',
    'the file was dropped for a pack that the pack index does not hold; the index needs repair',
    { path: entry.path },
  );
}

async function* oneChunk(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

/**
 * The first `atLeast` bytes of a stream: `head` (all of it) when the stream ends before,
 * otherwise `rest`, the whole stream again (the chunks read, then the remainder) — read once.
 */
async function peekHead(
  stream: AsyncIterable<Uint8Array>,
  atLeast: number,
): Promise<{ head: Uint8Array; rest?: undefined } | { head?: undefined; rest: AsyncIterable<Uint8Array> }> {
  const it = stream[Symbol.asyncIterator]();
  const chunks: Uint8Array[] = [];
  let n = 0;
  while (n < atLeast) {
    const r = await it.next();
    if (r.done) return { head: Buffer.concat(chunks) };
    chunks.push(r.value);
    n += r.value.byteLength;
  }
  // An iterator object rather than a generator: its return() closes the file even when the
  // reader gives up before its first chunk (a generator not yet started skips its finally).
  let next = 0;
  const rest: AsyncIterableIterator<Uint8Array> = {
    [Symbol.asyncIterator]() {
      return rest;
    },
    next: () => (next < chunks.length ? Promise.resolve({ done: false, value: chunks[next++]! }) : it.next()),
    return: async () => {
      await it.return?.();
      return { done: true, value: undefined };
    },
  };
  return { rest };
}

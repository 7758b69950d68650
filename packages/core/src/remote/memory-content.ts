/**
 * The content side of the in-memory proxy (memory-store.ts): commits of held or transferred
 * content, bundle downloads, transfers and their blocks, deltas both ways with the real
 * rsync-wasm engine, signatures and Merkle nodes — each a function of one namespace, called
 * by MemoryRemoteStore after its test controls have let the call through.
 */
import { randomBytes } from 'node:crypto';
import {
  delta as rsyncDelta,
  loadSignature,
  patch as rsyncPatch,
  signature as rsyncSignature,
  suggestStrongLength,
} from '@weft/rsync-wasm';
import {
  type BlockAck,
  blockAck,
  BundleRoom,
  transferState,
  type BundleDeferred,
  type BundleDeferredReason,
  type BundleEntry,
  type ChangeRecord,
  type DecodedBundle,
  type DecodedDeltaContainer,
  type FileOp,
  type MerkleChildHash,
  type MerkleNode,
  type OpResult,
  type TransferState,
  decodeBundle,
  decodeDeltaContainer,
  decodeTransferBlock,
  dirHash,
  encodeBundle,
  encodeDeltaContainer,
  fileLeafHash,
  isWireFormatError,
  orderChildren,
  sha256Hex,
} from '@weft/wire';
import {
  type MemoryServerState,
  type Namespace,
  type Transfer,
  type Writer,
  checkNewPath,
  checkPath,
  fail,
  signatureBlockSize,
} from './memory-server.ts';
import { RemoteError } from './proxy-client.ts';

async function collect(source: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of source) parts.push(c);
  return Buffer.concat(parts);
}

/** A commit operation: of content the server holds, or of a complete transfer. */
export function commitContent(
  server: MemoryServerState,
  n: Namespace,
  writer: Writer,
  op: Extract<FileOp, { op: 'commit' }>,
): OpResult {
  if (!op.transferId) {
    const bytes = n.held.get(op.sha256) === op.size ? server.heldContent(n, op.sha256) : undefined;
    if (!bytes) fail('OBJECT_UNKNOWN', 'the server has no object with that SHA-256 and size; upload it');
    return server.writeFile(n, writer, op.path, bytes, op.sha256, op.mtimeMs, op.baseRevision, op.own);
  }
  const t = n.transfers.get(op.transferId);
  if (!t) fail('TRANSFER_UNKNOWN', 'no such transfer; open a new one');
  const st = transferStateOf(n, t);
  if (st.receivedBytes !== t.size)
    fail('TRANSFER_INCOMPLETE', `${st.receivedBytes} of ${t.size} bytes received`, {
      received: st.received,
    });
  if (t.sha256 !== op.sha256 || t.size !== op.size || t.path !== op.path)
    fail('BAD_REQUEST', 'commit does not match the transfer (path, size, sha256)');
  try {
    const res = server.writeFile(n, writer, op.path, t.data, t.sha256, op.mtimeMs, op.baseRevision, op.own);
    n.transfers.delete(t.id);
    return res;
  } catch (e) {
    if (e instanceof RemoteError && e.code === 'HASH_MISMATCH') n.transfers.delete(t.id);
    throw e;
  }
}

/** The bundle of `paths` as the client would read it, and what the server deferred. */
export function bundleOf(
  n: Namespace,
  paths: readonly string[],
  compress: boolean,
): { bundle: DecodedBundle; deferred: { path: string; reason: BundleDeferredReason }[] } {
  if (paths.length < 1 || paths.length > 10_000) fail('BAD_REQUEST', 'between 1 and 10000 paths');
  if (new Set(paths).size !== paths.length) fail('BAD_REQUEST', 'paths must be distinct');
  for (const p of paths) checkPath(p);
  const entries: BundleEntry[] = [];
  const deferred: BundleDeferred[] = [];
  const room = new BundleRoom(paths.length);
  for (const [index, p] of paths.entries()) {
    const place = room.place(p, n.entries.get(p));
    if ('reason' in place) {
      deferred.push({ index, reason: place.reason });
      continue;
    }
    room.take(place.cost);
    const e = place.entry;
    entries.push({
      path: p,
      rev: e.revision,
      mtimeMs: e.mtimeMs,
      sha256: e.sha256,
      content: n.content.get(p) ?? new Uint8Array(),
    });
  }
  // Through the wire format and back, as the client would read it.
  const bundle = decodeBundle(encodeBundle(entries, { deferred, compress: compress && entries.length > 0 }));
  return {
    bundle,
    deferred: bundle.deferred.map((d) => ({ path: paths[d.index] as string, reason: d.reason })),
  };
}

/** A new transfer of large content. */
export function openTransfer(
  n: Namespace,
  req: { path: string; size: number; sha256: string; mtimeMs: number; baseRevision?: string | null },
): TransferState {
  checkNewPath(req.path);
  if (!/^[0-9a-f]{64}$/.test(req.sha256)) fail('BAD_REQUEST', 'sha256: lower-case hex SHA-256');
  const t: Transfer = {
    id: randomBytes(16).toString('hex'),
    path: req.path,
    size: req.size,
    sha256: req.sha256,
    mtimeMs: req.mtimeMs,
    data: new Uint8Array(req.size),
    ranges: [],
  };
  n.transfers.set(t.id, t);
  return transferStateOf(n, t);
}

export function transferStateOf(n: Namespace, t: Transfer): TransferState {
  return transferState(t, t.ranges, n.held.get(t.sha256));
}

/** One block frame of transfer `id`, acknowledged. */
export function receiveBlock(n: Namespace, id: string, frame: Uint8Array): BlockAck {
  let b: ReturnType<typeof decodeTransferBlock>;
  try {
    b = decodeTransferBlock(frame);
  } catch (e) {
    if (isWireFormatError(e)) fail('INVALID_FORMAT', (e as Error).message);
    throw e;
  }
  if (b.transferId !== id) fail('BAD_REQUEST', 'block belongs to another transfer');
  const t = n.transfers.get(id);
  if (!t) fail('TRANSFER_UNKNOWN', 'no such transfer; open a new one');
  if (b.offset + b.payload.byteLength > t.size)
    fail(
      'BAD_REQUEST',
      `block [${b.offset}, ${b.offset + b.payload.byteLength}) lies beyond the file size ${t.size}`,
    );
  t.data.set(b.payload, b.offset);
  t.ranges.push({ offset: b.offset, length: b.payload.byteLength });
  return blockAck(b, transferStateOf(n, t).receivedBytes);
}

/** A delta container applied to the base it names; the result written at `path`. */
export async function applyDelta(
  server: MemoryServerState,
  n: Namespace,
  writer: Writer,
  path: string,
  baseRevision: string,
  mtimeMs: number,
  container: Uint8Array,
  own?: readonly string[],
): Promise<OpResult> {
  checkNewPath(path);
  const c = decodeContainer(container);
  const cur = n.entries.get(path);
  const old = cur?.sha256 === c.baseSha256 ? n.content.get(path) : server.heldContent(n, c.baseSha256);
  if (!old) fail('DELTA_BASE_UNKNOWN', 'the server does not have the base content; upload the whole file');
  let bytes: Uint8Array;
  try {
    bytes = await collect(rsyncPatch(old, c.delta, { maxOutputBytes: c.targetSize }));
  } catch (e) {
    fail('INVALID_FORMAT', (e as Error).message);
  }
  if (bytes.byteLength !== c.targetSize || sha256Hex(bytes) !== c.targetSha256)
    fail('HASH_MISMATCH', 'the patched result does not match the target size and SHA-256');
  const res = server.writeFile(n, writer, path, bytes, c.targetSha256, mtimeMs, baseRevision, own);
  return res;
}

/** The delta from the client's signature to the current content of `path`. */
export async function deltaFor(
  n: Namespace,
  path: string,
  baseSha256: string,
  signatureBytes: Uint8Array,
): Promise<DecodedDeltaContainer> {
  let sig: Awaited<ReturnType<typeof loadSignature>>;
  try {
    sig = await loadSignature(signatureBytes);
  } catch (e) {
    fail('INVALID_FORMAT', (e as Error).message);
  }
  checkPath(path);
  const e = n.entries.get(path);
  if (!e || e.kind !== 'file' || !e.sha256) fail('NOT_FOUND', 'not found');
  const content = n.content.get(path) ?? new Uint8Array();
  const d = await collect(rsyncDelta(sig, content));
  const encoded = encodeDeltaContainer(
    { baseSha256, targetSha256: e.sha256, targetSize: e.size, delta: d },
    { compress: true },
  );
  return decodeDeltaContainer(encoded);
}

/** The signature of a large file, sized as the proxy sizes it. */
export async function signatureOf(
  n: Namespace,
  path: string,
): Promise<{ bytes: Uint8Array; sha256: string; revision: string }> {
  checkPath(path);
  const e = n.entries.get(path);
  if (!e) fail('NOT_FOUND', 'not found');
  if (e.kind !== 'file' || e.tier !== 'large' || !e.sha256)
    fail('NOT_FOUND', 'only large files have a signature');
  const content = n.content.get(path) ?? new Uint8Array();
  const blockSize = signatureBlockSize(e.size);
  // Strong hash sized as the proxy sizes it (proxy-server store/link-file.ts signatureStrongLength).
  const strongLength = Math.min(8, suggestStrongLength(Math.max(1, e.size), blockSize) + 1);
  const bytes = await collect(rsyncSignature(content, { blockSize, strongLength }));
  return { bytes, sha256: e.sha256, revision: e.revision };
}

export function since(n: Namespace, cursor: number, limit: number): ChangeRecord[] {
  // Seqs are 1..n.seq in order: record seq s sits at index s - 1.
  return n.log.slice(cursor, cursor + limit);
}

function decodeContainer(bytes: Uint8Array): DecodedDeltaContainer {
  try {
    return decodeDeltaContainer(bytes);
  } catch (e) {
    if (isWireFormatError(e)) fail('INVALID_FORMAT', (e as Error).message);
    throw e;
  }
}

/** A Merkle node as the server's MerkleIndex answers it (hashes defined in @weft/wire). */
export function merkleNode(n: Namespace, path: string): MerkleNode {
  const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
  const children = (dir: string): MerkleChildHash[] => {
    const prefix = dir === '' ? '' : dir + '/';
    return n.list(dir, false).map((e) => ({
      name: e.path.slice(prefix.length),
      kind: e.kind,
      hash: e.kind === 'file' ? fileLeafHash(e.path, e.sha256 ?? '') : dirHash(e.path, children(e.path)),
    }));
  };
  if (path !== '') {
    const e = n.entries.get(path);
    if (!e) return { path };
    if (e.kind === 'file') return { path, kind: 'file', hash: hex(fileLeafHash(path, e.sha256 ?? '')) };
  }
  const kids = children(path);
  return {
    path,
    kind: 'dir',
    hash: hex(dirHash(path, kids)),
    children: orderChildren(kids).map((c) => ({ name: c.name, kind: c.kind, hash: hex(c.hash) })),
  };
}

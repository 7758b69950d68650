/**
 * The redundant tier's write (redundant-provider.ts): a body smaller than the threshold is
 * replicated, a larger one striped RS(k, m) and streamed to the backends as it is encoded
 * (StripeWriter, stripe-write.ts; a stream of unknown length is spooled first). A backend
 * whose write fails is owed its blob (the outage log, in the commit's own transaction); a
 * write needs one replica or k fragments stored, else it fails and leaves nothing.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { finished } from 'node:stream/promises';
import { checkBody, openBody, sha256Hex, throwIfAborted } from '../body.ts';
import { TransientError } from '../errors.ts';
import { normalizeEntryPath } from '../paths.ts';
import type { Body, Entry, WriteOptions } from '../provider.ts';
import type { LocationRow, ObjectRow, PlacementStore } from './placement-store.ts';
import { place } from './planner.ts';
import { type RedundantProvider, blobKey } from './redundant-provider.ts';
import { type EncodedObject, StripeWriter } from './stripe-write.ts';
import { shardBytesFor } from './striping.ts';

export async function writeObject(
  t: RedundantProvider,
  id: string,
  path: string,
  body: Body,
  options: WriteOptions,
): Promise<Entry> {
  const p = normalizeEntryPath(path);
  throwIfAborted(options.signal);
  const cond = { ifNotExists: options.ifNotExists, ifRevision: options.ifRevision };
  await t.store.checkPut(p, cond);
  const it = openBody(body)[Symbol.asyncIterator]();
  const head: Buffer[] = [];
  let headBytes = 0;
  let ended = false;
  while (headBytes < t.thresholdBytes) {
    // The producer may reuse a chunk's buffer once asked for the next one: the chunk held
    // so far is copied then, the last one never (a large body given whole is not copied).
    if (head.length > 0) head[head.length - 1] = Buffer.from(head[head.length - 1]!);
    const r = await it.next();
    throwIfAborted(options.signal);
    if (r.done) {
      ended = true;
      break;
    }
    head.push(Buffer.from(r.value.buffer, r.value.byteOffset, r.value.byteLength));
    headBytes += r.value.byteLength;
  }
  const modifiedMs = options.modifiedMs ?? Date.now();
  if (ended) {
    const data = Buffer.concat(head, headBytes);
    const sha = sha256Hex(data);
    checkBody(t.name, p, options, data.byteLength, sha);
    const stored = await putReplicated(t, id, data, sha, options.signal);
    return commit(t, p, stored, cond, modifiedMs);
  }
  // A stream of unknown length is spooled first (the shard size must fit the object);
  // one of known length goes straight to the backends as it is encoded (issue #17).
  let spool: string | undefined;
  try {
    let source: AsyncIterable<Uint8Array> = chain(head, it);
    let size = options.size;
    if (size === undefined) {
      await fsp.mkdir(t.spoolDir, { recursive: true });
      spool = await fsp.mkdtemp(nodePath.join(t.spoolDir, 'w-'));
      const input = nodePath.join(spool, 'input');
      const out = createWriteStream(input);
      size = 0;
      for await (const chunk of source) {
        throwIfAborted(options.signal);
        size += chunk.byteLength;
        if (!out.write(chunk)) await new Promise<void>((r) => out.once('drain', () => r()));
      }
      out.end();
      await finished(out);
      source = createReadStream(input, { highWaterMark: 1 << 20 });
    }
    const stored = await putStriped(t, id, p, source, size, options);
    return await commit(t, p, stored, cond, modifiedMs);
  } finally {
    if (spool) await fsp.rm(spool, { recursive: true, force: true });
  }
}

async function commit(
  t: RedundantProvider,
  path: string,
  stored: { row: Omit<ObjectRow, 'refs'>; locations: Omit<LocationRow, 'object_id'>[] },
  cond: { ifNotExists?: boolean; ifRevision?: string },
  modifiedMs: number,
): Promise<Entry> {
  let result: Awaited<ReturnType<PlacementStore['commitFile']>>;
  // What a down backend missed is logged in the commit's own transaction.
  const owed = stored.locations
    .filter((l) => l.state === 'owed')
    .map((l) => ({ backend: l.backend, slot: l.slot, blobKey: blobKey(stored.row, l.slot) }));
  try {
    result = await t.store.commitFile(path, stored, cond, modifiedMs, owed);
  } catch (e) {
    await discard(t, stored);
    throw e;
  }
  t.metrics.loggedWrites += stored.locations.filter((l) => l.state === 'owed').length;
  await t.release(result.released);
  return result.entry;
}

/** Remove blobs of an object that was never committed (best effort: unreferenced anyway). */
async function discard(
  t: RedundantProvider,
  stored: {
    row: Omit<ObjectRow, 'refs'>;
    locations: Omit<LocationRow, 'object_id'>[];
  },
) {
  await Promise.all(
    stored.locations
      .filter((l) => l.state === 'ok')
      .map((l) =>
        t
          .backend(l.backend)
          ?.remove(blobKey(stored.row, l.slot))
          .catch(() => undefined),
      ),
  );
}

function placementFor(t: RedundantProvider, size: number): string[] {
  const ids = t.backendIds();
  return [
    ...place(size, t.stats(ids), {
      thresholdBytes: t.thresholdBytes,
      replicas: t.replicas,
      k: t.k,
      m: t.m,
    }).backends,
  ];
}

/** `sha`: SHA-256 (hex) of `data`, already computed by the caller. */
async function putReplicated(
  t: RedundantProvider,
  id: string,
  data: Buffer,
  sha: string,
  signal?: AbortSignal,
) {
  const row = {
    id,
    size: data.byteLength,
    sha256: sha,
    layout: 'replicated' as const,
    k: 1,
    m: 0,
    shard_bytes: 0,
    shard_sha: null,
  };
  const targets = placementFor(t, data.byteLength);
  const locations = await Promise.all(
    targets.map(async (backend, slot) => {
      const ok = await t.putBlob(backend, blobKey(row, slot), data, data.byteLength, sha, signal);
      return { slot, backend, blob_sha256: sha, state: ok ? ('ok' as const) : ('owed' as const) };
    }),
  );
  await settle(t, { row, locations }, 1, signal);
  return { row, locations };
}

/**
 * Encode `source` (`size` bytes declared) and stream each fragment to its backend as it is
 * encoded (StripeWriter). A backend whose write fails is owed its fragment (outage log);
 * the write needs k fragments stored.
 */
async function putStriped(
  t: RedundantProvider,
  id: string,
  p: string,
  source: AsyncIterable<Uint8Array>,
  size: number,
  options: WriteOptions,
) {
  // Placed first: a placement that fails leaves no writer waiting on the caller's signal.
  const targets = placementFor(t, size);
  const rs = await t.codec(t.k, t.m);
  const writer = new StripeWriter(rs, shardBytesFor(size, t.k, t.maxShardBytes), size, options.signal);
  const key = (slot: number) => blobKey({ id, layout: 'striped' }, slot);
  const uploads = targets.map((backend, slot) =>
    t
      .putBlob(backend, key(slot), writer.body(slot), writer.fragmentBytes, undefined, writer.signal)
      .finally(() => writer.close(slot)),
  );
  let enc: EncodedObject;
  try {
    enc = await writer.run(source, (n, sha) => checkBody(t.name, p, options, n, sha));
  } catch (e) {
    // Nothing was stored whole (the last stripe is held back until the checks pass);
    // what a backend kept of a fragment is removed, best effort (else the orphan sweep).
    const oks = await Promise.all(uploads);
    await Promise.all(
      targets.map((backend, slot) =>
        oks[slot]
          ? t
              .backend(backend)
              ?.remove(key(slot))
              .catch(() => undefined)
          : undefined,
      ),
    );
    throw e;
  }
  const oks = await Promise.all(uploads);
  const row = {
    id,
    size: enc.size,
    sha256: enc.sha256,
    layout: 'striped' as const,
    k: enc.k,
    m: enc.m,
    shard_bytes: enc.shardBytes,
    shard_sha: enc.shardSha,
  };
  const locations = targets.map((backend, slot) => ({
    slot,
    backend,
    blob_sha256: enc.fragmentSha[slot]!,
    state: oks[slot] ? ('ok' as const) : ('owed' as const),
  }));
  await settle(t, { row, locations }, enc.k, options.signal);
  return { row, locations };
}

/** A write needs `need` blobs stored (1 replica, k fragments); else it fails, leaving nothing. */
async function settle(
  t: RedundantProvider,
  stored: { row: Omit<ObjectRow, 'refs'>; locations: Omit<LocationRow, 'object_id'>[] },
  need: number,
  signal?: AbortSignal,
): Promise<void> {
  const ok = stored.locations.filter((l) => l.state === 'ok').length;
  if (ok >= need && !signal?.aborted) return;
  await discard(t, stored);
  throwIfAborted(signal);
  throw new TransientError(`${t.name}: only ${ok} of the ${need} blobs needed could be stored`);
}

async function* chain(
  head: readonly Uint8Array[],
  rest: AsyncIterator<Uint8Array>,
): AsyncIterable<Uint8Array> {
  for (const h of head) yield h;
  for (;;) {
    const r = await rest.next();
    if (r.done) return;
    yield r.value;
  }
}

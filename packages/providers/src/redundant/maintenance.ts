/**
 * Keeping the redundant tier whole (issue #17): replaying the outage log of a backend that
 * came back, scrubbing (reading every blob's checksum and repairing what is missing or
 * corrupt), and replacing a backend that is gone for good by rebuilding its replicas and
 * fragments onto a new one. Rebuilding reads the other replicas, or k other fragments
 * stripe by stripe (bounded memory), and writes the blob again under the same key.
 *
 * Their writes to the placement store are `fenced`: on a store several proxy instances
 * share, they commit only while this instance holds the controller lease, so a controller
 * that lost the role (paused, cut off) cannot record anything over its successor's work.
 * All of it is resumable from the store: a replay killed midway leaves its entries in the
 * log (the next controller writes those blobs again — the same bytes under the same key,
 * or a delete of what is already gone), a replacement leaves the locations it re-pointed.
 */
import { createHash } from 'node:crypto';
import { collect, rechunk, sha256Hex } from '../body.ts';
import { NotFoundError } from '../errors.ts';
import type { Body, Provider, WriteOptions } from '../provider.ts';
import { FRAGMENT_HEADER_BYTES } from './fragment.ts';
import { type BackendConfig, blobKey, type RedundantProvider } from './redundant-provider.ts';
import type { LocationRow, ObjectRow } from './placement-store.ts';

const FENCED = { fenced: true } as const;
import { fragmentSources, stripeHooks } from './reading.ts';
import { completeStripe, readStripes } from './stripe-read.ts';
import { acceptedHeaders, fragmentChecksumKind, stripeCount } from './striping.ts';

/** Wire replay into a tier: a backend found up again has its outage log replayed. */
export function enableReplay(tier: RedundantProvider): void {
  tier.onBackendUp = async (id) => {
    await replayOutageLog(tier, id);
  };
}

/**
 * Replay what `backend` missed, oldest first. Stops (the backend marked down again) at the
 * first failure; what is left stays in the log. Returns how many entries were applied.
 */
export async function replayOutageLog(tier: RedundantProvider, backend: string): Promise<number> {
  const p = tier.backend(backend);
  if (!p) return 0;
  let applied = 0;
  for (;;) {
    const batch = await tier.store.logPending(backend, 100);
    if (batch.length === 0) return applied;
    for (const row of batch) {
      try {
        if (row.op === 'delete') {
          await p.remove(row.blob_key).catch((e: unknown) => {
            if (!(e instanceof NotFoundError)) throw e;
          });
        } else {
          const obj = await tier.store.object(row.object_id);
          const loc = obj && (await tier.store.locations(obj.id)).find((l) => l.slot === row.slot);
          // Skipped when the object was deleted since (its delete follows in the log) or moved on.
          if (obj && loc && loc.backend === backend) {
            let body: Body | undefined;
            try {
              body = await rebuildBody(tier, obj, loc);
            } catch {
              // Too few good holders to rebuild from now: not this backend's fault. Left to
              // the scrub (which repairs 'bad' locations), so the rest of the log goes on.
              await tier.store.setLocation(obj.id, loc.slot, { state: 'bad' }, FENCED);
            }
            if (body !== undefined) {
              await p.write(row.blob_key, body, blobWriteOptions(obj, loc));
              await tier.store.setLocation(obj.id, loc.slot, { state: 'ok' }, FENCED);
            }
          }
        }
      } catch (e) {
        // Not the controller any more: stop, the backend is not at fault.
        if (isFenced(e)) throw e;
        tier.markDown(backend);
        return applied;
      }
      await tier.store.logDone(row.seq, FENCED);
      tier.metrics.replayed += 1;
      applied += 1;
    }
  }
}

function blobWriteOptions(obj: ObjectRow, loc: LocationRow): WriteOptions & { size: number } {
  if (obj.layout === 'replicated') return { size: obj.size, sha256: loc.blob_sha256 };
  // A fragment: its shards are checked against the placement store on read and scrub.
  return {
    size: FRAGMENT_HEADER_BYTES + stripeCount(obj.size, obj.k, obj.shard_bytes) * obj.shard_bytes,
    callerVerifies: true,
  };
}

/**
 * The content slot `loc.slot` of `obj` should hold, rebuilt from the other holders: a replica
 * (verified), or a fragment as a re-sendable stream (header, then each stripe's shard,
 * reconstructed from k other fragments and checked against its recorded checksum).
 */
export async function rebuildBody(tier: RedundantProvider, obj: ObjectRow, loc: LocationRow): Promise<Body> {
  const locs = await tier.store.locations(obj.id);
  if (obj.layout === 'replicated') {
    for (const other of locs) {
      if (other.slot === loc.slot || other.state !== 'ok' || !tier.isUp(other.backend)) continue;
      try {
        const data = await collect(await tier.backend(other.backend)!.read(blobKey(obj, other.slot)));
        if (sha256Hex(data) === obj.sha256) return data;
      } catch {
        /* try the next replica */
      }
    }
    throw new Error(`no good replica of object ${obj.id} to rebuild from`);
  }
  const striped = {
    k: obj.k,
    m: obj.m,
    shardBytes: obj.shard_bytes,
    size: obj.size,
    shardSha: obj.shard_sha!,
  };
  const stripes = stripeCount(obj.size, obj.k, obj.shard_bytes);
  const sources = fragmentSources(tier, obj, locs, stripes * obj.shard_bytes, loc.slot);
  if (sources.length < obj.k)
    throw new Error(`object ${obj.id}: ${sources.length} of ${obj.k} fragments available to rebuild from`);
  const rs = await tier.codec(obj.k, obj.m);
  const header = acceptedHeaders(striped, loc.slot, loc.blob_sha256)[0]!;
  const hooks = stripeHooks(tier, obj);
  return async function* () {
    yield header;
    for await (const slots of readStripes(striped, sources, 0, stripes - 1, {
      hedgeAfterMs: tier.hedgeAfterMs,
      hooks,
    }))
      yield Buffer.from(completeStripe(rs, slots)[loc.slot]!);
  };
}

export interface ScrubOptions {
  /** Read at most this many bytes per second (default: unlimited). */
  readonly bytesPerSecond?: number;
  /** Repair what is missing or corrupt (default true). */
  readonly repair?: boolean;
  readonly sleep?: (ms: number) => Promise<void>;
  /** The clock the pacing reads (default Date.now; tests pair it with `sleep`). */
  readonly now?: () => number;
  /** Called with the report so far after each blob (a running scrub's progress). */
  readonly onProgress?: (report: Readonly<ScrubReport>) => void;
  /** Stops the scrub between blobs (it then rejects with the signal's reason). */
  readonly signal?: AbortSignal;
}

export interface ScrubReport {
  objects: number;
  blobsChecked: number;
  bytesRead: number;
  missing: number;
  corrupt: number;
  repaired: number;
  /** Blobs on down backends, not checked this time. */
  skipped: number;
  /** Blobs found bad that could not be rebuilt (too few good holders). */
  unrepairable: number;
}

/**
 * Read every blob of every object on the backends that are up, compare with the recorded
 * checksums (a fragment's header, every shard, its payload SHA-256), and rebuild what is
 * missing or corrupt. Outage logs of backends that are up are replayed first.
 */
export async function scrub(tier: RedundantProvider, options: ScrubOptions = {}): Promise<ScrubReport> {
  const report: ScrubReport = {
    objects: 0,
    blobsChecked: 0,
    bytesRead: 0,
    missing: 0,
    corrupt: 0,
    repaired: 0,
    skipped: 0,
    unrepairable: 0,
  };
  if (!tier.onBackendUp) enableReplay(tier);
  for (const id of tier.backendIds()) if (tier.isUp(id)) await tier.replay(id);
  await tier.release(await tier.store.unreferenced());
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const now = options.now ?? Date.now;
  const started = now();
  for (const id of await tier.store.objectIds()) {
    const obj = await tier.store.object(id);
    // Gone, or unreferenced and being released: its blobs are going away on purpose.
    if (!obj || obj.refs <= 0) continue;
    report.objects += 1;
    for (const loc of await tier.store.locations(id)) {
      options.signal?.throwIfAborted();
      const p = tier.backend(loc.backend);
      if (!p || !tier.isUp(loc.backend) || loc.state === 'owed') {
        report.skipped += 1;
        continue;
      }
      let verdict: Awaited<ReturnType<typeof checkBlob>>;
      try {
        verdict = await checkBlob(p, obj, loc, report);
      } catch {
        // The backend failed now (not "not found"): down until a probe finds it again; its
        // blobs are skipped this time, the rest of the scrub goes on.
        tier.markDown(loc.backend);
        report.skipped += 1;
        continue;
      }
      // Deleted while the scrub read it (the tier is in use): not missing, nothing to rebuild —
      // a blob written back now would belong to nothing.
      if (verdict !== 'ok' && !(((await tier.store.object(id))?.refs ?? 0) > 0)) break;
      report.blobsChecked += 1;
      if (verdict === 'missing') report.missing += 1;
      if (verdict === 'corrupt') report.corrupt += 1;
      if (verdict !== 'ok') await tier.store.setLocation(id, loc.slot, { state: 'bad' }, FENCED);
      // Marked bad by a read that failed midway, but whole on the backend: good again.
      else if (loc.state === 'bad') await tier.store.setLocation(id, loc.slot, { state: 'ok' }, FENCED);
      if (verdict !== 'ok' && options.repair !== false) {
        try {
          await p.write(
            blobKey(obj, loc.slot),
            await rebuildBody(tier, obj, loc),
            blobWriteOptions(obj, loc),
          );
          await tier.store.setLocation(id, loc.slot, { state: 'ok' }, FENCED);
          report.repaired += 1;
        } catch (e) {
          if (isFenced(e)) throw e;
          report.unrepairable += 1;
        }
      }
      options.onProgress?.(report);
      if (options.bytesPerSecond) {
        const due = (report.bytesRead / options.bytesPerSecond) * 1000 - (now() - started);
        if (due > 0) await sleep(due);
      }
    }
  }
  return report;
}

async function checkBlob(
  p: Provider,
  obj: ObjectRow,
  loc: LocationRow,
  report: ScrubReport,
): Promise<'ok' | 'missing' | 'corrupt'> {
  const key = blobKey(obj, loc.slot);
  try {
    if (obj.layout === 'replicated') {
      const data = await collect(await p.read(key));
      report.bytesRead += data.byteLength;
      return sha256Hex(data) === loc.blob_sha256 ? 'ok' : 'corrupt';
    }
    const striped = {
      k: obj.k,
      m: obj.m,
      shardBytes: obj.shard_bytes,
      size: obj.size,
      shardSha: obj.shard_sha!,
    };
    const stripes = stripeCount(obj.size, obj.k, obj.shard_bytes);
    const st = await p.stat(key);
    if (st.size !== FRAGMENT_HEADER_BYTES + stripes * obj.shard_bytes) return 'corrupt';
    const head = await collect(await p.read(key, { offset: 0, length: FRAGMENT_HEADER_BYTES }));
    if (!acceptedHeaders(striped, loc.slot, loc.blob_sha256).some((h) => head.equals(h))) return 'corrupt';
    // Versions 2 and 3: the recorded checksum is over the shard checksums (the record says
    // it matches them), so each shard checked is the whole check. Version 1 also hashes the
    // payload as a whole.
    const whole =
      fragmentChecksumKind(striped, loc.slot, loc.blob_sha256) === 1 ? createHash('sha256') : undefined;
    let s = 0;
    const n = obj.k + obj.m;
    for await (const shard of rechunk(
      await p.read(key, { offset: FRAGMENT_HEADER_BYTES }),
      obj.shard_bytes,
    )) {
      report.bytesRead += shard.byteLength;
      whole?.update(shard);
      const want = obj.shard_sha!.subarray((s * n + loc.slot) * 32, (s * n + loc.slot + 1) * 32);
      if (!createHash('sha256').update(shard).digest().equals(want)) return 'corrupt';
      s += 1;
    }
    return s === stripes && (!whole || whole.digest('hex') === loc.blob_sha256) ? 'ok' : 'corrupt';
  } catch (e) {
    if (e instanceof NotFoundError) return 'missing';
    throw e;
  }
}

export interface ReplaceProgress {
  readonly done: number;
  readonly total: number;
  readonly bytes: number;
}

/**
 * Replace backend `oldId` (gone for good) by `next`: every replica and fragment it held is
 * rebuilt from the others onto `next` and re-pointed there; its outage log is dropped (the
 * rebuild covers it); then `oldId` leaves the set. Resumable: a second run skips what was
 * already moved. Returns the number of blobs rebuilt.
 */
export async function replaceBackend(
  tier: RedundantProvider,
  oldId: string,
  next: BackendConfig,
  onProgress?: (p: ReplaceProgress) => void,
  /** Stops between objects (rejecting with its reason); running it again resumes. */
  signal?: AbortSignal,
): Promise<number> {
  if (!tier.backendIds().includes(next.id)) tier.addBackend(next);
  const ids = await tier.store.objectIds(oldId);
  let done = 0;
  let bytes = 0;
  for (const id of ids) {
    signal?.throwIfAborted();
    const obj = await tier.store.object(id);
    if (!obj) continue;
    for (const loc of await tier.store.locations(id)) {
      if (loc.backend !== oldId) continue;
      const opts = blobWriteOptions(obj, loc);
      // Mark it bad first: it must not serve as a source for its own rebuild.
      await tier.store.setLocation(id, loc.slot, { state: 'bad' }, FENCED);
      await next.provider.write(blobKey(obj, loc.slot), await rebuildBody(tier, obj, loc), opts);
      await tier.store.setLocation(id, loc.slot, { state: 'ok', backend: next.id }, FENCED);
      bytes += opts.size;
    }
    done += 1;
    onProgress?.({ done, total: ids.length, bytes });
  }
  await tier.store.logClear(oldId, FENCED);
  await tier.dropBackend(oldId);
  return done;
}

/** A fenced write refused because this instance is not (or no longer) the controller. */
function isFenced(e: unknown): boolean {
  return e instanceof Error && e.name === 'FencedError';
}

/**
 * Reading from the redundant tier: a replica from the fastest available backend (verified
 * against its SHA-256, the next one tried on failure), or the stripes a range needs from
 * the fragments in parallel, hedged (stripe-read.ts): the k data fragments when none is
 * down or slow (no decoding; the shards go out as they arrived, uncopied), else every
 * available one by rate, decoded stripe by stripe. Memory stays bounded by the reader's
 * window.
 */
import { collect, sha256Hex, throwIfAborted } from '../body.ts';
import { NotFoundError, TransientError } from '../errors.ts';
import { planRead, planStripedRead } from './planner.ts';
import { blobKey, type RedundantProvider } from './redundant-provider.ts';
import type { LocationRow, ObjectRow } from './placement-store.ts';
import { dataOf, type FragmentSource, readStripes, shardRange, type StripeReadHooks } from './stripe-read.ts';

export async function readReplica(
  tier: RedundantProvider,
  obj: ObjectRow,
  locs: LocationRow[],
  signal?: AbortSignal,
): Promise<Buffer> {
  const holders = locs.filter((l) => tier.isUp(l.backend));
  let order: number[] = [];
  try {
    const plan = planRead(tier.stats(holders.map((l) => l.backend)), 1, obj.size);
    order = [...plan.primary, ...plan.spares];
  } catch {
    /* none available: fall through to the error below */
  }
  if (holders.length < (await tier.store.locations(obj.id)).length) tier.metrics.degradedReads += 1;
  for (const i of order) {
    const l = holders[i]!;
    const started = Date.now();
    try {
      const data = await collect(
        await tier.backend(l.backend)!.read(blobKey(obj, l.slot), { signal }),
        signal,
      );
      if (sha256Hex(data) === obj.sha256) {
        tier.recordTransfer(l.backend, data.byteLength, Date.now() - started);
        return data;
      }
      await tier.store.setLocation(obj.id, l.slot, { state: 'bad' });
    } catch (e) {
      throwIfAborted(signal);
      if (e instanceof NotFoundError) await tier.store.setLocation(obj.id, l.slot, { state: 'bad' });
      else tier.markDown(l.backend);
    }
  }
  throw new TransientError(`${tier.name}: no replica of object ${obj.id} could be read`);
}

/**
 * Available fragment sources of a striped object for `bytes` each, in the order a read takes
 * them (planner.ts `planStripedRead`): `active` of them read from the start — the k data
 * fragments when none is down or slow, else all, fastest first — and the rest are spares.
 */
export function stripeSources(
  tier: RedundantProvider,
  obj: ObjectRow,
  locs: readonly LocationRow[],
  bytes: number,
  exclude?: number,
): { sources: FragmentSource[]; active: number } {
  const holders = locs.filter((l) => l.state === 'ok' && l.slot !== exclude && tier.isUp(l.backend));
  const plan = planStripedRead(
    tier.stats(holders.map((l) => l.backend)),
    holders.map((l) => l.slot),
    obj.k,
    bytes,
  );
  const sources = [...plan.primary, ...plan.spares].map((i) => {
    const l = holders[i]!;
    return {
      index: l.slot,
      backend: l.backend,
      provider: tier.backend(l.backend)!,
      key: blobKey(obj, l.slot),
    };
  });
  return { sources, active: plan.primary.length };
}

/** Available fragment sources of a striped object, in the order a read takes them. */
export function fragmentSources(
  tier: RedundantProvider,
  obj: ObjectRow,
  locs: readonly LocationRow[],
  bytes: number,
  exclude?: number,
): FragmentSource[] {
  return stripeSources(tier, obj, locs, bytes, exclude).sources;
}

export async function readStriped(
  tier: RedundantProvider,
  obj: ObjectRow,
  locs: LocationRow[],
  start: number,
  end: number,
  signal?: AbortSignal,
): Promise<AsyncIterable<Uint8Array>> {
  const striped = {
    k: obj.k,
    m: obj.m,
    shardBytes: obj.shard_bytes,
    size: obj.size,
    shardSha: obj.shard_sha!,
  };
  const stripeBytes = obj.k * obj.shard_bytes;
  const s0 = Math.floor(start / stripeBytes);
  const s1 = Math.floor((end - 1) / stripeBytes);
  const { sources, active } = stripeSources(tier, obj, locs, (s1 - s0 + 1) * obj.shard_bytes);
  if (sources.length < obj.k)
    throw new TransientError(
      `${tier.name}: ${sources.length} of the ${obj.k} fragments needed are available`,
    );
  if (sources.length < obj.k + obj.m) tier.metrics.degradedReads += 1;
  const rs = await tier.codec(obj.k, obj.m);
  return (async function* () {
    let s = s0;
    for await (const slots of readStripes(striped, sources, s0, s1, {
      hedgeAfterMs: tier.hedgeAfterMs,
      active,
      signal,
      hooks: stripeHooks(tier, obj),
    })) {
      const base = s * stripeBytes;
      const data = dataOf(rs, slots);
      for (let i = 0; i < obj.k; i++) {
        const from = Math.max(start, base + i * obj.shard_bytes);
        const to = Math.min(end, base + (i + 1) * obj.shard_bytes);
        if (from < to)
          yield* shardRange(data[i]!, from - base - i * obj.shard_bytes, to - base - i * obj.shard_bytes);
      }
      s += 1;
    }
  })();
}

export function stripeHooks(tier: RedundantProvider, obj: ObjectRow): StripeReadHooks {
  return {
    onFailure: (src, error, corrupt) => {
      tier.metrics.failedFragmentReads += 1;
      if (corrupt || error instanceof NotFoundError) {
        if (corrupt) tier.metrics.corruptFragmentReads += 1;
        tier.store.setLocation(obj.id, src.index, { state: 'bad' }).catch(() => undefined);
      } else tier.markDown(src.backend);
    },
    onSample: (src, bytes, ms) => tier.recordTransfer(src.backend, bytes, ms),
    onHedge: () => void (tier.metrics.hedgedReads += 1),
  };
}

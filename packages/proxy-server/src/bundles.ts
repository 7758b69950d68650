/**
 * Bundles (docs/formats/bundle.md): many small files in one request each way. An uploaded
 * bundle is checked against the quota as it is inflated, then written as ONE scheduled
 * operation (stop-and-wait on all its paths) and one metadata transaction; a download
 * bundle carries the files that fit and a deferred record for every other requested path.
 */
import {
  type BundleDeferred,
  type BundleEntry,
  type EntryInfo,
  BundleRoom,
  decodeBundle,
  encodeBundle,
  type OpResult,
  scanBundleEntries,
  sha256Hex,
} from '@weft/wire';
import type { AuthContext } from './auth.ts';
import { ApiError, toApiError } from './errors.ts';
import { errorResult, writerOf } from './ops.ts';
import type { OpScheduler } from './scheduler.ts';
import { checkNewPath, type HybridStore } from './store/hybrid.ts';

export class BundleService {
  constructor(
    private readonly o: {
      store: HybridStore;
      scheduler: OpScheduler;
      /**
       * The bytes of those contents that are read from their packs (filesystem-tier copy
       * dropped), ranges of one pack close together fetched in one request (Packer.readDroppedMany).
       */
      readPackedMany?: (sha256s: readonly string[]) => Promise<Map<string, Uint8Array>>;
      /** One read of a small file's content (store/read-counts.ts). */
      onRead?: (sha256: string) => void;
      /**
       * The checked bytes of the uploaded entries, before they are written: the packer packs
       * them from memory instead of reading them back (Packer.offerAll: bounded there; the
       * bundle waits while the packer is full).
       */
      offer?: (entries: readonly { sha256: string; content: Uint8Array }[]) => Promise<void>;
      /** A bundle's ingest began; the call returned says it ended (Packer.busy: the idle flush). */
      busy?: () => () => void;
    },
  ) {}

  /**
   * Apply an uploaded bundle. `admit(n)` is the back-pressure check for n more operations.
   * QUOTA_EXCEEDED refuses the whole bundle (thrown); any other failure of the batch is
   * every entry's result.
   */
  async ingest(
    a: AuthContext,
    bytes: Uint8Array,
    admit: (incoming: number) => void,
  ): Promise<{ path: string; result: OpResult }[]> {
    const ended = this.o.busy?.();
    try {
      return await this.ingestBundle(a, bytes, admit);
    } finally {
      ended?.();
    }
  }

  private async ingestBundle(
    a: AuthContext,
    bytes: Uint8Array,
    admit: (incoming: number) => void,
  ): Promise<{ path: string; result: OpResult }[]> {
    const { store, scheduler } = this.o;
    // Under a quota, the entries are admitted as they are inflated: a compressed bundle is
    // refused at the first entry that takes the running total (each entry's size less the
    // file it replaces) past what is left, before the rest is expanded.
    // The scan's callback is synchronous: it refuses as soon as the sizes pass what is left
    // plus everything the namespace holds (more than any overwrite could free); the exact
    // growth, each size less the file it replaces, is checked once the headers are read.
    const left = await store.quota.remaining(a.userId);
    if (left !== Infinity) {
      const used = (await store.quota.usage(a.userId)).usedBytes;
      const headers: { path: string; size: number }[] = [];
      let sizes = 0;
      let tooBig = false;
      await scanBundleEntries(bytes, (h) => {
        headers.push({ path: h.path, size: h.size });
        sizes += h.size;
        if (sizes > left + used) {
          tooBig = true;
          throw new ApiError('QUOTA_EXCEEDED', 'bundle exceeds the quota');
        }
      }).catch((e: unknown) => {
        if (!tooBig) throw e;
      });
      let growth = 0;
      for (const h of headers) {
        growth += await store.growthAt(a.userId, h.path, h.size);
        if (growth > left) throw await store.quota.exceeded(a.userId, growth);
      }
      if (tooBig) throw await store.quota.exceeded(a.userId, sizes - used);
    }
    const bundle = decodeBundle(bytes);
    for (const e of bundle.entries) checkNewPath(e.path);
    admit(bundle.entries.length);
    // decodeBundle checked every entry's bytes against its SHA-256.
    await this.o.offer?.(bundle.entries);
    // One scheduled operation for the whole bundle: it waits for every earlier operation on
    // any of its paths (stop-and-wait) and is written and committed as one batch.
    const w = writerOf(a);
    const results = await scheduler
      .submit({
        namespace: a.userId,
        paths: bundle.entries.map((e) => e.path),
        bytes: 0,
        run: () =>
          store.writeFiles(
            w,
            bundle.entries.map((e) => ({
              path: e.path,
              bytes: e.content,
              sha256: e.sha256,
              mtimeMs: e.mtimeMs,
              base: e.rev,
              own: e.own,
              checked: true, // by decodeBundle
              pathChecked: true, // above, before admitting the bundle
            })),
          ),
      })
      .catch((err: unknown): OpResult[] => {
        // A bundle over the quota is refused whole, as the request's answer (507).
        if (err instanceof ApiError && err.code === 'QUOTA_EXCEEDED') throw err;
        const failed = errorResult(toApiError(err));
        return bundle.entries.map(() => failed);
      });
    return bundle.entries.map((e, i) => ({ path: e.path, result: results[i]! }));
  }

  /**
   * A version-2 bundle of the requested files: every requested path is either an entry or
   * a deferred record (absent, large, later, changed). Room for a record per path is kept,
   * so the answer never exceeds the bundle limit.
   */
  async download(userId: string, paths: readonly string[], compress: boolean): Promise<Uint8Array> {
    const { store } = this.o;
    const entries: BundleEntry[] = [];
    // (In the body: a list of thousands of paths once outgrew the clients' 16 KiB header limit.)
    const deferred: BundleDeferred[] = [];
    const room = new BundleRoom(paths.length);
    // First what goes in (room spent as planned), then the packed contents in one batch of
    // coalesced ranged reads, then every file read and checked.
    const planned: { index: number; path: string; entry: EntryInfo & { sha256: string } }[] = [];
    for (const [index, p] of paths.entries()) {
      const place = room.place(p, await store.stat(userId, p));
      if ('reason' in place) {
        deferred.push({ index, reason: place.reason });
        continue;
      }
      room.take(place.cost);
      planned.push({ index, path: p, entry: place.entry });
    }
    const packed = (await this.o.readPackedMany?.(planned.map((f) => f.entry.sha256))) ?? new Map();
    for (const { index, path: p, entry: e } of planned) {
      const content = packed.get(e.sha256) ?? (await store.readAll(userId, e));
      if (content.byteLength !== e.size || sha256Hex(content) !== e.sha256) {
        deferred.push({ index, reason: 'changed' }); // changed while reading: fetch again
        continue;
      }
      entries.push({ path: p, rev: e.revision, mtimeMs: e.mtimeMs, sha256: e.sha256, content });
      this.o.onRead?.(e.sha256);
    }
    deferred.sort((a, b) => a.index - b.index);
    let out = encodeBundle(entries, { deferred });
    if (compress && entries.length > 0) {
      const packed = encodeBundle(entries, { compress: true, deferred });
      if (packed.byteLength <= out.byteLength * 0.9) out = packed;
    }
    return out;
  }
}

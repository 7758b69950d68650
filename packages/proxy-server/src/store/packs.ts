/**
 * Packs (issue #16, docs/formats/pack.md): small files, acknowledged once durable on the
 * filesystem tier, are appended by the packer into pack blobs in the object tier, flushed at
 * a target size or after a timeout, whichever first. The global index (hash → pack, offset,
 * length) lives in the metadata store's database (pack-index.ts: SQLite migration 004, or
 * PostgreSQL) and is a redundant copy of the packs' footers: rebuildFromFooters() restores it
 * from the object tier alone.
 *
 * Several proxy processes on one PostgreSQL: a flush packs only the contents it claimed
 * (PackIndex.claim; the others are left to the process packing them), a repack only a pack it
 * claimed, so no content is packed twice and no pack is rewritten by two processes.
 *
 * Crash safety: a pack is written atomically (Provider.write) before any index row names it,
 * so the index never references a missing pack; a pack written but not indexed (a crash in
 * between) is found by recoverUnindexed() at startup and indexed from its footer.
 *
 * Confinement: the index is keyed by content hash only and is never consulted with a hash a
 * client names; a packed content is read only through an entry of the reader's own namespace.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { NotFoundError, type Provider } from '@weft/providers';
import {
  coalescePackRanges,
  PackBuilder,
  type PackEntry,
  PACK_TRAILER_SIZE,
  readAhead,
  WireFormatError,
} from '@weft/wire';
import type { PackIndex } from './pack-index.ts';
import type {
  FsCopyPolicy,
  PackGcCandidate,
  PackLocation,
  PackStats,
  PendingContent,
  RepackOutcome,
} from './pack-types.ts';
import { keepFsCopy } from './pack-types.ts';
import { HotContents } from './pack-hot.ts';
import { type StoredForm, storedFormOffThread } from './pack-worker.ts';
import { IdleFlush } from './pack-idle.ts';
import {
  FULL_LIST_LIMIT,
  FULL_LIST_MS,
  PACK_CLAIM_TTL_MS,
  packKey,
  READ_AHEAD,
  ROOM_WAIT_MS,
  DEFAULT_PACK_IDLE_FRACTION,
  DEFAULT_PACK_TARGET_BYTES,
  DEFAULT_PACK_TIMEOUT_MS,
} from './pack-config.ts';
import { copyLiveEntries, newPackId, toIterable } from './pack-repack.ts';
import { indexUnindexedPacks, readPackEntry, readPackFooter, readPackRanges } from './pack-read.ts';

export {
  DEFAULT_PACK_IDLE_FRACTION,
  DEFAULT_PACK_TARGET_BYTES,
  DEFAULT_PACK_TIMEOUT_MS,
  PACK_CLAIM_TTL_MS,
  PACK_PREFIX,
  packKey,
} from './pack-config.ts';

export {
  type FsCopyPolicy,
  keepFsCopy,
  type PackGcCandidate,
  type PackLocation,
  type PackStats,
  type PendingContent,
  type RepackOutcome,
} from './pack-types.ts';

export interface PackerOptions {
  /** The pack tables (SQLite or PostgreSQL). */
  readonly index: PackIndex;
  readonly objects: Provider;
  /** Read a small file's bytes from the filesystem tier (NotFoundError if gone). */
  readonly readSmall: (userId: string, path: string) => Promise<Uint8Array>;
  /** Replace the filesystem-tier copies by stubs (policy 'drop'), a flushed pack's at once. */
  readonly dropSmall?: (files: readonly PendingContent[]) => Promise<void>;
  readonly log: Logger;
  readonly targetBytes?: number;
  readonly timeoutMs?: number;
  /** Flush this long after the last bundle in flight ended (0: no idle flush; default timeout / 5). */
  readonly idleMs?: number;
  readonly fsCopyPolicy?: FsCopyPolicy;
  readonly now?: () => number;
  /** Called after each pack is durable and indexed. */
  readonly onFlush?: (packId: string, entries: number, bytes: number) => void;
}

export class Packer {
  private readonly o: PackerOptions;
  readonly targetBytes: number;
  readonly timeoutMs: number;
  readonly idleMs: number;
  private pendingBytes = 0;
  /** The idle flush (pack-idle.ts). */
  private readonly idle: IdleFlush;
  /**
   * A flush asked for at the target is waiting for the running one: no other is asked for
   * (each notify past the target used to queue one more flush behind a slow one — at 100,000
   * files tens of thousands of them, run one after another long after the drop).
   */
  private targetFlushWaiting = false;
  /**
   * The namespace paths written since the last flush began (`user\0path`), looked up one by
   * one at the flush; undefined: the next flush lists every small entry not yet packed (at
   * start, after a failed flush, after a folder move, and at least every FULL_LIST_MS as a
   * safety net). Listing them all at every flush cost O(all small files) per flush: 290 s of
   * a 100,000-file drop's 800 s (issue #16).
   */
  private queued: Map<string, { userId: string; path: string }> | undefined;
  private lastFullListMs = Number.NEGATIVE_INFINITY;
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<number> | undefined;
  private closed = false;
  private readonly now: () => number;
  /** This packer's name on its claims (one per process). */
  private readonly owner = randomBytes(8).toString('hex');
  /** Bytes of small files just received, packed without reading them back (pack-hot.ts). */
  private readonly hot: HotContents;
  /** How long a bundle waits for room with nothing taken (ROOM_WAIT_MS; tests shorten it). */
  private roomWaitMs = ROOM_WAIT_MS;

  constructor(o: PackerOptions) {
    this.o = o;
    this.targetBytes = o.targetBytes ?? DEFAULT_PACK_TARGET_BYTES;
    this.timeoutMs = o.timeoutMs ?? DEFAULT_PACK_TIMEOUT_MS;
    this.idleMs = o.idleMs ?? Math.round(this.timeoutMs * DEFAULT_PACK_IDLE_FRACTION);
    this.now = o.now ?? Date.now;
    this.hot = new HotContents(2 * this.targetBytes);
    // Only bytes written since the last flush began count: what a flush puts back (notify(0):
    // claimed elsewhere, a listing cut short) waits for the timeout, never the idle flush.
    this.idle = new IdleFlush(
      this.idleMs,
      this.now,
      () => !this.closed && this.pendingBytes > 0,
      () => void this.flush().catch((e) => this.failed(e)),
    );
  }

  /**
   * The bytes of the small files a bundle is about to write: their flush packs them from
   * memory instead of reading the filesystem-tier copies back. The caller has checked each
   * against its hash (BundleService: decodeBundle did): they are not hashed again.
   * What the packer holds is bounded (2 × target): while it is full, the bundle waits here for
   * the packer to take what it holds into packs (back-pressure on the ingest; issue #16: at
   * 100,000 files, what overflowed was read back file by file, most of a 33 s tail after the
   * agent was idle). The wait ends without room after ROOM_WAIT_MS with nothing taken (an
   * object tier down, contents that will not be packed): then, until the packer takes
   * something again, bundles do not wait, and what does not fit is read back as before.
   */
  async offerAll(
    entries: readonly { readonly sha256: string; readonly content: Uint8Array }[],
  ): Promise<void> {
    if (!this.closed) await this.hot.offerAll(entries, this.roomWaitMs);
  }

  /**
   * A bundle's ingest began; the call returned says it ended. While any is in flight there is
   * no idle flush; once the last one ends, what is pending is flushed after idleDelayMs().
   */
  busy(): () => void {
    return this.idle.busy();
  }

  /** How long the idle flush would wait now: learnt from the stream of bundles (pack-idle.ts). */
  idleDelayMs(): number {
    return this.idle.delayMs();
  }

  /** Where a content's bytes are in the packs, if packed. */
  locate(sha256: string): Promise<PackLocation | undefined> {
    return this.o.index.locate(sha256);
  }

  /** Small files durable on the filesystem tier whose content is in no pack yet. */
  pending(limit = 100_000): Promise<PendingContent[]> {
    return this.o.index.pending(limit);
  }

  /** What this flush packs: the paths queued since the last one, or every pending file. */
  private async takePending(): Promise<PendingContent[]> {
    const queued = this.queued;
    this.queued = new Map();
    const now = this.now();
    if (queued === undefined || now - this.lastFullListMs >= FULL_LIST_MS) {
      this.lastFullListMs = now;
      const all = await this.pending(FULL_LIST_LIMIT);
      // More than one listing holds: the next flush lists again from where the packs are.
      if (all.length >= FULL_LIST_LIMIT) this.queued = undefined;
      return all;
    }
    return this.o.index.pendingAt([...queued.values()]);
  }

  /** How many small files `pending` would list (unbounded). */
  pendingCount(): Promise<number> {
    return this.o.index.pendingCount();
  }

  /**
   * A small file became durable on the filesystem tier at `at` (or, without `at`, something the
   * packer must find by listing: a folder moved, a start): flush at the target or after the
   * timeout.
   */
  notify(bytes: number, at?: { readonly userId: string; readonly path: string }): void {
    if (this.closed) return;
    if (at === undefined) this.queued = undefined;
    else this.queued?.set(`${at.userId}\0${at.path}`, { userId: at.userId, path: at.path });
    this.pendingBytes += bytes;
    if (this.pendingBytes >= this.targetBytes) {
      if (!this.targetFlushWaiting) {
        this.targetFlushWaiting = true;
        void this.flush().catch((e) => this.failed(e));
      }
    } else if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        void this.flush().catch((e) => this.failed(e));
      }, this.timeoutMs);
      this.timer.unref();
    }
    this.idle.arm();
  }

  private failed(e: unknown): void {
    this.o.log.warn({ err: e }, 'packer flush failed; retried at the next flush');
  }

  /** Pack everything pending now (several packs if above the target). Returns packs written. */
  async flush(): Promise<number> {
    while (this.flushing) await this.flushing.catch(() => undefined);
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.idle.clear();
    // This flush takes everything pending: the one waiting at the target is served by it.
    this.targetFlushWaiting = false;
    this.pendingBytes = 0;
    this.flushing = this.flushAll();
    try {
      return await this.flushing;
    } catch (e) {
      this.queued = undefined; // what this flush took is found again by the next listing
      throw e;
    } finally {
      this.flushing = undefined;
    }
  }

  private async flushAll(): Promise<number> {
    let packs = 0;
    let builder = new PackBuilder();
    let members: PendingContent[] = [];
    // A full pack is written while the next one fills: at most one write in flight (each holds
    // a pack's bytes); a failed write fails the flush at the next pack or at its end, and what
    // it held stays pending (its files are read back by the next flush).
    let writing: Promise<void> | undefined;
    const write = async (): Promise<void> => {
      if (builder.count === 0) return;
      const [full, of] = [builder, members];
      builder = new PackBuilder();
      members = [];
      await writing;
      writing = this.writePack(full, of).then(() => void packs++);
      writing.catch(() => undefined); // awaited at the next pack or the end
    };
    // The files are read several at a time, ahead of the builder (one after another, the
    // 10,029-file drop's flush waited ~12 s on reads; issue #16). A content read twice
    // (the same bytes at two paths) is added once.
    // What comes from memory was checked against its hash by the bundle's decoder (offer):
    // not hashed again; what is read back from the filesystem tier is.
    // Each content's stored form (deflated or not) is worked out in a worker thread as it is
    // read ahead (pack-worker.ts), off the event loop.
    const read = async (
      file: PendingContent,
    ): Promise<{ bytes: Uint8Array; hot: boolean; stored: StoredForm } | undefined> => {
      const hot = this.hot.get(file.sha256);
      let bytes: Uint8Array;
      try {
        bytes = hot ?? (await this.o.readSmall(file.userId, file.path));
      } catch (e) {
        if (e instanceof NotFoundError) return undefined; // deleted meanwhile
        throw e;
      }
      return { bytes, hot: hot !== undefined, stored: await storedFormOffThread(bytes) };
    };
    // Only the contents this process claimed: another one packing the same content meanwhile
    // (several proxies on one PostgreSQL) keeps it; its paths are looked up again next time.
    const mark = this.hot.mark();
    const taken = await this.takePending();
    const keys = [...new Set(taken.map((f) => `c:${f.sha256}`))];
    const held = await this.o.index.claim(keys, this.owner, this.now(), PACK_CLAIM_TTL_MS);
    const mine: PendingContent[] = [];
    for (const f of taken)
      if (held.has(`c:${f.sha256}`)) mine.push(f);
      else this.notify(0, f);
    try {
      for await (const [file, raw] of readAhead(mine, READ_AHEAD, async (f) => [f, await read(f)] as const)) {
        if (builder.has(file.sha256)) {
          members.push(file);
          continue;
        }
        if (raw === undefined) continue;
        try {
          builder.add(raw.bytes, file.sha256, raw.stored, raw.hot);
        } catch (e) {
          if (e instanceof WireFormatError) continue; // overwritten meanwhile: packed at its next flush
          throw e;
        }
        members.push(file);
        this.hot.take(file.sha256);
        if (builder.size >= this.targetBytes) await write();
      }
      await write();
      await writing;
    } finally {
      await writing?.catch(() => undefined);
      this.hot.sweep(mark);
      await this.o.index.release([...held], this.owner).catch((e) => this.failed(e));
    }
    if (this.queued === undefined) this.notify(0); // a listing cut short: the rest at the next flush
    return packs;
  }

  private async writePack(builder: PackBuilder, members: PendingContent[]): Promise<string> {
    const packId = newPackId(this.now());
    const { chunks, entries, size } = builder.finish();
    await this.o.objects.write(packKey(packId), () => toIterable(chunks), { size });
    await this.o.index.addPack(packId, size, entries, false, this.now());
    this.o.onFlush?.(packId, entries.length, size);
    const policy = this.o.fsCopyPolicy ?? keepFsCopy;
    if (this.o.dropSmall) {
      const drop: PendingContent[] = [];
      for (const m of members) if ((await policy({ ...m, packId })) === 'drop') drop.push(m);
      // Reads of these contents go to the pack from now on (pack-stub.ts, step 3), before
      // any copy is replaced by its stub.
      await this.o.index.markDropped(
        drop.map((m) => m.sha256),
        this.now(),
      );
      if (drop.length > 0) await this.o.dropSmall(drop).catch((e) => this.failed(e));
    }
    return packId;
  }

  /** The footer of a pack, read with two ranged reads (trailer, then footer). */
  readFooter(packId: string, size?: number): Promise<PackEntry[]> {
    return readPackFooter(this.o.objects, packId, size);
  }

  /**
   * Rebuild the pack tables from every pack's footer (they are a redundant copy). Packs are
   * taken oldest first so that, for a content in two packs, the newest (a repack's) wins.
   * Returns the number of packs indexed.
   */
  async rebuildFromFooters(): Promise<number> {
    await this.o.index.clear();
    return this.recoverUnindexed(true);
  }

  /** Index the packs present in the object tier but not in the tables (a crash after the PUT). */
  recoverUnindexed(move = false): Promise<number> {
    return indexUnindexedPacks(this.o.objects, this.o.index, this.o.log, this.now, move);
  }

  /** One packed content, streamed from one ranged read of its pack. */
  read(loc: PackLocation): Promise<Uint8Array> {
    return readPackEntry(this.o.objects, loc);
  }

  /**
   * A small file's bytes (or the inclusive range of them) from its pack, when its
   * filesystem-tier copy may have been dropped; undefined when it must be read from the
   * filesystem tier. One ranged read of the entry, checked against its hash.
   */
  async readDropped(sha256: string, range?: { start: number; end: number }): Promise<Uint8Array | undefined> {
    const [loc] = await this.o.index.droppedLocations([sha256]);
    if (!loc) return undefined;
    const bytes = await this.read(loc);
    return range ? bytes.subarray(range.start, range.end + 1) : bytes;
  }

  /**
   * The contents among `sha256s` whose filesystem-tier copy may have been dropped, read from
   * their packs with readMany (adjacent ranges of one pack in one request).
   */
  async readDroppedMany(sha256s: readonly string[]): Promise<Map<string, Uint8Array>> {
    const locs = await this.o.index.droppedLocations(sha256s);
    return locs.length > 0 ? this.readMany(locs) : new Map();
  }

  /**
   * Many packed contents: ranges of one pack closer than `maxGap` are fetched in one read.
   * Returns hash → bytes for every location given.
   */
  readMany(locs: readonly PackLocation[], maxGap?: number): Promise<Map<string, Uint8Array>> {
    return readPackRanges(this.o.objects, locs, maxGap);
  }

  /** Live and dead bytes of every pack (or one). */
  async stats(packId?: string): Promise<PackStats[]> {
    const out: PackStats[] = [];
    for (const r of await this.o.index.stats(packId))
      out.push({
        ...r,
        liveRanges: r.liveEntries === 0 ? 0 : coalescePackRanges(await this.liveLocations(r.packId)).length,
        deadBytes: Math.max(0, r.size - r.liveBytes - r.entries * 49 - PACK_TRAILER_SIZE),
      });
    return out;
  }

  /** The entries of a pack some namespace still references, in offset order. */
  liveLocations(packId: string): Promise<PackLocation[]> {
    return this.o.index.liveLocations(packId);
  }

  /**
   * Mark the pack entries no small file references any more as dead since `nowMs` (and the
   * ones referenced again as live), and keep each pack's Σ s_j and Σ s_j·t_j (migration 006).
   * A death is dated when first seen, so C_store is never over-estimated: the collector may
   * repack late by the marking delay (in a large store, until changes make a marking worth
   * it: pack-gc.ts MARK_ENTRIES_PER_CHANGE), never early.
   */
  markDead(nowMs = this.now()): Promise<{ died: number; revived: number; entries: number }> {
    return this.o.index.markDead(nowMs);
  }

  /**
   * The cost model's inputs for every pack holding dead entries (after markDead): live bytes
   * and the ranged reads a repack needs, Σ s_j and Σ s_j·t_j of the dead ones.
   */
  async gcCandidates(): Promise<PackGcCandidate[]> {
    const out: PackGcCandidate[] = [];
    for (const r of await this.o.index.deadPacks()) {
      const [st] = await this.stats(r.packId);
      if (st) out.push({ ...r, liveBytes: st.liveBytes, liveRanges: st.liveRanges, size: st.size });
    }
    return out;
  }

  /** Note that the cost model was asked about a pack at `nowMs`. */
  gcChecked(packId: string, nowMs = this.now()): Promise<void> {
    return this.o.index.gcChecked(packId, nowMs);
  }

  /**
   * Repack one pack if `shouldRepack(stats)` says so: its live entries are copied (ranged reads)
   * into a new pack, the index moves to it in one transaction, then the old pack is deleted.
   * Returns the new pack's id ('' when nothing was live), or undefined when not repacked.
   */
  async repack(packId: string, shouldRepack: (stats: PackStats) => boolean): Promise<string | undefined> {
    const [st] = await this.stats(packId);
    if (!st || !shouldRepack(st)) return undefined;
    return (await this.rewrite(st))?.into;
  }

  /** Repack one pack now (the collector, once the cost model said so); undefined if gone. */
  async repackNow(packId: string): Promise<RepackOutcome | undefined> {
    const [st] = await this.stats(packId);
    return st ? this.rewrite(st) : undefined;
  }

  /** Repack one pack this process claimed (another process repacking it: undefined). */
  private async rewrite(st: PackStats): Promise<RepackOutcome | undefined> {
    const key = `p:${st.packId}`;
    if (!(await this.o.index.claim([key], this.owner, this.now(), PACK_CLAIM_TTL_MS)).has(key))
      return undefined;
    try {
      // Gone meanwhile (another process repacked it and released its claim): nothing to do.
      const [now] = await this.o.index.stats(st.packId);
      return now ? await this.rewriteClaimed(st) : undefined;
    } finally {
      await this.o.index.release([key], this.owner).catch((e) => this.failed(e));
    }
  }

  private async rewriteClaimed(st: PackStats): Promise<RepackOutcome> {
    while (this.flushing) await this.flushing.catch(() => undefined);
    const live = await this.liveLocations(st.packId);
    const outcome = await copyLiveEntries(this.o.objects, this.o.index, st, live, this.now);
    this.o.log.info({ pack: st.packId, into: outcome.into, stats: st, outcome }, 'pack repacked');
    return outcome;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.hot.clear();
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.idle.clear();
    while (this.flushing) await this.flushing.catch(() => undefined);
  }
}

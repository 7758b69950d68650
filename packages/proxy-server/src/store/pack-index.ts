/**
 * The packer's tables (docs/formats/pack.md): the global index (content hash → pack, offset,
 * length), one row per pack with its dead-byte sums for GC, the contents whose
 * filesystem-tier copy was dropped (`fs_dropped`), and the small files waiting for a pack
 * (derived from the namespace index). One async interface, two implementations on the
 * metadata store's database: SQLite (pack-index-sqlite.ts; migrations 004 and 006) and
 * PostgreSQL (pack-index-postgres.ts; pg-migrations/002), which several proxy processes share.
 *
 * What one process guaranteed by running alone holds across processes through `claim`: a
 * flush packs only the contents it claimed (no two processes pack the same content), and a
 * repack rewrites only a pack it claimed (no two processes move the same entries). A claim
 * names its owner and expires, so the claims of a process that died are taken over later.
 */
import type { PackEntry } from '@weft/wire';
import type { PendingReconcile } from './pack-pending-reconcile.ts';
import type { PackLocation, PendingContent } from './pack-types.ts';

/** A pack's row and its live bytes (PackStats without the figures the packer derives). */
export interface PackRowStats {
  readonly packId: string;
  readonly size: number;
  readonly entries: number;
  readonly createdMs: number;
  readonly liveBytes: number;
  readonly liveEntries: number;
}

/** A pack holding dead entries: Σ s_j and Σ s_j·t_j of them (migration 006). */
export interface DeadPackRow {
  readonly packId: string;
  readonly deadBytes: number;
  readonly deadByteSinceMs: number;
}

export interface PackIndex {
  /** Where a content's bytes are in the packs, if packed. */
  locate(sha256: string): Promise<PackLocation | undefined>;
  /** Small files durable on the filesystem tier whose content is in no pack yet. */
  pending(limit: number): Promise<PendingContent[]>;
  /** The ones of `paths` that are small files whose content is in no pack yet. */
  pendingAt(paths: readonly { readonly userId: string; readonly path: string }[]): Promise<PendingContent[]>;
  /** How many small files `pending` would list (unbounded). */
  pendingCount(): Promise<number>;
  /**
   * Recount the pending files and correct the kept count by any drift (PostgreSQL only, where
   * concurrent commits can leave it off: pack-pending-reconcile.ts). Absent: it cannot drift.
   */
  reconcilePending?(): Promise<PendingReconcile>;
  /**
   * Claim `keys` for `owner` until `nowMs + ttlMs`: a key is taken when nobody holds it, when
   * `owner` already does, or when its holder's claim expired. Returns the keys now held.
   */
  claim(keys: readonly string[], owner: string, nowMs: number, ttlMs: number): Promise<Set<string>>;
  /** Give back `owner`'s claims on `keys`. */
  release(keys: readonly string[], owner: string): Promise<void>;
  /**
   * Record a durable pack and its entries, in one transaction. An entry already indexed
   * elsewhere keeps its place, unless `move` (a repack, a rebuild): then it moves here, live.
   */
  addPack(
    packId: string,
    size: number,
    entries: readonly PackEntry[],
    move: boolean,
    nowMs: number,
  ): Promise<void>;
  /** Every pack id in the index. */
  packIds(): Promise<Set<string>>;
  /** Empty the pack tables (the index is rebuilt from the footers next). */
  clear(): Promise<void>;
  /** Reads of these contents go to their packs from now on (a dropped copy, a stub found). */
  markDropped(sha256s: readonly string[], nowMs: number): Promise<void>;
  /** The locations of the contents among `sha256s` whose filesystem-tier copy was dropped. */
  droppedLocations(sha256s: readonly string[]): Promise<PackLocation[]>;
  /** Every pack (or one) with its live bytes, in pack id order (byte order). */
  stats(packId?: string): Promise<PackRowStats[]>;
  /** The entries of a pack some namespace still references, in offset order. */
  liveLocations(packId: string): Promise<PackLocation[]>;
  /**
   * Date the entries no small file references any more (dead since `nowMs`), revive the ones
   * referenced again, and recompute the packs' dead-byte sums; one transaction. `entries`:
   * how many pack entries the pass looked at (what it cost: every one of them).
   */
  markDead(nowMs: number): Promise<{ died: number; revived: number; entries: number }>;
  /** The packs holding dead bytes, in pack id order. */
  deadPacks(): Promise<DeadPackRow[]>;
  /** The cost model was asked about this pack at `nowMs`. */
  gcChecked(packId: string, nowMs: number): Promise<void>;
  /**
   * Forget a pack whose live entries moved elsewhere: its remaining entries (and their
   * contents' fs_dropped rows) and its row, in one transaction.
   */
  removePack(packId: string): Promise<void>;
  /**
   * Packed small files' copies were replaced by their stubs: each entry takes its stub's tier
   * revision, if it is still the revision that was packed (pack-stub.ts step 5); one
   * transaction for them all.
   */
  replaceFsRevisions(rows: readonly FsRevisionChange[]): Promise<void>;
}

/** Claims kept in memory: the store of one process (SQLite), same rules as the shared one. */
export class LocalClaims {
  private readonly held = new Map<string, { owner: string; expiresMs: number }>();

  claim(keys: readonly string[], owner: string, nowMs: number, ttlMs: number): Set<string> {
    const out = new Set<string>();
    for (const k of keys) {
      const h = this.held.get(k);
      if (h && h.owner !== owner && h.expiresMs > nowMs) continue;
      this.held.set(k, { owner, expiresMs: nowMs + ttlMs });
      out.add(k);
    }
    return out;
  }

  release(keys: readonly string[], owner: string): void {
    for (const k of keys) if (this.held.get(k)?.owner === owner) this.held.delete(k);
  }
}

/** An entry's filesystem-tier revision `from` → `to` (a dropped copy's stub). */
export interface FsRevisionChange {
  readonly userId: string;
  readonly path: string;
  readonly from: string;
  readonly to: string;
}

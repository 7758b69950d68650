/**
 * The packer's vocabulary (packs.ts): where a content's bytes are in the packs, a pack's live
 * and dead bytes, what GC decides on, a small file waiting to be packed, and the policy for
 * its filesystem-tier copy once packed.
 */
export interface PackLocation {
  readonly sha256: string;
  readonly packId: string;
  readonly offset: number;
  readonly length: number;
  readonly rawLength: number;
  readonly compression: 0 | 1;
}

/** Live and dead bytes of one pack: what GC policies decide on (Coral §3.5). */
export interface PackStats {
  readonly packId: string;
  /** Whole pack object, footer and trailer included. */
  readonly size: number;
  readonly entries: number;
  /** Stored bytes of entries some namespace still references. */
  readonly liveBytes: number;
  readonly liveEntries: number;
  /** Ranged reads a repack needs for the live entries (coalescePackRanges, default gap). */
  readonly liveRanges: number;
  /** Stored bytes of entries nothing references (or that moved to another pack). */
  readonly deadBytes: number;
  readonly createdMs: number;
}

/** What the cost model needs to decide on one pack (cost/policy.ts PackGcInput, and its size). */
export interface PackGcCandidate {
  readonly packId: string;
  readonly size: number;
  readonly liveBytes: number;
  readonly liveRanges: number;
  readonly deadBytes: number;
  readonly deadByteSinceMs: number;
}

/** What a repack did: the old pack's size, the new one's ('' and 0 when nothing was live). */
export interface RepackOutcome {
  readonly packId: string;
  readonly into: string;
  readonly oldSize: number;
  readonly newSize: number;
  readonly liveBytes: number;
}

/** A small file waiting for the packer. */
export interface PendingContent {
  readonly userId: string;
  readonly path: string;
  readonly sha256: string;
  readonly size: number;
  /** The namespace file's revision and mtime when it was queued (for dropping its copy). */
  readonly fsRevision?: string;
  readonly mtimeMs?: number;
}

/** After a flush: keep the filesystem-tier copy of a packed small file, or drop it. */
export type FsCopyPolicy = (
  file: PendingContent & { packId: string },
) => 'keep' | 'drop' | Promise<'keep' | 'drop'>;

/**
 * Default: keep (config `packs.fsCopy`). A dropped copy leaves a stub in the namespace tree
 * (pack-stub.ts), the filesystem tier staying the truth for the tree.
 */
export const keepFsCopy: FsCopyPolicy = () => 'keep';

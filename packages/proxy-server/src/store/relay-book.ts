/**
 * The relay cache's bookkeeping (relay-cache.ts): which objects have a staged copy in the
 * relay directory, under which file name, how recently each was used, and who is reading it
 * (pins). One interface, two implementations: this process-local one (the embedded default:
 * one process owns the directory, which it empties at start, so the books live in memory) and
 * PostgreSQL (relay-book-postgres.ts), which every proxy instance sharing the filesystem tier
 * shares, so an object staged by one is served by all, the bound holds for the directory as a
 * whole and no instance deletes a copy another is reading.
 *
 * Each staged copy has a file name of its own (`<sha256>.<random>`): a copy evicted while a
 * new one of the same object is being staged never takes the new one with it.
 */

export interface RelayEntry {
  readonly sha256: string;
  /** The file's name in the relay directory. */
  readonly file: string;
  readonly size: number;
}

export interface RelayTotals {
  readonly bytes: number;
  readonly files: number;
}

export interface RelayBook {
  /** Shared by several processes (the directory is not emptied at start). */
  readonly shared: boolean;
  /** The entry when a copy is recorded, pinned for `holder` and marked most recently used. */
  pin(sha256: string, holder: string, nowMs: number): Promise<RelayEntry | undefined>;
  /**
   * Record a staged copy, pinned for `holder`. When another copy of the object was recorded
   * meanwhile (another instance staged it too), that one is pinned and returned instead.
   */
  add(entry: RelayEntry, holder: string, nowMs: number): Promise<RelayEntry>;
  unpin(sha256: string, holder: string): Promise<void>;
  /** Forget an entry whose file is gone (nothing when it names another file by now). */
  drop(entry: RelayEntry): Promise<void>;
  /**
   * Claim least recently used entries that nobody reads until the recorded bytes are within
   * `maxBytes`; their files are the caller's to delete. Pins not renewed since `staleBeforeMs`
   * (their holder died) do not count.
   */
  evict(maxBytes: number, staleBeforeMs: number): Promise<RelayEntry[]>;
  /** Claim the object's entry when nobody reads it (after GC deleted the object). */
  forget(sha256: string, staleBeforeMs: number): Promise<RelayEntry | undefined>;
  /** Whether a copy is recorded (any instance's). */
  has(sha256: string): Promise<boolean>;
  /** File names of every recorded copy (the start-up sweep keeps these). */
  files(): Promise<Set<string>>;
  totals(): Promise<RelayTotals>;
  /** Mark `holder`'s pins alive (it renews them while it holds any). */
  renew(holder: string, nowMs: number): Promise<void>;
  close(): Promise<void>;
}

interface Slot extends RelayEntry {
  lastUsed: number;
  pins: number;
}

/** The books of a relay directory one process owns (emptied at start): in memory. */
export class LocalRelayBook implements RelayBook {
  readonly shared = false;
  private readonly slots = new Map<string, Slot>();
  private tick = 0;

  // The methods change the books before they first yield, so calls apply in call order.

  async pin(sha256: string): Promise<RelayEntry | undefined> {
    const s = this.slots.get(sha256);
    if (!s) return undefined;
    s.pins += 1;
    s.lastUsed = ++this.tick;
    return entryOf(s);
  }

  async add(entry: RelayEntry): Promise<RelayEntry> {
    const had = this.slots.get(entry.sha256);
    if (had) {
      had.pins += 1;
      had.lastUsed = ++this.tick;
      return entryOf(had);
    }
    this.slots.set(entry.sha256, { ...entryOf(entry), lastUsed: ++this.tick, pins: 1 });
    return entryOf(entry);
  }

  async unpin(sha256: string): Promise<void> {
    const s = this.slots.get(sha256);
    if (s && s.pins > 0) s.pins -= 1;
  }

  async drop(entry: RelayEntry): Promise<void> {
    if (this.slots.get(entry.sha256)?.file === entry.file) this.slots.delete(entry.sha256);
  }

  async evict(maxBytes: number): Promise<RelayEntry[]> {
    let total = this.bytes();
    if (total <= maxBytes) return [];
    const out: RelayEntry[] = [];
    const victims = [...this.slots.values()]
      .filter((s) => s.pins === 0)
      .sort((a, b) => a.lastUsed - b.lastUsed);
    for (const s of victims) {
      if (total <= maxBytes) break;
      this.slots.delete(s.sha256);
      total -= s.size;
      out.push(entryOf(s));
    }
    return out;
  }

  async forget(sha256: string): Promise<RelayEntry | undefined> {
    const s = this.slots.get(sha256);
    if (!s || s.pins > 0) return undefined;
    this.slots.delete(sha256);
    return entryOf(s);
  }

  async has(sha256: string): Promise<boolean> {
    return this.slots.has(sha256);
  }

  async files(): Promise<Set<string>> {
    return new Set([...this.slots.values()].map((s) => s.file));
  }

  async totals(): Promise<RelayTotals> {
    return { bytes: this.bytes(), files: this.slots.size };
  }

  async renew(): Promise<void> {}

  async close(): Promise<void> {}

  private bytes(): number {
    let n = 0;
    for (const s of this.slots.values()) n += s.size;
    return n;
  }
}

function entryOf(e: RelayEntry): RelayEntry {
  return { sha256: e.sha256, file: e.file, size: e.size };
}

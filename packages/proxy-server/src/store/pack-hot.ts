/**
 * The bytes of small files just received, kept in memory for the packer (issue #16): a bundle's
 * files are written to the filesystem tier and, seconds later, packed; without this the packer
 * opened and read every one of them back (10,029 opens and reads for the 10,029-file drop,
 * ~1.6 s of the proxy's event loop at load). Keyed by content hash: an entry is only ever used
 * for a content the pack index lists as pending under that hash, and only bytes already checked
 * against their hash are offered (the bundle's decoder checks every entry), so PackBuilder.add
 * takes them without hashing them again and a wrong or stale entry cannot end up in a pack.
 * Bounded in bytes; a bundle waits for room before its bytes are offered (Packer.room: back-
 * pressure on the ingest while the packer catches up, bounded in time); what still does not
 * fit (or was evicted) is read from the filesystem tier (and hashed) as before.
 */
export class HotContents {
  private readonly bytesBy = new Map<string, { bytes: Uint8Array; gen: number }>();
  private held = 0;
  private gen = 0;
  /** offerAll gave up waiting with this much held: no wait begins until less is held. */
  private stalledAt = Number.POSITIVE_INFINITY;
  /** Bundles waiting for room (whenFits): how many bytes each waits to fit. */
  private readonly waiters = new Set<{ bytes: number; resolve: () => void }>();

  constructor(readonly limitBytes: number) {}

  /** Bytes held now (for tests and metrics). */
  get size(): number {
    return this.held;
  }

  /** Whether `bytes` more would fit (a bundle larger than the whole limit fits an empty one). */
  fits(bytes: number): boolean {
    return this.held === 0 || this.held + bytes <= this.limitBytes;
  }

  /**
   * Resolves once `bytes` more fit (bytes taken, swept or cleared); cancel() gives up waiting.
   */
  whenFits(bytes: number): { fits: Promise<void>; cancel: () => void } {
    let w: { bytes: number; resolve: () => void } | undefined;
    const fits = new Promise<void>((resolve) => {
      w = { bytes, resolve };
      if (this.fits(bytes)) resolve();
      else this.waiters.add(w);
    });
    return { fits, cancel: () => void (w && this.waiters.delete(w)) };
  }

  private wake(): void {
    for (const w of this.waiters)
      if (this.fits(w.bytes)) {
        this.waiters.delete(w);
        w.resolve();
      }
  }

  /**
   * Keep the bytes of a bundle's entries once they fit (Packer.offerAll: a bundle waits for the
   * packer to take what is held into packs). A wait that sees nothing taken for `waitMs` ends
   * without room (what does not fit is not kept), and then no wait begins until less is held
   * than when it ended (an object tier down holds no bundle more than once). The entries are
   * kept in the same turn as the last check: two bundles let in by one pack are not both let in.
   */
  async offerAll(
    entries: readonly { readonly sha256: string; readonly content: Uint8Array }[],
    waitMs: number,
  ): Promise<void> {
    let bytes = 0;
    for (const e of entries) bytes += e.content.byteLength;
    while (!this.fits(bytes) && this.held < this.stalledAt) {
      const held = this.held;
      const wait = this.whenFits(bytes);
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        wait.fits.then(() => false),
        new Promise<boolean>((r) => (timer = setTimeout(() => r(true), waitMs))),
      ]);
      clearTimeout(timer);
      wait.cancel();
      if (timedOut && this.held >= held) this.stalledAt = held;
    }
    if (this.held < this.stalledAt) this.stalledAt = Number.POSITIVE_INFINITY;
    for (const e of entries) this.offer(e.sha256, e.content);
  }

  /** Keep `bytes` (content `sha256`) if they fit under the limit. */
  offer(sha256: string, bytes: Uint8Array): void {
    if (this.bytesBy.has(sha256) || this.held + bytes.byteLength > this.limitBytes) return;
    this.bytesBy.set(sha256, { bytes, gen: this.gen });
    this.held += bytes.byteLength;
  }

  /** The bytes of `sha256` if held (they stay until taken or swept). */
  get(sha256: string): Uint8Array | undefined {
    return this.bytesBy.get(sha256)?.bytes;
  }

  /** Forget `sha256` (packed). */
  take(sha256: string): void {
    const e = this.bytesBy.get(sha256);
    if (!e) return;
    this.bytesBy.delete(sha256);
    this.held -= e.bytes.byteLength;
    if (this.waiters.size > 0) this.wake();
  }

  /** A flush begins: returns its mark for sweep(). */
  mark(): number {
    return ++this.gen;
  }

  /**
   * A flush ended: what was offered before the flush ahead of it began and is still held was
   * not pending at either (a failed write, a path deleted or overwritten since) and goes.
   * (One flush of slack: a bundle offered while a flush was listing is packed by the next.)
   */
  sweep(mark: number): void {
    for (const [sha, e] of this.bytesBy) if (e.gen < mark - 1) this.take(sha);
  }

  clear(): void {
    this.bytesBy.clear();
    this.held = 0;
    this.wake();
  }
}

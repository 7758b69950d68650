/**
 * The packer's idle flush (issue #16, docs/formats/pack.md): what is pending is packed once no
 * bundle has been in flight for a while, instead of waiting out the flush timeout (still the
 * maximum age) — an addition to the Packing paper's rule (target size or timeout), so that a
 * drop's last, part-filled pack reaches the object tier soon after its last bundle.
 *
 * How long "a while" is, is learnt from the stream of bundles since the last idle flush: twice
 * the longest gap seen between them (no bundle in flight, then the next one), at least
 * idleMs / 10 and at most idleMs; idleMs when the stream is a single bundle (nothing learnt).
 * An agent keeps two bundles on its way while it fills the next (upload-bundle.ts), so its
 * stream mostly has no gap at all, and its drop's last pack used to leave a full idleMs (1 s)
 * after its last bundle for nothing (the 10,029-file drop: agent idle 6.6 s, durable in S3
 * 7.6 s). A client whose bundles come with gaps teaches the packer to wait longer: a gap
 * longer than the wait costs one more (smaller) pack, and is learnt.
 */

/** The shortest idle wait after a stream of bundles, as a fraction of idleMs. */
export const PACK_IDLE_MIN_FRACTION = 1 / 10;

export class IdleFlush {
  /** Bundles being ingested; the idle flush waits for none. */
  private inFlight = 0;
  /** The current stream (since the last idle flush): bundles begun, longest gap (ms). */
  private bundles = 0;
  private gapMs = 0;
  /** When the last bundle in flight ended (undefined: one is in flight, or none since the idle flush). */
  private quietSince: number | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    /** The longest wait (0: no idle flush). */
    private readonly idleMs: number,
    private readonly now: () => number,
    /** Whether there is something to flush (new bytes since the last flush began, not closed). */
    private readonly waiting: () => boolean,
    private readonly flush: () => void,
  ) {}

  /**
   * A bundle's ingest began; the call returned says it ended. While any is in flight there is
   * no idle flush; delayMs() after the last one ends, what is pending is flushed.
   */
  busy(): () => void {
    if (this.inFlight === 0 && this.quietSince !== undefined) {
      const gap = this.now() - this.quietSince;
      // Quiet for the longest wait or more (with nothing to flush): a new stream, not a gap.
      if (gap >= this.idleMs) this.forget();
      else this.gapMs = Math.max(this.gapMs, gap);
    }
    this.quietSince = undefined;
    this.bundles++;
    this.inFlight++;
    this.clear();
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.inFlight--;
      if (this.inFlight === 0) this.quietSince = this.now();
      this.arm();
    };
  }

  /** How long the idle flush waits now (see the module's comment). */
  delayMs(): number {
    if (this.bundles < 2) return this.idleMs;
    const least = Math.round(this.idleMs * PACK_IDLE_MIN_FRACTION);
    return Math.min(this.idleMs, Math.max(least, 2 * this.gapMs));
  }

  /** Start the timer when something waits and nothing is in flight. */
  arm(): void {
    if (this.idleMs <= 0 || this.inFlight > 0 || !this.waiting()) return;
    this.clear();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.inFlight > 0 || !this.waiting()) return;
      this.forget(); // the stream is over: the next one is learnt afresh
      this.flush();
    }, this.delayMs());
    this.timer.unref();
  }

  private forget(): void {
    this.bundles = 0;
    this.gapMs = 0;
    this.quietSince = undefined;
  }

  clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

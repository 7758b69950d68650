/**
 * Per-user storage quotas. A user's usage is the logical bytes their namespace holds: the
 * size of every file once per path (the store keeps one version per path; conflicted copies
 * are files of their own), whatever the object tier's deduplication. Writes in progress hold
 * a reservation for the bytes they add, so concurrent writes of one user cannot together
 * pass the limit; a write checks before it stores anything and refuses with QUOTA_EXCEEDED.
 *
 * The usage comes from the metadata store (async). A reservation reads it, then checks and
 * takes its bytes with no await in between; a usage read that overlapped a release (a write
 * recorded, its reservation given back) is read again, so no write's bytes are missed.
 */
import { ApiError } from '../errors.ts';
import type { MetadataStore } from './metadata.ts';

export interface Usage {
  readonly usedBytes: number;
  /** null: unlimited. */
  readonly limitBytes: number | null;
}

/** Bytes held for a write in progress; give them back once it is recorded or failed. */
export interface Reservation {
  readonly bytes: number;
  /** Hand `n` of the reserved bytes back early (a part of the batch reserves on its own). */
  shrink(n: number): void;
  release(): void;
}

const NONE: Reservation = { bytes: 0, shrink: () => undefined, release: () => undefined };

export class QuotaLedger {
  private readonly reserved = new Map<string, number>();
  /** Bumped whenever reserved bytes are given back (a write recorded or failed). */
  private releases = 0;

  constructor(
    private readonly meta: MetadataStore,
    /** The user's limit in bytes, undefined for none. */
    private readonly limitOf: (userId: string) => number | undefined,
  ) {}

  limit(userId: string): number | undefined {
    return this.limitOf(userId);
  }

  async usage(userId: string): Promise<Usage> {
    const limit = this.limitOf(userId);
    return { usedBytes: await this.meta.usedBytes(userId), limitBytes: limit ?? null };
  }

  /** The namespace's usage, read again while a release overlapped the read. */
  private async settledUsage(userId: string): Promise<number> {
    for (;;) {
      const before = this.releases;
      const used = await this.meta.usedBytes(userId);
      if (this.releases === before) return used;
    }
  }

  /**
   * Bytes the user may still add before any write in progress lands (Infinity without a
   * quota). Reads the namespace's usage, so callers ask once per request, not per entry.
   */
  async remaining(userId: string): Promise<number> {
    const limit = this.limitOf(userId);
    if (limit === undefined) return Infinity;
    const used = await this.settledUsage(userId);
    return limit - used - (this.reserved.get(userId) ?? 0);
  }

  /** The QUOTA_EXCEEDED error for a write that needs `neededBytes` more. */
  async exceeded(userId: string, neededBytes: number): Promise<ApiError> {
    const { usedBytes, limitBytes } = await this.usage(userId);
    const inFlight = this.reserved.get(userId) ?? 0;
    return new ApiError(
      'QUOTA_EXCEEDED',
      `Weft storage is full: ${usedBytes} of ${limitBytes ?? 0} bytes used` +
        `${inFlight > 0 ? ` (${inFlight} more being written)` : ''}, this write needs ${neededBytes} more`,
      { usedBytes, limitBytes, neededBytes },
    );
  }

  /** Throw QUOTA_EXCEEDED unless `growth` more bytes fit now (an early check; nothing reserved). */
  async check(userId: string, growth: number): Promise<void> {
    if (growth > 0 && growth > (await this.remaining(userId))) throw await this.exceeded(userId, growth);
  }

  /**
   * Reserve `growth` bytes for a write (growth ≤ 0 — a write that frees space or keeps the
   * size — always passes, so a full user can still edit and delete). Throws QUOTA_EXCEEDED,
   * having reserved nothing, when the write would pass the limit.
   */
  async reserve(userId: string, growth: number): Promise<Reservation> {
    if (growth <= 0 || this.limitOf(userId) === undefined) return NONE;
    // remaining() ends with no await after its read: the check and the add below are one step.
    if (growth > (await this.remaining(userId))) throw await this.exceeded(userId, growth);
    this.add(userId, growth);
    let left = growth;
    return {
      bytes: growth,
      shrink: (n: number) => {
        const k = Math.min(n, left);
        left -= k;
        this.add(userId, -k);
      },
      release: () => {
        this.add(userId, -left);
        left = 0;
      },
    };
  }

  private add(userId: string, n: number): void {
    if (n < 0) this.releases += 1;
    const v = (this.reserved.get(userId) ?? 0) + n;
    if (v <= 0) this.reserved.delete(userId);
    else this.reserved.set(userId, v);
  }
}

/**
 * Per-user storage quotas. A user's usage is the logical bytes their namespace holds: the
 * size of every file once per path (the store keeps one version per path; conflicted copies
 * are files of their own), whatever the object tier's deduplication. Writes in progress hold
 * a reservation for the bytes they add, so concurrent writes of one user cannot together
 * pass the limit; a write checks before it stores anything and refuses with QUOTA_EXCEEDED.
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

  constructor(
    private readonly meta: MetadataStore,
    /** The user's limit in bytes, undefined for none. */
    private readonly limitOf: (userId: string) => number | undefined,
  ) {}

  limit(userId: string): number | undefined {
    return this.limitOf(userId);
  }

  usage(userId: string): Usage {
    const limit = this.limitOf(userId);
    return { usedBytes: this.meta.usedBytes(userId), limitBytes: limit ?? null };
  }

  /**
   * Bytes the user may still add before any write in progress lands (Infinity without a
   * quota). Reads the namespace's usage, so callers ask once per request, not per entry.
   */
  remaining(userId: string): number {
    const limit = this.limitOf(userId);
    if (limit === undefined) return Infinity;
    return limit - this.meta.usedBytes(userId) - (this.reserved.get(userId) ?? 0);
  }

  /** The QUOTA_EXCEEDED error for a write that needs `neededBytes` more. */
  exceeded(userId: string, neededBytes: number): ApiError {
    const { usedBytes, limitBytes } = this.usage(userId);
    const inFlight = this.reserved.get(userId) ?? 0;
    return new ApiError(
      'QUOTA_EXCEEDED',
      `Weft storage is full: ${usedBytes} of ${limitBytes ?? 0} bytes used` +
        `${inFlight > 0 ? ` (${inFlight} more being written)` : ''}, this write needs ${neededBytes} more`,
      { usedBytes, limitBytes, neededBytes },
    );
  }

  /** Throw QUOTA_EXCEEDED unless `growth` more bytes fit now (an early check; nothing reserved). */
  check(userId: string, growth: number): void {
    if (growth > 0 && growth > this.remaining(userId)) throw this.exceeded(userId, growth);
  }

  /**
   * Reserve `growth` bytes for a write (growth ≤ 0 — a write that frees space or keeps the
   * size — always passes, so a full user can still edit and delete). Throws QUOTA_EXCEEDED,
   * having reserved nothing, when the write would pass the limit.
   */
  reserve(userId: string, growth: number): Reservation {
    if (growth <= 0 || this.limitOf(userId) === undefined) return NONE;
    if (growth > this.remaining(userId)) throw this.exceeded(userId, growth);
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
    const v = (this.reserved.get(userId) ?? 0) + n;
    if (v <= 0) this.reserved.delete(userId);
    else this.reserved.set(userId, v);
  }
}

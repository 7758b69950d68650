/**
 * Weft storage usage as the agent shows it, and what the agent does when the storage is full.
 *
 * - Usage (`GET /v1/usage`) is read at start, shortly after activity (an upload, a delete, a
 *   download: each changes what the user stores) and every `refreshMs` (a quota can change
 *   with no activity at all).
 * - An upload refused with QUOTA_EXCEEDED (507) makes the storage *full*. The engine then
 *   keeps uploads queued (nothing is dropped) while downloads and deletes go on, and does not
 *   send them again: usage is read on a slow backoff (Weft's one retry policy,
 *   `@weft/providers/backoff`: a ceiling of `fullCheckMs` doubling up to `fullCheckMaxMs`,
 *   each wait drawn in its upper half) and after activity, and uploads resume by themselves
 *   once it shows room — the quota lifted or raised, or free space grown (a delete here or
 *   on another device).
 */
import { backoffDelay } from '@weft/providers/backoff';
import type { ErrorCode } from '@weft/wire';
import type { Disposable } from './lifecycle.ts';
import { RemoteError } from './remote/proxy-client.ts';
import type { ActivityItem, StatusModel, StorageStatus } from './status.ts';

export interface StorageTimings {
  /** Read usage this often in any case. Default 5 minutes. */
  readonly refreshMs: number;
  /** Read usage this long after activity settles. Default 2 s. */
  readonly activityMs: number;
  /** While full: the first re-check after a refusal; each further one waits twice as long… */
  readonly fullCheckMs: number;
  /** …up to this. Defaults 30 s and 10 minutes. */
  readonly fullCheckMaxMs: number;
}

export const DEFAULT_STORAGE_TIMINGS: StorageTimings = {
  refreshMs: 5 * 60_000,
  activityMs: 2_000,
  fullCheckMs: 30_000,
  fullCheckMaxMs: 10 * 60_000,
};

const QUOTA_EXCEEDED: ErrorCode = 'QUOTA_EXCEEDED';

/** A write refused because the user's Weft storage is full. */
export function isQuotaExceeded(e: unknown): e is RemoteError {
  return e instanceof RemoteError && (e.code === QUOTA_EXCEEDED || e.status === 507);
}

/** Bytes in words, decimal units as the UI shows them ("2.1 GB"). */
export function bytesInWords(n: number): string {
  const units = ['bytes', 'KB', 'MB', 'GB', 'TB', 'PB'];
  let v = n;
  let i = 0;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return i === 0 ? `${n} bytes` : `${v.toFixed(v >= 100 ? 0 : 1).replace(/\.0$/, '')} ${units[i]}`;
}

/** One line for `weft status`: "Weft storage: 2.1 GB of 5 GB used (full: uploads wait)". */
export function usageLine(u: StorageStatus): string {
  const of = u.limitBytes === null ? '' : ` of ${bytesInWords(u.limitBytes)}`;
  return `Weft storage: ${bytesInWords(u.usedBytes)}${of} used${u.full ? ' (full: uploads wait)' : ''}`;
}

export interface StorageWatchOptions {
  /** `GET /v1/usage`; absent: the server side has no usage to show (nothing is read). */
  readonly usage: (() => Promise<{ usedBytes: number; limitBytes: number | null }>) | undefined;
  readonly status: StatusModel;
  /** The storage has room again: send the waiting uploads. */
  readonly onRoom: () => void;
  readonly now?: () => number;
  readonly timings?: Partial<StorageTimings>;
  /** Uniform in [0, 1): the backoff's jitter. Default Math.random (injected by tests). */
  readonly random?: () => number;
}

interface Full {
  readonly sinceMs: number;
  neededBytes: number;
  /** Free bytes when the upload was refused; more than this later means room was made. */
  freeBytes: number;
  checks: number;
  nextCheckMs: number;
}

export class StorageWatch implements Disposable {
  private readonly timings: StorageTimings;
  private readonly now: () => number;
  private full: Full | undefined;
  private usage: { usedBytes: number; limitBytes: number | null; checkedAtMs: number } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private activityTimer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;
  private lastActivity: ActivityItem | undefined;
  private listener: Disposable | undefined;
  private disposed = false;

  constructor(private readonly options: StorageWatchOptions) {
    this.timings = { ...DEFAULT_STORAGE_TIMINGS, ...options.timings };
    this.now = options.now ?? Date.now;
  }

  /** True while the server refuses uploads for lack of space (until usage shows room). */
  get isFull(): boolean {
    return this.full !== undefined;
  }

  /** Read usage now and then on schedule; read it again after activity. */
  start(): void {
    if (!this.options.usage || this.disposed || this.listener) return;
    this.lastActivity = this.options.status.get().recent[0];
    this.listener = this.options.status.onChange((s) => {
      const head = s.recent[0];
      if (head === this.lastActivity) return;
      this.lastActivity = head;
      if (head && head.kind !== 'error') this.soon();
    });
    void this.check();
  }

  /**
   * An upload was refused with QUOTA_EXCEEDED: uploads wait from now on (the engine asks
   * isFull) until a usage check shows room. The error's details give the figures.
   */
  refused(e: RemoteError): void {
    const d = e.details ?? {};
    const num = (v: unknown): number | undefined =>
      typeof v === 'number' && Number.isFinite(v) ? v : undefined;
    const used = num(d.usedBytes) ?? this.usage?.usedBytes ?? 0;
    const limit = d.limitBytes === null ? null : (num(d.limitBytes) ?? this.usage?.limitBytes ?? used);
    const needed = Math.max(1, num(d.neededBytes) ?? 1);
    const free = limit === null ? 0 : Math.max(0, limit - used);
    const now = this.now();
    this.usage = { usedBytes: used, limitBytes: limit, checkedAtMs: now };
    if (this.full) {
      this.full.neededBytes = needed;
      this.full.freeBytes = free;
    } else {
      this.full = { sinceMs: now, neededBytes: needed, freeBytes: free, checks: 0, nextCheckMs: now };
    }
    this.scheduleFullCheck();
    this.publish();
  }

  /** Read usage now (the UI's "check again"); resumes uploads if there is room. */
  check(): Promise<void> {
    if (this.disposed) return Promise.resolve();
    if (!this.options.usage) {
      // No usage to read (a store without quotas that refused anyway): try the uploads again
      // once the backoff is over.
      if (this.full) {
        this.full = undefined;
        this.publish();
        this.options.onRoom();
      }
      return Promise.resolve();
    }
    return (this.reading ??= this.read().finally(() => (this.reading = undefined)));
  }

  /** The state's message in plain words, with the uploads that wait. */
  message(waiting: number): string {
    const u = this.usage;
    const figures =
      u && u.limitBytes !== null
        ? ` (${bytesInWords(u.usedBytes)} of ${bytesInWords(u.limitBytes)} used)`
        : '';
    const queued = waiting === 1 ? '1 change waits' : `${waiting} changes wait`;
    return (
      `Weft storage is full${figures}: ${queued} to upload. Downloads and deletes go on; ` +
      'delete files you no longer need or ask for more space, and Weft uploads again by itself.'
    );
  }

  dispose(): void {
    this.disposed = true;
    this.listener?.dispose();
    if (this.timer) clearTimeout(this.timer);
    if (this.activityTimer) clearTimeout(this.activityTimer);
    this.timer = undefined;
    this.activityTimer = undefined;
  }

  private async read(): Promise<void> {
    let u: { usedBytes: number; limitBytes: number | null };
    try {
      u = await (this.options.usage as NonNullable<StorageWatchOptions['usage']>)();
    } catch {
      // Offline or refused: keep what we knew, try again on schedule.
      this.schedule();
      return;
    }
    if (this.disposed) return;
    this.usage = { ...u, checkedAtMs: this.now() };
    const full = this.full;
    if (full) {
      const free = u.limitBytes === null ? Infinity : u.limitBytes - u.usedBytes;
      if (free >= full.neededBytes || free > full.freeBytes) {
        this.full = undefined;
        this.publish();
        this.schedule();
        this.options.onRoom();
        return;
      }
      full.checks += 1;
    }
    this.schedule();
    this.publish();
  }

  /** Activity changed usage: read it once things settle. */
  private soon(): void {
    if (this.disposed) return;
    if (this.activityTimer) clearTimeout(this.activityTimer);
    this.activityTimer = setTimeout(() => {
      this.activityTimer = undefined;
      void this.check();
    }, this.timings.activityMs);
    this.activityTimer.unref?.();
  }

  private schedule(): void {
    if (this.full) this.scheduleFullCheck();
    else this.arm(this.timings.refreshMs);
  }

  private scheduleFullCheck(): void {
    const full = this.full;
    if (!full) return;
    const policy = {
      baseMs: this.timings.fullCheckMs,
      capMs: this.timings.fullCheckMaxMs,
      jitter: 'equal' as const,
    };
    const wait = backoffDelay(policy, full.checks + 1, { random: this.options.random ?? Math.random });
    full.nextCheckMs = this.now() + wait;
    this.arm(wait);
  }

  private arm(ms: number): void {
    if (this.disposed) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.check();
    }, ms);
    this.timer.unref?.();
  }

  private publish(): void {
    const u = this.usage;
    if (!u || this.disposed) return;
    const storage: StorageStatus = {
      usedBytes: u.usedBytes,
      limitBytes: u.limitBytes,
      checkedAtMs: u.checkedAtMs,
      ...(this.full
        ? {
            full: {
              sinceMs: this.full.sinceMs,
              neededBytes: this.full.neededBytes,
              nextCheckMs: this.full.nextCheckMs,
            },
          }
        : {}),
    };
    this.options.status.update({ storage });
  }
}

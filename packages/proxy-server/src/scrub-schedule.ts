/**
 * The redundant tier's scrub schedule (storage-maintenance.ts, issue #17): when the next
 * scrub is due, the timer that starts it, and the last scrub as a job record.
 *
 * The last scrub is remembered in the placement store (its job records: SQLite's file or,
 * with several instances, PostgreSQL — read from `<tier dir>/last-scrub.json` when an older
 * version left it there), so a restart neither scrubs at once nor puts the next scrub off by
 * a whole interval, and on a shared store the next controller continues the schedule: when
 * its timer fires it reads the record again and scrubs only if no other instance has done so
 * within the interval. On a shared store each instance also looks every minute (the role
 * gained, a replacement to resume). Clock and timers are injectable (tests run the schedule
 * without waiting).
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { Logger } from 'pino';
import type { PlacementStore } from '@weft/providers/redundant';
import type { StorageJob } from '@weft/wire';

export interface Timers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

export const realTimers: Timers = {
  set(fn, ms) {
    const t = setTimeout(fn, ms);
    t.unref();
    return t;
  },
  clear(handle) {
    clearTimeout(handle as NodeJS.Timeout);
  },
};

/** How often an instance on a shared store looks at the job records (role gained, work left). */
const SHARED_LOOK_MS = 60_000;

/** The placement store's job record of the last scrub. */
const LAST_SCRUB = 'last-scrub';

/** What the schedule needs of the maintenance. */
export interface ScheduleHost {
  readonly store: PlacementStore;
  /** The tier's own folder (where an older version kept last-scrub.json). */
  readonly dir: string;
  /** Start a scrub this long after the last one ended; 0: never on a schedule. */
  readonly intervalMs: number;
  readonly now: () => number;
  readonly timers: Timers;
  readonly log: Logger;
  /** Whether the tier's jobs run here now (the controller, or a single instance). */
  mayRun(): boolean;
  /** Whether a job (scrub or replacement) is running. */
  busy(): boolean;
  /** Start the scheduled scrub (throws when it cannot, e.g. the role lost). */
  startScrub(): void;
  /** Resume an unfinished replacement: true when it was started. */
  resume(): Promise<boolean>;
  /** Read the other job records again (the orphan sweep's) before a scheduled scrub on a shared store. */
  reload(): Promise<void>;
}

export class ScrubScheduler {
  private timer: unknown;
  /** When the next scheduled scrub is due (undefined: none scheduled). */
  nextRunMs: number | undefined;
  /** When the first scrub is due if none was ever recorded (one interval after start). */
  private firstRunMs: number | undefined;
  /** The last scrub done. */
  last: StorageJob | undefined;
  private closed = false;

  constructor(private readonly h: ScheduleHost) {}

  /** The last scrub from the placement store's record (else an older version's file). */
  async load(): Promise<void> {
    const raw =
      (await this.h.store.jobRecord(LAST_SCRUB).catch((err: unknown) => {
        this.h.log.warn({ err }, 'redundant tier: could not read the last scrub');
        return undefined;
      })) ??
      (await fsp.readFile(nodePath.join(this.h.dir, 'last-scrub.json'), 'utf8').catch(() => undefined));
    if (raw === undefined) return; // never scrubbed
    try {
      const j = JSON.parse(raw) as StorageJob;
      if (typeof j.finishedMs === 'number' && typeof j.startedMs === 'number') this.last = j;
    } catch {
      /* an unreadable record: scrub as if never */
    }
  }

  schedule(): void {
    if (this.timer !== undefined) this.h.timers.clear(this.timer);
    this.timer = undefined;
    this.nextRunMs = undefined;
    const every = this.h.intervalMs;
    const shared = this.h.store.shared;
    if (this.closed || (every <= 0 && !shared)) return;
    const last = this.last?.finishedMs;
    let at: number | undefined;
    if (every > 0) {
      // Never scrubbed: one interval after the first start (kept while looking every minute).
      at =
        last === undefined
          ? (this.firstRunMs ??= this.h.now() + every)
          : Math.max(this.h.now(), last + every);
      this.nextRunMs = at;
    }
    // A shared store: look every minute too (the role gained, a replacement to resume).
    const look = shared ? this.h.now() + SHARED_LOOK_MS : undefined;
    const fireAt = Math.min(at ?? Infinity, look ?? Infinity);
    this.timer = this.h.timers.set(() => {
      this.timer = undefined;
      if (shared) {
        // Another controller may have scrubbed (or begun a replacement) since this one looked.
        if (this.h.mayRun()) void this.dueOnSharedStore(every);
        else this.schedule();
        return;
      }
      if (!this.h.mayRun()) {
        // Another instance is the controller: look again in a while.
        this.timer = this.h.timers.set(() => this.schedule(), every > 0 ? Math.min(every, 60_000) : 60_000);
        return;
      }
      if (this.h.busy()) {
        // Another job (an operator's scrub or a replacement) is running: try again later.
        this.nextRunMs = undefined;
        this.schedule();
        return;
      }
      this.h.startScrub();
    }, fireAt - this.h.now());
  }

  private async dueOnSharedStore(every: number): Promise<void> {
    // A replacement the last controller left unfinished comes first (the scrub waits for it).
    if (await this.h.resume()) return;
    if (every > 0) {
      await this.load();
      await this.h.reload();
    }
    if (this.closed || this.timer !== undefined) return;
    const last = this.last?.finishedMs;
    const due = last === undefined ? (this.firstRunMs ?? this.h.now()) : last + every;
    if (every <= 0 || this.h.busy() || due > this.h.now()) {
      this.schedule(); // continue the schedule the last controller kept
      return;
    }
    try {
      this.h.startScrub();
    } catch (err) {
      // Lost the role (or shut down) meanwhile: look again later.
      this.h.log.info({ err }, 'redundant tier: scheduled scrub not started');
      this.timer = this.h.timers.set(() => this.schedule(), Math.min(every, 60_000));
    }
  }

  /** A scrub started (on the schedule or by an operator): no timer until it ends. */
  scrubStarted(): void {
    if (this.timer === undefined) return;
    this.h.timers.clear(this.timer);
    this.timer = undefined;
    this.nextRunMs = undefined;
  }

  /** A scrub ended: when done, it is the last one (recorded); the next is scheduled either way. */
  async scrubEnded(done: StorageJob | undefined): Promise<void> {
    if (done) this.last = done;
    this.schedule();
    if (done) await this.save(done);
  }

  /** A replacement ended: the schedule goes on (unless a timer is set). */
  replaceEnded(): void {
    if (this.timer === undefined) this.schedule();
  }

  private async save(j: StorageJob): Promise<void> {
    try {
      // Fenced: a controller that lost the role meanwhile does not move the schedule.
      await this.h.store.setJobRecord(LAST_SCRUB, JSON.stringify(j), { fenced: true });
    } catch (err) {
      this.h.log.warn({ err }, 'redundant tier: could not record the last scrub');
    }
  }

  /** No more scrubs on the schedule. */
  stop(): void {
    this.closed = true;
    if (this.timer !== undefined) this.h.timers.clear(this.timer);
    this.timer = undefined;
  }
}

/**
 * Keeping a redundant object tier whole from the proxy (issue #17, docs/redundancy.md):
 * the scrub run on a schedule in the background, rate-limited (`objectTier.scrub`), a scrub
 * or a backend replacement started by an operator (http/storage.ts), one job at a time, with
 * progress; the figures as Prometheus metrics; and the tier's status for the operator and,
 * restricted to their own files, for a user.
 *
 * The last scrub is remembered in the placement store (its job records: SQLite's file or,
 * with several instances, PostgreSQL — read from `<tier dir>/last-scrub.json` when an older
 * version left it there), so a restart neither scrubs at once nor puts the next scrub off by
 * a whole interval, and on a shared store the next controller continues the schedule: when
 * its timer fires it reads the record again and scrubs only if no other instance has done so
 * within the interval. Clock and timers are injectable (tests run the schedule without waiting).
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Provider } from '@weft/providers';
import {
  RedundantProvider,
  replaceBackend,
  type ScrubReport,
  scrub,
  type TierStatus,
  tierStatus,
} from '@weft/providers/redundant';
import type {
  AdminStorageResponse,
  IfFails,
  RiskCounts,
  StorageHealthResponse,
  StorageJob,
} from '@weft/wire';
import type { ProxyConfig } from './config.ts';
import { ApiError } from './errors.ts';
import { OrphanSweeper, type OrphanSweepSettings } from './orphan-sweep.ts';
import { openBackend, type RedundantBackendConfig, redundantTierDir } from './redundant-tier.ts';

type AdminStatus = NonNullable<AdminStorageResponse['redundant']>;
type UserStatus = Omit<Extract<StorageHealthResponse, { redundant: true }>, 'redundant' | 'checkedAtMs'>;

export interface Timers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const realTimers: Timers = {
  set(fn, ms) {
    const t = setTimeout(fn, ms);
    t.unref();
    return t;
  },
  clear(handle) {
    clearTimeout(handle as NodeJS.Timeout);
  },
};

/** The scrub's schedule, and the orphan sweep run after each scrub (orphan-sweep.ts). */
export interface ScrubSchedule extends OrphanSweepSettings {
  /** Start a scrub this long after the last one ended; 0: never on a schedule. */
  readonly intervalMs: number;
  /** Bytes read per second by a scrub; 0: unlimited. */
  readonly bytesPerSecond: number;
}

export interface StorageMaintenanceOptions {
  readonly tier: RedundantProvider;
  /** The tier's own folder (where an older version kept last-scrub.json). */
  readonly dir: string;
  readonly schedule: ScrubSchedule;
  readonly layout: AdminStatus['layout'];
  readonly log: Logger;
  readonly registry: Registry;
  /** Open a new backend for a replacement (from its config). */
  readonly openBackend: (config: RedundantBackendConfig) => Promise<Provider>;
  /**
   * The backends in this instance's config (`objectTier.backends`): a replacement another
   * controller left unfinished is resumed here when its new backend is among them.
   */
  readonly configured?: readonly RedundantBackendConfig[];
  readonly now?: () => number;
  readonly timers?: Timers;
  /**
   * Whether the tier's jobs run here (several instances: only on the controller — scheduled
   * scrubs wait, an operator's scrub or replacement is refused elsewhere). Default: yes.
   */
  readonly runScheduled?: () => boolean;
}

const SCRUB_FIGURES = [
  'blobsChecked',
  'bytesRead',
  'missing',
  'corrupt',
  'repaired',
  'unrepairable',
  'skipped',
] as const;

type Job = StorageJob & { done?: Promise<void> };

/** How often an instance on a shared store looks at the job records (role gained, work left). */
const SHARED_LOOK_MS = 60_000;

/** The placement store's job record of the last scrub. */
const LAST_SCRUB = 'last-scrub';
/** The placement store's job record of an unfinished replacement (ReplaceRecord). */
const REPLACE = 'replace';

interface ReplaceRecord {
  readonly id: string;
  readonly from: string;
  readonly to: string;
  readonly startedMs: number;
}

export class StorageMaintenance {
  private readonly now: () => number;
  private readonly timers: Timers;
  private timer: unknown;
  private nextRunMs: number | undefined;
  /** When the first scrub is due if none was ever recorded (one interval after start). */
  private firstRunMs: number | undefined;
  private job: Job | undefined;
  private lastScrub: StorageJob | undefined;
  private lastReplace: StorageJob | undefined;
  private abort: AbortController | undefined;
  private closed = false;
  private readonly counters: Record<(typeof SCRUB_FIGURES)[number], Counter>;
  private readonly runs: Counter<'result' | 'trigger'>;
  private readonly sweeper: OrphanSweeper;

  constructor(private readonly o: StorageMaintenanceOptions) {
    this.now = o.now ?? Date.now;
    this.timers = o.timers ?? realTimers;
    this.sweeper = new OrphanSweeper({
      tier: o.tier,
      dir: o.dir,
      settings: o.schedule,
      registry: o.registry,
      log: o.log,
      now: this.now,
    });
    const reg = [o.registry];
    const names: Record<(typeof SCRUB_FIGURES)[number], [string, string]> = {
      blobsChecked: ['weft_redundant_scrub_blobs_checked_total', 'replicas and fragments checked'],
      bytesRead: ['weft_redundant_scrub_bytes_read_total', 'bytes read'],
      missing: ['weft_redundant_scrub_missing_total', 'replicas and fragments found missing'],
      corrupt: ['weft_redundant_scrub_corrupt_total', 'replicas and fragments found corrupt'],
      repaired: ['weft_redundant_scrub_repaired_total', 'replicas and fragments rebuilt'],
      unrepairable: [
        'weft_redundant_scrub_unrepairable_total',
        'bad replicas and fragments that could not be rebuilt (too few good holders)',
      ],
      skipped: [
        'weft_redundant_scrub_skipped_total',
        'replicas and fragments skipped (backend down or owed)',
      ],
    };
    this.counters = Object.fromEntries(
      SCRUB_FIGURES.map((k) => [
        k,
        new Counter({ name: names[k][0], help: `Redundant tier scrub: ${names[k][1]}`, registers: reg }),
      ]),
    ) as Record<(typeof SCRUB_FIGURES)[number], Counter>;
    this.runs = new Counter({
      name: 'weft_redundant_scrub_runs_total',
      help: 'Redundant tier scrubs finished, by result (done, failed, aborted) and trigger (schedule, admin)',
      labelNames: ['result', 'trigger'] as const,
      registers: reg,
    });
    const lastScrub = (): StorageJob | undefined => this.lastScrub;
    const running = (): Job | undefined => this.job;
    const lastReplace = (): StorageJob | undefined => this.lastReplace;
    new Gauge({
      name: 'weft_redundant_scrub_last_run_timestamp_seconds',
      help: 'Redundant tier: when the last scrub finished (0: never)',
      registers: reg,
      collect() {
        this.set((lastScrub()?.finishedMs ?? 0) / 1000);
      },
    });
    new Gauge({
      name: 'weft_redundant_scrub_last_duration_seconds',
      help: 'Redundant tier: how long the last scrub took',
      registers: reg,
      collect() {
        const l = lastScrub();
        this.set(l?.finishedMs !== undefined ? (l.finishedMs - l.startedMs) / 1000 : 0);
      },
    });
    new Gauge({
      name: 'weft_redundant_scrub_running',
      help: 'Redundant tier: 1 while a scrub runs',
      registers: reg,
      collect() {
        const j = running();
        this.set(j?.kind === 'scrub' && j.state === 'running' ? 1 : 0);
      },
    });
    new Gauge({
      name: 'weft_redundant_replace_objects',
      help: 'Redundant tier: objects of the running (or last) backend replacement, done and total',
      labelNames: ['of'] as const,
      registers: reg,
      collect() {
        const r = running()?.replace ?? lastReplace()?.replace;
        this.set({ of: 'done' }, r?.done ?? 0);
        this.set({ of: 'total' }, r?.total ?? 0);
      },
    });
  }

  /** Read when the last scrub ran and schedule the next one. */
  async start(): Promise<void> {
    await this.loadLastScrub();
    await this.sweeper.load();
    if (!this.o.runScheduled || this.o.runScheduled()) await this.resumeReplacement();
    this.schedule();
  }

  /**
   * Resume the replacement recorded unfinished (by this or another controller): true when
   * it was started again. When its new backend is not in this instance's config it cannot:
   * logged, and shown as a failed job in the status until it is.
   */
  private async resumeReplacement(): Promise<boolean> {
    if (this.job?.state === 'running') return false;
    const raw = await this.o.tier.store.jobRecord(REPLACE).catch(() => undefined);
    if (raw === undefined) return false;
    let r: ReplaceRecord;
    try {
      r = JSON.parse(raw) as ReplaceRecord;
    } catch (err) {
      this.o.log.warn({ err }, 'redundant tier: unreadable replacement record, not resumed');
      return false;
    }
    const to = this.o.configured?.find((b) => b.id === r.to);
    if (!to) {
      if (this.job?.id === r.id) return false;
      const error = `the replacement of backend ${r.from} by ${r.to} is unfinished and cannot resume here: ${r.to} is not in this instance's objectTier.backends (add it with the same settings, or start the replacement again)`;
      this.o.log.warn({ replace: r }, `redundant tier: ${error}`);
      this.job = {
        id: r.id,
        kind: 'replace',
        trigger: 'admin',
        state: 'failed',
        startedMs: r.startedMs,
        error,
      };
      this.job.replace = { from: r.from, to: r.to, done: 0, total: 0, bytes: 0 };
      return false;
    }
    try {
      await this.startReplace(r.from, to, r);
      this.o.log.info({ replace: r }, 'redundant tier: resuming an unfinished backend replacement');
      return true;
    } catch (err) {
      this.o.log.warn({ err, replace: r }, 'redundant tier: could not resume the backend replacement');
      return false;
    }
  }

  /** The last scrub from the placement store's record (else an older version's file). */
  private async loadLastScrub(): Promise<void> {
    const raw =
      (await this.o.tier.store.jobRecord(LAST_SCRUB).catch((err: unknown) => {
        this.o.log.warn({ err }, 'redundant tier: could not read the last scrub');
        return undefined;
      })) ?? (await fsp.readFile(this.stateFile(), 'utf8').catch(() => undefined));
    if (raw === undefined) return; // never scrubbed
    try {
      const j = JSON.parse(raw) as StorageJob;
      if (typeof j.finishedMs === 'number' && typeof j.startedMs === 'number') this.lastScrub = j;
    } catch {
      /* an unreadable record: scrub as if never */
    }
  }

  private stateFile(): string {
    return nodePath.join(this.o.dir, 'last-scrub.json');
  }

  private schedule(): void {
    if (this.timer !== undefined) this.timers.clear(this.timer);
    this.timer = undefined;
    this.nextRunMs = undefined;
    const every = this.o.schedule.intervalMs;
    const shared = this.o.tier.store.shared;
    if (this.closed || (every <= 0 && !shared)) return;
    const last = this.lastScrub?.finishedMs;
    let at: number | undefined;
    if (every > 0) {
      // Never scrubbed: one interval after the first start (kept while looking every minute).
      at = last === undefined ? (this.firstRunMs ??= this.now() + every) : Math.max(this.now(), last + every);
      this.nextRunMs = at;
    }
    // A shared store: look every minute too (the role gained, a replacement to resume).
    const look = shared ? this.now() + SHARED_LOOK_MS : undefined;
    const fireAt = Math.min(at ?? Infinity, look ?? Infinity);
    this.timer = this.timers.set(() => {
      this.timer = undefined;
      if (shared) {
        // Another controller may have scrubbed (or begun a replacement) since this one looked.
        if (!this.o.runScheduled || this.o.runScheduled()) void this.dueOnSharedStore(every);
        else this.schedule();
        return;
      }
      if (this.o.runScheduled && !this.o.runScheduled()) {
        // Another instance is the controller: look again in a while.
        this.timer = this.timers.set(() => this.schedule(), every > 0 ? Math.min(every, 60_000) : 60_000);
        return;
      }
      if (this.job?.state === 'running') {
        // Another job (an operator's scrub or a replacement) is running: try again later.
        this.nextRunMs = undefined;
        this.schedule();
        return;
      }
      this.startScrub({}, 'schedule');
    }, fireAt - this.now());
  }

  private async dueOnSharedStore(every: number): Promise<void> {
    // A replacement the last controller left unfinished comes first (the scrub waits for it).
    if (await this.resumeReplacement()) return;
    if (every > 0) {
      await this.loadLastScrub();
      await this.sweeper.load();
    }
    if (this.closed || this.timer !== undefined) return;
    const last = this.lastScrub?.finishedMs;
    const due = last === undefined ? (this.firstRunMs ?? this.now()) : last + every;
    if (every <= 0 || this.job?.state === 'running' || due > this.now()) {
      this.schedule(); // continue the schedule the last controller kept
      return;
    }
    try {
      this.startScrub({}, 'schedule');
    } catch (err) {
      // Lost the role (or shut down) meanwhile: look again later.
      this.o.log.info({ err }, 'redundant tier: scheduled scrub not started');
      this.timer = this.timers.set(() => this.schedule(), Math.min(every, 60_000));
    }
  }

  /** The running job, or the last one; with `id`, that job if it is the current, last scrub or last replacement. */
  currentJob(id?: string): StorageJob | undefined {
    if (id === undefined || this.job?.id === id) return this.job && view(this.job);
    return [this.lastScrub, this.lastReplace].find((j) => j?.id === id);
  }

  /** Start a scrub now; ALREADY_EXISTS while another job runs. */
  startScrub(
    options: { bytesPerSecond?: number; repair?: boolean },
    trigger: StorageJob['trigger'],
  ): StorageJob {
    const bps = options.bytesPerSecond ?? this.o.schedule.bytesPerSecond;
    const figures: ScrubReport = {
      objects: 0,
      blobsChecked: 0,
      bytesRead: 0,
      missing: 0,
      corrupt: 0,
      repaired: 0,
      skipped: 0,
      unrepairable: 0,
    };
    const counted = { ...figures };
    const count = (r: Readonly<ScrubReport>): void => {
      Object.assign(figures, r);
      for (const k of SCRUB_FIGURES) {
        const d = r[k] - counted[k];
        if (d > 0) this.counters[k].inc(d);
        counted[k] = r[k];
      }
    };
    return this.run('scrub', trigger, { scrub: figures }, async (job, signal) => {
      const report = await scrub(this.o.tier, {
        ...(bps > 0 ? { bytesPerSecond: bps } : {}),
        ...(options.repair === undefined ? {} : { repair: options.repair }),
        now: this.now,
        sleep: (ms) => this.sleep(ms, signal),
        signal,
        onProgress: count,
      });
      count(report);
      job.scrub = { ...report };
      if (!this.sweeper.enabled) return;
      const swept = await this.sweeper.run((ms) => this.sleep(ms, signal), signal);
      job.note = `Orphan sweep: ${swept.removed} unreferenced blobs deleted (${swept.bytes} bytes), ${swept.young} younger than the grace period kept${swept.skipped.length ? `, backends down: ${swept.skipped.join(', ')}` : ''}.`;
    });
  }

  /**
   * Replace backend `from` by a new one (`to`, opened from its config): its replicas and
   * fragments are rebuilt there from the others, with progress. BAD_REQUEST for an unknown
   * `from` or a `to` id already in the set; ALREADY_EXISTS while another job runs.
   */
  async startReplace(
    from: string,
    to: RedundantBackendConfig,
    recorded?: ReplaceRecord,
  ): Promise<StorageJob> {
    const ids = this.o.tier.backendIds();
    recorded ??= await this.o.tier.store
      .jobRecord(REPLACE)
      .then((raw) => (raw === undefined ? undefined : (JSON.parse(raw) as ReplaceRecord)))
      .catch(() => undefined);
    const same = recorded?.from === from && recorded.to === to.id;
    // A recorded replacement resumes even where the config already names the new backend only.
    if (!ids.includes(from) && !same)
      throw new ApiError('BAD_REQUEST', `no backend ${from} in the redundant tier`);
    const last = this.lastReplace?.replace;
    const resuming = same || (last?.from === from && last.to === to.id && this.lastReplace?.state !== 'done');
    if (ids.includes(to.id) && !resuming)
      throw new ApiError('BAD_REQUEST', `backend ${to.id} is already in the set: give the new one a new id`);
    this.refuseIfBusy();
    const provider = await this.o.openBackend(to).catch((e: unknown) => {
      throw new ApiError('BAD_REQUEST', `cannot open backend ${to.id}: ${(e as Error).message}`);
    });
    const progress = {
      from,
      to: to.id,
      done: 0,
      total: (await this.o.tier.store.objectIds(from)).length,
      bytes: 0,
    };
    try {
      return this.run('replace', 'admin', { replace: progress }, async (job, signal) => {
        // Recorded (fenced) before the first object: the next controller resumes it from the placement.
        const record: ReplaceRecord = same
          ? recorded!
          : { id: job.id, from, to: to.id, startedMs: job.startedMs };
        await this.o.tier.store.setJobRecord(REPLACE, JSON.stringify(record), { fenced: true });
        await replaceBackend(
          this.o.tier,
          from,
          {
            id: to.id,
            provider,
            ...(to.pricePerGbMonth === undefined ? {} : { pricePerGbMonth: to.pricePerGbMonth }),
          },
          (p) => Object.assign(progress, p),
          signal,
        );
        await this.o.tier.store.clearJobRecord(REPLACE, { fenced: true });
        job.note = `Backend ${from} is out of the set and ${to.id} holds its replicas and fragments. Put ${to.id} in place of ${from} in objectTier.backends before the next restart.`;
      });
    } catch (e) {
      await provider.close?.();
      throw e;
    }
  }

  private refuseIfBusy(): void {
    if (this.closed) throw new ApiError('SLOW_DOWN', 'the server is shutting down');
    if (this.o.runScheduled && !this.o.runScheduled())
      throw new ApiError(
        'BAD_REQUEST',
        'this instance is not the controller: the redundant tier’s jobs run on the controller (GET /v1/cluster/instances names it)',
        { reason: 'not-controller' },
      );
    if (this.job?.state === 'running')
      throw new ApiError(
        'ALREADY_EXISTS',
        `a ${this.job.kind} is running (job ${this.job.id}); wait for it`,
        {
          job: this.job.id,
        },
      );
  }

  private run(
    kind: StorageJob['kind'],
    trigger: StorageJob['trigger'],
    figures: Pick<StorageJob, 'scrub' | 'replace'>,
    work: (job: Job, signal: AbortSignal) => Promise<void>,
  ): StorageJob {
    this.refuseIfBusy();
    const job: Job = {
      id: randomBytes(6).toString('hex'),
      kind,
      trigger,
      state: 'running',
      startedMs: this.now(),
      ...figures,
    };
    const abort = new AbortController();
    this.abort = abort;
    this.job = job;
    if (kind === 'scrub' && this.timer !== undefined) {
      this.timers.clear(this.timer);
      this.timer = undefined;
      this.nextRunMs = undefined;
    }
    this.o.log.info({ job: job.id, kind, trigger }, 'redundant tier: maintenance job started');
    job.done = (async () => {
      try {
        await work(job, abort.signal);
        job.state = 'done';
      } catch (e) {
        job.state = abort.signal.aborted ? 'aborted' : 'failed';
        job.error = e instanceof Error ? e.message : String(e);
      }
      job.finishedMs = this.now();
      this.o.log.info(
        { job: job.id, kind, state: job.state, error: job.error, scrub: job.scrub, replace: job.replace },
        'redundant tier: maintenance job finished',
      );
      if (kind === 'replace') {
        this.lastReplace = view(job);
        if (this.timer === undefined) this.schedule();
        return;
      }
      this.runs.inc({ result: job.state, trigger });
      if (job.state === 'done') this.lastScrub = view(job);
      this.schedule();
      if (job.state === 'done') await this.saveLastScrub(this.lastScrub!);
    })();
    return view(job);
  }

  private async saveLastScrub(j: StorageJob): Promise<void> {
    try {
      // Fenced: a controller that lost the role meanwhile does not move the schedule.
      await this.o.tier.store.setJobRecord(LAST_SCRUB, JSON.stringify(j), { fenced: true });
    } catch (err) {
      this.o.log.warn({ err }, 'redundant tier: could not record the last scrub');
    }
  }

  private sleep(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason as Error);
      const onAbort = (): void => {
        this.timers.clear(handle);
        reject(signal.reason as Error);
      };
      const handle = this.timers.set(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** The last orphan sweep (after a scrub), if any. */
  lastSweep(): ReturnType<OrphanSweeper['lastSweep']> {
    return this.sweeper.lastSweep();
  }

  /** Wait for the running job to end, its bookkeeping (next scrub scheduled, last one saved) done. */
  async settled(): Promise<void> {
    await this.job?.done;
  }

  /** The operator's view. */
  async adminStatus(): Promise<AdminStatus> {
    const s = await tierStatus(this.o.tier);
    const job = this.currentJob();
    return {
      state: tierState(s, s.risk),
      layout: this.o.layout,
      backends: s.backends.map((b) => ({ ...b })),
      outageLog: s.outageLog,
      objects: counts(s.risk),
      ifFails: ifFails(s),
      scrub: {
        intervalMs: this.o.schedule.intervalMs,
        bytesPerSecond: this.o.schedule.bytesPerSecond,
        ...(this.nextRunMs === undefined ? {} : { nextRunMs: this.nextRunMs }),
        ...(this.lastScrub ? { last: this.lastScrub } : {}),
      },
      ...(job ? { job } : {}),
    };
  }

  /**
   * A user's view: the backends' classes and states (no names, prices or figures), and
   * their own files by redundancy, with what one more failure would do to them.
   * `files`: object-tier key → how many of the user's files refer to it.
   */
  async userStatus(files: ReadonlyMap<string, number>): Promise<UserStatus> {
    const weights = new Map<string, number>();
    for (const [key, n] of files) {
      const id = await this.o.tier.store.objectOf(key);
      if (id !== undefined) weights.set(id, (weights.get(id) ?? 0) + n);
    }
    const s = await tierStatus(this.o.tier, weights);
    return {
      state: tierState(s, s.risk),
      backends: s.backends.map((b) => ({
        id: b.id,
        class: b.class,
        state: b.state,
        ...(b.since === undefined ? {} : { since: b.since }),
      })),
      files: counts(s.risk),
      ifFails: ifFails(s),
      ...(this.lastScrub?.finishedMs === undefined ? {} : { lastScrubMs: this.lastScrub.finishedMs }),
    };
  }

  /** Stop the schedule and abort a running job (a replacement resumes when started again). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer !== undefined) this.timers.clear(this.timer);
    this.timer = undefined;
    this.abort?.abort(new Error('the server is shutting down'));
    await this.settled();
  }
}

function view(j: Job): StorageJob {
  const { done: _done, ...rest } = j;
  return {
    ...rest,
    ...(j.scrub ? { scrub: { ...j.scrub } } : {}),
    ...(j.replace ? { replace: { ...j.replace } } : {}),
  };
}

function counts(r: TierStatus['risk']): RiskCounts {
  return {
    total: r.objects,
    whole: r.whole,
    reduced: r.reduced,
    atMinimum: r.atMinimum,
    unreadable: r.unreadable,
  };
}

function ifFails(s: TierStatus): IfFails[] {
  return Object.entries(s.risk.ifFails).map(([backend, r]) => ({ backend, ...r }));
}

function tierState(s: TierStatus, r: TierStatus['risk']): 'available' | 'degraded' | 'down' {
  if (r.unreadable > 0) return 'down';
  if (r.reduced > 0 || r.atMinimum > 0 || s.backends.some((b) => b.state !== 'available')) return 'degraded';
  return 'available';
}

/** The maintenance of the object tier when the config makes it redundant (started), else undefined. */
export async function openStorageMaintenance(
  config: ProxyConfig,
  objects: Provider,
  log: Logger,
  registry: Registry,
  options: { now?: () => number; timers?: Timers; runScheduled?: () => boolean } = {},
): Promise<StorageMaintenance | undefined> {
  const ot = config.objectTier;
  if (ot.type !== 'redundant' || !(objects instanceof RedundantProvider)) return undefined;
  const m = new StorageMaintenance({
    tier: objects,
    dir: redundantTierDir(ot, config.dataDir),
    schedule: ot.scrub,
    layout: {
      replicas: objects.replicas,
      k: objects.k,
      m: objects.m,
      thresholdBytes: objects.thresholdBytes,
    },
    log,
    registry,
    openBackend: (b) => openBackend(b, redundantTierDir(ot, config.dataDir)),
    configured: ot.backends,
    ...options,
  });
  await m.start();
  return m;
}

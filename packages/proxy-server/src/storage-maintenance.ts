/**
 * Keeping a redundant object tier whole from the proxy (issue #17, docs/redundancy.md):
 * the scrub run on a schedule in the background, rate-limited (`objectTier.scrub`), a scrub
 * or a backend replacement started by an operator (http/storage.ts), one job at a time, with
 * progress; the figures as Prometheus metrics; and the tier's status for the operator and,
 * restricted to their own files, for a user.
 *
 * Its parts: the schedule and the last scrub's job record (scrub-schedule.ts), a replacement's
 * job record and its resumption (storage-replace.ts), the metrics (storage-metrics.ts), the
 * status helpers (storage-status.ts). Clock and timers are injectable (tests run the schedule
 * without waiting).
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Provider } from '@weft/providers';
import { RedundantProvider, type ScrubReport, scrub, tierStatus } from '@weft/providers/redundant';
import type { AdminStorageResponse, StorageHealthResponse, StorageJob } from '@weft/wire';
import type { ProxyConfig } from './config.ts';
import { ApiError } from './errors.ts';
import { OrphanSweeper, type OrphanSweepSettings } from './orphan-sweep.ts';
import { openBackend, type RedundantBackendConfig, redundantTierDir } from './redundant-tier.ts';
import { realTimers, ScrubScheduler, type Timers } from './scrub-schedule.ts';
import { type MaintenanceMetrics, maintenanceMetrics, SCRUB_FIGURES } from './storage-metrics.ts';
import {
  readReplaceRecord,
  type ReplaceRecord,
  replaceRecorded,
  resumeReplacement,
} from './storage-replace.ts';
import { counts, ifFails, type Job, tierState, view } from './storage-status.ts';

export type { Timers } from './scrub-schedule.ts';

type AdminStatus = NonNullable<AdminStorageResponse['redundant']>;
type UserStatus = Omit<Extract<StorageHealthResponse, { redundant: true }>, 'redundant' | 'checkedAtMs'>;

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

export class StorageMaintenance {
  private readonly now: () => number;
  private readonly timers: Timers;
  private readonly scheduler: ScrubScheduler;
  private job: Job | undefined;
  private lastReplace: StorageJob | undefined;
  private abort: AbortController | undefined;
  private closed = false;
  private readonly metrics: MaintenanceMetrics;
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
    this.scheduler = new ScrubScheduler({
      store: o.tier.store,
      dir: o.dir,
      intervalMs: o.schedule.intervalMs,
      now: this.now,
      timers: this.timers,
      log: o.log,
      mayRun: () => this.mayRun(),
      busy: () => this.job?.state === 'running',
      startScrub: () => this.startScrub({}, 'schedule'),
      resume: () => this.resumeReplacement(),
      reload: () => this.sweeper.load(),
    });
    this.metrics = maintenanceMetrics(o.registry, {
      lastScrub: () => this.scheduler.last,
      running: () => this.job,
      lastReplace: () => this.lastReplace,
    });
  }

  /** Read when the last scrub ran and schedule the next one. */
  async start(): Promise<void> {
    await this.scheduler.load();
    await this.sweeper.load();
    if (this.mayRun()) await this.resumeReplacement();
    this.scheduler.schedule();
  }

  /** Whether the tier's jobs run here now (options.runScheduled). */
  private mayRun(): boolean {
    return !this.o.runScheduled || this.o.runScheduled();
  }

  /** Resume the replacement recorded unfinished (storage-replace.ts): true when it was started again. */
  private resumeReplacement(): Promise<boolean> {
    return resumeReplacement({
      tier: this.o.tier,
      log: this.o.log,
      configured: this.o.configured,
      job: () => this.job,
      show: (job) => {
        this.job = job;
      },
      start: (from, to, recorded) => this.startReplace(from, to, recorded),
    });
  }

  /** The running job, or the last one; with `id`, that job if it is the current, last scrub or last replacement. */
  currentJob(id?: string): StorageJob | undefined {
    if (id === undefined || this.job?.id === id) return this.job && view(this.job);
    return [this.scheduler.last, this.lastReplace].find((j) => j?.id === id);
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
        if (d > 0) this.metrics.counters[k].inc(d);
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
    recorded ??= await readReplaceRecord(this.o.tier.store);
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
        const record: ReplaceRecord = same
          ? recorded!
          : { id: job.id, from, to: to.id, startedMs: job.startedMs };
        job.note = await replaceRecorded(this.o.tier, record, to, provider, progress, signal);
      });
    } catch (e) {
      await provider.close?.();
      throw e;
    }
  }

  private refuseIfBusy(): void {
    if (this.closed) throw new ApiError('SLOW_DOWN', 'the server is shutting down');
    if (!this.mayRun())
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
    if (kind === 'scrub') this.scheduler.scrubStarted();
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
        this.scheduler.replaceEnded();
        return;
      }
      this.metrics.runs.inc({ result: job.state, trigger });
      await this.scheduler.scrubEnded(job.state === 'done' ? view(job) : undefined);
    })();
    return view(job);
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
        ...(this.scheduler.nextRunMs === undefined ? {} : { nextRunMs: this.scheduler.nextRunMs }),
        ...(this.scheduler.last ? { last: this.scheduler.last } : {}),
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
      ...(this.scheduler.last?.finishedMs === undefined
        ? {}
        : { lastScrubMs: this.scheduler.last.finishedMs }),
    };
  }

  /** Stop the schedule and abort a running job (a replacement resumes when started again). */
  async close(): Promise<void> {
    this.closed = true;
    this.scheduler.stop();
    this.abort?.abort(new Error('the server is shutting down'));
    await this.settled();
  }
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

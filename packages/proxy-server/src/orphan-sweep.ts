/**
 * The orphan sweep of a redundant object tier run by the proxy (issue #17,
 * docs/redundancy.md "Orphan sweep"): after each scrub (so on the scrub's schedule, and
 * after an operator's scrub), blobs on the backends that the placement store does not
 * refer to and that are older than a grace period are deleted, paced to a number of
 * deletes a second. The last sweep is kept in the placement store's job records (read from
 * `<tier dir>/last-sweep.json` when an older version left it there), so with several
 * instances the next controller reports it; its figures are Prometheus metrics.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import { type RedundantProvider, type SweepReport, sweepOrphans } from '@weft/providers/redundant';

export interface OrphanSweepSettings {
  /** Sweep after each scrub (default true). */
  readonly sweepOrphans?: boolean;
  /** Keep unreferenced blobs younger than this (ms): another process may still commit them. */
  readonly orphanGraceMs?: number;
  /** Deletes a second at most; 0: unlimited. */
  readonly orphanDeletesPerSecond?: number;
}

/** The placement store's job record of the last sweep. */
const LAST_SWEEP = 'last-sweep';

export const ORPHAN_SWEEP_DEFAULTS = { graceMs: 3_600_000, deletesPerSecond: 10 };

export interface LastSweep {
  readonly startedMs: number;
  readonly finishedMs: number;
  readonly report: SweepReport;
}

const FIGURES = [
  ['blobs', 'weft_redundant_orphan_sweep_blobs_listed_total', 'blobs listed'],
  ['orphans', 'weft_redundant_orphan_sweep_orphans_total', 'unreferenced blobs older than the grace period'],
  ['removed', 'weft_redundant_orphan_sweep_removed_total', 'unreferenced blobs deleted'],
  ['bytes', 'weft_redundant_orphan_sweep_orphan_bytes_total', 'bytes of the unreferenced blobs'],
  [
    'young',
    'weft_redundant_orphan_sweep_young_total',
    'unreferenced blobs kept, younger than the grace period',
  ],
] as const;

export class OrphanSweeper {
  private last: LastSweep | undefined;
  private readonly counters: Counter[];

  constructor(
    private readonly o: {
      readonly tier: RedundantProvider;
      readonly dir: string;
      readonly settings: OrphanSweepSettings;
      readonly registry: Registry;
      readonly log: Logger;
      readonly now: () => number;
    },
  ) {
    const reg = [o.registry];
    this.counters = FIGURES.map(
      ([, name, help]) => new Counter({ name, help: `Redundant tier orphan sweep: ${help}`, registers: reg }),
    );
    const last = (): LastSweep | undefined => this.last;
    new Gauge({
      name: 'weft_redundant_orphan_sweep_last_run_timestamp_seconds',
      help: 'Redundant tier: when the last orphan sweep finished (0: never)',
      registers: reg,
      collect() {
        this.set((last()?.finishedMs ?? 0) / 1000);
      },
    });
  }

  get enabled(): boolean {
    return this.o.settings.sweepOrphans !== false;
  }

  lastSweep(): LastSweep | undefined {
    return this.last;
  }

  private file(): string {
    return nodePath.join(this.o.dir, 'last-sweep.json');
  }

  async load(): Promise<void> {
    const text =
      (await this.o.tier.store.jobRecord(LAST_SWEEP).catch((err: unknown) => {
        this.o.log.warn({ err }, 'redundant tier: could not read the last orphan sweep');
        return undefined;
      })) ?? (await fsp.readFile(this.file(), 'utf8').catch(() => undefined));
    if (text === undefined) return; // never swept
    try {
      const raw = JSON.parse(text) as LastSweep;
      if (typeof raw.finishedMs === 'number' && typeof raw.report === 'object') this.last = raw;
    } catch {
      /* an unreadable record */
    }
  }

  /** One sweep: counted in the metrics, remembered on disk. Rejects when `signal` aborts it. */
  async run(sleep: (ms: number) => Promise<void>, signal: AbortSignal): Promise<SweepReport> {
    const s = this.o.settings;
    const startedMs = this.o.now();
    const report = await sweepOrphans(this.o.tier, {
      graceMs: s.orphanGraceMs ?? ORPHAN_SWEEP_DEFAULTS.graceMs,
      deletesPerSecond: s.orphanDeletesPerSecond ?? ORPHAN_SWEEP_DEFAULTS.deletesPerSecond,
      now: this.o.now,
      sleep,
      signal,
    });
    FIGURES.forEach(([key], i) => this.counters[i]!.inc(report[key]));
    this.last = { startedMs, finishedMs: this.o.now(), report };
    this.o.log.info({ sweep: report }, 'redundant tier: orphan sweep done');
    try {
      await this.o.tier.store.setJobRecord(LAST_SWEEP, JSON.stringify(this.last), { fenced: true });
    } catch (err) {
      this.o.log.warn({ err }, 'redundant tier: could not record the last orphan sweep');
    }
    return report;
  }
}

/**
 * The Prometheus metrics of the redundant tier's maintenance (storage-maintenance.ts): the
 * scrub's figures as counters, its runs by result and trigger, and gauges read when scraped
 * (last scrub, running scrub, the replacement's progress).
 */
import type { ScrubReport } from '@weft/providers/redundant';
import type { StorageJob } from '@weft/wire';
import { Counter, Gauge, type Registry } from 'prom-client';

/** The scrub figures counted in Prometheus (the ScrubReport's, but `objects`). */
export const SCRUB_FIGURES = [
  'blobsChecked',
  'bytesRead',
  'missing',
  'corrupt',
  'repaired',
  'unrepairable',
  'skipped',
] as const satisfies readonly (keyof ScrubReport)[];

export type ScrubFigure = (typeof SCRUB_FIGURES)[number];

export interface MaintenanceMetrics {
  readonly counters: Record<ScrubFigure, Counter>;
  readonly runs: Counter<'result' | 'trigger'>;
}

/** What the gauges read when scraped. */
export interface MaintenanceState {
  lastScrub(): StorageJob | undefined;
  running(): StorageJob | undefined;
  lastReplace(): StorageJob | undefined;
}

/** Register the maintenance metrics in `registry`. */
export function maintenanceMetrics(registry: Registry, state: MaintenanceState): MaintenanceMetrics {
  const reg = [registry];
  const names: Record<ScrubFigure, [string, string]> = {
    blobsChecked: ['weft_redundant_scrub_blobs_checked_total', 'replicas and fragments checked'],
    bytesRead: ['weft_redundant_scrub_bytes_read_total', 'bytes read'],
    missing: ['weft_redundant_scrub_missing_total', 'replicas and fragments found missing'],
    corrupt: ['weft_redundant_scrub_corrupt_total', 'replicas and fragments found corrupt'],
    repaired: ['weft_redundant_scrub_repaired_total', 'replicas and fragments rebuilt'],
    unrepairable: [
      'weft_redundant_scrub_unrepairable_total',
      'bad replicas and fragments that could not be rebuilt (too few good holders)',
    ],
    skipped: ['weft_redundant_scrub_skipped_total', 'replicas and fragments skipped (backend down or owed)'],
  };
  const counters = Object.fromEntries(
    SCRUB_FIGURES.map((k) => [
      k,
      new Counter({ name: names[k][0], help: `Redundant tier scrub: ${names[k][1]}`, registers: reg }),
    ]),
  ) as Record<ScrubFigure, Counter>;
  const runs = new Counter({
    name: 'weft_redundant_scrub_runs_total',
    help: 'Redundant tier scrubs finished, by result (done, failed, aborted) and trigger (schedule, admin)',
    labelNames: ['result', 'trigger'] as const,
    registers: reg,
  });
  new Gauge({
    name: 'weft_redundant_scrub_last_run_timestamp_seconds',
    help: 'Redundant tier: when the last scrub finished (0: never)',
    registers: reg,
    collect() {
      this.set((state.lastScrub()?.finishedMs ?? 0) / 1000);
    },
  });
  new Gauge({
    name: 'weft_redundant_scrub_last_duration_seconds',
    help: 'Redundant tier: how long the last scrub took',
    registers: reg,
    collect() {
      const l = state.lastScrub();
      this.set(l?.finishedMs !== undefined ? (l.finishedMs - l.startedMs) / 1000 : 0);
    },
  });
  new Gauge({
    name: 'weft_redundant_scrub_running',
    help: 'Redundant tier: 1 while a scrub runs',
    registers: reg,
    collect() {
      const j = state.running();
      this.set(j?.kind === 'scrub' && j.state === 'running' ? 1 : 0);
    },
  });
  new Gauge({
    name: 'weft_redundant_replace_objects',
    help: 'Redundant tier: objects of the running (or last) backend replacement, done and total',
    labelNames: ['of'] as const,
    registers: reg,
    collect() {
      const r = state.running()?.replace ?? state.lastReplace()?.replace;
      this.set({ of: 'done' }, r?.done ?? 0);
      this.set({ of: 'total' }, r?.total ?? 0);
    },
  });
  return { counters, runs };
}

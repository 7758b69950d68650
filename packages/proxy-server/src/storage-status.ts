/**
 * The redundant tier's maintenance jobs and status as the wire shows them
 * (storage-maintenance.ts): a job's copy without its bookkeeping, and the tier's risk
 * figures as counts, per-backend "if it fails" rows and one state.
 */
import type { TierStatus } from '@weft/providers/redundant';
import type { IfFails, RiskCounts, StorageJob } from '@weft/wire';

/** A maintenance job, with the promise of its end (its bookkeeping included). */
export type Job = StorageJob & { done?: Promise<void> };

/** The job as the wire shows it: a copy, without `done`. */
export function view(j: Job): StorageJob {
  const { done: _done, ...rest } = j;
  return {
    ...rest,
    ...(j.scrub ? { scrub: { ...j.scrub } } : {}),
    ...(j.replace ? { replace: { ...j.replace } } : {}),
  };
}

export function counts(r: TierStatus['risk']): RiskCounts {
  return {
    total: r.objects,
    whole: r.whole,
    reduced: r.reduced,
    atMinimum: r.atMinimum,
    unreadable: r.unreadable,
  };
}

export function ifFails(s: TierStatus): IfFails[] {
  return Object.entries(s.risk.ifFails).map(([backend, r]) => ({ backend, ...r }));
}

export function tierState(s: TierStatus, r: TierStatus['risk']): 'available' | 'degraded' | 'down' {
  if (r.unreadable > 0) return 'down';
  if (r.reduced > 0 || r.atMinimum > 0 || s.backends.some((b) => b.state !== 'available')) return 'degraded';
  return 'available';
}

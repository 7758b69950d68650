/**
 * A backend replacement of the redundant tier as a job record (storage-maintenance.ts,
 * issue #17 across instances): recorded in the placement store's job records before the
 * first object is moved and cleared when done, so the controller — this one after a restart,
 * or the next one — resumes an unfinished replacement by itself when the new backend is in
 * its objectTier.backends; otherwise it says so, as a failed job in the storage status.
 */
import type { Logger } from 'pino';
import type { Provider } from '@weft/providers';
import { type PlacementStore, type RedundantProvider, replaceBackend } from '@weft/providers/redundant';
import type { StorageJob } from '@weft/wire';
import type { RedundantBackendConfig } from './redundant-tier.ts';

/** The placement store's job record of an unfinished replacement (ReplaceRecord). */
const REPLACE = 'replace';

export interface ReplaceRecord {
  readonly id: string;
  readonly from: string;
  readonly to: string;
  readonly startedMs: number;
}

/**
 * The replacement recorded unfinished, if any. A record that cannot be read is none; one
 * that cannot be parsed is none too, `onUnreadable` told.
 */
export async function readReplaceRecord(
  store: PlacementStore,
  onUnreadable?: (err: unknown) => void,
): Promise<ReplaceRecord | undefined> {
  const raw = await store.jobRecord(REPLACE).catch(() => undefined);
  if (raw === undefined) return undefined;
  try {
    return JSON.parse(raw) as ReplaceRecord;
  } catch (err) {
    onUnreadable?.(err);
    return undefined;
  }
}

/** What resuming a recorded replacement needs of the maintenance. */
export interface ResumeHost {
  readonly tier: RedundantProvider;
  readonly log: Logger;
  /** The backends in this instance's config (objectTier.backends). */
  readonly configured: readonly RedundantBackendConfig[] | undefined;
  /** The running job, or the last one shown. */
  job(): StorageJob | undefined;
  /** Show `job` (a replacement that cannot resume here) as the current job. */
  show(job: StorageJob): void;
  /** Start the replacement again (StorageMaintenance.startReplace). */
  start(from: string, to: RedundantBackendConfig, recorded: ReplaceRecord): Promise<unknown>;
}

/**
 * Resume the replacement recorded unfinished (by this or another controller): true when
 * it was started again. When its new backend is not in this instance's config it cannot:
 * logged, and shown as a failed job in the status until it is.
 */
export async function resumeReplacement(h: ResumeHost): Promise<boolean> {
  if (h.job()?.state === 'running') return false;
  const r = await readReplaceRecord(h.tier.store, (err) =>
    h.log.warn({ err }, 'redundant tier: unreadable replacement record, not resumed'),
  );
  if (r === undefined) return false;
  const to = h.configured?.find((b) => b.id === r.to);
  if (!to) {
    if (h.job()?.id === r.id) return false;
    const error = `the replacement of backend ${r.from} by ${r.to} is unfinished and cannot resume here: ${r.to} is not in this instance's objectTier.backends (add it with the same settings, or start the replacement again)`;
    h.log.warn({ replace: r }, `redundant tier: ${error}`);
    h.show({
      id: r.id,
      kind: 'replace',
      trigger: 'admin',
      state: 'failed',
      startedMs: r.startedMs,
      error,
      replace: { from: r.from, to: r.to, done: 0, total: 0, bytes: 0 },
    });
    return false;
  }
  try {
    await h.start(r.from, to, r);
    h.log.info({ replace: r }, 'redundant tier: resuming an unfinished backend replacement');
    return true;
  } catch (err) {
    h.log.warn({ err, replace: r }, 'redundant tier: could not resume the backend replacement');
    return false;
  }
}

/**
 * The replacement's work in its job: recorded (fenced) before the first object, so the next
 * controller resumes it from the placement; the record cleared when done. Returns the job's note.
 */
export async function replaceRecorded(
  tier: RedundantProvider,
  record: ReplaceRecord,
  to: RedundantBackendConfig,
  provider: Provider,
  progress: NonNullable<StorageJob['replace']>,
  signal: AbortSignal,
): Promise<string> {
  await tier.store.setJobRecord(REPLACE, JSON.stringify(record), { fenced: true });
  await replaceBackend(
    tier,
    record.from,
    {
      id: to.id,
      provider,
      ...(to.pricePerGbMonth === undefined ? {} : { pricePerGbMonth: to.pricePerGbMonth }),
    },
    (p) => Object.assign(progress, p),
    signal,
  );
  await tier.store.clearJobRecord(REPLACE, { fenced: true });
  return `Backend ${record.from} is out of the set and ${to.id} holds its replicas and fragments. Put ${to.id} in place of ${record.from} in objectTier.backends before the next restart.`;
}

/**
 * The health of a redundant object tier (issue #17, docs/redundancy.md): `GET
 * /v1/storage/health` tells a device's user how their own files stand — the backends'
 * classes and states, and how many of their files one more backend failure would leave
 * unreadable; `GET /v1/admin/storage` tells the operator everything (figures, outage log,
 * scrub, replacement). A user never sees other users' data nor the backends' names or prices.
 */
import { z } from 'zod/v4';

const Count = z.number().int().min(0);
const BackendId = z.string().min(1).max(64);

export const BackendClassName = z.enum(['performance', 'cost']);
export const BackendStateName = z.enum(['available', 'degraded', 'down']);

/** Objects (or files) by how many good holders they have on backends that are up. */
export const RiskCounts = z.object({
  total: Count,
  /** Every replica / fragment good and on a backend that is up. */
  whole: Count,
  /** Readable with a spare, but not whole. */
  reduced: Count,
  /** Readable with no spare: one more failure of a holder makes it unreadable. */
  atMinimum: Count,
  unreadable: Count,
});
export type RiskCounts = z.infer<typeof RiskCounts>;

/** What the failure of one more backend (one that is up now) would do. */
export const IfFails = z.object({
  backend: BackendId,
  /** Readable now, unreadable then. */
  unreadable: Count,
  /** Readable with no spare then. */
  atMinimum: Count,
});
export type IfFails = z.infer<typeof IfFails>;

export const StorageHealthResponse = z.discriminatedUnion('redundant', [
  z.object({ redundant: z.literal(false) }),
  z.object({
    redundant: z.literal(true),
    /** For the caller's files: down when one is unreadable, degraded when any backend or file is not whole. */
    state: BackendStateName,
    backends: z.array(
      z.object({
        id: BackendId,
        class: BackendClassName,
        state: BackendStateName,
        /** Down since / degraded since (ms since the epoch). */
        since: z.number().optional(),
      }),
    ),
    /** The caller's current files stored in the object tier (large files, packed small ones). */
    files: RiskCounts,
    ifFails: z.array(IfFails),
    /** When the last scrub (a full check of every stored blob) finished. */
    lastScrubMs: z.number().optional(),
    checkedAtMs: z.number(),
  }),
]);
export type StorageHealthResponse = z.infer<typeof StorageHealthResponse>;

export const ScrubFigures = z.object({
  objects: Count,
  blobsChecked: Count,
  bytesRead: Count,
  missing: Count,
  corrupt: Count,
  repaired: Count,
  skipped: Count,
  unrepairable: Count,
});

export const StorageJob = z.object({
  id: z.string(),
  kind: z.enum(['scrub', 'replace']),
  trigger: z.enum(['schedule', 'admin']),
  state: z.enum(['running', 'done', 'failed', 'aborted']),
  startedMs: z.number(),
  finishedMs: z.number().optional(),
  error: z.string().optional(),
  /** A scrub's figures (so far, while running). */
  scrub: ScrubFigures.optional(),
  /** A replacement's progress: objects rebuilt onto `to` of `total`. */
  replace: z.object({ from: BackendId, to: BackendId, done: Count, total: Count, bytes: Count }).optional(),
  /** What the operator must do next (e.g. edit the config after a replacement). */
  note: z.string().optional(),
});
export type StorageJob = z.infer<typeof StorageJob>;

export const AdminStorageResponse = z.object({
  objectTier: z.enum(['fs', 's3', 'redundant']),
  redundant: z
    .object({
      state: BackendStateName,
      layout: z.object({
        replicas: Count,
        k: Count,
        m: Count,
        thresholdBytes: Count,
      }),
      backends: z.array(
        z.object({
          id: BackendId,
          name: z.string(),
          class: BackendClassName,
          state: BackendStateName,
          since: z.number().optional(),
          latencyMs: z.number().optional(),
          throughputBps: z.number().optional(),
          pricePerGbMonth: z.number(),
          outageLog: Count,
          blobs: Count,
          bad: Count,
        }),
      ),
      outageLog: Count,
      objects: RiskCounts,
      ifFails: z.array(IfFails),
      scrub: z.object({
        intervalMs: Count,
        bytesPerSecond: Count,
        /** When the next scheduled scrub starts (absent: none scheduled). */
        nextRunMs: z.number().optional(),
        last: StorageJob.optional(),
      }),
      /** The maintenance job running now, or the last one. */
      job: StorageJob.optional(),
    })
    .optional(),
});
export type AdminStorageResponse = z.infer<typeof AdminStorageResponse>;

export const ScrubRequest = z
  .object({
    /** Pace (bytes read per second; 0: unlimited). Default: the configured one. */
    bytesPerSecond: z.number().int().min(0).optional(),
    /** Repair what is missing or corrupt (default true). */
    repair: z.boolean().optional(),
  })
  .strict();

export const JobResponse = z.object({ job: StorageJob.nullable() });
export type JobResponse = z.infer<typeof JobResponse>;

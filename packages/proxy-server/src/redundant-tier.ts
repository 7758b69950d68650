/**
 * The proxy's object tier as a redundant set of backends (issue #17, docs/redundancy.md):
 * config schema and opener. Backends are directories, S3 buckets or cloud accounts
 * (redundant-backends.ts); `migrateFrom` moves a former single store in. The tier itself
 * (placement, degraded reads, outage log, scrub) is `@weft/providers/redundant`. Its
 * placement store is SQLite in the tier's folder, or — when the proxy's metadata is on
 * PostgreSQL (`databaseUrl`) — the `redundant_*` tables there (store/placement-postgres.ts),
 * so every instance sharing the database serves the same tier.
 */
import * as nodePath from 'node:path';
import { z } from 'zod/v4';
import { FsProvider, S3Provider, type Provider } from '@weft/providers';
import { Counter, Gauge, type Registry } from 'prom-client';
import {
  MigratingRedundantProvider,
  openRedundantProvider,
  type PlacementStore,
  RedundantProvider,
} from '@weft/providers/redundant';
import { CloudBackendConfig, openCloudBackend } from './redundant-backends.ts';

const Common = {
  /** Stable id, recorded in the placement store; never reuse one for another store. */
  id: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/),
  /** Storage price per GB-month (breaks classification ties; cost model input). */
  pricePerGbMonth: z.number().min(0).optional(),
};

const S3Backend = z.object({
  ...Common,
  type: z.literal('s3'),
  bucket: z.string().min(1),
  prefix: z.string().default(''),
  endpoint: z.string().optional(),
  region: z.string().default('us-east-1'),
  forcePathStyle: z.boolean().default(false),
  accessKeyId: z.string().optional(),
  secretAccessKey: z.string().optional(),
});

export const RedundantBackendConfig = z.discriminatedUnion('type', [
  z.object({ ...Common, type: z.literal('fs'), dir: z.string().min(1) }),
  S3Backend,
  /** A Dropbox, Drive or OneDrive account as a blob store (redundant-backends.ts). */
  ...CloudBackendConfig.options,
]);
export type RedundantBackendConfig = z.infer<typeof RedundantBackendConfig>;

const DEFAULT_SCRUB = {
  intervalMs: 24 * 3600_000,
  bytesPerSecond: 10_000_000,
  sweepOrphans: true,
  orphanGraceMs: 3600_000,
  orphanDeletesPerSecond: 10,
};

export const RedundantTierConfig = z
  .object({
    type: z.literal('redundant'),
    /** Placement store and write spool. Default: <dataDir>/redundant. */
    dir: z.string().optional(),
    backends: z.array(RedundantBackendConfig).min(2),
    /** Below: replicated; at or above: striped. Default 512 KiB (measured: docs/redundancy.md). */
    thresholdBytes: z.number().int().min(1).optional(),
    replicas: z.number().int().min(1).optional(),
    k: z.number().int().min(2).optional(),
    m: z.number().int().min(1).optional(),
    maxShardBytes: z.number().int().min(1).max(0xffffffff).optional(),
    hedgeAfterMs: z.number().int().min(1).optional(),
    probeIntervalMs: z.number().int().min(0).optional(),
    /**
     * The single store this tier replaces (the former `objectTier`): its objects stay served
     * and move into placement in the background. fs `dir` default: <dataDir>/objects.
     */
    migrateFrom: z
      .discriminatedUnion('type', [
        z.object({ type: z.literal('fs'), dir: z.string().min(1).optional() }),
        S3Backend.omit({ id: true, pricePerGbMonth: true }),
      ])
      .optional(),
    /** The scrub the proxy runs in the background (storage-maintenance.ts). */
    scrub: z
      .object({
        /** Start a scrub this long after the last one ended; 0: never on a schedule. Default 24 h. */
        intervalMs: z.number().int().min(0).default(DEFAULT_SCRUB.intervalMs),
        /** Bytes read per second (all backends together); 0: unlimited. Default 10 MB/s. */
        bytesPerSecond: z.number().int().min(0).default(DEFAULT_SCRUB.bytesPerSecond),
        /** After each scrub, delete blobs no placement refers to (orphan-sweep.ts). Default true. */
        sweepOrphans: z.boolean().default(DEFAULT_SCRUB.sweepOrphans),
        /** Keep unreferenced blobs younger than this (ms). Default 1 h. */
        orphanGraceMs: z.number().int().min(0).default(DEFAULT_SCRUB.orphanGraceMs),
        /** Orphans deleted per second at most; 0: unlimited. Default 10. */
        orphanDeletesPerSecond: z.number().min(0).default(DEFAULT_SCRUB.orphanDeletesPerSecond),
      })
      .strict()
      .default(DEFAULT_SCRUB),
  })
  .refine((c) => new Set(c.backends.map((b) => b.id)).size === c.backends.length, {
    message: 'redundant object tier: backend ids must be distinct',
  });
export type RedundantTierConfig = z.infer<typeof RedundantTierConfig>;

/**
 * Open one backend from its config (at startup, and for a replacement); a cloud account's
 * refreshed tokens are kept below `stateDir` (the tier's folder) when given.
 */
export async function openBackend(b: RedundantBackendConfig, stateDir?: string): Promise<Provider> {
  if (b.type === 'fs')
    return FsProvider.open({ root: b.dir, portable: false, maxJournal: 2000, private: true });
  if (b.type !== 's3') return openCloudBackend(b, stateDir);
  return new S3Provider({
    bucket: b.bucket,
    prefix: b.prefix,
    ...(b.endpoint ? { endpoint: b.endpoint } : {}),
    region: b.region,
    forcePathStyle: b.forcePathStyle,
    ...(b.accessKeyId && b.secretAccessKey
      ? { credentials: { accessKeyId: b.accessKeyId, secretAccessKey: b.secretAccessKey } }
      : {}),
  });
}

/** The tier's own folder: placement store (SQLite), write spool. */
export function redundantTierDir(c: RedundantTierConfig, dataDir: string): string {
  return c.dir ?? nodePath.join(dataDir, 'redundant');
}

/**
 * Open the configured backends and the tier over them (outage log replayed when one comes
 * back); `store`: the placement store when not the tier's own SQLite file (PostgreSQL).
 */
export async function openRedundantTier(
  c: RedundantTierConfig,
  dataDir: string,
  store?: PlacementStore,
): Promise<RedundantProvider> {
  const backends = await Promise.all(
    c.backends.map(async (b) => ({
      id: b.id,
      provider: await openBackend(b, redundantTierDir(c, dataDir)),
      ...(b.pricePerGbMonth === undefined ? {} : { pricePerGbMonth: b.pricePerGbMonth }),
    })),
  );
  const from = c.migrateFrom;
  const legacy =
    from === undefined
      ? undefined
      : await openBackend(
          from.type === 'fs'
            ? { id: 'legacy', type: 'fs', dir: from.dir ?? nodePath.join(dataDir, 'objects') }
            : { ...from, id: 'legacy' },
        );
  const tier = openRedundantProvider({
    ...(legacy ? { legacy } : {}),
    ...(store ? { store } : {}),
    backends,
    dir: redundantTierDir(c, dataDir),
    name: 'objects:redundant',
    ...(c.thresholdBytes === undefined ? {} : { thresholdBytes: c.thresholdBytes }),
    ...(c.replicas === undefined ? {} : { replicas: c.replicas }),
    ...(c.k === undefined ? {} : { k: c.k }),
    ...(c.m === undefined ? {} : { m: c.m }),
    ...(c.maxShardBytes === undefined ? {} : { maxShardBytes: c.maxShardBytes }),
    ...(c.hedgeAfterMs === undefined ? {} : { hedgeAfterMs: c.hedgeAfterMs }),
    ...(c.probeIntervalMs === undefined ? {} : { probeIntervalMs: c.probeIntervalMs }),
  });
  await tier.ready();
  // Shared placement: no background work until the server hands the tier its controller role.
  if (store?.shared) tier.maintains = () => false;
  if (tier instanceof MigratingRedundantProvider) tier.startMigration();
  return tier;
}

/**
 * When the object tier is redundant: per-backend state and owed outage-log entries, and the
 * tier's event counts (hedged, degraded, failed and corrupt fragment reads, logged writes,
 * replayed entries), read from the tier at each scrape.
 */
export function registerRedundantMetrics(registry: Registry, objects: Provider): void {
  if (!(objects instanceof RedundantProvider)) return;
  const tier = objects;
  new Gauge({
    name: 'weft_redundant_backend_up',
    help: 'Redundant object tier: 1 when the backend is available, 0 while down',
    labelNames: ['backend'] as const,
    registers: [registry],
    async collect() {
      for (const h of await tier.health()) this.set({ backend: h.id }, h.state === 'available' ? 1 : 0);
    },
  });
  new Gauge({
    name: 'weft_redundant_outage_log_entries',
    help: 'Redundant object tier: outage-log entries waiting for each backend',
    labelNames: ['backend'] as const,
    registers: [registry],
    async collect() {
      for (const h of await tier.health()) this.set({ backend: h.id }, h.owed);
    },
  });
  new Counter({
    name: 'weft_redundant_events_total',
    help: 'Redundant object tier events since start, by kind',
    labelNames: ['kind'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [kind, n] of Object.entries(tier.metrics)) if (n > 0) this.inc({ kind }, n);
    },
  });
}

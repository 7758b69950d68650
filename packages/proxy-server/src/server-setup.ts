/**
 * The proxy's configuration mapped to the options of the parts server.ts composes: the tiers
 * (the fs tier's write-ahead log from bundleSyncMs), the cluster's ordering and admission, the
 * packer and its collector (config.packs).
 */
import * as nodePath from 'node:path';
import type { Logger } from 'pino';
import { collect, FsProvider, S3Provider, type Provider } from '@weft/providers';
import { PgAdmission } from './cluster/admission.ts';
import { PgOrdering } from './cluster/ordering.ts';
import type { ProxyConfig } from './config.ts';
import type { CostService } from './cost/service.ts';
import type { ProxyMetrics } from './metrics.ts';
import { openRedundantTier } from './redundant-tier.ts';
import type { HybridStore } from './store/hybrid.ts';
import { PackCollector } from './store/pack-gc.ts';
import { dropFsCopies } from './store/pack-stub.ts';
import { Packer } from './store/packs.ts';
import { PostgresPlacementStore } from './store/placement-postgres.ts';
import { CLUSTER_KEEPALIVES, connect as connectPostgres } from './store/postgres-db.ts';
import type { ReadCounter } from './store/read-counts.ts';
import type { SharedTables } from './store/shared-tables.ts';

/** The two tiers as the configuration describes them (and a shared redundant tier's placement). */
export async function openProviders(config: ProxyConfig): Promise<{
  fs: FsProvider;
  objects: Provider;
  fsRoot: string;
  placement: PostgresPlacementStore | undefined;
}> {
  const fsRoot = config.fsTierDir ?? nodePath.join(config.dataDir, 'fs');
  // The proxy keeps its own change feed in SQLite and never reads the fs provider's: without
  // it, no JSON line per file written (issue #16).
  // One process owning its tier makes a bundle durable with one sync of a write-ahead log
  // (FsProvider `batchLog`, replayed here at open, before reconcile()); processes sharing a
  // tier on PostgreSQL keep an fsync per file (one process's log must not replay over
  // another's later writes).
  const fs = await FsProvider.open({
    root: fsRoot,
    portable: false,
    changeFeed: false,
    private: true,
    batchLog: !config.databaseUrl && config.bundleSyncMs > 0 ? { checkpointMs: config.bundleSyncMs } : false,
  });
  const ot = config.objectTier;
  // A redundant tier on several instances: its placement in the shared database (issue #18).
  const placement =
    ot.type === 'redundant' && config.databaseUrl
      ? await PostgresPlacementStore.open(config.databaseUrl)
      : undefined;
  const objects: Provider =
    ot.type === 'redundant'
      ? await openRedundantTier(ot, config.dataDir, placement)
      : ot.type === 'fs'
        ? await FsProvider.open({
            root: ot.dir ?? nodePath.join(config.dataDir, 'objects'),
            portable: false,
            changeFeed: false,
            private: true,
          })
        : new S3Provider({
            bucket: ot.bucket,
            prefix: ot.prefix,
            ...(ot.endpoint ? { endpoint: ot.endpoint } : {}),
            region: ot.region,
            forcePathStyle: ot.forcePathStyle,
            ...(ot.accessKeyId && ot.secretAccessKey
              ? { credentials: { accessKeyId: ot.accessKeyId, secretAccessKey: ot.secretAccessKey } }
              : {}),
          });
  return { fs, objects, fsRoot, placement };
}

/**
 * Several instances on one PostgreSQL: their ordering of related operations and, with a
 * shared apply budget, their admission (none on SQLite).
 */
export async function openClusterOrdering(
  config: ProxyConfig,
  instanceId: string,
  log: Logger,
  metrics: ProxyMetrics,
): Promise<{ admission: PgAdmission | undefined; ordering: PgOrdering | undefined }> {
  // Several instances on one PostgreSQL: related operations ordered across them (cluster/ordering.ts).
  // With a shared budget (cluster.applySlots) the next slot goes to the smallest FOP over every
  // instance's queue (cluster/admission.ts).
  const admission =
    config.databaseUrl && config.cluster.applySlots > 0
      ? new PgAdmission(
          connectPostgres(config.databaseUrl, 2, {
            connection: { ...CLUSTER_KEEPALIVES, application_name: `weft-proxy/${instanceId}` },
            connect_timeout: 5,
          }),
          {
            instanceId,
            slots: config.cluster.applySlots,
            aliveMs: config.cluster.aliveMs,
            pollMs: config.cluster.queuePollMs,
            log,
            registry: metrics.registry,
          },
        )
      : undefined;
  await admission?.start();
  const ordering = config.databaseUrl
    ? new PgOrdering(config.databaseUrl, config.concurrency + 2, admission, `weft-proxy/${instanceId}`)
    : undefined;
  return { admission, ordering };
}

/** What the packer and its collector are given besides the configuration. */
export interface PackingParts {
  readonly tables: SharedTables;
  readonly objects: Provider;
  readonly fs: FsProvider;
  readonly store: HybridStore;
  readonly stubKey: Buffer;
  readonly cost: CostService;
  readonly reads: ReadCounter;
  readonly metrics: ProxyMetrics;
  readonly log: Logger;
  readonly now?: () => number;
}

/**
 * The packer of small files (config.packs) and its collector, with what a crash left
 * recovered and what waits to be packed notified.
 */
export async function openPacking(
  config: ProxyConfig,
  d: PackingParts,
): Promise<{ packer: Packer; packGc: PackCollector }> {
  const packer = new Packer({
    index: d.tables.packs,
    objects: d.objects,
    readSmall: async (user, path) => collect(await d.fs.read(d.store.nsPath(user, path))),
    ...(config.packs.fsCopy === 'keep'
      ? {}
      : {
          dropSmall: async (files) => {
            await dropFsCopies(
              { fs: d.fs, index: d.tables.packs, key: d.stubKey, nsPath: (u, p) => d.store.nsPath(u, p) },
              files,
            );
          },
          // 'cost': keep while a month on the fs tier costs less than serving the file's
          // reads from the pack, at the rate its content has been read (docs/cost.md).
          fsCopyPolicy:
            config.packs.fsCopy === 'drop'
              ? () => 'drop' as const
              : async (f) =>
                  d.cost.keepFsCopy(f.size, await d.reads.readsPerMonth(f.sha256)).keep ? 'keep' : 'drop',
        }),
    log: d.log,
    targetBytes: config.packs.targetBytes,
    timeoutMs: config.packs.timeoutMs,
    ...(config.packs.idleMs !== undefined ? { idleMs: config.packs.idleMs } : {}),
    ...(d.now ? { now: d.now } : {}),
  });
  const packGc = new PackCollector({
    packer,
    cost: d.cost,
    log: d.log,
    intervalMs: config.packs.gcIntervalMs,
    ...(d.now ? { now: d.now } : {}),
  });
  d.metrics.packPending(() => packer.pendingCount());
  // A pack written but not indexed before a crash, then whatever waits to be packed.
  await packer.recoverUnindexed();
  if ((await packer.pending(1)).length > 0) packer.notify(0);
  return { packer, packGc };
}

/**
 * The Weft proxy server: composition, listen and close. The HTTP API lives in http/*.ts
 * (one module per area, each handler a few lines over a service), the storage in store/.
 * `startProxyServer(config)` runs it in-process (tests, `npm start`); bin/weft-proxy.mjs
 * runs it from a config file.
 */
import { randomBytes } from 'node:crypto';
import * as nodePath from 'node:path';
import type { FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import { type Provider, withCounting } from '@weft/providers';
import { RedundantProvider } from '@weft/providers/redundant';
import type { ChangeRecord, ErrorCode } from '@weft/wire';
import { hashSecret } from './auth.ts';
import { BundleService } from './bundles.ts';
import { ChangeHub } from './change-hub.ts';
import { parseConfig, quotaLimit, type ProxyConfig, type ProxyConfigInput } from './config.ts';
import type { ClusterRole } from './cluster/lease.ts';
import { ActiveTransfers, LoadMeter } from './cluster/load.ts';
import { LeaderJobs, openClusterRole, reconcileJob, writeGate } from './cluster/role.ts';
import { InstanceRegistry } from './cluster/registry.ts';
import { countFs } from './cost/count-fs.ts';
import { CostService } from './cost/service.ts';
import { DeltaService } from './deltas.ts';
import { Enrolment } from './enrolment.ts';
import { createHttpApp, routeContext } from './http/app.ts';
import { registerChangeRoutes } from './http/changes.ts';
import { registerClusterRoutes } from './http/cluster.ts';
import { registerCostRoutes } from './http/cost.ts';
import { registerDeltaRoutes } from './http/deltas.ts';
import { DeviceSessions, registerDeviceRoutes } from './http/devices.ts';
import { registerEnrolmentRoutes } from './http/enrolment.ts';
import { registerFileRoutes } from './http/files.ts';
import { registerOpRoutes } from './http/ops.ts';
import type { RouteDoc } from './http/route.ts';
import { registerShareRoutes } from './http/shares.ts';
import { registerStorageRoutes } from './http/storage.ts';
import { registerSystemRoutes } from './http/system.ts';
import { registerTransferRoutes } from './http/transfers.ts';
import { registerVersionRoutes } from './http/versions.ts';
import { MerkleIndex } from './merkle.ts';
import { ProxyMetrics } from './metrics.ts';
import { OpService } from './ops.ts';
import { registerPeerLink, type PeerLink } from './peer-link.ts';
import { PeerRouter } from './peer-routing.ts';
import { privateDir } from './private-files.ts';
import { opLogger } from './op-log.ts';
import { OpScheduler } from './scheduler.ts';
import type { VaultKeys } from '@weft/mirror';
import { PostgresShareBook } from './shares/book-postgres.ts';
import { PostgresMirrorBooks, termFence } from './shares/mirror-books-postgres.ts';
import { MIRROR_DEVICE_PREFIX, ShareService, type ShareServiceOptions } from './shares/service.ts';
import { HybridStore } from './store/hybrid.ts';
import { RelayCache } from './store/relay-cache.ts';
import { PostgresRelayBook } from './store/relay-book-postgres.ts';
import { PackCollector, type PackGcPass } from './store/pack-gc.ts';
import { decodeStub, loadSharedStubKey, loadStubKey } from './store/pack-stub.ts';
import { Packer } from './store/packs.ts';
import { ReadCounter } from './store/read-counts.ts';
import type { MetadataStore } from './store/metadata.ts';
import { connect as connectPostgres } from './store/postgres-db.ts';
import { openPostgresStore } from './store/postgres.ts';
import { postgresTables, sqliteTables } from './store/shared-tables.ts';
import { SqliteMetadataStore } from './store/sqlite.ts';
import { registerRedundantMetrics } from './redundant-tier.ts';
import { openClusterOrdering, openPacking, openProviders } from './server-setup.ts';
import { openStorageMaintenance } from './storage-maintenance.ts';
import { PENDING_RECONCILE_MS, PendingReconciler } from './store/pack-pending-reconcile.ts';
import { userObjectKeys } from './store/user-objects.ts';
import { TransferService } from './transfers.ts';
import { VersionService } from './versions.ts';

export { SERVER_VERSION } from './version.ts';
export { parseRange } from './http/files.ts';

export interface RunningProxyServer {
  /** Base URL, e.g. http://127.0.0.1:41234 */
  readonly url: string;
  /**
   * The admin token guarding enrolment (the configured one, or a generated one). A server
   * configured with `adminTokenSha256` never holds the token: reading this then throws.
   */
  readonly adminToken: string;
  readonly config: ProxyConfig;
  readonly app: FastifyInstance;
  readonly store: HybridStore;
  /** The object tier (a RedundantProvider when `objectTier.type` is 'redundant'). */
  readonly objects: Provider;
  readonly scheduler: OpScheduler;
  /** The inter-proxy endpoint, when the config has a `peer` section. */
  readonly peerLink?: PeerLink;
  /** Bandwidth probes and write routing between proxies (when the peer link is configured). */
  readonly peerRouter?: PeerRouter;
  /** Run garbage collection now (grace period from the config unless given). */
  gc(graceMs?: number): Promise<{ objects: number; orphans: number; transfers: number; versions: number }>;
  /** Enrol a device directly (for `npm start` and tests). */
  enrol(user: string, deviceName: string): Promise<{ token: string; deviceId: string }>;
  /** Cost accounting (docs/cost.md). */
  readonly cost: CostService;
  /** The packer of small files into pack blobs (docs/formats/pack.md); absent when disabled. */
  readonly packer?: Packer;
  /** One pass of the cost-driven pack collector now (docs/cost.md); absent when packs are disabled. */
  packGc?(): Promise<PackGcPass>;
  /** Cross-cloud shared folders (absent when config.shares.enabled is false). */
  readonly shares?: ShareService;
  /** This instance among those sharing its database: load, steering (cluster/registry.ts). */
  readonly instances: InstanceRegistry;
  /** The controller role (cluster/lease.ts): GC, reconciliation and scrub run on its holder. */
  readonly cluster: ClusterRole;
  close(): Promise<void>;
}

/** Start a proxy server. Defaults: 127.0.0.1, a free port, everything under config.dataDir. */
export async function startProxyServer(
  input: ProxyConfigInput = {},
  options: {
    logger?: Logger;
    shares?: Pick<ShareServiceOptions, 'wrap'>;
    /** The clock of the cost model, the packer and the pack collector (tests replay months). */
    now?: () => number;
  } = {},
): Promise<RunningProxyServer> {
  const config = parseConfig(input);
  // One id for this run everywhere (instance registry, controller lease, logs).
  config.instanceId ??= randomBytes(6).toString('hex');
  const log = options.logger ?? pino({ level: config.logLevel, name: 'weft-proxy' });
  // Owner-only, whatever the umask (the data directory, and every folder and file below).
  privateDir(config.dataDir);
  // The check needs only the token's hash; with `adminTokenSha256` the plaintext never exists here.
  const adminToken = config.adminTokenSha256
    ? undefined
    : (config.adminToken ?? 'wfa_' + randomBytes(24).toString('base64url'));
  const adminTokenSha256 = config.adminTokenSha256 ?? hashSecret(adminToken ?? '');
  const metrics = new ProxyMetrics();
  const tiers = await openProviders(config);
  registerRedundantMetrics(metrics.registry, tiers.objects);
  const sqlite = new SqliteMetadataStore(
    config.metadataFile ?? nodePath.join(config.dataDir, 'metadata.sqlite'),
  );
  const pg = config.databaseUrl ? await openPostgresStore(config.databaseUrl, log) : undefined;
  const meta: MetadataStore = pg ?? sqlite;
  // Packs, reads per content and the cost ledger live beside the metadata (shared on PostgreSQL).
  const tables = pg ? postgresTables(pg.connection) : sqliteTables(sqlite.database);
  const { admission, ordering } = await openClusterOrdering(config, config.instanceId, log, metrics);
  // Every request to a tier is counted for the cost model (docs/cost.md).
  const cost = new CostService(tables.cost, config.cost, metrics, log, options.now);
  const { fsRoot } = tiers;
  const fs = countFs(tiers.fs, cost.sink('fs'));
  const objects = withCounting(tiers.objects, cost.sink('objects'));
  const hub = new ChangeHub({
    meta,
    batchMs: config.shares.notifyBatchMs,
    isMirror: (r) => r.device?.startsWith(MIRROR_DEVICE_PREFIX) ?? false,
  });
  const merkle = new MerkleIndex(meta);
  // Changes recorded by any process sharing the store (PostgreSQL) wake this one's feeds; the
  // hashes cached for that namespace may predate them.
  const unwatch = await meta.watchChanges((userId) => {
    merkle.forget(userId);
    hub.wake(userId);
  });
  const devices = new DeviceSessions(meta);
  const scheduler = new OpScheduler({
    concurrency: config.concurrency,
    ...(config.opLogFile ? { onDone: opLogger(config.opLogFile, config.instanceId ?? 'local') } : {}),
    ...(ordering
      ? {
          around: <T>(ns: string, paths: readonly string[], run: () => Promise<T>, fop: number) =>
            ordering.around(ns, paths, run, fop),
        }
      : {}),
  });
  // With PostgreSQL the relay directory (on the shared filesystem tier) has shared books.
  const relay = new RelayCache(nodePath.join(fsRoot, 'relay'), config.relayCacheBytes, objects, {
    onStaged: (bytes, ms) => {
      metrics.transferSeconds.observe({ kind: 'relay-stage' }, ms / 1000);
      metrics.bytes.inc({ tier: 'object', direction: 'out' }, bytes);
      scheduler.bandwidth.record(bytes, ms);
    },
    ...(config.databaseUrl ? { book: PostgresRelayBook.open(config.databaseUrl) } : {}),
  });
  await relay.init();
  let packer: Packer | undefined;
  let packGc: PackCollector | undefined;
  const clock = options.now ?? Date.now;
  // Several processes on one PostgreSQL share one stub key (their data directories differ).
  const stubKey = pg ? await loadSharedStubKey(pg.connection) : await loadStubKey(config.dataDir);
  const store = new HybridStore({
    fs,
    objects,
    meta,
    relay,
    // A small file whose filesystem-tier copy was dropped is read from its pack (pack-stub.ts).
    readPacked: async (sha256, range) => packer?.readDropped(sha256, range),
    packedStub: async (bytes) => {
      const stub = decodeStub(stubKey, bytes);
      if (stub) await tables.packs.markDropped([stub.sha256], clock());
      return stub;
    },
    stagingDir: nodePath.join(fsRoot, 'staging'),
    smallFileBytes: config.smallFileBytes,
    quotaLimit: (userId) => quotaLimit(config.quota, userId),
    versionRetentionMs: config.versions.retentionDays * 24 * 3600 * 1000,
    log,
    metrics,
    onChanges: (userId: string, records: ChangeRecord[]) => {
      for (const r of records) {
        if (r.type === 'upsert' && r.entry.tier === 'small')
          packer?.notify(r.entry.size, { userId, path: r.path });
        // A moved file is queued at its new path; a moved folder's files are found by listing.
        if (r.type === 'move')
          packer?.notify(0, r.entry.kind === 'dir' ? undefined : { userId, path: r.path });
        // A delete or an overwrite may leave packed content unreferenced: date it soon.
        if (r.type === 'delete' || (r.type === 'upsert' && r.entry.kind === 'file')) packGc?.markSoon();
        merkle.invalidate(userId, r.path);
        if (r.type === 'move') merkle.invalidate(userId, r.from);
      }
      hub.notify(userId, records);
    },
    onObjectTransfer: (bytes, ms) => scheduler.bandwidth.record(bytes, ms),
  });
  await store.clearTemps();
  // Crash recovery: the filesystem tier is the truth for every namespace. On PostgreSQL the
  // controller does it, each namespace while no instance applies to it (below).
  if (!pg) {
    for (const user of await meta.listUsers()) await store.reconcile(user);
    await meta.recomputeRefcounts(Date.now());
  }
  // Reads per content, for the 'cost' keep-or-drop decision of a packed file's fs copy.
  const reads = new ReadCounter(tables.reads, {
    onError: (err) => log.warn({ err }, 'reads per content not written'),
  });
  if (config.packs.enabled)
    ({ packer, packGc } = await openPacking(config, {
      tables,
      objects,
      fs,
      store,
      stubKey,
      cost,
      reads,
      metrics,
      log,
      ...(options.now ? { now: options.now } : {}),
    }));
  const transfers = new TransferService(store, metrics, config.maxFileBytes);
  const enrolment = new Enrolment({
    meta,
    ensureNamespace: (user) => store.ensureNamespace(user),
    adminTokenSha256,
    inviteTtlMs: config.inviteTtlMs,
    failuresPerMinute: config.enrolFailuresPerMinute,
  });
  const ops = new OpService({ store, scheduler, transfers, metrics, log });
  const bundles = new BundleService({
    store,
    scheduler,
    readPackedMany: async (sha256s) => packer?.readDroppedMany(sha256s) ?? new Map<string, Uint8Array>(),
    onRead: (sha) => reads.count(sha),
    offer: async (entries) => packer?.offerAll(entries),
    busy: () => packer?.busy() ?? (() => undefined),
  });
  const deltas = new DeltaService({
    store,
    scheduler,
    limits: { maxDeltaBytes: config.maxDeltaBytes, maxFileBytes: config.maxFileBytes },
  });

  const held: { role?: ClusterRole } = {}; // the write gate's view, set once the role is open
  const { app, slowClients } = await createHttpApp({
    config,
    log,
    meta,
    devices,
    metrics,
    gate: writeGate(() => held.role),
  });
  // The instance registry (several instances on one PostgreSQL; just this one on SQLite).
  const activeTransfers = new ActiveTransfers();
  activeTransfers.install(app);
  const instanceSql = config.databaseUrl ? connectPostgres(config.databaseUrl, 2) : undefined;
  const instances = new InstanceRegistry({
    ...(instanceSql ? { sql: instanceSql } : {}),
    id: config.instanceId,
    heartbeatMs: config.cluster.heartbeatMs,
    aliveMs: config.cluster.aliveMs,
    meter: new LoadMeter({
      windowMs: config.cluster.windowMs,
      minCapacityBps: config.cluster.minCapacityBps,
      ...(config.cluster.capacityBps ? { capacityBps: config.cluster.capacityBps } : {}),
    }),
    active: activeTransfers,
    clientBytes: async () =>
      (await metrics.bytes.get()).values
        .filter((v) => v.labels.tier === 'client')
        .reduce((sum, v) => sum + v.value, 0),
    log,
  });
  // The controller role (a PostgreSQL lease; always this process on SQLite) and its jobs.
  const role = await openClusterRole({
    databaseUrl: config.databaseUrl,
    instanceId: instances.id,
    ttlMs: config.cluster.leaseTtlMs,
    renewMs: config.cluster.leaseRenewMs,
    log,
    registry: metrics.registry,
  });
  held.role = role;
  if (pg) pg.fence = (tx) => role.fence(tx);
  const leaderJobs = new LeaderJobs(role, log);
  // A redundant tier shared by several instances: its background work (outage-log replay,
  // scrub, orphan sweep, replacement) is the controller's, its writes fenced by the lease.
  if (tiers.placement) tiers.placement.fence = (tx) => role.fence(tx);
  if (tiers.objects instanceof RedundantProvider && tiers.placement) {
    const tier = tiers.objects;
    tier.maintains = () => role.isController();
    // A new controller takes over the outage log where the last one left it (the probe
    // replays every backend with entries waiting), without waiting for the probe's timer.
    leaderJobs.add('redundant-replay', {
      start() {
        tier.probe().catch((err: unknown) => log.error({ err }, 'redundant tier: replay failed'));
      },
      stop() {},
    });
  }
  const docs: RouteDoc[] = [];
  const ctx = routeContext(app, docs);
  // Registration order is the OpenAPI document's order.
  registerSystemRoutes(ctx, { metrics, scheduler, docs });
  registerEnrolmentRoutes(ctx, { enrolment, store });
  registerFileRoutes(ctx, { store, onRead: (sha) => reads.count(sha) });
  registerOpRoutes(ctx, { ops, bundles, scheduler, maxQueueDepth: config.maxQueueDepth });
  registerTransferRoutes(ctx, {
    transfers,
    devices,
    // New transfers are steered to the instance with the most available bandwidth.
    steer: () => {
      const p = instances.preferred();
      return p.id === instances.id ? undefined : { id: p.id, url: p.url };
    },
  });
  registerClusterRoutes(ctx, instances, (token) => enrolment.requireAdmin(token));
  await registerDeltaRoutes(ctx, { deltas, store, maxSignatureBytes: config.maxSignatureBytes });
  registerChangeRoutes(ctx, { meta, hub, merkle, devices, metrics });
  registerCostRoutes(ctx, cost);
  registerVersionRoutes(
    ctx,
    new VersionService({ store, scheduler, retentionDays: config.versions.retentionDays }),
  );

  if (config.databaseUrl && config.shares.enabled && !config.shares.key && !config.shares.keyFile)
    log.warn(
      'shares on PostgreSQL without shares.key: this instance encrypts accounts with its own key file, which other instances cannot read',
    );
  const shares = config.shares.enabled
    ? new ShareService({
        config: config.shares,
        dataDir: config.dataDir,
        store,
        scheduler,
        log,
        ...(options.shares?.wrap ? { wrap: options.shares.wrap } : {}),
        // With PostgreSQL every instance serves the same shares (the registry there), and the
        // engines' books are there too, their writes fenced by the controller lease.
        ...(config.databaseUrl
          ? {
              openBook: (keys: VaultKeys) => PostgresShareBook.open(config.databaseUrl!, keys),
              books: PostgresMirrorBooks.open(config.databaseUrl, { fenceFor: termFence(role) }),
            }
          : {}),
        // The mirror engines are the controller's (below): one instance writes their books.
        engines: false,
        waitForSeq: (user, seq, signal) => hub.waitForSeq(user, seq, signal),
      })
    : undefined;
  if (shares) registerShareRoutes(ctx, shares);
  registerDeviceRoutes(ctx, meta, devices);
  // A redundant object tier: scrub on a schedule, status and the operator's jobs (docs/redundancy.md).
  const maintenance = await openStorageMaintenance(config, tiers.objects, log, metrics.registry, {
    runScheduled: () => role.isController(),
  });
  registerStorageRoutes(ctx, {
    objectTier: config.objectTier.type,
    maintenance,
    requireAdmin: (token) => enrolment.requireAdmin(token),
    userObjects: (user) => userObjectKeys(meta, tables.packs, user),
  });

  let gcTimer: NodeJS.Timeout | undefined;
  leaderJobs.add('gc', {
    start() {
      if (config.gcIntervalMs <= 0) return;
      gcTimer = setInterval(() => {
        store.gc(config.gcGraceMs).catch((err: unknown) => log.error({ err }, 'garbage collection failed'));
      }, config.gcIntervalMs);
      gcTimer.unref();
    },
    stop() {
      clearInterval(gcTimer);
      gcTimer = undefined;
    },
  });
  // The pack collector's passes on the controller only (concurrent passes would be safe —
  // a repack claims its pack — but one is enough); every instance packs its own writes.
  leaderJobs.add('pack-gc', {
    start: () => packGc?.start(),
    stop: () => packGc?.stop(),
  });
  // PostgreSQL: the pack pending count's drift (concurrent commits) recounted away at start and
  // every 10 minutes when idle, on the controller (store/pack-pending-reconcile.ts).
  const reconcilePending = tables.packs.reconcilePending?.bind(tables.packs);
  if (reconcilePending && config.packs.enabled) {
    const fix = new PendingReconciler({
      reconcile: reconcilePending,
      log,
      intervalMs: PENDING_RECONCILE_MS,
      busy: () => scheduler.depth > 0,
      onCorrection: (delta) => metrics.packPendingCorrected(delta),
    });
    leaderJobs.add('pack-pending', { start: () => fix.start(), stop: () => fix.stop() });
  }
  if (pg && ordering)
    leaderJobs.add(
      'reconcile',
      reconcileJob({
        role,
        listUsers: () => meta.listUsers(),
        reconcile: (user) => store.reconcile(user),
        exclusive: (user, fn) => ordering.exclusive(user, fn),
        recount: () => meta.recomputeRefcounts(Date.now()),
        instanceIds: () => instances.instances().map((r) => r.id),
        everyMs: config.cluster.heartbeatMs,
        log,
      }),
    );
  await leaderJobs.begin();

  const peerLink = config.peer ? await registerPeerLink(app, config.peer, config.dataDir, log) : undefined;
  const peerRouter =
    peerLink && config.peer?.routing.enabled
      ? new PeerRouter({
          link: peerLink,
          endpoints: config.shares.endpoints,
          intervalMs: config.peer.routing.intervalMs,
          probeBytes: config.peer.routing.probeBytes,
          writeTimeoutMs: config.peer.routing.writeTimeoutMs,
          log,
        })
      : undefined;
  if (peerRouter && shares) shares.providerRoute = peerRouter.route;
  cost.start();
  const address = await app.listen({ host: config.host, port: config.port });
  // The share mirror engines run where the controller role is (always here on SQLite).
  const followRole = () =>
    shares
      ?.setEngines(role.isController())
      .catch((err: unknown) => log.error({ err }, 'share engines failed'));
  const unfollowRole = shares ? role.onChange(() => void followRole()) : undefined;
  await followRole();
  peerRouter?.start();
  const url = address.replace('[::1]', 'localhost');
  await instances.start(config.publicUrl ?? url);
  log.info({ url, dataDir: config.dataDir, objectTier: config.objectTier.type }, 'weft proxy listening');
  if (!config.adminToken && !config.adminTokenSha256)
    log.info('no adminToken configured: a random one was generated for this run');

  let closed = false;
  return {
    url,
    get adminToken(): string {
      if (adminToken === undefined)
        throw new Error('this server was given only the admin token’s hash (adminTokenSha256)');
      return adminToken;
    },
    config,
    app,
    store,
    objects: tiers.objects,
    scheduler,
    ...(peerLink ? { peerLink } : {}),
    ...(peerRouter ? { peerRouter } : {}),
    gc: (graceMs?: number) => store.gc(graceMs ?? config.gcGraceMs),
    enrol: (user: string, deviceName: string) => enrolment.enrolDevice(user, deviceName),
    ...(shares ? { shares } : {}),
    instances,
    cluster: role,
    cost,
    ...(packer ? { packer } : {}),
    ...(packGc ? { packGc: () => packGc.run() } : {}),
    async close() {
      if (closed) return;
      closed = true;
      await leaderJobs.close();
      await instances.close();
      await instanceSql?.end();
      await peerRouter?.stop();
      unfollowRole?.();
      await shares?.close();
      await unwatch();
      hub.close();
      for (const c of app.websocketServer?.clients ?? []) c.terminate();
      slowClients.close();
      await app.close();
      await ordering?.close();
      await admission?.close();
      await packGc?.close();
      await packer?.close();
      await maintenance?.close();
      await relay.close();
      await fs.close();
      await objects.close?.();
      await cost.close();
      await reads.close();
      await role.close();
      if (meta !== sqlite) await meta.close();
      await sqlite.close();
    },
  };
}

export type { ErrorCode };

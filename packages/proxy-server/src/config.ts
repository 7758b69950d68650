/**
 * Server configuration: one JSON file plus WEFT_PROXY_* environment overrides, validated
 * with zod. Everything has an embedded default, so `{}` starts a working server.
 */
import { readFileSync } from 'node:fs';
import * as nodePath from 'node:path';
import * as os from 'node:os';
import { z } from 'zod/v4';
import { ClusterConfig } from './cluster/config.ts';
import { CostConfig } from './cost/prices.ts';
import { PeerLinkConfig } from './peer-link.ts';
import { RedundantTierConfig } from './redundant-tier.ts';

const MiB = 1024 * 1024;

export const ObjectTierConfig = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('fs'),
    /** Default: <dataDir>/objects. */
    dir: z.string().optional(),
  }),
  z.object({
    type: z.literal('s3'),
    bucket: z.string().min(1),
    prefix: z.string().default(''),
    endpoint: z.string().optional(),
    region: z.string().default('us-east-1'),
    forcePathStyle: z.boolean().default(false),
    accessKeyId: z.string().optional(),
    secretAccessKey: z.string().optional(),
  }),
  /** Several backends, small objects replicated and large ones erasure-coded (docs/redundancy.md). */
  RedundantTierConfig,
]);

const OAuthClient = z.object({
  clientId: z.string().min(1),
  clientSecret: z.string().optional(),
  /**
   * Where refresh tokens are redeemed, when not the cloud's usual endpoint: another Microsoft
   * tenant's, or a local emulator's (the agent's WEFT_*_TOKEN_URL, passed on by npm start).
   */
  tokenUrl: z
    .string()
    .url()
    .refine(
      (u) => /^https:/.test(u) || /^http:\/\/(127\.0\.0\.1|localhost|\[::1\])[:/]/.test(u),
      'an https: URL (http: only on 127.0.0.1 or localhost)',
    )
    .optional(),
});

/** Cross-cloud shared folders served by this proxy (docs/sharing.md, docs/formats/api.md). */
export const SharesConfig = z.object({
  enabled: z.boolean().default(true),
  /**
   * The mirror's SQLite file (shares, log, encrypted credentials). Default: <dataDir>/mirror.sqlite.
   * Unused with `databaseUrl`: the registry and the engines' books are then on PostgreSQL.
   */
  mirrorFile: z.string().optional(),
  /**
   * The key that encrypts connected accounts' tokens at rest (32 bytes: 64 hex digits or
   * base64). Default: WEFT_MIRROR_KEY, else a key file (created, mode 0600, when missing).
   */
  key: z.string().optional(),
  /** Earlier keys, for reading records not yet rotated: key id → key. */
  oldKeys: z.record(z.string(), z.string()).default({}),
  /** Default: <dataDir>/mirror.key. */
  keyFile: z.string().optional(),
  /** Pause between mirror rounds for replicas without push/long-poll notification. */
  pollIntervalMs: z.number().int().min(10).default(2000),
  /**
   * How often a share replica that is unavailable (full, unauthorised, failing) is tried
   * again: up to `first` after its second failed try, doubling with each one up to `max`; a
   * cloud's Retry-After replaces the wait, capped at `max` (docs/mirror.md). Default 2 s and
   * 10 min.
   */
  probeBackoffMs: z
    .object({
      first: z.number().int().min(0).default(2000),
      max: z.number().int().min(0).default(600_000),
    })
    .refine((b) => b.first <= b.max, { message: 'probeBackoffMs: first must not exceed max' })
    .optional(),
  /** Dropbox list_folder/longpoll timeout (Dropbox accepts 30–480 s). */
  longpollTimeoutSeconds: z.number().int().min(30).max(480).default(60),
  /** Mirror writes into a namespace reach its feed clients in batches at most this often. */
  notifyBatchMs: z.number().int().min(0).default(250),
  /** API origins (emulators, tests); default the clouds' own. */
  endpoints: z
    .object({
      dropbox: z.string().url().optional(),
      gdrive: z.string().url().optional(),
      onedrive: z.string().url().optional(),
    })
    .default({}),
  /** OAuth clients, so the server can refresh access tokens with the stored refresh tokens. */
  oauth: z
    .object({
      dropbox: OAuthClient.optional(),
      gdrive: OAuthClient.optional(),
      onedrive: OAuthClient.optional(),
    })
    .default({}),
});
export type SharesConfig = z.infer<typeof SharesConfig>;

/**
 * Timeouts against slow clients (Slowloris and slow-body attacks). A request's body must
 * arrive within `bodyMs`, extended by one second for every `bodyMinBytesPerSecond` bytes
 * received (Apache mod_reqtimeout's rule), so a fast upload of any size is never cut while
 * a connection trickling a byte every few seconds is closed after about `bodyMs`.
 */
export const TimeoutsConfig = z.object({
  /** A connection with no bytes in either direction for this long is closed (0 = never). */
  idleMs: z.number().int().min(0).default(60_000),
  /** The request line and headers must arrive within this (0 = never). */
  headersMs: z.number().int().min(0).default(30_000),
  /** Initial allowance for a request body (0 = no body timeout). */
  bodyMs: z.number().int().min(0).default(20_000),
  /** Each this many bytes of body received extend the allowance by one second. */
  bodyMinBytesPerSecond: z.number().int().positive().default(500),
});
export type TimeoutsConfig = z.infer<typeof TimeoutsConfig>;

/**
 * Per-user storage quotas (docs/proxy-server.md, "Quotas"): what a user's namespace may hold,
 * counted in logical bytes (every file's size once per path, as stored: a compressed upload
 * counts at its expanded size, a deduplicated object at its full size in each namespace).
 */
export const QuotaConfig = z.object({
  /** Every user's limit in bytes; null (the default) = unlimited. */
  defaultBytes: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).nullable().default(null),
  /** Per-user overrides: user id → bytes, or null for unlimited. */
  users: z.record(z.string(), z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).nullable()).default({}),
});
export type QuotaConfig = z.infer<typeof QuotaConfig>;

/** The quota that applies to `userId` (undefined: unlimited). */
export function quotaLimit(q: QuotaConfig, userId: string): number | undefined {
  const own = Object.hasOwn(q.users, userId) ? q.users[userId] : q.defaultBytes;
  return own ?? undefined;
}

export const ProxyConfig = z.object({
  host: z.string().default('127.0.0.1'),
  port: z.number().int().min(0).max(65535).default(0),
  /** Root of everything the server stores unless placed elsewhere below. */
  dataDir: z.string().default(nodePath.join(os.homedir(), '.weft', 'proxy')),
  /** Filesystem tier (EFS in production). Default: <dataDir>/fs. */
  fsTierDir: z.string().optional(),
  objectTier: ObjectTierConfig.default({ type: 'fs' }),
  /** SQLite file. Default: <dataDir>/metadata.sqlite. */
  metadataFile: z.string().optional(),
  /**
   * PostgreSQL for the metadata store instead of the SQLite file (docs/deployment.md):
   * `postgres://user:password@host:5432/db`. Several proxy processes may share one database:
   * the pack index, cost ledger, relay-cache books, shares and mirror books, and a redundant
   * tier's placement are all on it then.
   */
  databaseUrl: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'a postgres:// or postgresql:// URL')
    .optional(),
  /**
   * Guards enrolment. Default: a random token, returned by startProxyServer and logged once.
   * Prefer `adminTokenSha256`, which keeps the token itself out of the config.
   */
  adminToken: z.string().min(16).optional(),
  /**
   * The admin token's SHA-256, 64 lowercase hex digits (`printf %s TOKEN | sha256sum`): the
   * server then never holds the token itself. Give this or `adminToken`, not both.
   */
  adminTokenSha256: z
    .string()
    .regex(/^[0-9a-f]{64}$/, 'adminTokenSha256 is 64 lowercase hex digits (the SHA-256 of the token)')
    .optional(),
  /** Lifetime of an enrolment invite unless its request says otherwise (default 7 days). */
  inviteTtlMs: z
    .number()
    .int()
    .positive()
    .default(7 * 24 * 3600 * 1000),
  /**
   * Refused enrolments (a bad, used, expired or other user's invite, a wrong admin token)
   * allowed per client address per minute; beyond it `POST /v1/enrol` answers 503 SLOW_DOWN.
   */
  enrolFailuresPerMinute: z.number().int().positive().default(10),
  tls: z.object({ certFile: z.string(), keyFile: z.string() }).optional(),
  smallFileBytes: z
    .number()
    .int()
    .positive()
    .default(2 * MiB),
  /**
   * Bundle durability (issue #16): a bundle's small files are acknowledged once the bundle is
   * in the fs tier's write-ahead log (one sync), and synced in place together this many ms
   * later (the log's checkpoint; sooner before another change of a logged path). 0: an fsync
   * per file instead, no log. Ignored with `databaseUrl` (processes sharing a tier fsync per file).
   */
  bundleSyncMs: z.number().int().min(0).default(1000),
  /** The packer (docs/formats/pack.md): target pack size and flush timeout; `enabled: false` keeps small files on the fs tier only. */
  packs: z
    .object({
      enabled: z.boolean().default(true),
      targetBytes: z
        .number()
        .int()
        .min(64 * 1024)
        .default(16 * MiB),
      timeoutMs: z.number().int().positive().default(5000),
      /**
       * Flush what is pending once no bundle has been in flight for this long (0: off; default
       * a fifth of `timeoutMs`, 1 s); the timeout stays the maximum age (store/packs.ts).
       */
      idleMs: z.number().int().min(0).optional(),
      /**
       * How often the pack collector asks the cost model about packs holding dead bytes
       * (docs/cost.md); 0 turns the timer off. Default 1 h: Coral's crossover for a 16 MiB
       * S3 pack is days to months away, an hour late costs next to nothing.
       */
      gcIntervalMs: z
        .number()
        .int()
        .min(0)
        .default(3600 * 1000),
      /**
       * A small file's filesystem-tier copy once its pack is flushed: 'keep' it (default),
       * 'drop' it (reads come from the pack), or let the cost model decide per file ('cost':
       * policy.fsCopyDecision on the two tiers' prices).
       */
      fsCopy: z.enum(['keep', 'drop', 'cost']).default('keep'),
    })
    .prefault({}),
  relayCacheBytes: z
    .number()
    .int()
    .positive()
    .default(1024 * MiB),
  /** How long an unreferenced object is kept (default 24 h). */
  gcGraceMs: z
    .number()
    .int()
    .min(0)
    .default(24 * 3600 * 1000),
  gcIntervalMs: z
    .number()
    .int()
    .min(0)
    .default(3600 * 1000),
  /**
   * Versions and deleted files (docs/proxy-server.md): a file overwritten with other content
   * or deleted stays restorable for `retentionDays` (Dropbox Basic's 30 days by default);
   * 0 keeps nothing (an overwrite or a delete is final at once, as before).
   */
  versions: z.object({ retentionDays: z.number().min(0).max(3650).default(30) }).prefault({}),
  /** Unrelated operations applied at once. */
  concurrency: z.number().int().positive().default(8),
  /** Waiting operations above which writes get 503 SLOW_DOWN (back-pressure). */
  maxQueueDepth: z.number().int().positive().default(20_000),
  /** Largest delta container accepted (it is streamed: this bounds time and disk, not memory). */
  maxDeltaBytes: z
    .number()
    .int()
    .positive()
    .default(512 * MiB),
  /**
   * Largest rsync signature accepted by a delta download (it is held in memory with its
   * index, about 4 × its size). 128 MiB covers a 5 GiB file at the client's smallest block
   * size (512 bytes, 12 bytes per block) and 1 TiB at 64 KiB blocks.
   */
  maxSignatureBytes: z
    .number()
    .int()
    .positive()
    .default(128 * MiB),
  /**
   * Largest file a client may declare (large-file transfer, delta target). A transfer's
   * staging file is sized by its declaration, so this bounds what one request can make the
   * server reserve. 64 GiB is above any file people sync day to day (disk images and raw
   * video included) and well below the filesystem tier's capacity; raise it for more.
   */
  maxFileBytes: z
    .number()
    .int()
    .positive()
    .max(Number.MAX_SAFE_INTEGER)
    .default(64 * 1024 * MiB),
  /** Slow or stalled clients (docs/proxy-server.md, "Timeouts"). */
  timeouts: TimeoutsConfig.default({
    idleMs: 60_000,
    headersMs: 30_000,
    bodyMs: 20_000,
    bodyMinBytesPerSecond: 500,
  }),
  /** Per-user storage quotas (default: none). */
  quota: QuotaConfig.default({ defaultBytes: null, users: {} }),
  /** Price tables and sampling of the cost model (docs/cost.md). */
  cost: CostConfig.prefault({}),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /**
   * Append one JSON line per finished file operation to this file (src/op-log.ts): for the
   * cluster tests' ordering checker. Off by default.
   */
  opLogFile: z.string().optional(),
  /**
   * This instance among several sharing one database (docs/deployment.md): its id (default
   * random at each start) and the URL clients reach it at (default its listen URL).
   */
  instanceId: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,64}$/, 'letters, digits, ".", "_" or "-", at most 64')
    .optional(),
  publicUrl: z.string().url().optional(),
  /** Load reporting, steering and `weft-proxy cluster` scaling (src/cluster/config.ts). */
  cluster: ClusterConfig.prefault({}),
  /** Inter-proxy link (docs/formats/inter-proxy.md): this proxy's id and its peers. */
  peer: PeerLinkConfig.optional(),
  shares: SharesConfig.default({
    enabled: true,
    oldKeys: {},
    pollIntervalMs: 2000,
    longpollTimeoutSeconds: 60,
    notifyBatchMs: 250,
    endpoints: {},
    oauth: {},
  }),
});
export type ProxyConfig = z.infer<typeof ProxyConfig>;
export type ProxyConfigInput = z.input<typeof ProxyConfig>;

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** Environment variables that override the file, and the config key each sets. */
export const ENV_OVERRIDES: Record<string, (c: Record<string, unknown>, v: string) => void> = {
  WEFT_PROXY_HOST: (c, v) => (c.host = v),
  WEFT_PROXY_PORT: (c, v) => (c.port = Number(v)),
  WEFT_PROXY_DATA_DIR: (c, v) => (c.dataDir = v),
  WEFT_PROXY_FS_TIER_DIR: (c, v) => (c.fsTierDir = v),
  WEFT_PROXY_METADATA_FILE: (c, v) => (c.metadataFile = v),
  WEFT_DATABASE_URL: (c, v) => (c.databaseUrl = v),
  WEFT_PROXY_INSTANCE_ID: (c, v) => (c.instanceId = v),
  WEFT_PROXY_PUBLIC_URL: (c, v) => (c.publicUrl = v),
  WEFT_PROXY_ADMIN_TOKEN: (c, v) => (c.adminToken = v),
  WEFT_PROXY_ADMIN_TOKEN_SHA256: (c, v) => (c.adminTokenSha256 = v),
  WEFT_PROXY_INVITE_TTL_MS: (c, v) => (c.inviteTtlMs = Number(v)),
  WEFT_PROXY_LOG_LEVEL: (c, v) => (c.logLevel = v),
  WEFT_PROXY_CONCURRENCY: (c, v) => (c.concurrency = Number(v)),
  WEFT_PROXY_RELAY_CACHE_BYTES: (c, v) => (c.relayCacheBytes = Number(v)),
  WEFT_PROXY_GC_GRACE_MS: (c, v) => (c.gcGraceMs = Number(v)),
  WEFT_PROXY_VERSION_RETENTION_DAYS: (c, v) => (c.versions = { retentionDays: Number(v) }),
  WEFT_PROXY_MAX_FILE_BYTES: (c, v) => (c.maxFileBytes = Number(v)),
  WEFT_PROXY_IDLE_TIMEOUT_MS: (c, v) => (c.timeouts = { ...(c.timeouts as object), idleMs: Number(v) }),
  WEFT_PROXY_QUOTA_BYTES: (c, v) =>
    (c.quota = { ...(c.quota as object), defaultBytes: v === 'none' ? null : Number(v) }),
  WEFT_PROXY_TLS_CERT_FILE: (c, v) => (c.tls = { ...(c.tls as object), certFile: v }),
  WEFT_PROXY_TLS_KEY_FILE: (c, v) => (c.tls = { ...(c.tls as object), keyFile: v }),
  WEFT_MIRROR_KEY: (c, v) => (c.shares = { ...(c.shares as object), key: v }),
  WEFT_PROXY_S3_BUCKET: (c, v) => (c.objectTier = { ...s3(c), bucket: v }),
  WEFT_PROXY_S3_PREFIX: (c, v) => (c.objectTier = { ...s3(c), prefix: v }),
  WEFT_PROXY_S3_ENDPOINT: (c, v) => (c.objectTier = { ...s3(c), endpoint: v }),
  WEFT_PROXY_S3_REGION: (c, v) => (c.objectTier = { ...s3(c), region: v }),
  WEFT_PROXY_S3_FORCE_PATH_STYLE: (c, v) =>
    (c.objectTier = { ...s3(c), forcePathStyle: v === 'true' || v === '1' }),
  WEFT_PROXY_S3_ACCESS_KEY_ID: (c, v) => (c.objectTier = { ...s3(c), accessKeyId: v }),
  WEFT_PROXY_S3_SECRET_ACCESS_KEY: (c, v) => (c.objectTier = { ...s3(c), secretAccessKey: v }),
};

function s3(c: Record<string, unknown>): Record<string, unknown> {
  const cur = c.objectTier as Record<string, unknown> | undefined;
  return cur?.type === 's3' ? cur : { type: 's3' };
}

/** Validate a config object (after env overrides), filling defaults. */
export function parseConfig(input: unknown, env: NodeJS.ProcessEnv = {}): ProxyConfig {
  const raw: Record<string, unknown> = {
    ...(typeof input === 'object' && input !== null ? (input as object) : {}),
  };
  for (const [name, apply] of Object.entries(ENV_OVERRIDES)) {
    const v = env[name];
    if (v !== undefined && v !== '') apply(raw, v);
  }
  const parsed = ProxyConfig.safeParse(raw);
  if (!parsed.success) throw new ConfigError(`invalid proxy configuration: ${z.prettifyError(parsed.error)}`);
  if (parsed.data.adminToken !== undefined && parsed.data.adminTokenSha256 !== undefined)
    throw new ConfigError(
      'invalid proxy configuration: give adminToken or adminTokenSha256, not both (keep only the hash)',
    );
  return parsed.data;
}

/** Read a JSON config file and apply the environment. */
export function loadConfigFile(file: string, env: NodeJS.ProcessEnv = process.env): ProxyConfig {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new ConfigError(`cannot read ${file}: ${(e as Error).message}`);
  }
  return parseConfig(json, env);
}

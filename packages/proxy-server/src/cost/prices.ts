/**
 * Price tables per backend kind: the one place Weft's cost model reads prices from
 * (docs/cost.md). The operator overrides any field in the proxy configuration
 * (`cost.prices`, `cost.tiers`). Prices are USD, list prices of the cheapest public region
 * (AWS us-east-1) as published on the pages cited in `source`, read November 2026; a GB is
 * 2^30 bytes, as AWS bills. A consumer cloud (Dropbox, Drive, OneDrive) bills a plan, not
 * requests: its table carries the plan's monthly price and quota and the request rate the
 * provider wrappers pace to (packages/providers/src/wrappers/compose.ts).
 */
import { z } from 'zod/v4';

export const GIB = 2 ** 30;
/** The billing month AWS uses to turn GB-months into GB-milliseconds: 730 hours. */
export const MONTH_MS = 730 * 3600 * 1000;

export const PriceTable = z.strictObject({
  /** USD per GB-month stored. */
  storagePerGbMonth: z.number().nonnegative(),
  /** USD per 1,000 PUT, COPY, POST and LIST requests. */
  putPer1000: z.number().nonnegative(),
  /** USD per 1,000 GET, HEAD and other requests. */
  getPer1000: z.number().nonnegative(),
  /** USD per 1,000 DELETE requests. */
  deletePer1000: z.number().nonnegative(),
  /** USD per GB read (retrieval fee of infrequent-access classes, EFS data access). */
  readPerGb: z.number().nonnegative(),
  /** USD per GB written (EFS elastic throughput). */
  writePerGb: z.number().nonnegative(),
  /** USD per GB transferred out to the internet (what the proxy sends to clients). */
  egressPerGb: z.number().nonnegative(),
  /** USD per GB moved between the proxy and this backend (0 inside one region). */
  transferPerGb: z.number().nonnegative(),
  /** Flat USD per month (a consumer plan), 0 for pay-as-you-go. */
  planPerMonth: z.number().nonnegative(),
  /** The plan's quota in bytes, null for none. */
  quotaBytes: z.number().int().positive().nullable(),
  /** Requests per second the backend allows before throttling, null for no published limit. */
  requestsPerSecond: z.number().positive().nullable(),
  /** Where these figures come from. */
  source: z.string(),
});
export type PriceTable = z.infer<typeof PriceTable>;

const PAY_AS_YOU_GO = {
  readPerGb: 0,
  writePerGb: 0,
  transferPerGb: 0,
  planPerMonth: 0,
  quotaBytes: null,
  requestsPerSecond: null,
} as const;

const PLAN = {
  storagePerGbMonth: 0,
  putPer1000: 0,
  getPer1000: 0,
  deletePer1000: 0,
  readPerGb: 0,
  writePerGb: 0,
  egressPerGb: 0,
  transferPerGb: 0,
} as const;

export const PRICE_TABLES = {
  's3-standard': {
    ...PAY_AS_YOU_GO,
    storagePerGbMonth: 0.023,
    putPer1000: 0.005,
    getPer1000: 0.0004,
    deletePer1000: 0,
    egressPerGb: 0.09,
    // S3 scales to 3,500 writes / 5,500 reads per second per prefix.
    requestsPerSecond: 3500,
    source:
      'https://aws.amazon.com/s3/pricing/ (S3 Standard, first 50 TB/month; data transfer out, first 10 TB)',
  },
  's3-ia': {
    ...PAY_AS_YOU_GO,
    storagePerGbMonth: 0.0125,
    putPer1000: 0.01,
    getPer1000: 0.001,
    deletePer1000: 0,
    readPerGb: 0.01,
    egressPerGb: 0.09,
    requestsPerSecond: 3500,
    source:
      'https://aws.amazon.com/s3/pricing/ (S3 Standard-Infrequent Access; 128 KB minimum billable object, 30-day minimum, not modelled)',
  },
  'efs-standard': {
    ...PAY_AS_YOU_GO,
    storagePerGbMonth: 0.3,
    putPer1000: 0,
    getPer1000: 0,
    deletePer1000: 0,
    // Elastic throughput: reads $0.03/GB, writes $0.06/GB.
    readPerGb: 0.03,
    writePerGb: 0.06,
    egressPerGb: 0.09,
    source: 'https://aws.amazon.com/efs/pricing/ (EFS Standard storage, Elastic Throughput reads and writes)',
  },
  'efs-ia': {
    ...PAY_AS_YOU_GO,
    storagePerGbMonth: 0.016,
    putPer1000: 0,
    getPer1000: 0,
    deletePer1000: 0,
    // Infrequent Access tiering: $0.01/GB read from IA, plus Elastic Throughput.
    readPerGb: 0.04,
    writePerGb: 0.06,
    egressPerGb: 0.09,
    source:
      'https://aws.amazon.com/efs/pricing/ (EFS Infrequent Access storage, IA access and Elastic Throughput)',
  },
  local: {
    ...PAY_AS_YOU_GO,
    storagePerGbMonth: 0,
    putPer1000: 0,
    getPer1000: 0,
    deletePer1000: 0,
    egressPerGb: 0,
    source: "the proxy's own disk: no metered price (set one in cost.prices to model a hosting bill)",
  },
  dropbox: {
    ...PLAN,
    planPerMonth: 11.99,
    quotaBytes: 2 * 1024 * GIB,
    requestsPerSecond: 50,
    source:
      'https://www.dropbox.com/plans (Plus, 2 TB, monthly billing); no request price; 429 with Retry-After (https://developers.dropbox.com/error-handling-guide)',
  },
  gdrive: {
    ...PLAN,
    planPerMonth: 9.99,
    quotaBytes: 2 * 1024 * GIB,
    // 12,000 queries per minute per user.
    requestsPerSecond: 200,
    source:
      'https://one.google.com/about/plans (Google One 2 TB); no request price; https://developers.google.com/drive/api/guides/limits',
  },
  onedrive: {
    ...PLAN,
    planPerMonth: 9.99,
    quotaBytes: 1024 * GIB,
    requestsPerSecond: 20,
    source:
      'https://www.microsoft.com/microsoft-365/onedrive/compare-onedrive-plans (Microsoft 365 Personal, 1 TB); no request price; throttling https://learn.microsoft.com/onedrive/developer/rest-api/concepts/scan-guidance',
  },
} as const satisfies Record<string, PriceTable>;

export type PriceTableName = keyof typeof PRICE_TABLES;
export const PRICE_TABLE_NAMES = Object.keys(PRICE_TABLES) as PriceTableName[];

/** Operator overrides: a named table per tier, with any field replaced. */
export const CostConfig = z.strictObject({
  /** Which table prices each tier of this proxy. */
  tiers: z
    .strictObject({
      fs: z.enum(PRICE_TABLE_NAMES as [PriceTableName, ...PriceTableName[]]).default('efs-standard'),
      objects: z.enum(PRICE_TABLE_NAMES as [PriceTableName, ...PriceTableName[]]).default('s3-standard'),
    })
    .default({ fs: 'efs-standard', objects: 's3-standard' }),
  /** Field overrides per table name, e.g. { "s3-standard": { "storagePerGbMonth": 0.021 } }. */
  prices: z
    .record(z.string(), PriceTable.partial())
    .refine((r) => Object.keys(r).every((k) => k in PRICE_TABLES), {
      message: `a price table is one of ${Object.keys(PRICE_TABLES).join(', ')}`,
    })
    .default({}),
  /** How often the bytes held per tier are sampled (ms; 0: only at start and close). */
  sampleIntervalMs: z
    .number()
    .int()
    .refine((v) => v === 0 || v >= 1000, 'sampleIntervalMs: 0 (off) or at least 1000')
    .default(300_000),
});
export type CostConfig = z.infer<typeof CostConfig>;

/** The price table a tier uses after the operator's overrides. */
export function resolvePrices(config: CostConfig): { fs: PriceTable; objects: PriceTable } {
  const one = (name: PriceTableName): PriceTable => {
    const override = config.prices[name] ?? {};
    return PriceTable.parse({ ...PRICE_TABLES[name], ...override });
  };
  return { fs: one(config.tiers.fs), objects: one(config.tiers.objects) };
}

/** Storage price in USD per byte-millisecond. */
export function storagePerByteMs(p: PriceTable): number {
  return p.storagePerGbMonth / GIB / MONTH_MS;
}

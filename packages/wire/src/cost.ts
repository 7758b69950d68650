/**
 * `GET /v1/cost`: the month's bill so far and projected (docs/cost.md), for the caller's
 * user and for the whole proxy, and the bytes held per tier over time for the chart.
 * Amounts are USD.
 */
import { z } from 'zod/v4';
import { UserId } from './api.ts';

const Usd = z.number().min(0);
const Bytes = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

export const CostParts = z
  .object({
    storage: Usd,
    requests: Usd,
    transfer: Usd,
    egress: Usd,
    plan: Usd,
    total: Usd,
  })
  .meta({ id: 'CostParts' });
export type CostParts = z.infer<typeof CostParts>;

export const CostBill = z
  .object({
    soFar: CostParts,
    projected: CostParts,
    /** Bytes held now on each tier. */
    fsBytes: Bytes,
    objectsBytes: Bytes,
    /** Requests counted so far this month (the proxy's; a user's share of them, rounded). */
    requests: z.object({ put: Bytes, get: Bytes, delete: Bytes }),
    egressBytes: Bytes,
  })
  .meta({ id: 'CostBill' });
export type CostBill = z.infer<typeof CostBill>;

export const CostPoint = z
  .object({ timeMs: Bytes, fsBytes: Bytes, objectsBytes: Bytes })
  .meta({ id: 'CostPoint' });
export type CostPoint = z.infer<typeof CostPoint>;

export const CostResponse = z
  .object({
    user: UserId,
    /** The calendar month (UTC), 'YYYY-MM'. */
    month: z.string().regex(/^\d{4}-\d{2}$/),
    /** Fraction of the month elapsed. */
    elapsed: z.number().min(0).max(1),
    currency: z.literal('USD'),
    /** The price table pricing each tier (names from docs/cost.md). */
    tables: z.object({ fs: z.string(), objects: z.string() }),
    mine: CostBill,
    proxy: CostBill,
    /** The caller's bytes per tier, hourly, over the last 30 days (oldest first). */
    history: z.array(CostPoint),
  })
  .meta({ id: 'Cost' });
export type CostResponse = z.infer<typeof CostResponse>;

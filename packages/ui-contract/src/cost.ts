/**
 * The Cost panel's data (docs/cost.md): this month's bill of the user's Weft storage so far
 * and projected, and the bytes held per tier over the last 30 days, as the proxy answers
 * `GET /v1/cost`. Amounts are USD.
 */
import { z } from 'zod';

const Usd = z.number().min(0);
const Bytes = z.number().int().min(0);

export const CostPartsSchema = z.object({
  storage: Usd,
  requests: Usd,
  transfer: Usd,
  egress: Usd,
  plan: Usd,
  total: Usd,
});
export type CostParts = z.infer<typeof CostPartsSchema>;

export const CostViewSchema = z.discriminatedUnion('available', [
  z.object({ available: z.literal(false), reason: z.string() }),
  z.object({
    available: z.literal(true),
    month: z.string(),
    /** Fraction of the month elapsed. */
    elapsed: z.number().min(0).max(1),
    /** The price tables pricing the filesystem and object tiers. */
    tables: z.object({ fs: z.string(), objects: z.string() }),
    mine: z.object({ soFar: CostPartsSchema, projected: CostPartsSchema }),
    proxy: z.object({ soFar: CostPartsSchema, projected: CostPartsSchema }),
    requests: z.object({ put: Bytes, get: Bytes, delete: Bytes }),
    egressBytes: Bytes,
    history: z.array(z.object({ timeMs: Bytes, fsBytes: Bytes, objectsBytes: Bytes })),
  }),
]);
export type CostView = z.infer<typeof CostViewSchema>;

/**
 * The `cluster` section of the proxy config: heartbeats and load reporting of every instance
 * (registry.ts, load.ts) and the scaling rules of `weft-proxy cluster` (scale.ts,
 * supervisor.ts). docs/deployment.md, "Several instances", says how the defaults were chosen.
 */
import { z } from 'zod/v4';

/** The fields of `cluster` (config.ts) for load reporting and scaling. */
export const CLUSTER_LOAD_FIELDS = {
  /** How often an instance publishes its row and reads the others'. */
  heartbeatMs: z.number().int().min(50).default(1000),
  /** An instance is alive while its last heartbeat is this recent. */
  aliveMs: z.number().int().min(100).default(5000),
  /** The sliding window its throughput is averaged over. */
  windowMs: z.number().int().min(100).default(5000),
  /** BW_o declared, bytes/s; unset = measured (the most moved over one window, load.ts). */
  capacityBps: z.number().positive().optional(),
  /** Floor of a measured BW_o (default 12.5 MB/s = 100 Mbit/s). */
  minCapacityBps: z.number().positive().default(12_500_000),
  /** θ_c of Eq. 7: every instance with BW_a ≤ BW_o·θ_c is congested → add one. */
  thetaCongested: z.number().min(0).max(1).default(0.4),
  /** θ_l of Eq. 8: every instance with BW_a ≥ BW_o·θ_l is idle → drain one. */
  thetaIdle: z.number().min(0).max(1).default(0.7),
  /** A condition must hold this long before the supervisor acts on it. */
  sustainMs: z.number().int().min(0).default(10_000),
  /** No scaling action within this long of the previous one (the new figures settle). */
  cooldownMs: z.number().int().min(0).default(30_000),
  /** A draining instance is stopped after this even if transfers remain (they resume elsewhere). */
  drainTimeoutMs: z.number().int().min(0).default(600_000),
  /**
   * A shell command run on every scale decision (deployments that are not one machine): the
   * environment says WEFT_SCALE=up|down, WEFT_SCALE_INSTANCE (the instance to drain),
   * WEFT_SCALE_COUNT (instances after the action).
   */
  onScale: z.string().optional(),
  /**
   * Operations applying at once over every instance sharing the database (the shared tiers'
   * budget, admission.ts): beyond it they wait in one queue, in FOP order (Eq. 6) whichever
   * instance received them. 0 = no shared budget (each instance only its own `concurrency`).
   */
  applySlots: z.number().int().min(0).max(1000).default(16),
  /** A queued operation looks for a free slot at least this often (else when notified). */
  queuePollMs: z.number().int().min(10).max(10_000).default(250),
};

/**
 * The `cluster` section: the controller lease's timings (helper C's lease: the holder renews
 * every `leaseRenewMs`; another instance takes over once `leaseTtlMs` passed without a renewal;
 * a holder that cannot renew gives the role up `leaseRenewMs` before its lease ends; ignored on
 * SQLite, where the one process is always the controller) and the load fields above.
 */
export const ClusterConfig = z
  .object({
    leaseTtlMs: z.number().int().min(200).max(600_000).default(5000),
    leaseRenewMs: z.number().int().min(50).max(60_000).default(1000),
    ...CLUSTER_LOAD_FIELDS,
  })
  .refine(
    (c) => c.leaseRenewMs * 2 <= c.leaseTtlMs,
    'cluster.leaseRenewMs must be at most half of leaseTtlMs',
  )
  .refine(
    (c) => c.thetaCongested < c.thetaIdle,
    'cluster.thetaCongested must be below cluster.thetaIdle (else adding and draining overlap)',
  );
export type ClusterConfig = z.infer<typeof ClusterConfig>;

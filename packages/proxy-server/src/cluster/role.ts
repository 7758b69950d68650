/**
 * What the controller role means for one proxy instance (issue #18): the role itself (a
 * PostgreSQL lease, or always on SQLite), the `weft_cluster_controller{instance}` gauge,
 * and the controller-only jobs, started when the role is gained and stopped when it is
 * lost — in that order, one transition at a time, so a job never runs in two terms at once.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { Gauge, type Registry } from 'prom-client';
import { ApiError } from '../errors.ts';
import { type ClusterRole, LocalRole, PgLease } from './lease.ts';

export interface LeaderJob {
  /** Start (the role was gained, in term `token`). Awaited before the next transition. */
  start(token: number): void | Promise<void>;
  /** Stop (the role was lost, or the server closes). */
  stop(): void | Promise<void>;
}

export class LeaderJobs {
  private readonly jobs: { name: string; job: LeaderJob }[] = [];
  private running = false;
  private chain: Promise<void> = Promise.resolve();
  private unsubscribe: (() => void) | undefined;
  private closed = false;

  constructor(
    private readonly role: ClusterRole,
    private readonly log: Logger,
  ) {}

  add(name: string, job: LeaderJob): void {
    this.jobs.push({ name, job });
  }

  /** Follow the role from now on; resolves once the jobs of a role held now have started. */
  begin(): Promise<void> {
    this.unsubscribe = this.role.onChange(() => void this.follow());
    return this.follow();
  }

  private follow(): Promise<void> {
    this.chain = this.chain.then(async () => {
      const want = this.role.isController() && !this.closed;
      if (want === this.running) return;
      this.running = want;
      const token = this.role.fencingToken ?? 0;
      for (const { name, job } of this.jobs) {
        try {
          await (want ? job.start(token) : job.stop());
        } catch (err) {
          this.log.error({ err, job: name }, `controller job failed to ${want ? 'start' : 'stop'}`);
        }
      }
    });
    return this.chain;
  }

  /** Stop every job (the server closes); the role is released after this. */
  async close(): Promise<void> {
    this.closed = true;
    this.unsubscribe?.();
    await this.follow();
  }
}

/**
 * Reconciliation on PostgreSQL (recovery.ts: the filesystem tier is the truth), run by the
 * controller when it gains the role and again whenever an instance leaves the live list
 * (killed, cut off, retired): what a dead instance left half-applied is recorded. Each
 * namespace is reconciled while no instance applies anything to it; then the references
 * are recounted. A pass asked for while one runs runs once more after it; a pass stops when
 * the term it started in ends.
 */
export function reconcileJob(o: {
  role: ClusterRole;
  listUsers(): Promise<string[]>;
  reconcile(user: string): Promise<unknown>;
  exclusive<T>(user: string, fn: () => Promise<T>): Promise<T>;
  recount(): Promise<void>;
  /** The live instances' ids (the registry's last heartbeat). */
  instanceIds(): string[];
  everyMs: number;
  log: Logger;
}): LeaderJob {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let again = false;
  const pass = (token: number): Promise<void> | undefined => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        for (const user of await o.listUsers()) {
          if (o.role.fencingToken !== token) return;
          await o.exclusive(user, () => o.reconcile(user));
        }
        if (o.role.fencingToken !== token) return;
        await o.recount();
      } while (again);
    })()
      .catch((err: unknown) => o.log.error({ err }, 'reconciliation failed'))
      .finally(() => (running = undefined));
    return running;
  };
  return {
    // The first pass is awaited: an instance that starts as the controller serves once the
    // index is in line with the tier, as a single process always did.
    async start(token) {
      let seen = new Set(o.instanceIds());
      timer = setInterval(() => {
        const now = new Set(o.instanceIds());
        const gone = [...seen].filter((id) => !now.has(id));
        seen = now;
        if (gone.length === 0) return;
        o.log.info({ gone }, 'instances left the cluster: reconciling what they may have left half-done');
        void pass(token);
      }, o.everyMs);
      timer.unref();
      await pass(token);
    },
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}

/**
 * The role of an instance: on PostgreSQL a lease (started: the first attempt made), on
 * SQLite always the controller. The gauge reads 1 on the controller, 0 elsewhere.
 */
export async function openClusterRole(o: {
  databaseUrl: string | undefined;
  instanceId: string;
  ttlMs: number;
  renewMs: number;
  log: Logger;
  registry: Registry;
}): Promise<ClusterRole> {
  let role: ClusterRole;
  if (o.databaseUrl) {
    const lease = new PgLease({
      url: o.databaseUrl,
      instanceId: o.instanceId,
      log: o.log,
      ttlMs: o.ttlMs,
      renewMs: o.renewMs,
    });
    await lease.start();
    role = lease;
  } else role = new LocalRole(o.instanceId);
  new Gauge({
    name: 'weft_cluster_controller',
    help: 'Whether this instance holds the controller role (1) or not (0): GC, reconciliation, scrub run there',
    labelNames: ['instance'] as const,
    registers: [o.registry],
    collect() {
      this.set({ instance: role.instanceId }, role.isController() ? 1 : 0);
    },
  });
  return role;
}

/**
 * An instance that cannot reach PostgreSQL refuses every write (anything but GET and HEAD)
 * with 503 SLOW_DOWN and Retry-After, so clients go on through another instance, instead of
 * queueing work it cannot order or record. The HTTP app's first hook (before authentication,
 * which reads the store); `role()` is undefined until the role is open (nothing refused).
 */
export function writeGate(
  role: () => ClusterRole | undefined,
): (req: FastifyRequest, reply: FastifyReply) => void {
  return (req, reply) => {
    if (req.method === 'GET' || req.method === 'HEAD' || (role()?.reachable() ?? true)) return;
    void reply.header('retry-after', '1');
    throw new ApiError(
      'SLOW_DOWN',
      'this instance cannot reach its metadata store; retry later or elsewhere',
      {
        reason: 'metadata-store-unreachable',
      },
    );
  };
}

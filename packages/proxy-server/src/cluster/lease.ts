/**
 * The controller role among proxy instances sharing one PostgreSQL (issue #18; HyCloud
 * §III-C's controller): the work only one instance may do — GC, startup reconciliation,
 * scrub, pack flushing and collection, mirror engines — runs on the holder of a lease row
 * (pg-migrations/004_cluster_lease.sql).
 *
 * A lease row with an expiry rather than a session advisory lock: an advisory lock lasts as
 * long as PostgreSQL keeps the holder's connection, which after a partition is until TCP
 * keepalive gives up (minutes by default, and not under the instance's control), and the
 * holder cannot tell from its side when PostgreSQL let go. With a row, both sides count the
 * same TTL: the database's clock decides when another instance may take over, and the
 * holder gives the role up on its own clock, `renewMs` before the TTL counted from when it
 * *sent* its last successful renewal — so it has stopped before anyone else can start,
 * whatever the network did.
 *
 * Every acquisition increments `fencing_token`. Writes done for the controller call
 * `fence(tx)` inside their transaction: it locks the row (FOR SHARE, so no takeover can
 * commit meanwhile) and refuses unless the row still names this holder, this token and an
 * unexpired lease — a holder paused past its lease (GC pause, SIGSTOP, partition) cannot
 * act once another holds the role.
 *
 * On SQLite there is one process: `LocalRole` is always the controller.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { CLUSTER_KEEPALIVES, connect, type Sql, type Tx } from '../store/postgres-db.ts';

export const CONTROLLER = 'controller';

/** A controller-only write attempted without the role (or with a stale token). */
export class FencedError extends Error {
  override readonly name = 'FencedError';
}

export interface ClusterRole {
  readonly instanceId: string;
  isController(): boolean;
  /** The current term's fencing token (undefined when not the controller). */
  readonly fencingToken: number | undefined;
  /**
   * Whether this instance reached PostgreSQL recently enough to take writes (its lease
   * statements answered within the last TTL less one renewal period): an instance cut off
   * refuses writes instead of queueing them (503, Retry-After).
   */
  reachable(): boolean;
  /** Called with `true` when the role is gained and `false` when it is lost. */
  onChange(listener: (controller: boolean) => void): () => void;
  /**
   * Refuse (FencedError) unless this instance holds the role in term `token` (default: the
   * current one) — on PostgreSQL checked in the database, inside `tx` when given, where the
   * row stays locked against a takeover until `tx` ends. A job started in one term passes
   * that term's token, so it stops if the role was lost meanwhile, even if since regained.
   */
  fence(tx?: Tx, token?: number): Promise<void>;
  close(): Promise<void>;
}

/** The one process on SQLite: always the controller, token 1. */
export class LocalRole implements ClusterRole {
  readonly fencingToken = 1;
  constructor(readonly instanceId: string) {}
  isController(): boolean {
    return true;
  }
  reachable(): boolean {
    return true;
  }
  onChange(): () => void {
    return () => undefined;
  }
  async fence(_tx?: Tx, token = 1): Promise<void> {
    if (token !== 1) throw new FencedError(`term ${token} is not this process's`);
  }
  async close(): Promise<void> {}
}

export interface LeaseOptions {
  readonly url: string;
  readonly instanceId: string;
  readonly log: Logger;
  /** Lease length (database clock). Default 5000. */
  readonly ttlMs?: number;
  /** Renewal (and, when not held, acquisition) period. Default 1000. */
  readonly renewMs?: number;
  readonly name?: string;
}

/** `now` in ms on the database's clock (clock_timestamp: not frozen at transaction start). */
const DB_NOW = `(extract(epoch from clock_timestamp()) * 1000)::bigint`;

export class PgLease implements ClusterRole {
  readonly instanceId: string;
  private sql: Sql;
  private readonly ttlMs: number;
  private readonly renewMs: number;
  private readonly name: string;
  private readonly events = new EventEmitter();
  private token: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private deadline: NodeJS.Timeout | undefined;
  private inflight: Promise<void> | undefined;
  private inflightSince = 0;
  /** When the last statement that was answered was sent (performance.now()). */
  private lastAnswered = -Infinity;
  private closed = false;
  private lastError = '';

  constructor(private readonly o: LeaseOptions) {
    this.instanceId = o.instanceId;
    this.ttlMs = o.ttlMs ?? 5000;
    this.renewMs = o.renewMs ?? 1000;
    this.name = o.name ?? CONTROLLER;
    if (this.renewMs * 2 > this.ttlMs) throw new Error('lease renewMs must be at most half of ttlMs');
    // A connection of its own: a renewal never waits behind the store's queries. Server-side
    // keepalives make PostgreSQL drop a vanished instance's session within seconds.
    this.sql = this.open();
  }

  private open(): Sql {
    return connect(this.o.url, 1, {
      connection: { ...CLUSTER_KEEPALIVES, application_name: `weft-lease-${this.o.instanceId}` },
      connect_timeout: Math.max(1, Math.ceil(this.renewMs / 1000)),
    });
  }

  /** Try at once (waiting at most a TTL for the answer), then every renewMs. */
  async start(): Promise<void> {
    await within(this.tick(), this.ttlMs);
    this.timer = setInterval(() => void this.tick(), this.renewMs);
    this.timer.unref();
  }

  isController(): boolean {
    return this.token !== undefined;
  }

  reachable(): boolean {
    return performance.now() - this.lastAnswered < this.ttlMs - this.renewMs;
  }

  get fencingToken(): number | undefined {
    return this.token;
  }

  onChange(listener: (controller: boolean) => void): () => void {
    this.events.on('change', listener);
    return () => this.events.off('change', listener);
  }

  async fence(tx?: Tx, token = this.token): Promise<void> {
    if (token === undefined) throw new FencedError(`instance ${this.instanceId} is not the controller`);
    const run = tx ?? this.sql;
    const rows = await run.unsafe(
      `SELECT 1 FROM cluster_lease WHERE name = $1 AND holder = $2 AND fencing_token = $3
         AND expires_ms > ${DB_NOW} FOR SHARE`,
      [this.name, this.instanceId, token],
    );
    if (rows.length === 0)
      throw new FencedError(`instance ${this.instanceId}'s controller term ${token} has ended`);
  }

  private tick(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.inflight) {
      // A statement unanswered for a whole TTL (a link gone dark): a new connection, so the
      // role can be sought again as soon as the link is back instead of after TCP gives up.
      if (performance.now() - this.inflightSince > this.ttlMs) {
        const stuck = this.sql;
        this.sql = this.open();
        void stuck.end({ timeout: 0 }).catch(() => undefined);
      }
      return this.inflight;
    }
    this.inflightSince = performance.now();
    this.inflight = (this.token === undefined ? this.acquire() : this.renew())
      .catch((err: unknown) => {
        const msg = err instanceof Error ? err.message : String(err);
        if (msg !== this.lastError) this.o.log.warn({ err }, 'controller lease: PostgreSQL unreachable');
        this.lastError = msg;
      })
      .finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  private async acquire(): Promise<void> {
    const sent = performance.now();
    const rows = await this.sql.unsafe<{ fencing_token: number }[]>(
      `INSERT INTO cluster_lease AS l (name, holder, fencing_token, acquired_ms, expires_ms)
         VALUES ($1, $2, 1, ${DB_NOW}, ${DB_NOW} + $3)
       ON CONFLICT (name) DO UPDATE SET holder = $2, fencing_token = l.fencing_token + 1,
         acquired_ms = ${DB_NOW}, expires_ms = ${DB_NOW} + $3
       WHERE l.expires_ms <= ${DB_NOW} OR l.holder = $2 OR l.holder IS NULL
       RETURNING fencing_token`,
      [this.name, this.instanceId, this.ttlMs],
    );
    this.answered(sent);
    const token = rows[0]?.fencing_token;
    if (token === undefined || this.closed) return;
    this.token = token;
    this.holdUntil(sent);
    this.o.log.info({ instance: this.instanceId, fencingToken: token }, 'controller role gained');
    this.events.emit('change', true);
  }

  private async renew(): Promise<void> {
    const token = this.token;
    const sent = performance.now();
    const rows = await this.sql.unsafe(
      `UPDATE cluster_lease SET expires_ms = ${DB_NOW} + $4
        WHERE name = $1 AND holder = $2 AND fencing_token = $3 AND expires_ms > ${DB_NOW}
        RETURNING 1`,
      [this.name, this.instanceId, token ?? -1, this.ttlMs],
    );
    this.answered(sent);
    if (this.token !== token) return; // lost meanwhile (deadline)
    if (rows.length > 0) this.holdUntil(sent);
    else this.lose('the lease row names another holder or term');
  }

  private answered(sent: number): void {
    if (this.lastError) this.o.log.info('controller lease: PostgreSQL reachable again');
    this.lastError = '';
    this.lastAnswered = Math.max(this.lastAnswered, sent);
  }

  /** The role ends renewMs before the TTL counted from `sent`, unless renewed meanwhile. */
  private holdUntil(sent: number): void {
    if (this.deadline) clearTimeout(this.deadline);
    const left = sent + this.ttlMs - this.renewMs - performance.now();
    this.deadline = setTimeout(() => this.lose('no renewal reached PostgreSQL in time'), Math.max(0, left));
    this.deadline.unref();
  }

  private lose(why: string): void {
    if (this.deadline) clearTimeout(this.deadline);
    this.deadline = undefined;
    if (this.token === undefined) return;
    const token = this.token;
    this.token = undefined;
    this.o.log.warn({ instance: this.instanceId, fencingToken: token, why }, 'controller role lost');
    this.events.emit('change', false);
  }

  /**
   * Stop; a held lease is released (expired at once) so another instance takes over at its
   * next attempt. `abrupt`: drop the connection without releasing (tests: a killed process).
   */
  async close(options: { abrupt?: boolean } = {}): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await within(this.inflight, this.renewMs);
    const token = this.token;
    this.lose('shutting down');
    if (options.abrupt) {
      await this.sql.end({ timeout: 0 });
      return;
    }
    if (token !== undefined)
      await within(
        this.sql.unsafe(
          `UPDATE cluster_lease SET holder = NULL, expires_ms = 0
            WHERE name = $1 AND holder = $2 AND fencing_token = $3`,
          [this.name, this.instanceId, token],
        ),
        this.renewMs,
      ).catch((err: unknown) => this.o.log.warn({ err }, 'controller lease: release failed'));
    await this.sql.end({ timeout: 1 });
  }
}

/** `p`, but waiting at most `ms` for it (its outcome then ignored). */
async function within(p: Promise<unknown> | undefined, ms: number): Promise<void> {
  if (!p) return;
  let t: NodeJS.Timeout | undefined;
  await Promise.race([p.then(() => undefined), new Promise<void>((r) => (t = setTimeout(r, ms)))]).finally(
    () => clearTimeout(t),
  );
}

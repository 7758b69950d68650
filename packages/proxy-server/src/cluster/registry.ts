/**
 * The proxy instances sharing one metadata database (issue #18; docs/deployment.md, "Several
 * instances"). Each instance upserts its row of `proxy_instances` (pg-migrations/005) every
 * `cluster.heartbeatMs` with its URL, state and load (load.ts), and reads everyone's rows
 * back; an instance is alive while its heartbeat (PostgreSQL's clock) is within
 * `cluster.aliveMs`. On SQLite (one process) the registry holds only this instance.
 *
 * Steering (HyCloud §III-C: "the relay proxy with the highest BW_a among all in-use proxies is
 * selected for the next file transfer"): `preferred()` is the live, active instance with the
 * most available bandwidth, this one on a tie. A draining instance (set by the supervisor or
 * an operator in its row) is never preferred, and learns it is draining at its next heartbeat.
 */
import type { Logger } from 'pino';
import type { Sql } from '../store/postgres-db.ts';
import type { ActiveTransfers, LoadMeter } from './load.ts';

export type InstanceState = 'active' | 'draining';

export interface InstanceRow {
  id: string;
  url: string;
  startedMs: number;
  /** Last heartbeat, ms (the database's clock). */
  heartbeatMs: number;
  state: InstanceState;
  availableBps: number;
  measuredBps: number;
  activeTransfers: number;
}

/** The instance new transfers go to: the active one with the most BW_a; `selfId` on a tie. */
export function preferredInstance(rows: readonly InstanceRow[], selfId: string): string {
  let best: InstanceRow | undefined;
  for (const r of rows) {
    if (r.state !== 'active') continue;
    if (
      !best ||
      r.availableBps > best.availableBps ||
      (r.availableBps === best.availableBps && (r.id === selfId || (best.id !== selfId && r.id < best.id)))
    )
      best = r;
  }
  return best?.id ?? selfId;
}

interface DbRow {
  id: string;
  url: string;
  started_ms: number;
  heartbeat_ms: number;
  state: InstanceState;
  available_bps: number;
  measured_bps: number;
  active_transfers: number;
}

const fromDb = (r: DbRow): InstanceRow => ({
  id: r.id,
  url: r.url,
  startedMs: r.started_ms,
  heartbeatMs: r.heartbeat_ms,
  state: r.state,
  availableBps: r.available_bps,
  measuredBps: r.measured_bps,
  activeTransfers: r.active_transfers,
});

/**
 * The live instances in the database: a heartbeat within `aliveMs` of the database's clock
 * (every timestamp here is PostgreSQL's, so instances whose clocks disagree still agree).
 */
export async function liveInstances(sql: Sql, aliveMs: number): Promise<InstanceRow[]> {
  const rows = await sql<DbRow[]>`
    SELECT * FROM proxy_instances
    WHERE heartbeat_ms >= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint - ${aliveMs} ORDER BY started_ms, id`;
  return rows.map(fromDb);
}

/** Mark an instance draining (it stops being preferred; it learns so at its next heartbeat). */
export async function markDraining(sql: Sql, id: string): Promise<boolean> {
  return (await setInstanceState(sql, id, 'draining')) !== undefined;
}

/**
 * Set a live instance's state (the supervisor's lazy retire, the admin routes); the row now,
 * and whether it changed, or undefined when no live instance has that id. The instance keeps
 * the state the row says for the rest of its run (its heartbeat does not overwrite it).
 */
export async function setInstanceState(
  sql: Sql,
  id: string,
  state: InstanceState,
  aliveMs?: number,
): Promise<{ row: InstanceRow; changed: boolean } | undefined> {
  const rows = await sql<(DbRow & { before: InstanceState })[]>`
    WITH b AS (SELECT id, state AS before FROM proxy_instances WHERE id = ${id} FOR UPDATE)
    UPDATE proxy_instances p SET state = ${state}
    FROM b
    WHERE p.id = b.id
      AND (${aliveMs ?? null}::bigint IS NULL
           OR p.heartbeat_ms >= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint - ${aliveMs ?? null}::bigint)
    RETURNING p.*, b.before`;
  const r = rows[0];
  return r ? { row: fromDb(r), changed: r.before !== state } : undefined;
}

export interface RegistryOptions {
  /** The database (several instances); undefined = SQLite, this instance alone. */
  sql?: Sql;
  id: string;
  heartbeatMs: number;
  aliveMs: number;
  meter: LoadMeter;
  active: ActiveTransfers;
  /** Running total of client bytes moved (in + out), read at each heartbeat. */
  clientBytes: () => Promise<number>;
  log: Logger;
  now?: () => number;
}

export class InstanceRegistry {
  readonly id: string;
  readonly startedMs: number;
  private url = '';
  private ownState: InstanceState = 'active';
  private rows: InstanceRow[] = [];
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> | undefined;
  private closed = false;
  private controllerId: string | null = null;

  constructor(private readonly o: RegistryOptions) {
    this.id = o.id;
    this.startedMs = (o.now ?? Date.now)();
  }

  /**
   * The controller role's holder: on PostgreSQL the live holder of the `controller` lease
   * (pg-migrations/004, read at each heartbeat), null when none; on SQLite this instance.
   */
  controller(): string | null {
    return this.o.sql ? this.controllerId : this.id;
  }

  get state(): InstanceState {
    return this.ownState;
  }

  /** Begin heartbeating as `url` (after the server listens); the first beat is awaited. */
  async start(url: string): Promise<void> {
    this.url = url;
    await this.beat();
    this.timer = setInterval(() => {
      this.beating ??= this.beat()
        .catch((err: unknown) => this.o.log.warn({ err }, 'cluster heartbeat failed'))
        .finally(() => (this.beating = undefined));
    }, this.o.heartbeatMs);
    this.timer.unref();
  }

  /** This instance's own figures now. */
  self(): InstanceRow {
    const m = this.o.meter;
    return {
      id: this.id,
      url: this.url,
      startedMs: this.startedMs,
      heartbeatMs: (this.o.now ?? Date.now)(),
      state: this.ownState,
      availableBps: m.availableBps(),
      measuredBps: m.measuredBps(),
      activeTransfers: this.o.active.count(),
    };
  }

  /** Sample the load, publish this instance's row and read everyone's. */
  async beat(): Promise<void> {
    const now = (this.o.now ?? Date.now)();
    this.o.meter.sample(await this.o.clientBytes(), now);
    const me = this.self();
    const sql = this.o.sql;
    if (!sql || this.closed) {
      this.rows = [me];
      return;
    }
    // The row's state stands for the rest of a run (an operator or the supervisor sets it);
    // a restarted instance (same id, new start) sheds the old run's 'draining'.
    const [r] = await sql<{ state: InstanceState }[]>`
      INSERT INTO proxy_instances
        (id, url, started_ms, heartbeat_ms, state, available_bps, measured_bps, active_transfers)
      VALUES (${me.id}, ${me.url}, ${me.startedMs}, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint, ${me.state},
              ${me.availableBps}, ${me.measuredBps}, ${me.activeTransfers})
      ON CONFLICT (id) DO UPDATE SET
        url = excluded.url,
        heartbeat_ms = excluded.heartbeat_ms,
        state = CASE WHEN proxy_instances.started_ms = excluded.started_ms
                     THEN proxy_instances.state ELSE excluded.state END,
        started_ms = excluded.started_ms,
        available_bps = excluded.available_bps,
        measured_bps = excluded.measured_bps,
        active_transfers = excluded.active_transfers
      RETURNING state`;
    if (r && r.state !== this.ownState) {
      this.o.log.info({ instance: this.id, state: r.state }, 'cluster: this instance is now %s', r.state);
      this.ownState = r.state;
    }
    this.rows = await liveInstances(sql, this.o.aliveMs);
    const [lease] = await sql<{ holder: string | null }[]>`
      SELECT holder FROM cluster_lease
      WHERE name = 'controller' AND expires_ms > (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint`;
    this.controllerId = lease?.holder ?? null;
  }

  /** Stop taking new transfers (an operator or the supervisor retiring this instance). */
  async drain(): Promise<void> {
    await this.setState(this.id, 'draining');
  }

  /**
   * Set a live instance's state — this one's at once, another's in its row (it learns at its
   * next heartbeat): the row now and whether it changed, or undefined when no live instance
   * has that id (on SQLite only this one exists).
   */
  async setState(
    id: string,
    state: InstanceState,
  ): Promise<{ row: InstanceRow; changed: boolean } | undefined> {
    const sql = this.o.sql;
    if (id === this.id) {
      const changed = this.ownState !== state;
      this.ownState = state;
      if (sql) await setInstanceState(sql, id, state);
      return { row: this.self(), changed };
    }
    if (!sql) return undefined;
    const r = await setInstanceState(sql, id, state, this.o.aliveMs);
    if (r) this.rows = this.rows.map((x) => (x.id === id ? r.row : x));
    return r;
  }

  /** The live instances as of the last heartbeat, this one's figures current. */
  instances(): InstanceRow[] {
    const me = this.self();
    me.heartbeatMs = this.rows.find((r) => r.id === this.id)?.heartbeatMs ?? me.heartbeatMs;
    const others = this.rows.filter((r) => r.id !== this.id);
    return [...others, me].sort((a, b) => a.startedMs - b.startedMs || a.id.localeCompare(b.id));
  }

  /** The instance to steer a new transfer to. */
  preferred(): InstanceRow {
    const all = this.instances();
    const id = preferredInstance(all, this.id);
    return all.find((r) => r.id === id) ?? this.self();
  }

  /** Stop heartbeating and remove this instance's row (it stops being listed at once). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await this.beating;
    if (this.o.sql) {
      try {
        await this.o.sql`DELETE FROM proxy_instances WHERE id = ${this.id}`;
      } catch (err) {
        this.o.log.warn({ err }, 'cluster: could not remove this instance’s row');
      }
    }
  }
}

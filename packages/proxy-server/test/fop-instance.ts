/**
 * The ordering and admission layers of one proxy instance on a real PostgreSQL, without the
 * HTTP server (cluster-fop.test.ts and its child process, fixtures/fop-child.ts): the
 * scheduler (on the test's clock, a fixed bandwidth estimate: 1 MB = 1000 ms), the ordering
 * locks, the cluster's apply slots (slots 0: none, each instance on its own, as before the
 * shared budget) and a heartbeat row in proxy_instances, as the registry keeps one.
 */
import pino from 'pino';
import type { Registry } from 'prom-client';
import { PgAdmission } from '../src/cluster/admission.ts';
import { PgOrdering } from '../src/cluster/ordering.ts';
import { BandwidthEstimator, OpScheduler } from '../src/scheduler.ts';
import { connect } from '../src/store/postgres-db.ts';

export interface FopInstance {
  readonly id: string;
  readonly scheduler: OpScheduler;
  close(): Promise<void>;
}

export async function fopInstance(
  url: string,
  id: string,
  o: { slots: number; now: () => number; aliveMs: number; concurrency?: number; registry?: Registry },
): Promise<FopInstance> {
  const name = `weft-proxy/${id}`;
  const sql = connect(url, 2, { connection: { application_name: name } });
  const beat = async (): Promise<void> => {
    await sql`
      INSERT INTO proxy_instances (id, url, started_ms, heartbeat_ms)
      VALUES (${id}, 'http://127.0.0.1:1', 1, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint)
      ON CONFLICT (id) DO UPDATE SET heartbeat_ms = excluded.heartbeat_ms`;
  };
  await beat();
  const timer = setInterval(() => void beat().catch(() => undefined), 100);
  const admission =
    o.slots > 0
      ? new PgAdmission(connect(url, 2, { connection: { application_name: name } }), {
          instanceId: id,
          slots: o.slots,
          aliveMs: o.aliveMs,
          pollMs: 50,
          alignClock: false,
          log: pino({ level: 'silent' }),
          ...(o.registry ? { registry: o.registry } : {}),
        })
      : undefined;
  await admission?.start();
  const concurrency = o.concurrency ?? 8;
  const ordering = new PgOrdering(url, concurrency + 2, admission, name);
  const scheduler = new OpScheduler({
    concurrency,
    now: o.now,
    bandwidth: new BandwidthEstimator(5, 1000),
    around: (ns, paths, run, fop) => ordering.around(ns, paths, run, fop),
  });
  return {
    id,
    scheduler,
    async close() {
      clearInterval(timer);
      await ordering.close();
      await admission?.close();
      await sql`DELETE FROM proxy_instances WHERE id = ${id}`.catch(() => undefined);
      await sql.end();
    },
  };
}

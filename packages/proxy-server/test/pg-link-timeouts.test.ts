/**
 * An operation on PostgreSQL whose link goes dark mid-way (nothing answered, nothing closed:
 * a partition, a frozen server) fails with a clear error after the pool's response limit
 * instead of waiting for ever, commits nothing, and the pool works again once the link is
 * back; a statement that runs too long is cancelled by the server (statement_timeout). On a
 * real PostgreSQL (src/testing/postgres.ts) through a TCP hop the test cuts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgLinkTimeoutError } from '../src/store/pg-link-watch.ts';
import { connect, DEFAULT_PG_TIMEOUTS, inTransaction, type Sql } from '../src/store/postgres-db.ts';
import { postgresBinaries, type RunningPostgres, startPostgres } from '../src/testing/postgres.ts';
import { adminSql } from './pg-admin.ts';
import { forwarder } from './tcp-hop.ts';

const bins = postgresBinaries();
const noPg = 'missing' in bins ? bins.missing : undefined;

describe.skipIf(noPg !== undefined)(`PostgreSQL pools' timeouts${noPg ? ` (skipped: ${noPg})` : ''}`, () => {
  let cluster: RunningPostgres;
  let url: string;
  beforeAll(async () => {
    cluster = await startPostgres(adminSql);
    url = await cluster.createDatabase();
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it('anOperationWhoseLinkGoesDarkFailsClearlyAndCommitsNothing', { timeout: 30_000 }, async () => {
    const hop = await forwarder(cluster.port);
    const sql: Sql = connect(
      url.replace(`:${cluster.port}/`, `:${hop.port}/`),
      2,
      {},
      {
        statementTimeoutMs: 1000,
        responseTimeoutMs: 1500,
      },
    );
    try {
      await sql`CREATE TABLE dark (n int)`;
      const op = inTransaction(sql, async (tx) => {
        await tx`INSERT INTO dark VALUES (1)`;
        hop.cut();
        await tx`INSERT INTO dark VALUES (2)`;
      });
      const err = await op.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(PgLinkTimeoutError);
      expect((err as Error).message).toMatch(/did not answer for \d+ s/);
      hop.heal();
      // A new connection: the pool works again, and the cut transaction left nothing.
      expect(await sql`SELECT count(*)::int AS n FROM dark`).toEqual([{ n: 0 }]);
    } finally {
      hop.close();
      await sql.end({ timeout: 1 });
    }
  });

  it('aLinkDarkBeforeTheQueryIsSentFailsToo', { timeout: 30_000 }, async () => {
    const hop = await forwarder(cluster.port);
    const sql = connect(
      url.replace(`:${cluster.port}/`, `:${hop.port}/`),
      1,
      {},
      { responseTimeoutMs: 1000 },
    );
    try {
      expect(await sql`SELECT 1 AS one`).toEqual([{ one: 1 }]);
      hop.cut();
      await expect(sql`SELECT 2 AS two`).rejects.toBeInstanceOf(PgLinkTimeoutError);
    } finally {
      hop.close();
      await sql.end({ timeout: 1 });
    }
  });

  it('aStatementRunningTooLongIsCancelledByTheServer', async () => {
    const sql = connect(url, 1, {}, { statementTimeoutMs: 200, responseTimeoutMs: 10_000 });
    try {
      await expect(sql`SELECT pg_sleep(5)`).rejects.toMatchObject({ code: '57014' });
      expect(await sql`SELECT 1 AS one`).toEqual([{ one: 1 }]);
    } finally {
      await sql.end({ timeout: 1 });
    }
  });

  it('poolsHaveTheDefaultLimitsAndMayTurnThemOff', async () => {
    const withDefaults = connect(url, 1);
    const without = connect(url, 1, {}, { statementTimeoutMs: 0, responseTimeoutMs: 0 });
    try {
      // pg_settings gives milliseconds (SHOW would say '1min').
      const ms = (s: Sql) => s`SELECT setting FROM pg_settings WHERE name = 'statement_timeout'`;
      expect(await ms(withDefaults)).toEqual([{ setting: String(DEFAULT_PG_TIMEOUTS.statementTimeoutMs) }]);
      expect(await ms(without)).toEqual([{ setting: '0' }]);
    } finally {
      await Promise.all([withDefaults.end({ timeout: 1 }), without.end({ timeout: 1 })]);
    }
  });
});

/**
 * The metadata store conformance suite on PostgreSQL: a real cluster started for this file
 * (src/testing/postgres.ts), a database per test, two store instances (two connection
 * pools, as two proxy processes would have) on it. Skipped, with the reason, only where the
 * machine has no PostgreSQL server binaries.
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
import { PostgresMetadataStore } from '../src/store/postgres.ts';
import { postgresBinaries, type RunningPostgres, startPostgres } from '../src/testing/postgres.ts';
import { runMetadataConformance } from './metadata-conformance.ts';
import { adminSql } from './pg-admin.ts';

const bins = postgresBinaries();
let cluster: RunningPostgres | undefined;

if ('missing' in bins) {
  describe('metadata store conformance: postgres', () => {
    it.skip(`skipped: ${bins.missing}`, () => undefined);
  });
} else {
  beforeAll(async () => {
    cluster = await startPostgres(adminSql);
  });
  afterAll(async () => {
    await cluster?.stop();
  });
  runMetadataConformance({
    name: 'postgres',
    notifiesOtherInstances: true,
    open: async () => {
      const url = await cluster!.createDatabase();
      const a = await PostgresMetadataStore.open(url, { maxConnections: 4 });
      const b = await PostgresMetadataStore.open(url, { maxConnections: 4 });
      return {
        a,
        b,
        close: async () => {
          await a.close();
          await b.close();
        },
      };
    },
  });
}

/**
 * What several proxy instances share in the tests that run more than one (docs/deployment.md,
 * "Several instances"): a real PostgreSQL (src/testing/postgres.ts) with a database of their
 * own, one filesystem-tier directory, one object-tier directory and one admin token.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { type RunningPostgres, startPostgres } from '../src/testing/postgres.ts';
import { tempDir } from './helpers.ts';
import { adminSql } from './pg-admin.ts';

export interface SharedTiers {
  readonly databaseUrl: string;
  readonly fsTierDir: string;
  readonly objectTier: { readonly type: 'fs'; readonly dir: string };
  readonly adminToken: string;
}

export interface SharedStorage {
  readonly cluster: RunningPostgres;
  /** The temporary directory holding both tiers (and anything else the test puts there). */
  readonly dir: string;
  /** The configuration every instance takes. */
  readonly tiers: SharedTiers;
  /** Stops PostgreSQL and removes the directory (stop the servers first). */
  stop(): Promise<void>;
}

/** A PostgreSQL cluster with a new database, and both tiers under a new `prefix…` directory. */
export async function startSharedStorage(prefix: string): Promise<SharedStorage> {
  const cluster = await startPostgres(adminSql);
  try {
    const databaseUrl = await cluster.createDatabase();
    const dir = await tempDir(prefix);
    return {
      cluster,
      dir,
      tiers: {
        databaseUrl,
        fsTierDir: nodePath.join(dir, 'fs'),
        objectTier: { type: 'fs', dir: nodePath.join(dir, 'objects') },
        adminToken: 'wfa_shared-admin-token',
      },
      async stop() {
        await cluster.stop();
        await fsp.rm(dir, { recursive: true, force: true });
      },
    };
  } catch (e) {
    await cluster.stop();
    throw e;
  }
}

/**
 * The packer's tables, the reads per content and the cost ledger on the metadata store's
 * database: SQLite's file for the embedded store, the shared PostgreSQL otherwise (so that
 * with several proxy processes packing stays on and the cost ledger counts them all).
 */
import type Database from 'better-sqlite3';
import { PostgresCostStore } from '../cost/ledger-postgres.ts';
import { type CostStore, SqliteCostStore } from '../cost/ledger-store.ts';
import type { PackIndex } from './pack-index.ts';
import { PostgresPackIndex } from './pack-index-postgres.ts';
import { SqlitePackIndex } from './pack-index-sqlite.ts';
import type { Sql } from './postgres-db.ts';
import { PostgresReadCounts, type ReadCountStore, SqliteReadCounts } from './read-counts.ts';

export interface SharedTables {
  readonly packs: PackIndex;
  readonly reads: ReadCountStore;
  readonly cost: CostStore;
}

export function sqliteTables(db: Database.Database): SharedTables {
  return { packs: new SqlitePackIndex(db), reads: new SqliteReadCounts(db), cost: new SqliteCostStore(db) };
}

export function postgresTables(sql: Sql): SharedTables {
  return {
    packs: new PostgresPackIndex(sql),
    reads: new PostgresReadCounts(sql),
    cost: new PostgresCostStore(sql),
  };
}

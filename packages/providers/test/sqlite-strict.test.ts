/**
 * Every SQLite schema in the repository (each folder of numbered `NNN_name.sql` files that
 * the shared migration helper runs: the client journal, the mirror, the inter-proxy cache,
 * the proxy's metadata, the redundant tier's placement store, and any added later) gives
 * only STRICT tables once migrated (issue #15). Each is migrated into a real in-memory
 * SQLite database with foreign keys on, as the stores open them.
 */
import { readdirSync } from 'node:fs';
import * as nodePath from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { migrate } from '../src/sqlite-migrations.ts';

const repo = nodePath.resolve(import.meta.dirname, '..', '..', '..');
const MIGRATION = /^\d{3}_[a-z0-9_]+\.sql$/;

/** Folders under packages/*\/src and apps/*\/src holding migration files. */
function schemaDirs(): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    const entries = readdirSync(dir, { withFileTypes: true });
    // PostgreSQL schemas (pg-migrations/) are typed by the server itself: not SQLite's to check.
    const postgres = nodePath.basename(dir).startsWith('pg-');
    if (!postgres && entries.some((e) => e.isFile() && MIGRATION.test(e.name))) out.push(dir);
    for (const e of entries)
      if (e.isDirectory() && e.name !== 'node_modules') walk(nodePath.join(dir, e.name));
  };
  for (const top of ['packages', 'apps']) {
    for (const pkg of readdirSync(nodePath.join(repo, top), { withFileTypes: true })) {
      const src = nodePath.join(repo, top, pkg.name, 'src');
      if (pkg.isDirectory() && readdirSync(nodePath.join(repo, top, pkg.name)).includes('src')) walk(src);
    }
  }
  return out.sort();
}

describe('SQLite schemas', () => {
  const dirs = schemaDirs();

  it('are found in every package that keeps a database', () => {
    const rel = dirs.map((d) => nodePath.relative(repo, d));
    expect(rel).toEqual(
      expect.arrayContaining([
        'packages/core/src/journal/sql',
        'packages/mirror/src/sql',
        'packages/mirror/src/interproxy/sql',
        'packages/proxy-server/src/migrations',
        'packages/providers/src/redundant/sql',
      ]),
    );
  });

  it.each(dirs.map((d) => [nodePath.relative(repo, d), d]))('%s makes only STRICT tables', (_name, dir) => {
    const db = new Database(':memory:');
    try {
      db.pragma('foreign_keys = ON');
      migrate(db, dir, dir);
      const tables = db
        .prepare(
          "SELECT name, strict FROM pragma_table_list WHERE schema = 'main' AND name NOT LIKE 'sqlite_%'",
        )
        .all() as { name: string; strict: number }[];
      expect(tables.length).toBeGreaterThan(0);
      for (const t of tables) expect(t).toEqual({ name: t.name, strict: 1 });
    } finally {
      db.close();
    }
  });
});

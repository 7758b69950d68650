import { copyFileSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { migrate } from '@weft/providers/sqlite-migrations';
import { SqliteMetadataStore } from '../src/store/sqlite.ts';

const MIGRATIONS = fileURLToPath(new URL('../src/migrations/', import.meta.url));
/** The schema version the migration files produce (numbered from 001 without gaps). */
const LATEST = readdirSync(MIGRATIONS).filter((n) => n.endsWith('.sql')).length;

describe('proxy metadata schema', () => {
  it('upgrades a version-2 database (devices without last seen, invites without expiry), rows kept', async () => {
    const old = mkdtempSync(join(tmpdir(), 'weft-proxy-sql2-'));
    for (const f of readdirSync(MIGRATIONS).filter((n) => /^00[12]_/.test(n)))
      copyFileSync(join(MIGRATIONS, f), join(old, f));
    const file = join(mkdtempSync(join(tmpdir(), 'weft-proxy-up-')), 'metadata.sqlite');
    const db = new Database(file);
    expect(migrate(db, old, 'proxy metadata')).toBe(2);
    db.exec(`
      INSERT INTO users (id, created_ms) VALUES ('alice', 1);
      INSERT INTO devices (id, user_id, name, token_sha256, created_ms) VALUES ('d1', 'alice', 'laptop', 'th', 2);
      INSERT INTO invites (invite_sha256, user_id, created_ms) VALUES ('ih', 'alice', 1000);
    `);
    db.close();

    const store = new SqliteMetadataStore(file);
    expect(store.schemaVersion()).toBe(LATEST);
    expect(await store.listUsers()).toEqual(['alice']);
    expect(await store.lookupToken('th')).toEqual({
      state: 'active',
      device: { id: 'd1', userId: 'alice', name: 'laptop' },
    });
    expect(await store.listDevices('alice')).toEqual([
      { id: 'd1', userId: 'alice', name: 'laptop', createdMs: 2, lastSeenMs: null },
    ]);
    await store.close();
    const after = new Database(file, { readonly: true });
    expect(after.prepare("SELECT expires_ms FROM invites WHERE invite_sha256 = 'ih'").get()).toEqual({
      expires_ms: 1000 + 7 * 24 * 3600 * 1000,
    });
    const tables = after
      .prepare(
        "SELECT name, strict FROM pragma_table_list WHERE schema = 'main' AND name NOT LIKE 'sqlite_%'",
      )
      .all() as { name: string; strict: number }[];
    expect(tables.length).toBeGreaterThanOrEqual(9);
    for (const t of tables) expect(t).toEqual({ name: t.name, strict: 1 });
    after.close();
  });

  it('refuses a database newer than its files, unchanged', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'weft-proxy-new-')), 'metadata.sqlite');
    await new SqliteMetadataStore(file).close();
    const db = new Database(file);
    db.pragma('user_version = 42');
    db.close();
    expect(() => new SqliteMetadataStore(file)).toThrow(
      `proxy metadata schema 42 is newer than this Weft understands (${LATEST})`,
    );
    const again = new Database(file, { readonly: true });
    expect(again.pragma('user_version', { simple: true })).toBe(42);
    again.close();
  });
});

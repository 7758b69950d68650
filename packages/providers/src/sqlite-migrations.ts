/**
 * One way to keep a SQLite schema current, shared by the client journal, the mirror and
 * the proxy: the schema is a folder of numbered files `NNN_name.sql`, each producing
 * schema version NNN (numbered from 001 without gaps), and `PRAGMA user_version` is the
 * version the database is at (Syncthing's internal/db/sqlite/sql layout). Each file runs
 * once, in its own transaction together with the version bump, so a failed migration
 * leaves the database as it was. A database newer than the files is refused, unchanged:
 * an older program must not write to a schema it does not know.
 *
 * Foreign keys are switched off while the files run (SQLite ignores that pragma inside a
 * transaction, and rebuilding a table — create the new one, copy, drop the old, rename —
 * must not cascade); where the database enforces them, `PRAGMA foreign_key_check` must
 * come back empty before a file's transaction commits.
 *
 * The database is typed by the few methods used (better-sqlite3's Database has them), so
 * this package does not depend on the driver.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface MigratableDatabase {
  pragma(source: string, options?: { simple?: boolean }): unknown;
  exec(source: string): unknown;
  transaction<F extends () => void>(fn: F): () => void;
}

export interface Migration {
  /** The schema version the file produces. */
  readonly version: number;
  readonly file: string;
  readonly sql: string;
}

const NAME = /^(\d{3})_[a-z0-9_]+\.sql$/;

/** The migration files in `dir`, in order; throws on a stray `.sql` name, a gap or a repeated number. */
export function readMigrations(dir: string): Migration[] {
  const out: Migration[] = [];
  for (const file of readdirSync(dir).sort()) {
    if (!file.endsWith('.sql')) continue;
    const m = NAME.exec(file);
    if (!m) throw new Error(`${join(dir, file)}: a migration is named NNN_name.sql (lower case, digits, _)`);
    const version = Number(m[1]);
    if (version !== out.length + 1) {
      throw new Error(`${join(dir, file)}: expected migration ${String(out.length + 1).padStart(3, '0')}`);
    }
    out.push({ version, file, sql: readFileSync(join(dir, file), 'utf8') });
  }
  return out;
}

/**
 * Bring `db` to the newest version in `dir`; returns that version. `what` names the
 * database in the error for a schema newer than the files ("journal", "mirror database").
 */
export function migrate(db: MigratableDatabase, dir: string, what: string): number {
  const all = readMigrations(dir);
  const newest = all.at(-1)?.version ?? 0;
  const current = Number(db.pragma('user_version', { simple: true }));
  if (current > newest) {
    throw new Error(
      `${what} schema ${current} is newer than this Weft understands (${newest}); upgrade Weft`,
    );
  }
  const pending = all.filter((m) => m.version > current);
  if (pending.length === 0) return current;
  const foreignKeys = Number(db.pragma('foreign_keys', { simple: true })) === 1;
  if (foreignKeys) db.pragma('foreign_keys = OFF');
  try {
    for (const m of pending) {
      db.transaction(() => {
        db.exec(m.sql);
        const broken = foreignKeys ? (db.pragma('foreign_key_check') as unknown[]) : [];
        if (broken.length > 0) {
          throw new Error(`${what} migration ${m.file} leaves ${broken.length} broken foreign key(s)`);
        }
        db.pragma(`user_version = ${m.version}`);
      })();
    }
  } finally {
    if (foreignKeys) db.pragma('foreign_keys = ON');
  }
  return newest;
}

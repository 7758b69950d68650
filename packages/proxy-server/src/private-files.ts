/**
 * Everything a proxy stores is its users' data: folders it creates are 0700 and files 0600,
 * whatever the process umask (a standalone server under umask 022 would otherwise leave the
 * namespaces, the SQLite index and staged uploads readable by every local user).
 */
import { chmodSync, closeSync, mkdirSync, openSync } from 'node:fs';

/** Create `dir` (and missing parents) owner-only, and make an existing one owner-only. */
export function privateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

/**
 * Make a SQLite database file owner-only before SQLite opens it: created empty at 0600 when
 * missing (SQLite then gives its -wal and -shm files the same mode), and an existing file,
 * with its -wal and -shm, set to 0600.
 */
export function privateDatabaseFile(file: string): void {
  closeSync(openSync(file, 'a', 0o600));
  for (const f of [file, `${file}-wal`, `${file}-shm`]) {
    try {
      chmodSync(f, 0o600);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
  }
}

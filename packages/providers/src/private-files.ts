/**
 * Files and folders that hold users' data or secrets: folders 0700 and files 0600 whatever
 * the process umask, also when an older copy had looser modes. One home for the proxy (its
 * data directory, SQLite index, staging) and the agent (its state folder, journal, tokens).
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, closeSync, mkdirSync, openSync } from 'node:fs';
import * as fsp from 'node:fs/promises';

/** Create `dir` (and missing parents) owner-only, and make an existing one owner-only. */
export function privateDirSync(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

/** privateDirSync, without blocking the event loop. */
export async function privateDir(dir: string): Promise<void> {
  await fsp.mkdir(dir, { recursive: true, mode: 0o700 });
  await fsp.chmod(dir, 0o700);
}

/** Write a file whole (temporary file, then rename), readable by this user only. */
export async function writePrivateFile(file: string, data: string | Uint8Array): Promise<void> {
  const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    // 'wx': a fresh file, so the mode below is the one it was created with.
    await fsp.writeFile(tmp, data, { mode: 0o600, flag: 'wx' });
    await fsp.chmod(tmp, 0o600);
    await fsp.rename(tmp, file);
  } catch (e) {
    await fsp.rm(tmp, { force: true });
    throw e;
  }
}

/**
 * Make a SQLite database file owner-only before SQLite opens it: created empty at 0600 when
 * missing (SQLite gives its -wal and -shm files the database file's mode), and an existing
 * one, with its -wal and -shm, set to 0600.
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

/**
 * The engine's writes into the synced folder: always temp file in the same folder, fsync,
 * rename — a reader (or a crash) never sees a half-written file. Files the engine replaces
 * or deletes go to the trash first (kept 30 days), so nothing is lost to a sync decision.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';

/** Prefix of the engine's temp files inside the synced folder (ignored by the scanner). */
export const PARTIAL_PREFIX = '.weft-partial-';

export async function sha256File(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(file)) h.update(chunk as Buffer);
  return h.digest('hex');
}

/**
 * Write `data` (bytes or a stream) to `target` atomically. Returns the stat of the new file.
 * `target` is an absolute path the caller resolved inside the folder (LocalPaths.resolve).
 * `beforeRename` runs after the data is durable and before it becomes visible — the
 * place to keep the previous version in the trash, or to return another absolute path
 * (resolved the same way) when the content must land elsewhere.
 */
export async function atomicWrite(
  target: string,
  data: Uint8Array | AsyncIterable<Uint8Array>,
  options: { mtimeMs?: number; beforeRename?: () => Promise<string | void> } = {},
): Promise<import('node:fs').BigIntStats> {
  await fsp.mkdir(nodePath.dirname(target), { recursive: true });
  const tmp = nodePath.join(nodePath.dirname(target), PARTIAL_PREFIX + randomBytes(8).toString('hex'));
  const fh = await fsp.open(tmp, 'wx', 0o644);
  try {
    try {
      if (data instanceof Uint8Array) await fh.writeFile(data);
      else for await (const chunk of data) await fh.write(chunk);
      if (options.mtimeMs !== undefined) {
        const t = new Date(options.mtimeMs);
        await fh.utimes(t, t);
      }
      await fh.sync();
    } finally {
      await fh.close();
    }
    // beforeRename may redirect the new content (e.g. to a conflicted copy's name).
    const redirect = await options.beforeRename?.();
    if (typeof redirect === 'string') {
      target = redirect;
      await fsp.mkdir(nodePath.dirname(target), { recursive: true });
    }
    await fsp.rename(tmp, target);
  } catch (e) {
    await fsp.rm(tmp, { force: true });
    throw e;
  }
  return fsp.lstat(target, { bigint: true });
}

/** Remove temp files a crash left in the folder. */
export async function sweepPartials(root: string): Promise<number> {
  let removed = 0;
  const walk = async (dir: string): Promise<void> => {
    let entries: import('node:fs').Dirent[];
    try {
      entries = await fsp.readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const full = nodePath.join(dir, e.name);
      if (e.isDirectory()) await walk(full);
      else if (e.name.startsWith(PARTIAL_PREFIX)) {
        await fsp.rm(full, { force: true });
        removed += 1;
      }
    }
  };
  await walk(root);
  return removed;
}

/** The local trash: deleted and overwritten files, kept for `retentionDays`. */
export class Trash {
  constructor(
    readonly dir: string,
    private readonly retentionDays = 30,
  ) {}

  /**
   * Move `abs` (inside the synced folder) into the trash; returns where it went. `relPath`
   * is its LOCAL path relative to the folder (LocalPaths.localRel), so the trash holds
   * only names this disk can hold and nothing lands outside it.
   */
  async keep(abs: string, relPath: string): Promise<string | undefined> {
    try {
      await fsp.lstat(abs);
    } catch {
      return undefined;
    }
    const stamp = new Date().toISOString().replace(/[:.]/g, '-');
    const dest = this.destFor(stamp + '-' + randomBytes(3).toString('hex'), relPath);
    await fsp.mkdir(nodePath.dirname(dest), { recursive: true, mode: 0o700 });
    try {
      await fsp.rename(abs, dest);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EXDEV') throw e;
      await fsp.cp(abs, dest, { recursive: true });
      await fsp.rm(abs, { recursive: true, force: true });
    }
    return dest;
  }

  /** Where `relPath` goes in the trash; never outside it, whatever the name. */
  private destFor(slot: string, relPath: string): string {
    const base = nodePath.join(this.dir, slot);
    const dest = nodePath.join(base, ...relPath.split('/'));
    if (!dest.startsWith(base + nodePath.sep) || relPath.split('/').some((s) => s === '..' || s === '.'))
      throw new Error(`refusing to trash ${JSON.stringify(relPath)}: it would land outside the trash`);
    return dest;
  }

  /** Copy (not move) a file into the trash: for versions about to be overwritten in place. */
  async keepCopy(abs: string, relPath: string): Promise<string | undefined> {
    try {
      const stamp = new Date().toISOString().replace(/[:.]/g, '-');
      const dest = this.destFor(stamp + '-' + randomBytes(3).toString('hex'), relPath);
      await fsp.mkdir(nodePath.dirname(dest), { recursive: true, mode: 0o700 });
      await fsp.copyFile(abs, dest);
      return dest;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw e;
    }
  }

  /** Delete trash entries older than the retention period. */
  async purge(now = Date.now()): Promise<number> {
    let removed = 0;
    let names: string[];
    try {
      names = await fsp.readdir(this.dir);
    } catch {
      return 0;
    }
    for (const name of names) {
      const st = await fsp.stat(nodePath.join(this.dir, name));
      if (now - st.mtimeMs > this.retentionDays * 86_400_000) {
        await fsp.rm(nodePath.join(this.dir, name), { recursive: true, force: true });
        removed += 1;
      }
    }
    return removed;
  }
}

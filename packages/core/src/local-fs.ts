/**
 * The engine's writes into the synced folder: always temp file in the same folder, fsync,
 * rename — a reader (or a crash) never sees a half-written file. Files the engine replaces
 * or deletes go to the trash first (purged by age and size, trash-purge.ts), so nothing is
 * lost to a sync decision.
 */
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import { createReadStream } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { LoopGate } from './loop-gate.ts';
import {
  DAY_MS,
  DEFAULT_TRASH_KEEP_DAYS,
  TrashItemGoneError,
  parseTrashSlot,
  purgeTrash,
  trashSlotName,
} from './trash-purge.ts';

/** Prefix of the engine's temp files inside the synced folder (ignored by the scanner). */
export const PARTIAL_PREFIX = '.weft-partial-';

/**
 * A small file's bytes and mtime, read on the event loop while the gate says reads are quick
 * (open, fstat, read, close: ~10 µs for a cached small file), else the same calls through
 * the thread pool (readFile and lstat took five round trips as well: 4.6 s of a 30,000-file
 * drop's 28 s of agent CPU, issue #16). A file that grew since its stat is read to its end
 * either way. The bytes go into `alloc(size)` (a bundle upload's reused read slabs,
 * read-slabs.ts: a fresh buffer per file piled up as the agent's RSS spike, issue #16).
 */
export async function readSmallFile(
  abs: string,
  gate: LoopGate,
  alloc: (size: number) => Buffer = (size) => Buffer.allocUnsafe(size),
): Promise<{ readonly content: Buffer; readonly mtimeMs: number }> {
  if (!gate.onLoop()) {
    const fh = await fsp.open(abs, 'r');
    try {
      const st = await fh.stat({ bigint: true });
      const content = alloc(Number(st.size));
      let n = 0;
      while (n < content.length) {
        const { bytesRead } = await fh.read(content, n, content.length - n, null);
        if (bytesRead === 0) break;
        n += bytesRead;
      }
      const rest = n === content.length ? await grownTail(fh) : undefined;
      const whole = rest && rest.length > 0 ? Buffer.concat([content, rest]) : content.subarray(0, n);
      return { content: whole, mtimeMs: Number(st.mtimeMs) };
    } finally {
      await fh.close();
    }
  }
  const t = performance.now();
  try {
    const { content, mtimeMs } = readWholeSync(abs, alloc);
    return { content, mtimeMs: mtimeMs as number };
  } finally {
    gate.took(performance.now() - t);
  }
}

/**
 * A small file read whole on the calling thread (the event loop): open, fstat unless its
 * `size` is given (then `mtimeMs` is undefined), read to that size into `alloc(size)`, and on
 * to its end when it grew since, close. The one read of small files on the loop, for the
 * scanner's hashing and the bundle upload alike (callers ask their LoopGate first and time it).
 * Throws as the system calls do (ENOENT, EACCES, EISDIR…).
 */
export function readWholeSync(
  abs: string,
  alloc: (size: number) => Buffer,
  size?: number,
): { readonly content: Buffer; readonly mtimeMs: number | undefined } {
  const fd = fs.openSync(abs, 'r');
  try {
    const st = size === undefined ? fs.fstatSync(fd, { bigint: true }) : undefined;
    const content = alloc(st === undefined ? (size as number) : Number(st.size));
    let n = 0;
    while (n < content.length) {
      const got = fs.readSync(fd, content, n, content.length - n, null);
      if (got === 0) break;
      n += got;
    }
    const rest = n === content.length ? grownTailSync(fd) : undefined;
    const whole = rest && rest.length > 0 ? Buffer.concat([content, rest]) : content.subarray(0, n);
    return { content: whole, mtimeMs: st === undefined ? undefined : Number(st.mtimeMs) };
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * What a file read to its stat size holds beyond it (grown since the stat), else undefined.
 * Probed with one byte: readFile(fd) here allocated a buffer of the whole file's size to
 * read nothing — a second dead buffer per file read (issue #16).
 */
function grownTailSync(fd: number): Buffer | undefined {
  if (fs.readSync(fd, PROBE, 0, 1, null) === 0) return undefined;
  return Buffer.concat([PROBE, fs.readFileSync(fd)]);
}

async function grownTail(fh: fsp.FileHandle): Promise<Buffer | undefined> {
  const probe = Buffer.allocUnsafe(1); // not PROBE: other reads run meanwhile
  if ((await fh.read(probe, 0, 1, null)).bytesRead === 0) return undefined;
  return Buffer.concat([probe, await fh.readFile()]);
}

/** One byte read past a file's end on the event loop (never across an await). */
const PROBE = Buffer.alloc(1);

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
    // A path made only for a folder or a temp file: not one per file (run at every start).
    for (const e of entries) {
      if (e.isDirectory()) await walk(nodePath.join(dir, e.name));
      else if (e.name.startsWith(PARTIAL_PREFIX)) {
        await fsp.rm(nodePath.join(dir, e.name), { force: true });
        removed += 1;
      }
    }
  };
  await walk(root);
  return removed;
}

/**
 * The local trash: deleted and overwritten files, each in its own slot
 * `<dir>/<ISO time with - for : and .>-<6 hex>/<local path>` (the slot's name is the time it
 * was trashed). Purged by age and size (trash-purge.ts; the agent runs it).
 */
export class Trash {
  private readonly now: () => number;
  private readonly retentionDays: number;

  constructor(
    readonly dir: string,
    options: { readonly now?: () => number; readonly retentionDays?: number } = {},
  ) {
    this.now = options.now ?? Date.now;
    this.retentionDays = options.retentionDays ?? DEFAULT_TRASH_KEEP_DAYS;
  }

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
    const dest = this.destFor(this.newSlot(), relPath);
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

  private newSlot(): string {
    return trashSlotName(this.now(), randomBytes(3).toString('hex'));
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
    const slot = this.newSlot();
    const dest = this.destFor(slot, relPath);
    try {
      await fsp.mkdir(nodePath.dirname(dest), { recursive: true, mode: 0o700 });
      await fsp.copyFile(abs, dest);
      return dest;
    } catch (e) {
      // Nothing to keep (a new file): no empty slot is left behind either.
      await fsp.rm(nodePath.join(this.dir, slot), { recursive: true, force: true });
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw e;
    }
  }

  /**
   * Put a trashed item (a path keep/keepCopy returned) back at `target` (an absolute path
   * the caller resolved inside the folder), which must not exist. Fails with
   * TrashItemGoneError when the item was purged meanwhile; nothing is written then.
   */
  async restore(trashed: string, target: string): Promise<void> {
    const rel = nodePath.relative(this.dir, trashed);
    const [slot, ...rest] = rel.split(nodePath.sep);
    if (
      rel.startsWith('..') ||
      nodePath.isAbsolute(rel) ||
      !slot ||
      !parseTrashSlot(slot) ||
      rest.length === 0
    )
      throw new Error(`not an item of the trash ${this.dir}: ${trashed}`);
    // Every folder on the way must be a real folder of the trash (no symlink leads out).
    let at = this.dir;
    for (const part of [slot, ...rest.slice(0, -1)]) {
      at = nodePath.join(at, part);
      const st = await fsp.lstat(at).catch(() => undefined);
      if (!st) throw new TrashItemGoneError(trashed, slot);
      if (!st.isDirectory()) throw new Error(`not an item of the trash ${this.dir}: ${trashed}`);
    }
    if (!(await fsp.lstat(trashed).catch(() => undefined))) throw new TrashItemGoneError(trashed, slot);
    if (await fsp.lstat(target).catch(() => undefined))
      throw new Error(`cannot restore to ${target}: something is there already`);
    await fsp.mkdir(nodePath.dirname(target), { recursive: true });
    try {
      await fsp.rename(trashed, target);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new TrashItemGoneError(trashed, slot);
      if ((e as NodeJS.ErrnoException).code !== 'EXDEV') throw e;
      await fsp.cp(trashed, target, { recursive: true, errorOnExist: true, force: false });
    }
    await fsp.rm(nodePath.join(this.dir, slot), { recursive: true, force: true });
  }

  /** Delete trash entries older than the retention period (the agent's purge also caps the size). */
  async purge(now = this.now()): Promise<number> {
    const result = await purgeTrash(
      this.dir,
      { maxAgeMs: this.retentionDays * DAY_MS, maxBytes: Infinity },
      now,
    );
    return result.removed.length;
  }
}

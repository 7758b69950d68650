/**
 * Purging the local trash (local-fs.ts Trash): by age (default 30 days) and by size (default
 * min(10 % of the disk the trash is on, 10 GiB)), oldest first. The agent runs it at start,
 * every hour, and after a sync pass that put something in the trash (TrashJanitor).
 *
 * Only what the trash itself made is ever removed: a folder directly in the trash directory
 * whose name is a slot name (`2026-11-24T04-14-15-123Z-a1b2c3`). Anything else there — other
 * names, files, symlinks — is left alone, and nothing is followed out of the directory: sizes
 * are counted with lstat, and removing a slot unlinks symlinks inside it, never their targets.
 */
import type { Dirent } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { Disposable } from './lifecycle.ts';

export const DAY_MS = 86_400_000;
export const DEFAULT_TRASH_KEEP_DAYS = 30;
/** The automatic size cap: this share of the disk… */
export const TRASH_DISK_SHARE = 0.1;
/** …but never more than this. */
export const TRASH_CAP_CEILING_BYTES = 10 * 1024 ** 3;
/** How often the agent purges when nothing else asks it to. */
export const TRASH_PURGE_INTERVAL_MS = 3_600_000;

const SLOT = /^(\d{4})-(\d{2})-(\d{2})T(\d{2})-(\d{2})-(\d{2})-(\d{3})Z-[0-9a-f]{6}$/;

/** The name of a new slot trashed at `ms`. */
export function trashSlotName(ms: number, suffix: string): string {
  return new Date(ms).toISOString().replace(/[:.]/g, '-') + '-' + suffix;
}

/** When a slot was trashed (ms), or undefined for a name the trash did not make. */
export function parseTrashSlot(name: string): number | undefined {
  const m = SLOT.exec(name);
  if (!m) return undefined;
  const ms = Date.parse(`${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}.${m[7]}Z`);
  return Number.isFinite(ms) ? ms : undefined;
}

/** The item asked for was purged from the trash (or never was there). */
export class TrashItemGoneError extends Error {
  readonly code = 'TRASH_ITEM_GONE';
  constructor(
    readonly item: string,
    slot: string,
  ) {
    const at = parseTrashSlot(slot);
    super(
      `${item} is no longer in the trash${at !== undefined ? ` (trashed ${new Date(at).toISOString()})` : ''}: ` +
        'items are purged after the days set in Settings, oldest first when the trash is over its size limit',
    );
    this.name = 'TrashItemGoneError';
  }
}

export interface TrashPolicy {
  /** Slots older than this go. */
  readonly maxAgeMs: number;
  /** Then, oldest first, until the rest fits in this many bytes (Infinity: no cap). */
  readonly maxBytes: number;
}

export interface TrashSlot {
  readonly name: string;
  readonly trashedAtMs: number;
  readonly bytes: number;
}

export interface PurgeResult {
  readonly removed: readonly string[];
  readonly freedBytes: number;
  readonly keptBytes: number;
  readonly kept: number;
}

/** Bytes under `p`, counted with lstat (a symlink is its own few bytes, never its target). */
async function treeBytes(p: string): Promise<number> {
  const st = await fsp.lstat(p).catch(() => undefined);
  if (!st) return 0;
  if (!st.isDirectory()) return st.size;
  let total = 0;
  let entries: Dirent[];
  try {
    entries = await fsp.readdir(p, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) total += await treeBytes(nodePath.join(p, e.name));
  return total;
}

/**
 * The trash's slots, oldest first. `sizes` caches slot sizes between calls (a slot never
 * changes once written), so a purge after every pass reads only the new ones.
 */
export async function listTrashSlots(dir: string, sizes?: Map<string, number>): Promise<TrashSlot[]> {
  let entries: Dirent[];
  try {
    entries = await fsp.readdir(dir, { withFileTypes: true });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  const slots: TrashSlot[] = [];
  for (const e of entries) {
    const trashedAtMs = parseTrashSlot(e.name);
    // Dirent from readdir is lstat-like: a symlink named like a slot is not a directory.
    if (trashedAtMs === undefined || !e.isDirectory()) continue;
    let bytes = sizes?.get(e.name);
    if (bytes === undefined) {
      bytes = await treeBytes(nodePath.join(dir, e.name));
      sizes?.set(e.name, bytes);
    }
    slots.push({ name: e.name, trashedAtMs, bytes });
  }
  if (sizes)
    for (const name of [...sizes.keys()]) if (!slots.some((s) => s.name === name)) sizes.delete(name);
  return slots.sort((a, b) => a.trashedAtMs - b.trashedAtMs || (a.name < b.name ? -1 : 1));
}

/** Which slots go (pure): too old, then the oldest until the rest fits the cap. */
export function planPurge(slots: readonly TrashSlot[], policy: TrashPolicy, nowMs: number): TrashSlot[] {
  const oldestFirst = [...slots].sort((a, b) => a.trashedAtMs - b.trashedAtMs || (a.name < b.name ? -1 : 1));
  const going = new Set<TrashSlot>();
  let kept = 0;
  for (const s of oldestFirst) {
    // A slot from the future (the clock went back) counts as trashed now.
    if (nowMs - Math.min(s.trashedAtMs, nowMs) > policy.maxAgeMs) going.add(s);
    else kept += s.bytes;
  }
  for (const s of oldestFirst) {
    if (kept <= policy.maxBytes) break;
    if (going.has(s)) continue;
    going.add(s);
    kept -= s.bytes;
  }
  return oldestFirst.filter((s) => going.has(s));
}

/** Purge `dir` by `policy` at `nowMs`. */
export async function purgeTrash(
  dir: string,
  policy: TrashPolicy,
  nowMs: number,
  sizes?: Map<string, number>,
): Promise<PurgeResult> {
  const slots = await listTrashSlots(dir, sizes);
  const going = planPurge(slots, policy, nowMs);
  const removed: string[] = [];
  let freedBytes = 0;
  for (const s of going) {
    // rm does not follow symlinks: inside the slot they are unlinked, their targets untouched.
    await fsp.rm(nodePath.join(dir, s.name), { recursive: true, force: true });
    sizes?.delete(s.name);
    removed.push(s.name);
    freedBytes += s.bytes;
  }
  const total = slots.reduce((n, s) => n + s.bytes, 0);
  return { removed, freedBytes, keptBytes: total - freedBytes, kept: slots.length - removed.length };
}

/**
 * The automatic cap: min(10 % of the disk `dir` is on, 10 GiB). The disk that fills is the
 * one holding the trash (the agent's state folder; in the default layout ~/.weft, on the
 * same disk as ~/Weft). 10 % follows the Windows Recycle Bin's usual share of a drive; the
 * ceiling keeps a large disk from holding tens of GiB of old versions nobody asked for.
 */
export async function automaticTrashCap(dir: string): Promise<number> {
  let at = nodePath.resolve(dir);
  for (;;) {
    try {
      const s = await fsp.statfs(at);
      return Math.min(Math.floor(s.blocks * s.bsize * TRASH_DISK_SHARE), TRASH_CAP_CEILING_BYTES);
    } catch (e) {
      const parent = nodePath.dirname(at);
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT' || parent === at) throw e;
      at = parent;
    }
  }
}

export interface TrashJanitorOptions {
  readonly dir: string;
  /** The policy now (read on every run, so a changed setting applies at the next one). */
  readonly policy: () => TrashPolicy | Promise<TrashPolicy>;
  readonly now?: () => number;
  /** Runs `fn` every `ms`; default setInterval (unref'd). */
  readonly every?: (ms: number, fn: () => void) => Disposable;
  readonly intervalMs?: number;
  /** Told about every run that removed something, and about failures. */
  readonly log?: (line: string) => void;
}

/** Runs the purge at start, periodically, and after a pass that trashed something. */
export class TrashJanitor implements Disposable {
  private readonly sizes = new Map<string, number>();
  private running: Promise<PurgeResult | undefined> | undefined;
  private again = false;
  private timer: Disposable | undefined;
  private disposed = false;
  private readonly now: () => number;

  constructor(private readonly o: TrashJanitorOptions) {
    this.now = o.now ?? Date.now;
  }

  /** Purge now, then every intervalMs. Resolves when the first purge is done. */
  async start(): Promise<PurgeResult | undefined> {
    const every =
      this.o.every ??
      ((ms: number, fn: () => void): Disposable => {
        const t = setInterval(fn, ms);
        t.unref();
        return { dispose: () => clearInterval(t) };
      });
    this.timer = every(this.o.intervalMs ?? TRASH_PURGE_INTERVAL_MS, () => void this.run());
    return this.run();
  }

  /**
   * After a sync pass: purge if the trash holds a slot the last purge did not see. Cheap when
   * nothing was trashed (one readdir).
   */
  async afterPass(): Promise<PurgeResult | undefined> {
    let names: string[];
    try {
      names = await fsp.readdir(this.o.dir);
    } catch {
      return undefined;
    }
    const fresh = names.some((n) => parseTrashSlot(n) !== undefined && !this.sizes.has(n));
    return fresh ? this.run() : undefined;
  }

  /** One purge (one at a time: a call during a run gets one more run after it). */
  run(): Promise<PurgeResult | undefined> {
    if (this.disposed) return Promise.resolve(undefined);
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      let result: PurgeResult | undefined;
      do {
        this.again = false;
        try {
          result = await purgeTrash(this.o.dir, await this.o.policy(), this.now(), this.sizes);
          if (result.removed.length > 0)
            this.o.log?.(
              `trash: purged ${result.removed.length} item(s), ${result.freedBytes} bytes; ${result.kept} kept (${result.keptBytes} bytes)`,
            );
        } catch (e) {
          this.o.log?.(`trash: purge failed: ${e instanceof Error ? e.message : String(e)}`);
        }
      } while (this.again && !this.disposed);
      return result;
    })().finally(() => (this.running = undefined));
    return this.running;
  }

  /** Stop the timer; resolves when a purge in progress has finished. */
  async stop(): Promise<void> {
    this.dispose();
    await this.running;
  }

  dispose(): void {
    this.disposed = true;
    this.timer?.dispose();
    this.timer = undefined;
  }
}

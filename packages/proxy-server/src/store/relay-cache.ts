/**
 * Relay cache (HyCloud §III-B): large objects are staged from the object tier into a
 * bounded directory on the filesystem tier and streamed to clients from there, with Range
 * support. Least recently used files are evicted when the total exceeds the bound; a file
 * being read is pinned. Concurrent requests for the same object share one staging.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { createWriteStream } from 'node:fs';
import type { Provider } from '@weft/providers';

interface Slot {
  readonly file: string;
  readonly size: number;
  lastUsed: number;
  pins: number;
}

export interface RelayStats {
  hits: number;
  misses: number;
  bytes: number;
  files: number;
}

export class RelayCache {
  private readonly slots = new Map<string, Slot>();
  private readonly staging = new Map<string, Promise<Slot>>();
  private total = 0;
  private tick = 0;
  readonly stats: RelayStats = { hits: 0, misses: 0, bytes: 0, files: 0 };

  constructor(
    private readonly dir: string,
    private readonly maxBytes: number,
    private readonly objects: Provider,
    private readonly onStaged?: (bytes: number, ms: number) => void,
  ) {}

  async init(): Promise<void> {
    // Anything left from a previous run is only a cache: start empty.
    await fsp.rm(this.dir, { recursive: true, force: true });
    await fsp.mkdir(this.dir, { recursive: true, mode: 0o700 });
  }

  /**
   * Pin the object's local copy (staging it if needed) and return its file; call
   * `release()` when done reading.
   */
  async acquire(sha256: string, key: string, size: number): Promise<{ file: string; release: () => void }> {
    let slot = this.slots.get(sha256);
    if (slot) this.stats.hits += 1;
    else {
      let pending = this.staging.get(sha256);
      if (pending) this.stats.hits += 1;
      else {
        this.stats.misses += 1;
        pending = this.stage(sha256, key, size).finally(() => this.staging.delete(sha256));
        this.staging.set(sha256, pending);
      }
      slot = await pending;
    }
    slot.pins += 1;
    slot.lastUsed = ++this.tick;
    let released = false;
    const s = slot;
    return {
      file: s.file,
      release: () => {
        if (released) return;
        released = true;
        s.pins -= 1;
        void this.evict();
      },
    };
  }

  private async stage(sha256: string, key: string, size: number): Promise<Slot> {
    const started = performance.now();
    const file = nodePath.join(this.dir, sha256);
    const tmp = nodePath.join(this.dir, `.tmp-${randomBytes(8).toString('hex')}`);
    try {
      const body = await this.objects.read(key);
      await pipeline(Readable.from(body), createWriteStream(tmp, { mode: 0o600 }));
      const st = await fsp.stat(tmp);
      if (st.size !== size) throw new Error(`object ${sha256} has ${st.size} bytes, expected ${size}`);
      await fsp.rename(tmp, file);
    } catch (e) {
      await fsp.rm(tmp, { force: true });
      throw e;
    }
    this.onStaged?.(size, performance.now() - started);
    const slot: Slot = { file, size, lastUsed: ++this.tick, pins: 0 };
    this.slots.set(sha256, slot);
    this.total += size;
    this.stats.bytes = this.total;
    this.stats.files = this.slots.size;
    await this.evict();
    return slot;
  }

  private async evict(): Promise<void> {
    if (this.total <= this.maxBytes) return;
    const victims = [...this.slots.entries()]
      .filter(([, s]) => s.pins === 0)
      .sort((a, b) => a[1].lastUsed - b[1].lastUsed);
    for (const [sha, s] of victims) {
      if (this.total <= this.maxBytes) break;
      this.slots.delete(sha);
      this.total -= s.size;
      await fsp.rm(s.file, { force: true });
    }
    this.stats.bytes = this.total;
    this.stats.files = this.slots.size;
  }

  /** Drop an object's copy (after GC deleted the object). */
  async forget(sha256: string): Promise<void> {
    const s = this.slots.get(sha256);
    if (!s || s.pins > 0) return;
    this.slots.delete(sha256);
    this.total -= s.size;
    await fsp.rm(s.file, { force: true });
  }

  has(sha256: string): boolean {
    return this.slots.has(sha256);
  }
}

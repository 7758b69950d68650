/**
 * How the scanner (scanner.ts) reads the disk: the stats of a folder's names and the hashes
 * of the files that need one — on the event loop while such calls are quick (the folder's
 * LoopGate, loop-gate.ts), a slice at a time between turns of the loop, else through the
 * thread pool (issue #16).
 */
import { createHash } from 'node:crypto';
import type { BigIntStats } from 'node:fs';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { BoundedTasks } from './bounded-tasks.ts';
import { readWholeSync, sha256File } from './local-fs.ts';
import type { LoopGate } from './loop-gate.ts';
import type { DiskEntry } from './scan-rows.ts';

/**
 * Entries stat'ed on the event loop between two of its turns: a cached stat is a few µs, 4x
 * less CPU than through the thread pool (issue #16), so 256 hold the loop a millisecond or two.
 */
export const STAT_SLICE = 256;
/** Names of one folder whose stats are asked for together, in the thread pool. */
const STAT_CHUNK = 64;
/** lstat's options on the loop: one object for every call. */
const STAT_OPTIONS = { bigint: true, throwIfNoEntry: false } as const;
/** Files hashed at once (reads overlap in the thread pool; small files are read whole). */
const HASH_CONCURRENCY = 8;
/** Files up to this size are read in one call to hash them, not streamed. */
const WHOLE_READ_BYTES = 1024 * 1024;

/** Files up to this size are hashed on the event loop (while reads are quick), through one buffer. */
const SCRATCH_BYTES = 256 * 1024;
/** Bytes (plus 4 KiB a file) read and hashed on the event loop between two of its turns: a few ms. */
const HASH_SLICE_BYTES = 4 * 1024 * 1024;
/**
 * Milliseconds of stats and hashes on the event loop between two of its turns, whatever their
 * count or bytes: a read or a stat that misses the OS's cache is not "slow" to the LoopGate
 * (under 20 ms) yet 300 such reads held the loop 90 ms of CPU in a 100,000-file first scan
 * (issue #16: the agent answers its UI within 100 ms).
 */
export const LOOP_SLICE_MS = 10;

/**
 * The hash of a small file read on the event loop into `scratch` (local-fs.ts readWholeSync),
 * or 'unsettled' (it changed while read: its size or mtime moved) or 'gone' (unreadable or vanished).
 */
function hashOnLoop(abs: string, e: { size: number; mtimeNs: bigint }, scratch: Buffer): string {
  try {
    const into = (n: number): Buffer =>
      n <= scratch.length ? scratch.subarray(0, n) : Buffer.allocUnsafe(n);
    const hash = createHash('sha256')
      .update(readWholeSync(abs, into, e.size).content)
      .digest('hex');
    const again = fs.lstatSync(abs, { bigint: true }); // the path: a file renamed over it counts
    return again.mtimeNs !== e.mtimeNs || Number(again.size) !== e.size ? 'unsettled' : hash;
  } catch {
    return 'gone';
  }
}

async function hashFile(abs: string, size: number): Promise<string> {
  if (size > WHOLE_READ_BYTES) return sha256File(abs);
  return createHash('sha256')
    .update(await fsp.readFile(abs))
    .digest('hex');
}

/** Where an entry is on disk (made when needed: 100,000 stored paths cost megabytes). */
export function absOf(e: DiskEntry): string {
  return nodePath.join(e.dir, e.name);
}

/** One scan's stats and hashes; `stopCheck` throws once the scan is asked to stop. */
export class ScanDisk {
  /** Files whose content was read to hash it. */
  hashedFiles = 0;
  private sinceTurn = 0;
  private hashedSinceTurn = 0;
  /** Milliseconds the calls made on the loop took since its last turn (LOOP_SLICE_MS). */
  private msSinceTurn = 0;
  private readonly scratch = Buffer.allocUnsafe(SCRATCH_BYTES);
  private readonly tasks = new BoundedTasks(HASH_CONCURRENCY);

  constructor(
    private readonly gate: LoopGate,
    private readonly stopCheck: () => void,
    /** Milliseconds, as performance.now() (a test's clock). */
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /** A turn of the event loop now; the slices start again. */
  private async turn(): Promise<void> {
    this.sinceTurn = 0;
    this.hashedSinceTurn = 0;
    this.msSinceTurn = 0;
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.stopCheck();
  }

  /** A call made on the loop took `ms`: for the LoopGate, and toward LOOP_SLICE_MS. */
  private tookOnLoop(ms: number): void {
    this.msSinceTurn += ms;
    this.gate.took(ms);
  }

  // Stats on the event loop, STAT_SLICE between turns, while they are quick (the folder's
  // LoopGate, shared with its realpaths): else in the thread pool, a chunk of names at once
  // (the pool works on them together).
  async statNames(dirAbs: string, names: readonly string[]): Promise<(BigIntStats | undefined)[]> {
    const out: (BigIntStats | undefined)[] = [];
    // The folder's path once, normalised, with its separator: `prefix + name` is join's result
    // for a name from readdir (no separator, never . or ..) without its cost per file.
    const prefix = nodePath.join(dirAbs, 'x').slice(0, -1);
    while (out.length < names.length) {
      if (this.gate.onLoop()) {
        if (++this.sinceTurn >= STAT_SLICE || this.msSinceTurn >= LOOP_SLICE_MS) await this.turn();
        const abs = prefix + (names[out.length] as string);
        const t = this.clock();
        try {
          out.push(fs.lstatSync(abs, STAT_OPTIONS));
        } catch {
          out.push(undefined); // unreadable: as if gone
        }
        this.tookOnLoop(this.clock() - t);
        continue;
      }
      const chunk = names.slice(out.length, out.length + STAT_CHUNK);
      out.push(
        ...(await Promise.all(
          chunk.map((n) => fsp.lstat(prefix + n, { bigint: true }).catch(() => undefined)),
        )),
      );
      this.stopCheck();
    }
    return out;
  }

  // Hash what needs it, several files at once ('unsettled': changed while hashed; 'gone':
  // unreadable or vanished). A small file is read on the event loop while reads are quick,
  // into one reused buffer, HASH_SLICE_BYTES between turns: through the pool each took four
  // round trips and a buffer of its own (~850 MB of buffers at 100,000 files; issue #16).
  /** Sets `hash` on each entry of `chunk` that `needsHash` accepts. */
  async hashAll(chunk: readonly DiskEntry[], needsHash: (e: DiskEntry) => boolean): Promise<void> {
    for (const e of chunk) {
      if (!needsHash(e)) continue;
      this.stopCheck();
      this.hashedFiles += 1;
      if (e.size <= SCRATCH_BYTES && this.gate.onLoop()) {
        if (this.hashedSinceTurn >= HASH_SLICE_BYTES || this.msSinceTurn >= LOOP_SLICE_MS) await this.turn();
        const t = this.clock();
        e.hash = hashOnLoop(absOf(e), e, this.scratch); // never throws: 'gone'
        this.tookOnLoop(this.clock() - t);
        this.hashedSinceTurn += e.size + 4096;
        continue;
      }
      await this.tasks.add(async () => {
        let outcome: string;
        try {
          const abs = absOf(e);
          const hash = await hashFile(abs, e.size);
          const again = await fsp.lstat(abs, { bigint: true });
          outcome = again.mtimeNs !== e.mtimeNs || Number(again.size) !== e.size ? 'unsettled' : hash;
        } catch {
          outcome = 'gone';
        }
        e.hash = outcome;
      });
    }
    await this.tasks.drain();
  }
}

/**
 * The destination proxy's cache: for each path, the content it last received (or uploaded
 * to its clouds) — the basis of the next delta and the "unchanged" verdicts — plus each
 * path's block-size history (CoCloud Eq. 1–2). Index in SQLite (schema in ./sql), contents as
 * content-addressed files written atomically (temporary file, fsync, rename).
 */
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { migrate } from '@weft/providers/sqlite-migrations';
import { collect, estimateEliminationRatios, signature } from '@weft/rsync-wasm';
import { BlockSizePredictor, CANDIDATE_BLOCK_SIZES, type DestinationCache } from './compare.ts';

const SQL_DIR = fileURLToPath(new URL('./sql/', import.meta.url));

export class PeerCache implements DestinationCache {
  readonly predictor = new BlockSizePredictor(CANDIDATE_BLOCK_SIZES);
  private readonly db: Database.Database;
  private readonly objects: string;
  /** Contents that must not be deleted yet (the basis of a delta on its way). */
  private readonly pinned = new Map<string, number>();

  private constructor(
    readonly dir: string,
    db: Database.Database,
  ) {
    this.db = db;
    this.objects = nodePath.join(dir, 'objects');
  }

  static async open(dir: string): Promise<PeerCache> {
    await fsp.mkdir(nodePath.join(dir, 'objects'), { recursive: true });
    await fsp.mkdir(nodePath.join(dir, 'tmp'), { recursive: true });
    const db = new Database(nodePath.join(dir, 'cache.sqlite'));
    db.pragma('journal_mode = WAL');
    migrate(db, SQL_DIR, 'peer cache');
    const c = new PeerCache(dir, db);
    for (const row of db.prepare('SELECT path, probs, n FROM block_history').all() as {
      path: string;
      probs: string;
      n: number;
    }[]) {
      c.predictor.restore(row.path, JSON.parse(row.probs) as number[], row.n);
    }
    return c;
  }

  get(path: string): { size: number; sha256: string } | undefined {
    return this.db.prepare('SELECT sha256, size FROM cached WHERE path = ?').get(path) as
      { size: number; sha256: string } | undefined;
  }

  hasContent(sha256: string): boolean {
    return this.db.prepare('SELECT 1 FROM cached WHERE sha256 = ? LIMIT 1').get(sha256) !== undefined;
  }

  objectPath(sha256: string): string {
    return nodePath.join(this.objects, sha256);
  }

  /** A fresh temporary file name on the cache's filesystem (for an atomic rename later). */
  tempPath(): string {
    return nodePath.join(this.dir, 'tmp', randomBytes(12).toString('hex'));
  }

  pin(sha256: string): void {
    this.pinned.set(sha256, (this.pinned.get(sha256) ?? 0) + 1);
  }

  unpin(sha256: string): void {
    const n = (this.pinned.get(sha256) ?? 0) - 1;
    if (n <= 0) this.pinned.delete(sha256);
    else this.pinned.set(sha256, n);
  }

  /** Store bytes as the object of their hash (atomic); returns the object's file. */
  async putBytes(bytes: Uint8Array, sha256: string): Promise<string> {
    const tmp = this.tempPath();
    const fh = await fsp.open(tmp, 'w');
    try {
      await fh.writeFile(bytes);
      await fh.sync();
    } finally {
      await fh.close();
    }
    return this.adoptFile(tmp, sha256);
  }

  /** Move a complete, fsynced temporary file in as the object of `sha256` (atomic rename). */
  async adoptFile(tmp: string, sha256: string): Promise<string> {
    const dest = this.objectPath(sha256);
    await fsp.rename(tmp, dest);
    return dest;
  }

  /** Record that `path` now holds `sha256`; an old content nobody references is removed. */
  async commit(path: string, sha256: string, size: number): Promise<void> {
    const old = this.get(path);
    this.db
      .prepare(
        'INSERT INTO cached(path, sha256, size) VALUES (?, ?, ?) ON CONFLICT(path) DO UPDATE SET sha256 = excluded.sha256, size = excluded.size',
      )
      .run(path, sha256, size);
    if (old && old.sha256 !== sha256) await this.dropIfUnused(old.sha256);
  }

  async dropIfUnused(sha256: string): Promise<void> {
    if (this.pinned.has(sha256) || this.hasContent(sha256)) return;
    await fsp.rm(this.objectPath(sha256), { force: true });
  }

  /** The rsync signature of a cached object (the basis of a changed file), in blocks of `blockSize`. */
  signature(sha256: string, blockSize: number): Promise<Uint8Array> {
    return collect(signature(createReadStream(this.objectPath(sha256)), { blockSize }));
  }

  /**
   * Step 5, when idle: what each candidate block size would have saved between the cached
   * `basis` and `target` (both held), folded into the path's history (recordRatios).
   */
  async measureRatios(path: string, basis: string, target: string): Promise<void> {
    const est = await estimateEliminationRatios(
      createReadStream(this.objectPath(basis)),
      createReadStream(this.objectPath(target)),
      { blockSizes: CANDIDATE_BLOCK_SIZES },
    );
    this.recordRatios(
      path,
      est.map((e) => e.eliminationRatio),
    );
  }

  /** Eq. 1–2: fold one version's measured dedup ratios into the path's history. */
  recordRatios(path: string, gammas: readonly number[]): void {
    this.predictor.record(path, gammas);
    const s = this.predictor.snapshot(path);
    if (!s) return;
    this.db
      .prepare(
        'INSERT INTO block_history(path, probs, n) VALUES (?, ?, ?) ON CONFLICT(path) DO UPDATE SET probs = excluded.probs, n = excluded.n',
      )
      .run(path, JSON.stringify(s.probs), s.n);
  }

  close(): void {
    this.db.close();
  }
}

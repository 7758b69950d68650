/**
 * Versions and deleted files a user can undo (docs/proxy-server.md "Versions and deleted
 * files"): list a file's versions, list the files deleted under a folder, restore either —
 * a normal write at the path, through the scheduler like any operation, so the change goes
 * out on the feed and every device gets it — and read a given version's bytes.
 *
 * Confinement: every lookup is keyed by the caller's own user id, and paths are checked
 * like any other (a hostile path is INVALID_PATH before anything is looked up).
 */
import { createReadStream } from 'node:fs';
import type { DeletedResponse, FileVersion, OpResult, VersionsResponse } from '@weft/wire';
import type { AuthContext } from './auth.ts';
import { ApiError } from './errors.ts';
import { writerOf } from './ops.ts';
import type { OpScheduler } from './scheduler.ts';
import { checkUserPath, type HybridStore } from './store/hybrid.ts';
import { publicEntry } from './store/metadata.ts';
import { NOOP_SEQ } from './store/op-results.ts';
import type { VersionRow } from './store/version-index.ts';

const DAY_MS = 24 * 3600 * 1000;

export class VersionService {
  constructor(
    private readonly o: {
      store: HybridStore;
      scheduler: OpScheduler;
      retentionDays: number;
      now?: () => number;
    },
  ) {}

  private get retentionMs(): number {
    return this.o.retentionDays * DAY_MS;
  }

  private toWire(v: VersionRow): FileVersion {
    return {
      id: v.id,
      current: false,
      deleted: v.deleted,
      writtenMs: v.writtenMs,
      deviceName: v.deviceName,
      size: v.size,
      sha256: v.sha256,
      mtimeMs: v.mtimeMs,
      replacedMs: v.replacedMs,
      replacedByName: v.replacedByName,
      expiresMs: v.replacedMs + this.retentionMs,
    };
  }

  /** The current version (when the path holds a file) and the kept ones, newest first. */
  async list(userId: string, path: string): Promise<VersionsResponse> {
    checkUserPath(path);
    const { meta } = this.o.store;
    const cur = await meta.getEntry(userId, path);
    const kept = await meta.versions.list(userId, path);
    if (cur?.kind === 'dir' && kept.length === 0) throw new ApiError('NOT_FOUND', 'not a file');
    if (!cur && kept.length === 0)
      throw new ApiError('NOT_FOUND', 'no file and no kept version at that path');
    const current: FileVersion[] =
      cur?.kind === 'file' && cur.sha256
        ? [
            {
              id: 0,
              current: true,
              deleted: false,
              ...(await meta.versions.written(userId, path)),
              size: cur.size,
              sha256: cur.sha256,
              mtimeMs: cur.mtimeMs,
              replacedMs: null,
              replacedByName: null,
              expiresMs: null,
            },
          ]
        : [];
    return {
      path,
      versions: [...current, ...kept.map((v) => this.toWire(v))],
      retentionDays: this.o.retentionDays,
    };
  }

  /** Files deleted below `dir` that nothing has replaced since. */
  async deleted(userId: string, dir: string, limit: number): Promise<DeletedResponse> {
    if (dir !== '') {
      checkUserPath(dir);
      const d = await this.o.store.meta.getEntry(userId, dir);
      if (d && d.kind !== 'dir') throw new ApiError('NOT_A_FOLDER', 'not a folder');
    }
    const rows = await this.o.store.meta.versions.deleted(userId, dir, limit + 1);
    return {
      path: dir,
      files: rows.slice(0, limit).map((v) => ({
        path: v.path,
        version: v.id,
        deletedMs: v.replacedMs,
        deletedByName: v.replacedByName,
        size: v.size,
        sha256: v.sha256,
        mtimeMs: v.mtimeMs,
        expiresMs: v.replacedMs + this.retentionMs,
      })),
      truncated: rows.length > limit,
      retentionDays: this.o.retentionDays,
    };
  }

  private async version(userId: string, path: string, id: number): Promise<VersionRow> {
    checkUserPath(path);
    const v = await this.o.store.meta.versions.get(userId, path, id);
    if (!v) throw new ApiError('NOT_FOUND', 'no such version of that file (it may have expired)');
    return v;
  }

  /** The bytes of a kept version, as a stream (caller sends it). */
  async open(
    userId: string,
    path: string,
    id: number,
  ): Promise<{ version: VersionRow; body: AsyncIterable<Uint8Array> | Uint8Array; release: () => void }> {
    const version = await this.version(userId, path, id);
    const { content, release } = await this.o.store.versionContent(version);
    if ('bytes' in content) return { version, body: content.bytes, release };
    const stream = createReadStream(content.file);
    stream.once('close', release);
    return { version, body: stream, release };
  }

  /**
   * Make a kept version current again at its path: a write based on whatever is there now
   * (which becomes a kept version in turn), so nothing is lost and every device syncs it.
   */
  async restore(a: AuthContext, path: string, id: number): Promise<OpResult> {
    const v = await this.version(a.userId, path, id);
    const { store, scheduler } = this.o;
    return scheduler.submit({
      namespace: a.userId,
      paths: [path],
      bytes: v.size,
      run: async (): Promise<OpResult> => {
        const cur = await store.meta.getEntry(a.userId, path);
        if (cur?.kind === 'file' && cur.sha256 === v.sha256)
          return { status: 'applied', entry: publicEntry(cur), seq: NOOP_SEQ };
        if (cur?.kind === 'dir')
          throw new ApiError('ALREADY_EXISTS', 'a folder is at that path now; move it away first', { path });
        const { content, release } = await store.versionContent(v);
        try {
          return await store.writeFile(
            writerOf(a),
            path,
            content,
            v.sha256,
            (this.o.now ?? Date.now)(),
            cur ? cur.revision : null,
            true,
          );
        } finally {
          release();
        }
      },
    });
  }
}

/**
 * File operations (POST /v1/ops) run through the scheduler: each op waits for earlier ops
 * on its paths, then runs against the store. A commit with a transferId writes the
 * transfer's staged file; one without links content the caller already holds. An op's
 * failure is its result (`status: 'error'`), never the request's.
 */
import type { FileOp, OpResult } from '@weft/wire';
import type { AuthContext } from './auth.ts';
import { ApiError, toApiError } from './errors.ts';
import type { ProxyMetrics } from './metrics.ts';
import type { OpScheduler } from './scheduler.ts';
import type { HybridStore, Writer } from './store/hybrid.ts';
import type { TransferService } from './transfers.ts';
import type { Logger } from 'pino';

/** The store's writer for an authenticated device. */
export function writerOf(a: AuthContext): Writer {
  return { userId: a.userId, deviceId: a.deviceId, deviceName: a.deviceName };
}

/** An error as an op's result (`status: 'error'`). */
export function errorResult(err: ApiError): Extract<OpResult, { status: 'error' }> {
  return {
    status: 'error',
    error: { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) },
  };
}

export class OpService {
  constructor(
    private readonly o: {
      store: HybridStore;
      scheduler: OpScheduler;
      transfers: TransferService;
      metrics: ProxyMetrics;
      log: Logger;
    },
  ) {}

  run(a: AuthContext, op: FileOp): Promise<OpResult> {
    const { scheduler, metrics, log } = this.o;
    const paths = op.op === 'move' || op.op === 'copy' ? [op.from, op.to] : [op.path];
    const bytes = op.op === 'commit' ? op.size : 0;
    return scheduler
      .submit({
        namespace: a.userId,
        paths,
        bytes,
        run: async (): Promise<OpResult> => {
          metrics.queueDepth.set(scheduler.depth);
          return this.apply(a, op);
        },
      })
      .catch((e: unknown): OpResult => {
        const err = toApiError(e);
        if (err.status >= 500) log.error({ err: e }, 'operation failed');
        return errorResult(err);
      })
      .finally(() => metrics.queueDepth.set(scheduler.depth));
  }

  private async apply(a: AuthContext, op: FileOp): Promise<OpResult> {
    const { store, transfers } = this.o;
    const w = writerOf(a);
    switch (op.op) {
      case 'mkdir':
        return store.mkdir(w, op.path);
      case 'delete':
        return store.remove(w, op.path, op.baseRevision, op.own);
      case 'move':
        return store.move(w, op.from, op.to);
      case 'copy':
        return store.copy(w, op.from, op.to);
      case 'commit': {
        if (!op.transferId)
          return store.linkObject(w, op.path, op.sha256, op.size, op.mtimeMs, op.baseRevision, op.own);
        const { t, file } = await transfers.complete(a, op.transferId);
        if (t.sha256 !== op.sha256 || t.size !== op.size || t.path !== op.path) {
          throw new ApiError('BAD_REQUEST', 'commit does not match the transfer (path, size, sha256)');
        }
        try {
          const res = await store.writeFile(
            w,
            op.path,
            { file, size: t.size },
            t.sha256,
            op.mtimeMs,
            op.baseRevision,
            false,
            op.own,
          );
          await transfers.remove(t.id);
          return res;
        } catch (e) {
          if (e instanceof ApiError && e.code === 'HASH_MISMATCH') await transfers.remove(t.id);
          throw e;
        }
      }
    }
  }
}

/**
 * Large-file transfers: blocks written into a staging file at their offsets, each fsynced
 * and recorded before it is acknowledged, so acks survive a crash and a client resumes by
 * re-sending only unacknowledged ranges.
 */
import { randomBytes } from 'node:crypto';
import { constants as fsc, existsSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { blockAck, decodeTransferBlock, type BlockAck, type TransferState, transferState } from '@weft/wire';
import type { AuthContext } from './auth.ts';
import { ApiError } from './errors.ts';
import { checkNewPath, type HybridStore } from './store/hybrid.ts';
import type { TransferRow } from './store/metadata.ts';
import type { ProxyMetrics } from './metrics.ts';

/** FILE_TOO_LARGE for a declared size (transfer, delta target) above the server's limit. */
export function checkDeclaredSize(size: number, maxFileBytes: number): void {
  if (size > maxFileBytes)
    throw new ApiError(
      'FILE_TOO_LARGE',
      `a file of ${size} bytes exceeds this server's limit of ${maxFileBytes} bytes (maxFileBytes)`,
      { size, maxFileBytes },
    );
}

const gone = (): ApiError => new ApiError('TRANSFER_UNKNOWN', 'no such transfer; open a new one');

export class TransferService {
  constructor(
    private readonly store: HybridStore,
    private readonly metrics: ProxyMetrics,
    /** Largest size a transfer may declare (config.maxFileBytes). */
    private readonly maxFileBytes: number = Number.MAX_SAFE_INTEGER,
  ) {}

  /** The transfer, if it exists and belongs to the caller (another user's looks absent). */
  async get(auth: AuthContext, id: string): Promise<TransferRow> {
    const t = await this.store.meta.getTransfer(id);
    if (!t || t.userId !== auth.userId) throw gone();
    return t;
  }

  /** The store's clock: when a transfer is opened and when it was last active. */
  now(): number {
    return this.store.clock();
  }

  async state(t: TransferRow): Promise<TransferState> {
    return transferState(
      t,
      await this.store.meta.transferRanges(t.id),
      await this.store.meta.userLargeContent(t.userId, t.sha256),
    );
  }

  /**
   * Open a transfer for a client's request. Refused when opened, not after the upload: the
   * declared size, with the user's other open transfers, must fit in what the quota leaves
   * (the file it replaces is freed).
   */
  async open(
    auth: AuthContext,
    request: { path: string; size: number; sha256: string; mtimeMs: number },
    nowMs: number,
  ): Promise<TransferState> {
    checkNewPath(request.path);
    await this.store.quota.check(
      auth.userId,
      (await this.store.growthAt(auth.userId, request.path, request.size)) +
        (await this.store.meta.openTransferBytes(auth.userId, request.path)),
    );
    const id = randomBytes(16).toString('hex');
    return this.create(auth, { id, ...request }, nowMs);
  }

  async create(
    auth: AuthContext,
    t: Omit<TransferRow, 'userId' | 'createdMs'>,
    nowMs: number,
  ): Promise<TransferState> {
    checkDeclaredSize(t.size, this.maxFileBytes);
    const row: TransferRow = { ...t, userId: auth.userId, createdMs: nowMs };
    const file = await this.store.stagingFile(t.id);
    await (await fsp.open(file, 'w', 0o600)).close();
    await this.store.meta.addTransfer(row);
    return this.state(row);
  }

  async block(auth: AuthContext, bytes: Uint8Array): Promise<BlockAck> {
    const b = decodeTransferBlock(bytes);
    const t = await this.get(auth, b.transferId);
    // A transfer opened before maxFileBytes was lowered is still held to the current limit.
    if (b.offset + b.payload.byteLength > Math.min(t.size, this.maxFileBytes)) {
      throw new ApiError(
        'BAD_REQUEST',
        `block [${b.offset}, ${b.offset + b.payload.byteLength}) lies beyond the file size ${t.size}`,
      );
    }
    const file = await this.store.stagingFile(t.id);
    const fh = await fsp.open(file, fsc.O_RDWR | fsc.O_CREAT, 0o600);
    try {
      let written = 0;
      while (written < b.payload.byteLength) {
        const { bytesWritten } = await fh.write(
          b.payload,
          written,
          b.payload.byteLength - written,
          b.offset + written,
        );
        written += bytesWritten;
      }
      await fh.sync();
    } finally {
      await fh.close();
    }
    // Durable before acknowledged: the ack promises the client it need not resend. Recorded
    // with the transfer's activity (same write), so GC leaves an upload in progress alone.
    if (!(await this.store.meta.addTransferRange(t.id, b.offset, b.payload.byteLength, this.now()))) {
      // GC removed the transfer meanwhile: this block recreated its staging file.
      await fsp.rm(file, { force: true });
      throw gone();
    }
    return blockAck(b, (await this.state(t)).receivedBytes);
  }

  /**
   * Count a block frame received over the /v1/stream WebSocket as client bytes in. A block
   * sent over HTTP is counted by the server's response hook (its Content-Length), so
   * `block` counts nothing itself: counting there too counted every HTTP block twice.
   */
  countStreamed(frameBytes: number): void {
    this.metrics.bytes.inc({ tier: 'client', direction: 'in' }, frameBytes);
  }

  /** The staged file, once every byte has been acknowledged. */
  async complete(auth: AuthContext, id: string): Promise<{ t: TransferRow; file: string }> {
    const t = await this.get(auth, id);
    // A commit attempt is activity: GC, which deletes only a transfer still idle, now leaves
    // this one (and its staged bytes) alone for the grace period.
    if (!(await this.store.meta.touchTransfer(t.id, this.now()))) throw gone();
    const file = await this.store.stagingFile(t.id);
    if (!existsSync(file)) {
      // Its staged bytes are gone (GC caught between the file and the row): unusable.
      await this.store.meta.deleteTransfer(t.id);
      throw gone();
    }
    const st = await this.state(t);
    if (st.receivedBytes !== t.size) {
      throw new ApiError('TRANSFER_INCOMPLETE', `${st.receivedBytes} of ${t.size} bytes received`, {
        received: st.received,
      });
    }
    return { t, file };
  }

  async remove(id: string): Promise<void> {
    await fsp.rm(await this.store.stagingFile(id), { force: true });
    await this.store.meta.deleteTransfer(id);
  }
}

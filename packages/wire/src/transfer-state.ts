/**
 * A large-file transfer's state as the server answers it (TransferState, BlockAck), from
 * the ranges it has acknowledged: shared by the proxy (TransferService) and the client's
 * in-memory proxy (MemoryRemoteStore), so both count received bytes the same way.
 */
import type { BlockAck, ByteRange, TransferState } from './api.ts';
import { MAX_BLOCK_PAYLOAD, type TransferBlock } from './transfer-block.ts';

/** The ranges sorted, empty ones dropped, overlapping and touching ones joined. */
export function mergeRanges(ranges: readonly ByteRange[]): ByteRange[] {
  const sorted = [...ranges].filter((r) => r.length > 0).sort((a, b) => a.offset - b.offset);
  const out: ByteRange[] = [];
  for (const r of sorted) {
    const last = out.at(-1);
    if (last && r.offset <= last.offset + last.length)
      last.length = Math.max(last.length, r.offset + r.length - last.offset);
    else out.push({ ...r });
  }
  return out;
}

/**
 * The state of transfer `t` given the ranges acknowledged so far and the size of the
 * object with its SHA-256 the user already holds (undefined: none).
 */
export function transferState(
  t: { readonly id: string; readonly path: string; readonly size: number; readonly sha256: string },
  ranges: readonly ByteRange[],
  heldSize: number | undefined,
): TransferState {
  const received = mergeRanges(ranges);
  return {
    transferId: t.id,
    path: t.path,
    size: t.size,
    sha256: t.sha256,
    received,
    receivedBytes: received.reduce((s, r) => s + r.length, 0),
    haveObject: heldSize === t.size,
    maxBlockBytes: MAX_BLOCK_PAYLOAD,
  };
}

/** The acknowledgement of block `b`, once it is stored, with the transfer's bytes received. */
export function blockAck(b: TransferBlock, receivedBytes: number): BlockAck {
  return {
    type: 'block-ack',
    transferId: b.transferId,
    seq: b.seq,
    offset: b.offset,
    length: b.payload.byteLength,
    receivedBytes,
  };
}

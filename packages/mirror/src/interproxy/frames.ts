/**
 * The messages of the inter-proxy link (docs/formats/inter-proxy.md): JSON control
 * messages in WebSocket text frames, blocks in binary frames behind a fixed 32-byte header.
 * Everything received is validated here before any state is touched.
 */
import type WebSocket from 'ws';
import { z } from 'zod/v4';
import { normalizeEntryPath } from '@weft/providers/paths';
import { MirrorError } from '../errors.ts';

export const PROTOCOL_VERSION = 1;
/** Route of the peer endpoint on a proxy server (outside /v1: peers are not devices). */
export const PEER_STREAM_PATH = '/peer/v1/stream';

export const FRAME_HEADER_BYTES = 32;
/** Frame header magic byte 1 ("version"): readers abort on anything else. */
export const FRAME_VERSION = 1;
/** `file` field of a frame that belongs to no single file (a bundle). */
export const NO_FILE = 0xffffffff;

export const FrameTag = {
  /** A piece of a large new file: a WFTK transfer block of the file's content. */
  Whole: 1,
  /** A WFTB bundle of small files. */
  Bundle: 2,
  /** Destination → source: the rsync signature of the cached basis of a changed file. */
  Signature: 3,
  /** A piece of a large changed file: a WFTK transfer block of its WFTX delta container. */
  DeltaPiece: 4,
} as const;
export type FrameTag = (typeof FrameTag)[keyof typeof FrameTag];

export interface Frame {
  readonly tag: FrameTag;
  /** 32 lower-case hex digits. */
  readonly session: string;
  readonly seq: number;
  readonly batch: number;
  /** Index of the file in its batch, or NO_FILE. */
  readonly file: number;
  readonly payload: Uint8Array;
}

export class FrameError extends MirrorError {
  readonly code = 'BadFrame' as const;
}

const SESSION_HEX = /^[0-9a-f]{32}$/;

export function encodeFrame(f: Frame): Uint8Array {
  if (!SESSION_HEX.test(f.session)) throw new FrameError('session is not 32 lower-case hex digits');
  for (const [k, v] of [
    ['seq', f.seq],
    ['batch', f.batch],
    ['file', f.file],
  ] as const) {
    if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw new FrameError(`bad ${k} ${v}`);
  }
  const out = new Uint8Array(FRAME_HEADER_BYTES + f.payload.byteLength);
  const dv = new DataView(out.buffer);
  out[0] = f.tag;
  out[1] = FRAME_VERSION;
  out.set(Buffer.from(f.session, 'hex'), 4);
  dv.setUint32(20, f.seq, true);
  dv.setUint32(24, f.batch, true);
  dv.setUint32(28, f.file, true);
  out.set(f.payload, FRAME_HEADER_BYTES);
  return out;
}

export function decodeFrame(bytes: Uint8Array, maxBytes: number): Frame {
  if (bytes.byteLength > maxBytes)
    throw new FrameError(`frame of ${bytes.byteLength} bytes (max ${maxBytes})`);
  if (bytes.byteLength < FRAME_HEADER_BYTES) throw new FrameError('truncated frame header');
  const tag = bytes[0];
  if (tag !== 1 && tag !== 2 && tag !== 3 && tag !== 4) throw new FrameError(`unknown frame tag ${tag}`);
  if (bytes[1] !== FRAME_VERSION) throw new FrameError(`unsupported frame version ${bytes[1]}`);
  if (bytes[2] !== 0 || bytes[3] !== 0) throw new FrameError('reserved bytes are not zero');
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return {
    tag,
    session: Buffer.from(bytes.subarray(4, 20)).toString('hex'),
    seq: dv.getUint32(20, true),
    batch: dv.getUint32(24, true),
    file: dv.getUint32(28, true),
    payload: bytes.subarray(FRAME_HEADER_BYTES),
  };
}

// ---------------------------------------------------------------- control messages

const U32 = z.number().int().min(0).max(0xffffffff);
const Sha256 = z.string().regex(/^[0-9a-f]{64}$/);
const Session = z.string().regex(SESSION_HEX);
const ProxyId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/);
const EntryPath = z
  .string()
  .max(4096)
  .superRefine((p, ctx) => {
    try {
      if (normalizeEntryPath(p) !== p) ctx.addIssue({ code: 'custom', message: 'path is not canonical' });
    } catch (e) {
      ctx.addIssue({ code: 'custom', message: (e as Error).message });
    }
  });
const FileMetaSchema = z.object({
  path: EntryPath,
  size: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  sha256: Sha256,
});

const CloudName = z.string().regex(/^[a-z0-9][a-z0-9_.:-]{0,63}$/);
/** One (proxy, cloud) bandwidth estimate; `ageMs` instead of a timestamp: no clock agreement needed. */
const MeasurementSchema = z.object({
  proxy: ProxyId,
  cloud: CloudName,
  bytesPerSecond: z.number().positive().max(1e13),
  ageMs: z
    .number()
    .int()
    .min(0)
    .max(7 * 24 * 3600 * 1000),
});
/** A cloud account the peer may use, its credentials sealed with the pair's secret (credentials.ts). */
const SealedAccount = z.object({ cloud: CloudName, sealed: z.string().max(16_384) });

export const SourceMessage = z.discriminatedUnion('type', [
  z.object({ type: z.literal('hello'), version: z.number().int(), proxy: ProxyId, session: Session }),
  z.object({
    type: z.literal('bandwidth'),
    measurements: z.array(MeasurementSchema).max(1024),
    /** Clouds the source wants this peer to probe too (the clouds of the shares it hosts). */
    probe: z.array(SealedAccount).max(256).optional(),
  }),
  /**
   * Write the cached content `cache`/`sha256` (sent before in a batch) to `path` of the
   * account's cloud, conditionally — the mirror's replica write, performed by the peer.
   */
  z.object({
    type: z.literal('write'),
    id: U32,
    account: SealedAccount,
    path: z.string().min(1).max(4096),
    cache: EntryPath,
    sha256: Sha256,
    size: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
    ifRevision: z.string().max(1024).optional(),
    ifNotExists: z.boolean().optional(),
  }),
  z.object({ type: z.literal('batch'), batch: U32, files: z.array(FileMetaSchema).max(10_000) }),
  z.object({ type: z.literal('done'), batch: U32 }),
]);
export type SourceMessage = z.infer<typeof SourceMessage>;

export const VerdictSchema = z.discriminatedUnion('verdict', [
  z.object({ path: EntryPath, verdict: z.literal('unchanged') }),
  z.object({ path: EntryPath, verdict: z.literal('new') }),
  z.object({
    path: EntryPath,
    verdict: z.literal('changed'),
    basisSha256: Sha256,
    blockSize: z
      .number()
      .int()
      .min(16)
      .max(1 << 20),
  }),
]);

export const RESULT_CODES = ['CHECKSUM', 'BASIS', 'UPLOAD', 'FORMAT', 'INTERNAL'] as const;
export type ResultCode = (typeof RESULT_CODES)[number];

export const DestinationMessage = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('welcome'),
    version: z.number().int(),
    proxy: ProxyId,
    session: Session,
    /** HMAC proving the destination holds the pair's secret (auth.ts). */
    proof: z.string().regex(/^[0-9a-f]{64}$/),
    /** false: the destination has no state for this session (it restarted): start open batches over. */
    resumed: z.boolean(),
    acked: z.array(U32),
  }),
  z.object({ type: z.literal('verdicts'), batch: U32, verdicts: z.array(VerdictSchema) }),
  z.object({ type: z.literal('ack'), seq: U32 }),
  z.object({ type: z.literal('bandwidth'), measurements: z.array(MeasurementSchema).max(1024) }),
  /** The answer to `write`: the provider entry written, or the provider error's code. */
  z.object({
    type: z.literal('written'),
    id: U32,
    entry: z.object({
      revision: z.string().max(1024),
      size: z.number().int().min(0),
      modifiedMs: z.number().optional(),
      hash: z.object({ algorithm: z.string().max(64), value: z.string().max(1024) }).optional(),
    }),
  }),
  z.object({
    type: z.literal('write-failed'),
    id: U32,
    code: z.string().max(64),
    message: z.string().max(2000),
  }),
  z.object({ type: z.literal('nack'), seq: U32, code: z.string().max(64), message: z.string().max(2000) }),
  z.object({ type: z.literal('committed'), batch: U32, path: EntryPath, sha256: Sha256 }),
  z.object({
    type: z.literal('failed'),
    batch: U32,
    path: EntryPath,
    code: z.enum(RESULT_CODES),
    message: z.string().max(2000),
  }),
  z.object({
    type: z.literal('error'),
    code: z.string().max(64),
    message: z.string().max(2000),
    /** The batch refused (BAD_BATCH) or that could not be compared: the source gives it up. */
    batch: U32.optional(),
  }),
]);
export type DestinationMessage = z.infer<typeof DestinationMessage>;

/** Parse one text frame; undefined when it is not valid JSON or not a known message. */
export function parseMessage<T extends z.ZodType>(schema: T, text: string): z.infer<T> | undefined {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  const r = schema.safeParse(json);
  return r.success ? r.data : undefined;
}

/** The batch id of a text message that failed validation as a batch, to refuse it by. */
export function invalidBatchId(text: string): number | undefined {
  try {
    const j = JSON.parse(text) as { type?: unknown; batch?: unknown };
    const id = j.batch;
    return j.type === 'batch' && typeof id === 'number' && Number.isInteger(id) && id >= 0 && id <= 0xffffffff
      ? id
      : undefined;
  } catch {
    return undefined;
  }
}

/** A WebSocket message's data as one byte array. */
export function toBytes(data: WebSocket.RawData): Uint8Array {
  if (Array.isArray(data)) return Buffer.concat(data);
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  return data;
}

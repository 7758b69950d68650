/**
 * JSON messages of the Weft client ↔ proxy API (docs/formats/api.md). Every schema here is
 * the single definition both sides use: the server validates request bodies with them and
 * generates its OpenAPI document from them; the client validates responses with them.
 *
 * Paths inside messages are canonical provider paths (@weft/providers/paths): a schema
 * rejects a non-canonical path instead of silently rewriting it, so both sides always
 * agree on the exact key.
 */
import { z } from 'zod/v4';
import { normalizeEntryPath, normalizePath } from '@weft/providers/paths';

export const API_VERSION = 1;
/** Prefix of every API route. */
export const API_PREFIX = '/v1';

function pathSchema(allowRoot: boolean) {
  return z
    .string()
    .max(4096)
    .superRefine((p, ctx) => {
      try {
        const n = allowRoot ? normalizePath(p) : normalizeEntryPath(p);
        if (n !== p) ctx.addIssue({ code: 'custom', message: 'path is not in canonical (NFC) form' });
      } catch (e) {
        ctx.addIssue({ code: 'custom', message: (e as Error).message });
      }
    });
}

/** A named entry (never the root). */
export const EntryPath = pathSchema(false).meta({ id: 'EntryPath' });
/** A folder path; '' is the namespace root. */
export const DirPath = pathSchema(true).meta({ id: 'DirPath' });
export const Sha256 = z.string().regex(/^[0-9a-f]{64}$/, 'lower-case hex SHA-256');
export const Revision = z.string().regex(/^[\x21-\x7e]{1,255}$/, '1..255 printable ASCII characters');
/**
 * The revision a write is based on: a string = exactly that revision must be current;
 * null = nothing may exist at the path; absent = unconditional.
 */
export const BaseRevision = Revision.nullable().optional();
export const TransferId = z.string().regex(/^[0-9a-f]{32}$/, '32 lower-case hex digits');
export const UserId = z.string().regex(/^[a-z0-9][a-z0-9_.-]{0,63}$/, 'user id: a-z 0-9 _ . - (max 64)');
export const DeviceName = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[^/\\\p{Cc}()]+$/u, 'device name without / \\ ( ) or control characters');
const Ms = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const Size = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

// ---------------------------------------------------------------- errors

export const ERROR_CODES = [
  'BAD_REQUEST',
  'INVALID_PATH',
  'INVALID_FORMAT',
  'UNAUTHORIZED',
  /** 401: the token belonged to a device that was removed from its account. */
  'DEVICE_REVOKED',
  'FORBIDDEN',
  /** 410: an enrolment invite past its expiry (it can no longer be used). */
  'INVITE_EXPIRED',
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'NOT_A_FOLDER',
  'PRECONDITION_FAILED',
  'HASH_MISMATCH',
  'DELTA_BASE_UNKNOWN',
  'TRANSFER_UNKNOWN',
  'TRANSFER_INCOMPLETE',
  'OBJECT_UNKNOWN',
  'PAYLOAD_TOO_LARGE',
  'FILE_TOO_LARGE',
  'RANGE_NOT_SATISFIABLE',
  'QUOTA_EXCEEDED',
  'SLOW_DOWN',
  'INTERNAL',
] as const;
export const ErrorCode = z.enum(ERROR_CODES);
export type ErrorCode = z.infer<typeof ErrorCode>;

export const ApiErrorBody = z
  .object({
    error: z.object({
      code: ErrorCode,
      message: z.string(),
      /** Extra facts, e.g. currentRevision for PRECONDITION_FAILED. */
      details: z.record(z.string(), z.unknown()).optional(),
    }),
  })
  .meta({ id: 'ApiError' });
export type ApiErrorBody = z.infer<typeof ApiErrorBody>;

// ---------------------------------------------------------------- enrolment

export const EnrolRequest = z
  .object({
    user: UserId,
    deviceName: DeviceName,
    /** One-time invite instead of the admin token (Authorization header). */
    invite: z.string().min(16).max(128).optional(),
  })
  .meta({ id: 'EnrolRequest' });
export type EnrolRequest = z.infer<typeof EnrolRequest>;

export const EnrolResponse = z
  .object({
    user: UserId,
    deviceId: z.string(),
    deviceName: DeviceName,
    /** Bearer token for every later request; shown once, stored hashed by the server. */
    token: z.string(),
  })
  .meta({ id: 'EnrolResponse' });
export type EnrolResponse = z.infer<typeof EnrolResponse>;

export const InviteRequest = z
  .object({
    user: UserId,
    /** Lifetime in hours (default: the server's `inviteTtlMs`, 7 days; at most 90 days). */
    ttlHours: z
      .number()
      .positive()
      .max(90 * 24)
      .optional(),
  })
  .meta({ id: 'InviteRequest' });
export type InviteRequest = z.infer<typeof InviteRequest>;
export const InviteResponse = z
  .object({ user: UserId, invite: z.string(), expiresMs: Ms })
  .meta({ id: 'InviteResponse' });
export type InviteResponse = z.infer<typeof InviteResponse>;

export const WhoAmIResponse = z
  .object({ user: UserId, deviceId: z.string(), deviceName: DeviceName, seq: z.number().int().min(0) })
  .meta({ id: 'WhoAmI' });

/** One of the user's devices (revoked ones are not listed). */
export const DeviceInfo = z
  .object({
    id: z.string(),
    name: DeviceName,
    createdMs: Ms,
    /** Last request or feed connection (to the minute); null: not seen since enrolment. */
    lastSeenMs: Ms.nullable(),
    /** The device making this request. */
    current: z.boolean(),
  })
  .meta({ id: 'DeviceInfo' });
export type DeviceInfo = z.infer<typeof DeviceInfo>;

export const DeviceListResponse = z
  .object({ devices: z.array(DeviceInfo) })
  .meta({ id: 'DeviceListResponse' });
export type DeviceListResponse = z.infer<typeof DeviceListResponse>;

/** `DELETE /v1/devices/{id}`: the device's id (path parameter). */
export const DeviceIdParam = z.object({ id: z.string().min(1).max(64) });

/**
 * A user's storage: the logical bytes their namespace holds (every file's size, large and
 * small alike, whatever the deduplication) and the configured quota (null: unlimited).
 */
export const UsageResponse = z
  .object({
    user: UserId,
    usedBytes: Size,
    limitBytes: Size.nullable(),
    /**
     * Bytes of the replaced and deleted versions kept for the retention period (absent when
     * the server keeps none). Held and billed (docs/cost.md), not counted against `limitBytes`.
     */
    versionsBytes: Size.optional(),
  })
  .meta({ id: 'Usage' });
export type UsageResponse = z.infer<typeof UsageResponse>;

// ---------------------------------------------------------------- entries

export const EntryInfo = z
  .object({
    path: EntryPath,
    kind: z.enum(['file', 'dir']),
    size: Size,
    mtimeMs: Ms,
    /** Opaque; changes whenever the entry changes. '' never appears for files. */
    revision: Revision,
    /** Files only. */
    sha256: Sha256.optional(),
    /** Files only: 'small' = stored in the filesystem tier, 'large' = object tier + link file. */
    tier: z.enum(['small', 'large']).optional(),
  })
  .meta({ id: 'EntryInfo' });
export type EntryInfo = z.infer<typeof EntryInfo>;

/** The most entries one page of a paged listing holds (a larger `limit` is refused). */
export const MAX_LIST_PAGE = 5000;
/**
 * A listing, whole (no `limit`: the behaviour of every client before paging) or a page of a
 * recursive one: `limit` entries at most, in byte order of path, after the path `after`
 * (exclusive, a keyset: no entry is skipped or repeated whatever lands between pages), with
 * `seq` the snapshot the first page answered, passed back unchanged (issue #16).
 */
export const ListQuery = z.object({
  path: DirPath.default(''),
  recursive: z.enum(['0', '1', 'true', 'false']).optional(),
  limit: z.coerce.number().int().min(1).max(MAX_LIST_PAGE).optional(),
  after: EntryPath.optional(),
  seq: z.coerce.number().int().min(0).optional(),
});
export type ListQuery = z.infer<typeof ListQuery>;
export const ListResponse = z
  .object({
    entries: z.array(EntryInfo),
    /**
     * The namespace sequence the listing reflects: resume the change feed from here. For a
     * paged listing, the first page's (every page answers the same): a change landing while
     * the pages are read is in the feed after it.
     */
    seq: z.number().int().min(0),
    /** Paged listing only: present while more may follow — pass it back as `after`. */
    next: EntryPath.optional(),
  })
  .meta({ id: 'ListResponse' });
export type ListResponse = z.infer<typeof ListResponse>;

export const PathQuery = z.object({ path: EntryPath });

// ---------------------------------------------------------------- operations

export const MkdirOp = z.object({ op: z.literal('mkdir'), path: EntryPath });
/**
 * Contents (SHA-256s) this device sent to the path before and never heard the answer for: a
 * file there holding one of them is its own write, as good as the base (write-rule.ts).
 */
export const OwnContents = z.array(Sha256).min(1).max(16);
export const DeleteOp = z.object({
  op: z.literal('delete'),
  path: EntryPath,
  baseRevision: BaseRevision,
  own: OwnContents.optional(),
});
export const MoveOp = z.object({
  op: z.literal('move'),
  from: EntryPath,
  to: EntryPath,
  /** Revision of `from` the client saw (files only). */
  baseRevision: BaseRevision,
});
export const CopyOp = z.object({ op: z.literal('copy'), from: EntryPath, to: EntryPath });
/**
 * Make a large file's content current at `path`: from a completed transfer, or — without
 * transferId — from an object the server already has (dedup; OBJECT_UNKNOWN otherwise).
 */
export const CommitOp = z.object({
  op: z.literal('commit'),
  path: EntryPath,
  sha256: Sha256,
  size: Size,
  mtimeMs: Ms,
  baseRevision: BaseRevision,
  transferId: TransferId.optional(),
  own: OwnContents.optional(),
});
export const FileOp = z
  .discriminatedUnion('op', [MkdirOp, DeleteOp, MoveOp, CopyOp, CommitOp])
  .meta({ id: 'FileOp' });
export type FileOp = z.infer<typeof FileOp>;

export const OpsRequest = z
  .object({
    /** Applied in this order (related paths strictly in order). At most 1000. */
    ops: z.array(FileOp).min(1).max(1000),
  })
  .meta({ id: 'OpsRequest' });
export type OpsRequest = z.infer<typeof OpsRequest>;

export const ConflictReport = z
  .object({
    /** Where the client wanted to write. */
    path: EntryPath,
    /** Where the client's version was kept instead ('' when the client's op was dropped, e.g. a delete of a changed file). */
    conflictPath: z.string(),
    kind: z.enum(['write-write', 'delete-modified', 'move-modified']),
    /** The revision the client based its op on. */
    baseRevision: Revision.nullable().optional(),
    /** The revision the server had. */
    serverRevision: Revision.nullable(),
  })
  .meta({ id: 'ConflictReport' });
export type ConflictReport = z.infer<typeof ConflictReport>;

export const OpResult = z
  .discriminatedUnion('status', [
    z.object({
      status: z.literal('applied'),
      /** The entry now at the path (absent after a delete). */
      entry: EntryInfo.optional(),
      /** The namespace sequence of the change this op produced (0 if it changed nothing). */
      seq: z.number().int().min(0),
    }),
    z.object({
      status: z.literal('conflict'),
      conflict: ConflictReport,
      entry: EntryInfo.optional(),
      seq: z.number().int().min(0),
    }),
    z.object({ status: z.literal('error'), error: ApiErrorBody.shape.error }),
  ])
  .meta({ id: 'OpResult' });
export type OpResult = z.infer<typeof OpResult>;

export const OpsResponse = z.object({ results: z.array(OpResult) }).meta({ id: 'OpsResponse' });
export type OpsResponse = z.infer<typeof OpsResponse>;

/** Response to POST /v1/bundles: one result per bundle entry, in bundle order. */
export const BundleUploadResponse = z
  .object({ results: z.array(z.object({ path: EntryPath, result: OpResult })) })
  .meta({ id: 'BundleUploadResponse' });
export type BundleUploadResponse = z.infer<typeof BundleUploadResponse>;

export const BundleDownloadRequest = z
  .object({
    /**
     * Distinct paths. The answer is a version-2 bundle whose deferred records name the
     * paths left out by their index here (docs/formats/bundle.md).
     */
    paths: z
      .array(EntryPath)
      .min(1)
      .max(10_000)
      .refine((paths) => new Set(paths).size === paths.length, 'paths must be distinct'),
    /** Deflate when it pays (server decides per bundle). Default true. */
    compress: z.boolean().optional(),
  })
  .meta({ id: 'BundleDownloadRequest' });
export type BundleDownloadRequest = z.infer<typeof BundleDownloadRequest>;

// ---------------------------------------------------------------- large-file transfers

export const TransferCreateRequest = z
  .object({
    path: EntryPath,
    size: Size,
    sha256: Sha256,
    mtimeMs: Ms,
    baseRevision: BaseRevision,
  })
  .meta({ id: 'TransferCreateRequest' });
export type TransferCreateRequest = z.infer<typeof TransferCreateRequest>;

export const ByteRange = z.object({ offset: Size, length: Size });
export type ByteRange = z.infer<typeof ByteRange>;
export const TransferState = z
  .object({
    transferId: TransferId,
    path: EntryPath,
    size: Size,
    sha256: Sha256,
    /** Acknowledged byte ranges, merged and sorted. Re-send only what is missing. */
    received: z.array(ByteRange),
    receivedBytes: Size,
    /** The server already holds an object with this SHA-256: commit without sending blocks. */
    haveObject: z.boolean(),
    /** Largest payload of one block. */
    maxBlockBytes: z.number().int().positive(),
    /**
     * Several proxy instances (docs/deployment.md): the instance with the most available
     * bandwidth, when it is not the one answering. A client may send this transfer's blocks
     * there (same token, same paths); one that ignores it loses nothing.
     */
    preferred: z.object({ id: z.string(), url: z.string() }).optional(),
  })
  .meta({ id: 'TransferState' });
export type TransferState = z.infer<typeof TransferState>;

// ---------------------------------------------------------------- proxy instances

/** One proxy instance sharing the metadata database (GET /v1/cluster/instances). */
export const ClusterInstance = z
  .object({
    id: z.string(),
    /** Where clients reach it. */
    url: z.string(),
    /** 'draining': being retired, takes no new transfers. */
    state: z.enum(['active', 'draining']),
    /** BW_a: what it can still move, bytes/s (HyCloud Eq. 7–8). */
    availableBps: z.number().int().min(0),
    /** BW_o: its overall bandwidth, bytes/s (declared, or the most it has moved). */
    measuredBps: z.number().int().min(0),
    /** Its last heartbeat (the database's clock), ms since the epoch. */
    lastSeenMs: z.number().int().min(0),
    /** The instance answering this request. */
    self: z.boolean(),
  })
  .meta({ id: 'ClusterInstance' });
export type ClusterInstance = z.infer<typeof ClusterInstance>;

export const ClusterInstancesResponse = z
  .object({
    /** The live instances (a heartbeat within the last few seconds). */
    instances: z.array(ClusterInstance),
    /** The instance holding the controller role, or null (none, or not known). */
    controller: z.string().nullable(),
    /** The instance to send new transfers to: the active one with the most available bandwidth. */
    preferred: z.string(),
  })
  .meta({ id: 'ClusterInstancesResponse' });
export type ClusterInstancesResponse = z.infer<typeof ClusterInstancesResponse>;

/**
 * POST /v1/admin/cluster/instances/{id}/drain and …/activate (admin token): the instance's row
 * after the change, and whether it changed (false: it was already in that state). A draining
 * instance is never steered new transfers and finishes the ones it has.
 */
export const ClusterInstanceChange = z
  .object({
    instance: ClusterInstance,
    changed: z.boolean(),
  })
  .meta({ id: 'ClusterInstanceChange' });
export type ClusterInstanceChange = z.infer<typeof ClusterInstanceChange>;

export const BlockAck = z
  .object({
    type: z.literal('block-ack'),
    transferId: TransferId,
    seq: z.number().int().min(0),
    offset: Size,
    length: Size,
    receivedBytes: Size,
  })
  .meta({ id: 'BlockAck' });
export const BlockNack = z
  .object({
    type: z.literal('block-error'),
    /** Absent when the frame was too damaged to name its transfer. */
    transferId: TransferId.optional(),
    seq: z.number().int().min(0).optional(),
    error: ApiErrorBody.shape.error,
  })
  .meta({ id: 'BlockNack' });
/** Server → client messages on the /v1/stream WebSocket (text frames, JSON). */
export const StreamServerMessage = z.discriminatedUnion('type', [BlockAck, BlockNack]);
export type StreamServerMessage = z.infer<typeof StreamServerMessage>;
export type BlockAck = z.infer<typeof BlockAck>;
export type BlockNack = z.infer<typeof BlockNack>;

// ---------------------------------------------------------------- deltas

export const DeltaUploadQuery = z.object({
  path: EntryPath,
  /** Server revision the delta was computed against (the client's last synced version). */
  baseRevision: Revision,
  mtimeMs: z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  /** OwnContents (CommitOp.own), comma-separated: contents sent here whose answer never came. */
  own: z
    .string()
    .regex(/^[0-9a-f]{64}(,[0-9a-f]{64}){0,15}$/, 'up to 16 comma-separated lower-case hex SHA-256s')
    .optional(),
});
export const DeltaDownloadQuery = z.object({
  path: EntryPath,
  /** Hex SHA-256 of the client's old version (the content its signature describes). */
  baseSha256: Sha256,
});

// ---------------------------------------------------------------- change feed

export const ChangeRecord = z
  .discriminatedUnion('type', [
    z.object({
      seq: z.number().int().positive(),
      type: z.literal('upsert'),
      path: EntryPath,
      entry: EntryInfo,
      device: z.string().optional(),
      /** The writing device's name, for conflicted-copy names (absent for server-made changes). */
      deviceName: z.string().optional(),
    }),
    z.object({
      seq: z.number().int().positive(),
      type: z.literal('delete'),
      path: EntryPath,
      device: z.string().optional(),
      /** The writing device's name, for conflicted-copy names (absent for server-made changes). */
      deviceName: z.string().optional(),
    }),
    /** A file or folder moved; everything inside a folder moved with it (no per-child records). */
    z.object({
      seq: z.number().int().positive(),
      type: z.literal('move'),
      from: EntryPath,
      path: EntryPath,
      entry: EntryInfo,
      device: z.string().optional(),
      /** The writing device's name, for conflicted-copy names (absent for server-made changes). */
      deviceName: z.string().optional(),
    }),
  ])
  .meta({ id: 'ChangeRecord' });
export type ChangeRecord = z.infer<typeof ChangeRecord>;

export const ChangesQuery = z.object({
  cursor: z.coerce.number().int().min(0).default(0),
  limit: z.coerce.number().int().min(1).max(5000).default(1000),
});
export const ChangesResponse = z
  .object({
    changes: z.array(ChangeRecord),
    /** Pass back as `cursor` to continue (the seq of the last change returned, or the one given). */
    cursor: z.number().int().min(0),
    hasMore: z.boolean(),
    /** The cursor is ahead of the namespace: relist and continue from `cursor`. */
    reset: z.boolean(),
  })
  .meta({ id: 'ChangesResponse' });
export type ChangesResponse = z.infer<typeof ChangesResponse>;

/** Server → client messages on the /v1/feed WebSocket (text frames, JSON). */
export const FeedServerMessage = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('hello'),
    user: UserId,
    seq: z.number().int().min(0),
    cursor: z.number().int().min(0),
  }),
  z.object({ type: z.literal('changes'), changes: z.array(ChangeRecord), cursor: z.number().int().min(0) }),
  z.object({ type: z.literal('reset'), cursor: z.number().int().min(0) }),
  z.object({ type: z.literal('error'), error: ApiErrorBody.shape.error }),
]);
export type FeedServerMessage = z.infer<typeof FeedServerMessage>;

/** Client → server on /v1/feed: optional flow control. */
export const FeedClientMessage = z.discriminatedUnion('type', [
  /** The client has durably applied everything up to `cursor` (for metrics and pacing). */
  z.object({ type: z.literal('ack'), cursor: z.number().int().min(0) }),
  z.object({ type: z.literal('ping') }),
]);
export type FeedClientMessage = z.infer<typeof FeedClientMessage>;

// ---------------------------------------------------------------- Merkle check

export const MerkleRequest = z
  .object({ paths: z.array(DirPath).min(1).max(1000) })
  .meta({ id: 'MerkleRequest' });
export const MerkleChild = z.object({
  name: z.string(),
  kind: z.enum(['file', 'dir']),
  hash: Sha256,
});
export const MerkleNode = z
  .object({
    path: DirPath,
    /** Absent when nothing exists at the path. */
    kind: z.enum(['file', 'dir']).optional(),
    hash: Sha256.optional(),
    /** Folders only: direct children with their hashes, in name order. */
    children: z.array(MerkleChild).optional(),
  })
  .meta({ id: 'MerkleNode' });
export const MerkleResponse = z.object({ nodes: z.array(MerkleNode) }).meta({ id: 'MerkleResponse' });
export type MerkleNode = z.infer<typeof MerkleNode>;
export type MerkleResponse = z.infer<typeof MerkleResponse>;

export const HealthResponse = z
  .object({ status: z.literal('ok'), version: z.string() })
  .meta({ id: 'Health' });

// ---------------------------------------------------------------- headers

/** Response headers on file downloads. */
export const HEADER_REVISION = 'x-weft-revision';
export const HEADER_SHA256 = 'x-weft-sha256';
export const HEADER_MTIME = 'x-weft-mtime';

/** Errors the API turns into `{error: {code, message, details}}` responses. */
import type { ErrorCode } from '@weft/wire';
import { isProviderError } from '@weft/providers';
import { isWireFormatError } from '@weft/wire';
import { RsyncError } from '@weft/rsync-wasm';

const STATUS: Record<ErrorCode, number> = {
  BAD_REQUEST: 400,
  INVALID_PATH: 400,
  INVALID_FORMAT: 400,
  UNAUTHORIZED: 401,
  /** The token's device was removed from its account (docs/formats/api.md, "Devices"). */
  DEVICE_REVOKED: 401,
  FORBIDDEN: 403,
  /** An enrolment invite past its expiry. */
  INVITE_EXPIRED: 410,
  NOT_FOUND: 404,
  ALREADY_EXISTS: 409,
  NOT_A_FOLDER: 409,
  PRECONDITION_FAILED: 412,
  HASH_MISMATCH: 422,
  DELTA_BASE_UNKNOWN: 409,
  TRANSFER_UNKNOWN: 404,
  TRANSFER_INCOMPLETE: 409,
  OBJECT_UNKNOWN: 409,
  PAYLOAD_TOO_LARGE: 413,
  /** A declared file size (transfer, delta target) above the server's maxFileBytes. */
  FILE_TOO_LARGE: 413,
  RANGE_NOT_SATISFIABLE: 416,
  /** The user's storage quota would be exceeded (details: usedBytes, limitBytes, neededBytes). */
  QUOTA_EXCEEDED: 507,
  SLOW_DOWN: 503,
  INTERNAL: 500,
};

export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }

  get status(): number {
    return STATUS[this.code];
  }
}

export function statusOf(code: ErrorCode): number {
  return STATUS[code];
}

/** Classify anything thrown while serving a request. Messages never carry other namespaces' data. */
export function toApiError(e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  if (isWireFormatError(e))
    return new ApiError('INVALID_FORMAT', e.message, { format: e.format, reason: e.code });
  if (e instanceof RsyncError) return new ApiError('INVALID_FORMAT', e.message);
  if (isProviderError(e)) {
    switch (e.code) {
      case 'InvalidPath':
        return new ApiError('INVALID_PATH', stripInternal(e.message));
      case 'NotFound':
        return new ApiError('NOT_FOUND', 'not found');
      case 'AlreadyExists':
        return new ApiError('ALREADY_EXISTS', 'something is already at that path');
      case 'PreconditionFailed':
        return new ApiError('PRECONDITION_FAILED', 'changed meanwhile');
      case 'InvalidArgument':
        return new ApiError('BAD_REQUEST', stripInternal(e.message));
      case 'QuotaExceeded':
        return new ApiError('SLOW_DOWN', 'storage is full');
      case 'Transient':
        return new ApiError('SLOW_DOWN', 'storage is temporarily unavailable');
      default:
        return new ApiError('INTERNAL', 'storage error');
    }
  }
  return new ApiError('INTERNAL', 'internal error');
}

/** Provider messages name absolute tier paths; clients get only the part after the namespace. */
function stripInternal(message: string): string {
  return message.replace(/\S*\/ns\/[a-z0-9_.-]+\/?/g, '').replace(/fs:\S+/g, 'store');
}

/**
 * The mirror's own errors: one small hierarchy, each with a `code` a caller switches on
 * (`instanceof MirrorError` and `e.code`), never its message. What a provider throws keeps
 * its own types (`@weft/providers` errors: NotFoundError, PreconditionFailedError, …); the
 * engine tells them apart by class, not by comparing code strings.
 */
import {
  AlreadyExistsError,
  AuthError,
  InvalidPathError,
  NotFoundError,
  PreconditionFailedError,
  QuotaExceededError,
} from '@weft/providers';

export type MirrorErrorCode =
  /** The engine was given a configuration it cannot run (e.g. two replicas with one id). */
  | 'InvalidConfig'
  /** quiesce() ran out of rounds with work still going on. */
  | 'NotQuiescent'
  /** A file's log entry has lost its content (a broken log). */
  | 'MissingContent'
  /** Share registry: see ShareErrorCode. */
  | ShareErrorCode
  /** Stored credentials cannot be decrypted (wrong or missing key). */
  | 'Vault'
  /** An inter-proxy request failed authentication. */
  | 'PeerAuth'
  /** An inter-proxy metadata batch is malformed. */
  | 'BadBatch';

export type ShareErrorCode =
  'NotFound' | 'Forbidden' | 'InvalidInvite' | 'InviteExpired' | 'AlreadyMember' | 'InvalidArgument';

export abstract class MirrorError extends Error {
  abstract readonly code: MirrorErrorCode;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

export class MirrorConfigError extends MirrorError {
  readonly code = 'InvalidConfig' as const;
}

export class NotQuiescentError extends MirrorError {
  readonly code = 'NotQuiescent' as const;
}

export class MissingContentError extends MirrorError {
  readonly code = 'MissingContent' as const;
}

/** Which provider failures the engine tells apart, by class. */
export const isNotFound = (e: unknown): e is NotFoundError => e instanceof NotFoundError;
export const isAlreadyExists = (e: unknown): e is AlreadyExistsError => e instanceof AlreadyExistsError;
export const isPreconditionFailed = (e: unknown): e is PreconditionFailedError =>
  e instanceof PreconditionFailedError;
export const isInvalidPath = (e: unknown): e is InvalidPathError => e instanceof InvalidPathError;
export const isQuotaExceeded = (e: unknown): e is QuotaExceededError => e instanceof QuotaExceededError;
export const isAuthFailure = (e: unknown): e is AuthError => e instanceof AuthError;

/**
 * The mirror's own errors: one small hierarchy, each with a `code` a caller switches on
 * (`instanceof MirrorError` and `e.code`), never its message. What a provider throws keeps
 * its own types (`@weft/providers` errors: NotFoundError, PreconditionFailedError, …), which
 * the engine tells apart by class (provider-failures.ts), not by comparing code strings.
 */
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
  /** The inter-proxy sender was closed while a call waited on it. */
  | 'PeerClosed'
  /** An inter-proxy metadata batch is malformed. */
  | 'BadBatch'
  /** An inter-proxy binary frame is malformed. */
  | 'BadFrame';

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

/** The inter-proxy sender was closed (stop, shutdown) while a connect, send or write waited on it. */
export class PeerClosedError extends MirrorError {
  readonly code = 'PeerClosed' as const;
}

/**
 * Weft storage seen through the provider contract (@weft/providers): an API entry as a
 * provider Entry, and an operation's result or error code as the contract's typed errors.
 * Shared by the proxy's namespace provider (a member who keeps a share in Weft storage)
 * and by anything that drives Weft storage as a provider from outside (the e2e's person
 * acting through the HTTP API), so both answer alike.
 */
import {
  AlreadyExistsError,
  InvalidPathError,
  NotFoundError,
  PreconditionFailedError,
  type ProviderError,
  QuotaExceededError,
} from '@weft/providers/errors';
import type { Entry } from '@weft/providers';
import type { EntryInfo, ErrorCode, OpResult } from './api.ts';

export function entryFromInfo(e: EntryInfo): Entry {
  return {
    path: e.path,
    kind: e.kind,
    size: e.size,
    modifiedMs: e.mtimeMs,
    revision: e.revision,
    ...(e.sha256 ? { hash: { algorithm: 'sha256', value: e.sha256 } } : {}),
  };
}

/** The contract's error for a Weft error code about `path`; undefined when the contract has none. */
export function providerErrorFor(
  code: string,
  message: string,
  path: string,
  cause?: unknown,
): ProviderError | undefined {
  const text = `weft: ${path}: ${message}`;
  const options = cause === undefined ? {} : { cause };
  switch (code) {
    case 'NOT_FOUND':
      return new NotFoundError(text, options);
    case 'ALREADY_EXISTS':
    case 'NOT_A_FOLDER':
      return new AlreadyExistsError(text, options);
    case 'PRECONDITION_FAILED':
      return new PreconditionFailedError(text, undefined, options);
    case 'INVALID_PATH':
      // A name Weft storage refuses (a control or bidi character from another cloud): the
      // mirror counts it as refused by this replica instead of retrying it.
      return new InvalidPathError(text, path);
    case 'QUOTA_EXCEEDED':
      // The member's Weft storage is full: the mirror sees a full replica, as with a full cloud.
      return new QuotaExceededError(text, options);
    default:
      return undefined;
  }
}

/**
 * An operation's result as the contract sees it: the entry it left (undefined for a
 * delete), a conflict as PreconditionFailed, an error as the contract's error for its code
 * or, for a code the contract has no error for, what `other` makes of it.
 */
export function settleOpResult(
  r: OpResult,
  path: string,
  other: (code: ErrorCode, message: string) => Error,
): EntryInfo | undefined {
  if (r.status === 'error') {
    const e = other(r.error.code, r.error.message);
    throw providerErrorFor(r.error.code, r.error.message, path, e) ?? e;
  }
  if (r.status === 'conflict') throw new PreconditionFailedError(`weft: ${path}: changed concurrently`);
  return r.entry;
}

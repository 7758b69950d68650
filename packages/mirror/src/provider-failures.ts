/**
 * The provider failures the mirror engine tells apart, by class (never by comparing code
 * strings): a missing path, a name taken, a lost conditional write, a refused name, a full
 * account, refused credentials. Anything else is a replica failure (outage-log.ts).
 */
import {
  AlreadyExistsError,
  AuthError,
  InvalidPathError,
  NotFoundError,
  PreconditionFailedError,
  QuotaExceededError,
} from '@weft/providers';

/** Which provider failures the engine tells apart, by class. */
export const isNotFound = (e: unknown): e is NotFoundError => e instanceof NotFoundError;
export const isAlreadyExists = (e: unknown): e is AlreadyExistsError => e instanceof AlreadyExistsError;
export const isPreconditionFailed = (e: unknown): e is PreconditionFailedError =>
  e instanceof PreconditionFailedError;
export const isInvalidPath = (e: unknown): e is InvalidPathError => e instanceof InvalidPathError;
export const isQuotaExceeded = (e: unknown): e is QuotaExceededError => e instanceof QuotaExceededError;
export const isAuthFailure = (e: unknown): e is AuthError => e instanceof AuthError;

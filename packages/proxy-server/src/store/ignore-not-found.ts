import { NotFoundError } from '@weft/providers';

/** For `.catch()` on a tier removal: already gone is fine, anything else is rethrown. */
export function ignoreNotFound(e: unknown): void {
  if (e instanceof NotFoundError) return;
  throw e;
}

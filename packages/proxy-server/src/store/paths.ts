/**
 * Path rules of the namespace API, on top of @weft/providers' path validation (no `..`,
 * absolute paths, NUL, invalid UTF-8…): link-file names are reserved, and a name a write
 * creates must be printable everywhere.
 */
import { unprintableNameReason } from '@weft/providers';
import { ApiError } from '../errors.ts';
import { isLinkName, LINK_EXTENSION } from './link-file.ts';

/** A path the caller names: no segment may end in the link-file extension (reserved). */
export function checkUserPath(path: string): void {
  for (const seg of path.split('/')) {
    if (isLinkName(seg)) throw new ApiError('INVALID_PATH', `names ending in ${LINK_EXTENSION} are reserved`);
  }
}

/**
 * A path a write creates or replaces: besides checkUserPath, no control character and no
 * bidirectional control in any name (they travel to every member of a share and every
 * platform; docs/formats/api.md "Names"). Entries that already hold one can still be read,
 * moved away and deleted.
 */
export function checkNewPath(path: string): void {
  checkUserPath(path);
  const why = unprintableNameReason(path);
  if (why) throw new ApiError('INVALID_PATH', why);
}

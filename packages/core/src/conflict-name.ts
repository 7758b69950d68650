/**
 * Conflicted-copy names: one definition, in @weft/wire, shared with the proxy server and
 * the mirror. `conflictCopyPath` keeps the engine's argument order.
 */
import { conflictedCopyPath } from '@weft/wire';

export { conflictStamp, isConflictCopy, sanitizeDevice, splitExtension } from '@weft/wire';

export function conflictCopyPath(
  path: string,
  device: string,
  when: Date,
  taken: (candidate: string) => boolean = () => false,
): string {
  return conflictedCopyPath(path, when, device, taken);
}

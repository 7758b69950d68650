/**
 * Conflicted-copy names, one definition for the client engine, the proxy server and the
 * mirror, as people know them from Dropbox:
 *   `report (conflicted copy 2026-11-21 193045 from laptop).docx`
 * The copy sits next to the original; the extension stays last so it still opens. The
 * time is UTC; the device is the person-facing device name (never an internal id).
 */
import { MAX_SEGMENT_BYTES, baseName, parentPath } from '@weft/providers/paths';

const utf8 = new TextEncoder();
const MARK = / \(conflicted copy \d{4}-\d{2}-\d{2} \d{6} from [^()/]*\)(?:\.[^./]*)?$/;

function pad(n: number, width = 2): string {
  return String(n).padStart(width, '0');
}

/** `YYYY-MM-DD HHMMSS` in UTC. */
export function conflictStamp(when: Date): string {
  return (
    `${when.getUTCFullYear()}-${pad(when.getUTCMonth() + 1)}-${pad(when.getUTCDate())} ` +
    `${pad(when.getUTCHours())}${pad(when.getUTCMinutes())}${pad(when.getUTCSeconds())}`
  );
}

/** Split a file name into stem and extension ('.tar.gz' keeps only '.gz'; '.bashrc' has none). */
export function splitExtension(name: string): { stem: string; ext: string } {
  const dot = name.lastIndexOf('.');
  if (dot <= 0) return { stem: name, ext: '' };
  return { stem: name.slice(0, dot), ext: name.slice(dot) };
}

/** A device name safe inside a file name on every platform. */
export function sanitizeDevice(device: string): string {
  // eslint-disable-next-line no-control-regex
  const cleaned = device.replace(/[/\\:*?"<>|()\u0000-\u001f]/g, '-').trim();
  return (cleaned === '' ? 'unknown device' : cleaned).slice(0, 40);
}

function truncateUtf8(s: string, maxBytes: number): string {
  let out = s;
  while (utf8.encode(out).byteLength > maxBytes) out = out.slice(0, -1);
  // Never leave half a surrogate pair behind.
  if (/[\uD800-\uDBFF]$/.test(out)) out = out.slice(0, -1);
  return out;
}

/**
 * The path of the conflicted copy of `path`. `taken` says whether a candidate is already
 * used; a counter is added (`from laptop 2`) until it is not. The name never exceeds the
 * segment limit: the stem is shortened, the extension and the mark are kept.
 */
export function conflictedCopyPath(
  path: string,
  when: Date,
  device: string,
  taken: (candidate: string) => boolean = () => false,
): string {
  const parent = parentPath(path);
  const dir = parent === '' ? '' : parent + '/';
  const { stem, ext } = splitExtension(baseName(path));
  const dev = sanitizeDevice(device);
  for (let n = 1; ; n++) {
    const suffix = ` (conflicted copy ${conflictStamp(when)} from ${dev}${n > 1 ? ` ${n}` : ''})`;
    const room = MAX_SEGMENT_BYTES - utf8.encode(suffix + ext).byteLength;
    const candidate = dir + truncateUtf8(stem, Math.max(1, room)) + suffix + ext;
    if (!taken(candidate)) return candidate;
  }
}

/** True when a name is itself a conflicted copy. */
export function isConflictCopy(path: string): boolean {
  return (
    MARK.test(path) ||
    / \(conflicted copy \d{4}-\d{2}-\d{2} \d{6} from [^()/]* \d+\)(?:\.[^./]*)?$/.test(path)
  );
}

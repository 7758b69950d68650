/**
 * Path rules shared by every provider, the engine and the proxy server.
 *
 * A provider path is relative to the provider root, `/`-separated, NFC-normalised,
 * and made of non-empty segments. The root itself is the empty string.
 * Anything else is rejected with InvalidPathError before any I/O happens.
 */
import { InvalidPathError } from './errors.ts';

export const MAX_SEGMENT_BYTES = 255;
export const MAX_PATH_BYTES = 4096;

export interface PathRuleOptions {
  /**
   * Also reject names that Windows cannot store (reserved device names, `<>:"\|?*`,
   * control characters, trailing dot or space), so a tree stays portable to every desktop.
   */
  readonly portable?: boolean;
}

const WINDOWS_RESERVED = /^(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³])(\..*)?$/i;
// eslint-disable-next-line no-control-regex
const WINDOWS_ILLEGAL_CHARS = /[<>:"\\|?*\u0000-\u001f]/;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const utf8 = new TextEncoder();
const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The UTF-8 length of `s` exceeds `max`. A UTF-16 code unit is at most 3 UTF-8 bytes, so a
 * short string is decided without encoding it (encoding every path of a 10,000-entry listing
 * showed in the issue #16 profile).
 */
function utf8Longer(s: string, max: number): boolean {
  return s.length * 3 > max && utf8.encode(s).byteLength > max;
}

function reject(reason: string, raw: string): never {
  throw new InvalidPathError(`invalid path ${JSON.stringify(raw.slice(0, 200))}: ${reason}`, raw);
}

/**
 * Decode a path that arrived as bytes (from the network or a filesystem listing).
 * Invalid UTF-8 is rejected, never replaced with U+FFFD.
 */
export function decodePathBytes(bytes: Uint8Array): string {
  let text: string;
  try {
    text = strictUtf8.decode(bytes);
  } catch (cause) {
    throw new InvalidPathError('invalid path: not valid UTF-8', '<bytes>', { cause });
  }
  return normalizePath(text);
}

/**
 * Validate and normalise a path. Returns the canonical form ('' for the root).
 * Throws InvalidPathError for `..`, `.`, absolute paths, NUL, empty segments,
 * over-long segments or paths, unpaired surrogates (invalid UTF-8 once encoded),
 * and — with `portable` — names Windows cannot hold.
 */
export function normalizePath(raw: string, options: PathRuleOptions = {}): string {
  if (typeof raw !== 'string') reject('not a string', String(raw));
  if (raw === '') return '';
  if (LONE_SURROGATE.test(raw)) reject('contains an unpaired surrogate (not valid UTF-8)', raw);
  if (raw.includes('\0')) reject('contains NUL', raw);
  if (raw.startsWith('/')) reject('absolute paths are not allowed', raw);
  if (/^[A-Za-z]:/.test(raw) && options.portable) reject('drive-letter paths are not allowed', raw);
  const nfc = raw.normalize('NFC');
  if (utf8Longer(nfc, MAX_PATH_BYTES)) reject(`longer than ${MAX_PATH_BYTES} bytes`, raw);
  const segments = nfc.split('/');
  for (const segment of segments) {
    if (segment === '') reject('empty segment', raw);
    if (segment === '.' || segment === '..') reject(`'${segment}' segments are not allowed`, raw);
    if (utf8Longer(segment, MAX_SEGMENT_BYTES)) {
      reject(`a segment is longer than ${MAX_SEGMENT_BYTES} bytes`, raw);
    }
    if (options.portable) checkPortableSegment(segment, raw);
  }
  return nfc;
}

function checkPortableSegment(segment: string, raw: string): void {
  if (WINDOWS_ILLEGAL_CHARS.test(segment)) reject('contains a character Windows does not allow', raw);
  if (WINDOWS_RESERVED.test(segment)) reject(`'${segment}' is a reserved name on Windows`, raw);
  if (segment.endsWith('.') || segment.endsWith(' ')) reject('a name ends with a dot or a space', raw);
}

/**
 * C0 and C1 control characters, and the Unicode bidirectional controls (embeddings,
 * overrides, isolates, marks): they render invisibly or reorder the text around them, so
 * a name holding one can pose as another (`invoice\u202Efdp.exe` shows as `invoiceexe.pdf`).
 */
// eslint-disable-next-line no-control-regex
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

/**
 * Why a path holds a character that no stored name may carry (controls, bidi controls),
 * or undefined when it holds none. The proxy refuses such names on every write; reading,
 * moving away from or deleting an entry that already has one stays possible.
 */
export function unprintableNameReason(path: string): string | undefined {
  const m = UNPRINTABLE.exec(path);
  if (!m) return undefined;
  const cp = (m[0].codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0');
  const kind = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/.test(m[0])
    ? 'a bidirectional control'
    : 'a control character';
  return `a name contains ${kind} (U+${cp})`;
}

/** Like normalizePath but the root ('') is refused: for operations that need a named entry. */
export function normalizeEntryPath(raw: string, options: PathRuleOptions = {}): string {
  const p = normalizePath(raw, options);
  if (p === '') reject('the root cannot be used here', raw);
  return p;
}

/** Join canonical paths; each part must already be valid. */
export function joinPath(...parts: string[]): string {
  return parts.filter((p) => p !== '').join('/');
}

/** Parent of a canonical path ('' for top-level entries and the root). */
export function parentPath(p: string): string {
  const i = p.lastIndexOf('/');
  return i < 0 ? '' : p.slice(0, i);
}

/** Last segment of a canonical path. */
export function baseName(p: string): string {
  return p.slice(p.lastIndexOf('/') + 1);
}

/** Every ancestor of a canonical path, nearest the root first, excluding the root and the path. */
export function ancestors(p: string): string[] {
  const out: string[] = [];
  let i = p.indexOf('/');
  while (i >= 0) {
    out.push(p.slice(0, i));
    i = p.indexOf('/', i + 1);
  }
  return out;
}

/** True when `p` is `dir` itself or lies inside it. The root contains everything. */
export function isWithin(p: string, dir: string): boolean {
  return dir === '' || p === dir || p.startsWith(dir + '/');
}

/**
 * The key two names clash under on a case-insensitive filesystem (macOS, Windows):
 * NFC, then Unicode default case folding approximated by toLowerCase of the
 * upper-cased form (folds ß/ẞ, final sigma and similar to one key).
 */
export function caseFoldKey(p: string): string {
  return p.normalize('NFC').toUpperCase().toLowerCase();
}

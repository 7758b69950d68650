/**
 * How one remote name (a path segment) is stored as a local name on a disk with given rules,
 * and read back (issue #14); local-path.ts applies it to whole paths under the folder.
 *
 * Names the local filesystem cannot hold are stored under an ENCODED name, in the manner of
 * rclone's lib/encoder (our own code): a forbidden character becomes a look-alike —
 * full-width forms for `<>:"\|?*` (`:` → `：`), the Control Pictures block for C0 controls
 * (U+0001 → `␁`), the OCR block for text-direction controls (U+202E → `⑆`), a trailing dot
 * or space on Windows becomes `．` / `␠`, and a reserved device name gets `＿` after the
 * device word (`CON.txt` → `CON＿.txt`). The mapping is deterministic and reversible:
 *
 * - A character that the active rules use as a look-alike, written literally in a remote
 *   name, is escaped with the quote `‛` (U+201B) before it (`a：b` → `a‛：b` on Windows).
 * - The quote itself is doubled only where the next character would otherwise be read as
 *   escaped (`‛＼` stays distinguishable from `\`).
 * - A name whose encoding is longer than the filesystem allows (255 UTF-8 bytes; 255 UTF-16
 *   units on Windows) is truncated and ends in `‛~` + 16 hex digits of the SHA-256 of the
 *   remote name; the journal remembers which remote name it stands for. A short name that
 *   happens to end in that pattern gets one more quote, so the two never meet.
 *
 * A local name is synced only if it is canonical — encoding its decoded form gives the same
 * name back; any other name (say `ctl\u0001` typed on Linux, which the server would refuse)
 * is skipped with a warning and left alone, never deleted.
 */
import { createHash } from 'node:crypto';
import * as nodePath from 'node:path';

/** Whose filesystem rules apply. */
export type PathRules = 'posix' | 'darwin' | 'win32';

/** The rules of the machine we run on. */
export function hostPathRules(platform: NodeJS.Platform = process.platform): PathRules {
  if (platform === 'win32') return 'win32';
  if (platform === 'darwin') return 'darwin';
  return 'posix';
}

/** The `node:path` flavour that resolves paths under these rules. */
export function pathFlavour(rules: PathRules): nodePath.PlatformPath {
  return rules === 'win32' ? nodePath.win32 : nodePath.posix;
}

/** A remote path that cannot be placed inside the synced folder. Nothing was touched. */
export class UnsafeLocalPathError extends Error {
  readonly code = 'UNSAFE_LOCAL_PATH';
  constructor(
    message: string,
    readonly remotePath: string,
  ) {
    super(message);
    this.name = 'UnsafeLocalPathError';
  }
}

/** Why a name is stored under another local name. */
export type EncodeReason =
  'reserved-name' | 'reserved-char' | 'trailing' | 'control' | 'bidi' | 'quoted' | 'too-long';

/** The escape character (rclone's choice too): SINGLE HIGH-REVERSED-9 QUOTATION MARK. */
export const QUOTE = '\u201B';
/** Inserted after a Windows device word: `CON.txt` → `CON＿.txt`. */
export const DEVICE_MARK = '\uFF3F';
/** Maximum length of one name: UTF-8 bytes (posix, darwin) or UTF-16 units (win32). */
export const MAX_LOCAL_NAME = 255;

/** Text-direction controls, written as the OCR block's U+2440… in this order. */
const BIDI = [
  '\u200E',
  '\u200F',
  '\u202A',
  '\u202B',
  '\u202C',
  '\u202D',
  '\u202E',
  '\u2066',
  '\u2067',
  '\u2068',
  '\u2069',
];
const WINDOWS_CHARS = '<>:"\\|?*';
const DEVICE_WORD = /^(CONIN\$|CONOUT\$|CON|PRN|AUX|NUL|COM[0-9¹²³]|LPT[0-9¹²³])/i;
const DEVICE_NAME = /^(CONIN\$|CONOUT\$|CON|PRN|AUX|NUL|COM[0-9¹²³]|LPT[0-9¹²³])$/i;
const DEVICE_MARKED = new RegExp(
  `^(CONIN\\$|CONOUT\\$|CON|PRN|AUX|NUL|COM[0-9¹²³]|LPT[0-9¹²³])(${QUOTE}*)${DEVICE_MARK}`,
  'i',
);
const LONG_FORM = new RegExp(`(${QUOTE}+)~[0-9a-f]{16}$`, 'u');
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

interface Table {
  /** Characters replaced wherever they are. */
  readonly replace: ReadonlyMap<string, { to: string; reason: EncodeReason }>;
  /** Characters replaced when they end a name. */
  readonly endReplace: ReadonlyMap<string, string>;
  readonly restore: ReadonlyMap<string, string>;
  readonly endRestore: ReadonlyMap<string, string>;
}

function buildTable(rules: PathRules): Table {
  const replace = new Map<string, { to: string; reason: EncodeReason }>();
  for (let c = 0; c < 0x20; c++)
    replace.set(String.fromCharCode(c), { to: String.fromCharCode(0x2400 + c), reason: 'control' });
  replace.set('\u007F', { to: '\u2421', reason: 'control' });
  BIDI.forEach((c, i) => replace.set(c, { to: String.fromCharCode(0x2440 + i), reason: 'bidi' }));
  if (rules === 'darwin') replace.set(':', { to: '\uFF1A', reason: 'reserved-char' });
  if (rules === 'win32')
    for (const c of WINDOWS_CHARS)
      replace.set(c, { to: String.fromCharCode(c.charCodeAt(0) + 0xfee0), reason: 'reserved-char' });
  const endReplace = new Map<string, string>(
    rules === 'win32'
      ? [
          ['.', '\uFF0E'],
          [' ', '\u2420'],
        ]
      : [],
  );
  return {
    replace,
    endReplace,
    restore: new Map([...replace].map(([from, { to }]) => [to, from])),
    endRestore: new Map([...endReplace].map(([from, to]) => [to, from])),
  };
}

const TABLES: Record<PathRules, Table> = {
  posix: buildTable('posix'),
  darwin: buildTable('darwin'),
  win32: buildTable('win32'),
};

function nameLength(name: string, rules: PathRules): number {
  return rules === 'win32' ? name.length : Buffer.byteLength(name);
}

/** The result of mapping one remote name. */
export interface LocalName {
  readonly name: string;
  /** Set when `name` differs from the remote name, with the first reason it had to. */
  readonly reason?: EncodeReason;
}

/** Character-level encoding (without device names or length). */
function encodeChars(name: string, t: Table): { text: string; reason?: EncodeReason } {
  const chars = [...name];
  const n = chars.length;
  const tokens: string[] = new Array<string>(n);
  let reason: EncodeReason | undefined;
  for (let i = 0; i < n; i++) {
    const c = chars[i] as string;
    const last = i === n - 1;
    const r = t.replace.get(c);
    const end = last ? t.endReplace.get(c) : undefined;
    if (r) {
      tokens[i] = r.to;
      reason ??= r.reason;
    } else if (end !== undefined) {
      tokens[i] = end;
      reason ??= 'trailing';
    } else if (c !== QUOTE && (t.restore.has(c) || (last && t.endRestore.has(c)))) {
      tokens[i] = QUOTE + c;
      reason ??= 'quoted';
    } else tokens[i] = c;
  }
  // A literal quote is doubled when what follows it would otherwise be read as escaped.
  let suffix = '';
  for (let i = n - 1; i >= 0; i--) {
    let tok = tokens[i] as string;
    if (chars[i] === QUOTE && suffix.length > 0) {
      const f = String.fromCodePoint(suffix.codePointAt(0) as number);
      if (f === QUOTE || t.restore.has(f) || (f.length === suffix.length && t.endRestore.has(f))) {
        tok = QUOTE + QUOTE;
        reason ??= 'quoted';
      }
    }
    suffix = tok + suffix;
  }
  return reason === undefined ? { text: suffix } : { text: suffix, reason };
}

function decodeChars(local: string, t: Table): string {
  const chars = [...local];
  const n = chars.length;
  let out = '';
  for (let i = 0; i < n; i++) {
    const c = chars[i] as string;
    if (c === QUOTE && i + 1 < n) {
      const next = chars[i + 1] as string;
      if (next === QUOTE || t.restore.has(next) || (i + 1 === n - 1 && t.endRestore.has(next))) {
        out += next;
        i += 1;
        continue;
      }
    }
    const r = t.restore.get(c) ?? (i === n - 1 ? t.endRestore.get(c) : undefined);
    out += r ?? c;
  }
  return out;
}

function isDeviceName(name: string): boolean {
  const stem = name.split('.')[0] ?? '';
  return DEVICE_NAME.test(stem.replace(/ +$/, ''));
}

/** The long-form suffix for a remote name. */
function longSuffix(remoteName: string): string {
  return QUOTE + '~' + createHash('sha256').update(remoteName).digest('hex').slice(0, 16);
}

/**
 * Printable ASCII (no character the rules replace): such a name maps to itself both ways
 * when it is also short enough, not `.` or `..`, and on Windows neither ends in a dot or a
 * space nor is a device name. Quotes, look-alikes and long forms are never ASCII.
 */
const PLAIN_CHARS: Record<PathRules, RegExp> = {
  posix: /^[\x20-\x7E]{1,255}$/,
  darwin: /^[\x20-\x39\x3B-\x7E]{1,255}$/,
  win32:
    /^[\x20\x21\x23-\x29\x2B-\x2E\x30-\x39\x3B\x3D\x40-\x5B\x5D-\x7B\x7D\x7E]{0,254}[\x21\x23-\x29\x2B-\x2D\x30-\x39\x3B\x3D\x40-\x5B\x5D-\x7B\x7D\x7E]$/,
};

/**
 * The name is stored under itself and read back as itself by these rules (encodeName and
 * decodeName would return it unchanged): the fast path for the names almost every folder
 * holds — their character-by-character encoding and its check were a tenth of a no-change
 * rescan's CPU (issue #16).
 */
export function isPlainName(name: string, rules: PathRules): boolean {
  return (
    PLAIN_CHARS[rules].test(name) &&
    name !== '.' &&
    name !== '..' &&
    (rules !== 'win32' || !isDeviceName(name))
  );
}

/**
 * Map one remote name (a path segment) to the local name it is stored under on a disk with
 * these rules. Throws UnsafeLocalPathError for `''`, `.`, `..` and unpaired surrogates,
 * which no encoding makes safe (the server refuses them too).
 */
export function encodeName(remoteName: string, rules: PathRules): LocalName {
  if (isPlainName(remoteName, rules)) return { name: remoteName };
  return encodeSlowly(remoteName, rules);
}

/** encodeName without its fast path (exported for the test that holds the two equal). */
export function encodeSlowly(remoteName: string, rules: PathRules): LocalName {
  if (remoteName === '' || remoteName === '.' || remoteName === '..')
    throw new UnsafeLocalPathError(`the name ${JSON.stringify(remoteName)} cannot be stored`, remoteName);
  if (LONE_SURROGATE.test(remoteName))
    throw new UnsafeLocalPathError('the name contains an unpaired surrogate (not valid UTF-8)', remoteName);
  const t = TABLES[rules];
  const chars = encodeChars(remoteName, t);
  let text = chars.text;
  let reason = chars.reason;
  // A short name must never look like a long one: one more quote makes the run even.
  const long = LONG_FORM.exec(text);
  if (long && (long[1] as string).length % 2 === 1) {
    text = text.slice(0, long.index) + QUOTE + text.slice(long.index);
    reason ??= 'quoted';
  }
  if (rules === 'win32') {
    const marked = DEVICE_MARKED.exec(text);
    if (marked) {
      const at = (marked[1] as string).length;
      text = text.slice(0, at) + QUOTE + text.slice(at);
      reason ??= 'quoted';
    } else if (isDeviceName(text)) {
      const at = (DEVICE_WORD.exec(text)?.[1] as string).length;
      text = text.slice(0, at) + DEVICE_MARK + text.slice(at);
      reason ??= 'reserved-name';
    }
  }
  if (nameLength(text, rules) > MAX_LOCAL_NAME) {
    const suffix = longSuffix(remoteName);
    const room = MAX_LOCAL_NAME - nameLength(suffix, rules);
    let prefix = '';
    let used = 0;
    for (const c of text) {
      used += nameLength(c, rules);
      if (used > room) break;
      prefix += c;
    }
    // Never end the kept part with quotes: they would pair with the suffix's.
    while (prefix.endsWith(QUOTE)) prefix = prefix.slice(0, -1);
    return { name: prefix + suffix, reason: 'too-long' };
  }
  return reason === undefined ? { name: text } : { name: text, reason };
}

/**
 * Map a local name back to the remote name. Returns undefined when the name is not one
 * Weft writes (not canonical: it would not come back from encodeName unchanged) or is a
 * long form the journal does not know. `longNames` looks a long form up.
 */
export function decodeName(
  localName: string,
  rules: PathRules,
  longNames?: (localName: string) => string | undefined,
): string | undefined {
  return isPlainName(localName, rules) ? localName : decodeSlowly(localName, rules, longNames);
}

/** decodeName without its fast path (exported for the test that holds the two equal). */
export function decodeSlowly(
  localName: string,
  rules: PathRules,
  longNames?: (localName: string) => string | undefined,
): string | undefined {
  const long = LONG_FORM.exec(localName);
  if (long && (long[1] as string).length % 2 === 1) {
    const remote = longNames?.(localName);
    if (remote === undefined) return undefined;
    try {
      return encodeName(remote, rules).name === localName ? remote : undefined;
    } catch {
      return undefined;
    }
  }
  let text = localName;
  if (rules === 'win32') {
    const marked = DEVICE_MARKED.exec(text);
    if (marked) {
      const at = (marked[1] as string).length;
      text = text.slice(0, at) + text.slice(at + 1); // the mark, or one of the quotes
    }
  }
  const remote = decodeChars(text, TABLES[rules]);
  try {
    return encodeName(remote, rules).name === localName ? remote : undefined;
  } catch {
    return undefined;
  }
}

/** Human words for a notice: "Stored as `CON＿.txt` because Windows cannot hold `CON.txt`". */
export function describeEncoding(
  remoteName: string,
  localName: string,
  reason: EncodeReason,
  rules: PathRules,
): string {
  const os = rules === 'win32' ? 'Windows' : rules === 'darwin' ? 'macOS' : 'this computer';
  const why: Record<EncodeReason, string> = {
    'reserved-name': `${os} reserves the name`,
    'reserved-char': `${os} cannot hold a character in`,
    trailing: `${os} cannot hold a name ending in a dot or a space like`,
    control: 'control characters are not written into file names, as in',
    bidi: 'text-direction controls are not written into file names, as in',
    quoted: 'a look-alike character had to be told apart from an encoded one in',
    'too-long': `the name is longer than ${os} allows:`,
  };
  return `Stored as ${JSON.stringify(localName)} because ${why[reason]} ${JSON.stringify(remoteName)}`;
}

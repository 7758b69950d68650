/**
 * Remote names mapped onto a local disk (issue #14): whatever the name, the result is a
 * refusal or a path strictly inside the folder, under the rules of all three platforms; a
 * name the disk cannot hold is stored under an encoded name that maps back to it exactly.
 * The fuzz runs a few thousand names in CI and 100,000+ with WEFT_FULL=1.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import {
  DEVICE_MARK,
  LocalPaths,
  MAX_LOCAL_NAME,
  type PathRules,
  QUOTE,
  UnsafeLocalPathError,
  decodeName,
  decodeSlowly,
  encodeName,
  encodeSlowly,
  isPlainName,
  mapRemotePath,
  pathFlavour,
} from '../src/local-path.ts';

const FULL = process.env.WEFT_FULL === '1';
const RULES: PathRules[] = ['posix', 'darwin', 'win32'];
const ROOTS: Record<PathRules, string> = {
  posix: '/home/me/Weft',
  darwin: '/Users/me/Weft',
  win32: 'C:\\Users\\me\\Weft',
};

/** Hostile pieces of names: separators, drives, devices, streams, controls, bidi, look-alikes. */
const HOSTILE = [
  '..',
  '.',
  '...',
  '\\',
  '..\\..\\x',
  'C:',
  'c:\\Windows',
  '\\\\?\\',
  '\\\\server\\share',
  '\\\\.\\PhysicalDrive0',
  '/',
  '\0',
  '\u0001',
  '\u001f',
  '\u007f',
  '\u202e',
  '\u2066',
  '\u200f',
  'CON',
  'con.txt',
  'AUX',
  'NUL.tar.gz',
  'COM1',
  'lpt9.x',
  'COM¹',
  'CONIN$',
  'CON .txt',
  ' ',
  '.',
  ':',
  '::$DATA',
  ':stream',
  '<',
  '>',
  '"',
  '|',
  '?',
  '*',
  QUOTE,
  DEVICE_MARK,
  '：',
  '＼',
  '．',
  '␠',
  '␁',
  '⑆',
  '~0123456789abcdef',
  '\uD800',
  '\uDC00',
  'é',
  'e\u0301',
  'ß',
  'ẞ',
  'a',
  'Z',
];

const hostileName = fc
  .array(fc.oneof(fc.constantFrom(...HOSTILE), fc.string({ maxLength: 4, unit: 'binary' })), {
    minLength: 1,
    maxLength: 8,
  })
  .map((parts) => parts.join(''));
const longName = fc
  .tuple(fc.constantFrom('a', 'é', '\u0001', ':', QUOTE, '字', '😀'), fc.integer({ min: 80, max: 300 }))
  .map(([c, n]) => c.repeat(n));
const remotePath = fc
  .array(fc.oneof({ weight: 5, arbitrary: hostileName }, { weight: 1, arbitrary: longName }), {
    minLength: 1,
    maxLength: 4,
  })
  .map((segs) => segs.join('/'));
const pick = <T>(xs: readonly T[]): fc.Arbitrary<T> => fc.constantFrom(...xs);

// eslint-disable-next-line no-control-regex
const CONTROLS = /[\u0000-\u001f\u007f\u202a-\u202e\u2066-\u2069\u200e\u200f]/;
const DEVICE = /^(CON|PRN|AUX|NUL|COM[0-9¹²³]|LPT[0-9¹²³]|CONIN\$|CONOUT\$)$/i;

function must(ok: boolean, what: string, remote: string, local: string): void {
  if (!ok) throw new Error(`${what}: remote ${JSON.stringify(remote)} → ${JSON.stringify(local)}`);
}

function lengthOf(name: string, rules: PathRules): number {
  return rules === 'win32' ? name.length : Buffer.byteLength(name);
}

describe('mapping remote paths onto a local disk', () => {
  it('any remote path is refused or lands strictly inside the folder, on every platform, and maps back', () => {
    let mapped = 0;
    let refused = 0;
    fc.assert(
      fc.property(remotePath, pick(RULES), (remote, rules) => {
        const root = ROOTS[rules];
        const p = pathFlavour(rules);
        let m: ReturnType<typeof mapRemotePath>;
        try {
          m = mapRemotePath(root, remote, rules);
        } catch (e) {
          if (!(e instanceof UnsafeLocalPathError)) throw e;
          refused += 1;
          return;
        }
        mapped += 1;
        // Plain checks (expect() is too slow for 100,000 runs); each says what broke.
        const rel = p.relative(root, m.abs);
        const parts = rel.split(p.sep);
        must(rel !== '' && !p.isAbsolute(rel) && parts[0] !== '..', 'outside the folder', remote, m.abs);
        must(m.abs.startsWith(root + p.sep), 'not under the root', remote, m.abs);
        must(p.normalize(m.abs) === m.abs, 'moved by normalisation', remote, m.abs);
        must(parts.length === m.names.length, 'segments merged or split', remote, m.abs);
        const segs = remote.split('/');
        m.names.forEach((n, i) => {
          must(!CONTROLS.test(n), 'a control or bidi character on disk', remote, n);
          must(lengthOf(n, rules) <= MAX_LOCAL_NAME, 'name too long for the disk', remote, n);
          if (rules === 'win32') {
            must(!/[<>:"\\/|?*]/.test(n), 'a character Windows refuses', remote, n);
            must(!/[. ]$/.test(n), 'a trailing dot or space', remote, n);
            must(!DEVICE.test(n.split('.')[0]?.replace(/ +$/, '') ?? ''), 'a device name', remote, n);
          }
          if (rules === 'darwin') must(!n.includes(':'), 'a colon on macOS', remote, n);
          // Back again: the segment decodes to exactly the remote one (long forms via the journal).
          const original = segs[i] as string;
          const back = decodeName(n, rules, (l) => (l === n ? original : undefined));
          must(back === original, `maps back to ${JSON.stringify(back)}`, remote, n);
        });
      }),
      { numRuns: FULL ? 120_000 : 2_000 },
    );
    expect(mapped).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
  }, 600_000);

  it('decoding any local name and encoding it again gives the same name, or the name is not synced', () => {
    fc.assert(
      fc.property(hostileName, pick(RULES), (local, rules) => {
        const remote = decodeName(local, rules);
        if (remote !== undefined) expect(encodeName(remote, rules).name).toBe(local);
      }),
      { numRuns: FULL ? 100_000 : 3_000 },
    );
  }, 600_000);

  it('two different remote names never share a local name in one folder', () => {
    fc.assert(
      fc.property(hostileName, hostileName, pick(RULES), (a, b, rules) => {
        fc.pre(a !== b);
        let ea: string;
        let eb: string;
        try {
          ea = encodeName(a, rules).name;
          eb = encodeName(b, rules).name;
        } catch {
          return;
        }
        expect(ea).not.toBe(eb);
      }),
      { numRuns: FULL ? 100_000 : 3_000 },
    );
  }, 600_000);

  it.each([
    ['win32', '..\\..\\x', '..＼..＼x', 'reserved-char'],
    ['win32', 'CON', 'CON＿', 'reserved-name'],
    ['win32', 'con.txt', 'con＿.txt', 'reserved-name'],
    ['win32', 'COM1', 'COM1＿', 'reserved-name'],
    ['win32', 'COM10', 'COM10', undefined],
    ['win32', 'a:b', 'a：b', 'reserved-char'],
    ['win32', 'x::$DATA', 'x：：$DATA', 'reserved-char'],
    ['win32', 'C:', 'C：', 'reserved-char'],
    ['win32', 'trailing.', 'trailing．', 'trailing'],
    ['win32', 'space ', 'space␠', 'trailing'],
    ['win32', 'a.b', 'a.b', undefined],
    ['win32', 'ctl\u0001', 'ctl␁', 'control'],
    ['win32', 'a：b', 'a‛：b', 'quoted'],
    ['win32', 'CON＿.txt', 'CON‛＿.txt', 'quoted'],
    ['win32', 'my＿file', 'my＿file', undefined],
    ['win32', 'a．b', 'a．b', undefined],
    ['win32', 'end．', 'end‛．', 'quoted'],
    ['win32', '‛＼', '‛‛‛＼', 'quoted'],
    ['win32', 'a‛b', 'a‛b', undefined],
    ['posix', 'a:b\\c', 'a:b\\c', undefined],
    ['posix', 'ctl\u0001', 'ctl␁', 'control'],
    ['posix', 'evil\u202egnp.exe', 'evil⑆gnp.exe', 'bidi'],
    ['posix', 'CON', 'CON', undefined],
    ['posix', 'a：b', 'a：b', undefined],
    ['posix', 'pic␁', 'pic‛␁', 'quoted'],
    ['darwin', 'a:b', 'a：b', 'reserved-char'],
  ] as const)('%s: %j is stored as %j (%s)', (rules, remote, local, reason) => {
    const e = encodeName(remote, rules);
    expect(e.name).toBe(local);
    expect(e.reason).toBe(reason);
    expect(decodeName(local, rules)).toBe(remote);
  });

  it('a name too long for the disk is truncated with a hash and maps back through the journal only', () => {
    const remote = 'é'.repeat(120) + '\u0001'.repeat(40); // 280 bytes once encoded on Linux
    const e = encodeName(remote, 'posix');
    expect(e.reason).toBe('too-long');
    expect(Buffer.byteLength(e.name)).toBeLessThanOrEqual(255);
    expect(e.name).toMatch(new RegExp(`${QUOTE}~[0-9a-f]{16}$`));
    expect(decodeName(e.name, 'posix')).toBeUndefined();
    expect(decodeName(e.name, 'posix', () => remote)).toBe(remote);
    expect(decodeName(e.name, 'posix', () => 'someone else')).toBeUndefined();
    // A short remote name that looks like a long form is told apart by one more quote.
    const lookalike = `x${QUOTE}~0123456789abcdef`;
    const le = encodeName(lookalike, 'posix');
    expect(le.name).toBe(`x${QUOTE}${QUOTE}~0123456789abcdef`);
    expect(decodeName(le.name, 'posix')).toBe(lookalike);
  });

  it('names no encoding can make safe are refused, not rewritten', () => {
    for (const rules of RULES) {
      for (const bad of ['..', '.', '', 'a/../..', '/abs', 'a//b', 'x/\uD800']) {
        expect(() => mapRemotePath(ROOTS[rules], bad, rules)).toThrow(UnsafeLocalPathError);
      }
    }
  });

  it('maps under each root it is given, one after another (the last root is remembered)', () => {
    // mapRemotePath keeps the last absolute root normalised: a different root, flavour or a
    // root spelt unnormalised must each give their own place, whatever was mapped before.
    const cases: [string, PathRules, string][] = [
      ['/home/me/Weft', 'posix', '/home/me/Weft/a/b'],
      ['/home/you/Weft/', 'posix', '/home/you/Weft/a/b'],
      ['/home/me/./x/../Weft', 'posix', '/home/me/Weft/a/b'],
      ['C:\\Users\\me\\Weft', 'win32', 'C:\\Users\\me\\Weft\\a\\b'],
      ['/', 'posix', '/a/b'],
    ];
    for (let round = 0; round < 2; round++)
      for (const [root, rules, abs] of cases) expect(mapRemotePath(root, 'a/b', rules).abs).toBe(abs);
  });
});

describe('symbolic links inside the folder', () => {
  const dirs: string[] = [];
  afterEach(async () => {
    for (const d of dirs.splice(0)) await fsp.rm(d, { recursive: true, force: true });
  });

  it('a folder component that is a link pointing out is refused, a real folder is not', async () => {
    const base = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-localpath-'));
    dirs.push(base);
    const root = nodePath.join(base, 'Weft');
    const outside = nodePath.join(base, 'outside');
    await fsp.mkdir(nodePath.join(root, 'real'), { recursive: true });
    await fsp.mkdir(outside);
    await fsp.symlink(outside, nodePath.join(root, 'escape'));
    await fsp.symlink(nodePath.join(outside, 'f'), nodePath.join(root, 'filelink'));
    const paths = new LocalPaths(root, 'posix');
    await expect(paths.resolve('escape/x')).rejects.toThrow(UnsafeLocalPathError);
    await expect(paths.resolve('escape')).rejects.toThrow(UnsafeLocalPathError);
    await expect(paths.resolve('filelink')).rejects.toThrow(UnsafeLocalPathError);
    expect(await paths.resolve('real/new/file')).toBe(nodePath.join(root, 'real', 'new', 'file'));
    expect(await paths.resolve('not-yet/x')).toBe(nodePath.join(root, 'not-yet', 'x'));
  });

  it('a folder swapped for a link after it was resolved through is refused at once', async () => {
    const base = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-localpath-'));
    dirs.push(base);
    const root = nodePath.join(base, 'Weft');
    await fsp.mkdir(nodePath.join(root, 'a', 'b'), { recursive: true });
    await fsp.writeFile(nodePath.join(root, 'a', 'b', 'f'), 'x');
    await fsp.writeFile(nodePath.join(root, 'a', 'b', 'g'), 'y');
    const paths = new LocalPaths(root, 'posix');
    expect(await paths.resolve('a/b/f')).toBe(nodePath.join(root, 'a', 'b', 'f'));
    // The very folder moved out and linked back: the same inodes below the link.
    await fsp.rename(nodePath.join(root, 'a'), nodePath.join(base, 'a-out'));
    await fsp.symlink(nodePath.join(base, 'a-out'), nodePath.join(root, 'a'));
    await expect(paths.resolve('a/b/g')).rejects.toThrow(UnsafeLocalPathError);
    await expect(paths.resolve('a/b/f')).rejects.toThrow(UnsafeLocalPathError);
    // A link to a folder inside the folder is not followed either.
    await fsp.rm(nodePath.join(root, 'a'));
    await fsp.rename(nodePath.join(base, 'a-out'), nodePath.join(root, 'c'));
    await fsp.symlink('c', nodePath.join(root, 'a'));
    await expect(paths.resolve('a/b/g')).rejects.toThrow(UnsafeLocalPathError);
    expect(await paths.resolve('c/b/g')).toBe(nodePath.join(root, 'c', 'b', 'g'));
  });

  it('realpaths are taken on the event loop, not one thread-pool round trip per file (issue #16)', async () => {
    const base = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-localpath-'));
    dirs.push(base);
    const root = nodePath.join(base, 'Weft');
    await fsp.mkdir(nodePath.join(root, 'd'), { recursive: true });
    for (let i = 0; i < 20; i++) await fsp.writeFile(nodePath.join(root, 'd', `f${i}`), '');
    const paths = new LocalPaths(root, 'posix');
    for (let i = 0; i < 20; i++) await paths.resolve(`d/f${i}`);
    // One for the folder itself, then one per existing file.
    expect(paths.gate.calls).toEqual({ onLoop: 21, inPool: 0 });
  });

  it('the win32 rules are checked with Windows path semantics even on Linux', () => {
    const paths = new LocalPaths('/tmp/weft-x', 'win32');
    expect(paths.localRel('..\\..\\x/CON')).toBe('..＼..＼x/CON＿');
    expect(paths.remotePath('..＼..＼x/CON＿')).toBe('..\\..\\x/CON');
    expect(paths.remotePath('a\u0001')).toBeUndefined(); // not a name Weft writes
  });

  it('the plain-name fast path answers exactly as the full encoding for every ASCII name (issue #16)', () => {
    const same = (name: string, rules: PathRules): void => {
      let slow: unknown;
      try {
        slow = encodeSlowly(name, rules);
      } catch (e) {
        slow = (e as Error).message;
      }
      let fast: unknown;
      try {
        fast = encodeName(name, rules);
      } catch (e) {
        fast = (e as Error).message;
      }
      expect(fast, `encode ${JSON.stringify(name)} (${rules})`).toEqual(slow);
      expect(decodeName(name, rules), `decode ${JSON.stringify(name)} (${rules})`).toBe(
        decodeSlowly(name, rules),
      );
    };
    const ascii = Array.from({ length: 128 }, (_, c) => String.fromCharCode(c));
    const edges = [
      ...ascii,
      ...ascii.map((c) => `a${c}`),
      ...ascii.map((c) => `${c}.txt`),
      '.',
      '..',
      '...',
      'a.',
      'a ',
      ' a',
      'CON',
      'con.txt',
      'COM1 ',
      'Lpt9.tar.gz',
      'CONIN$',
      'x'.repeat(254),
      'x'.repeat(255),
      'x'.repeat(256),
      `${'x'.repeat(254)}.`,
    ];
    for (const rules of RULES) for (const name of edges) same(name, rules);
    // The fast path is taken for ordinary names (else this test would prove nothing).
    expect(isPlainName('f123.txt', 'posix') && isPlainName('a:b', 'posix')).toBe(true);
    expect(isPlainName('a:b', 'darwin') || isPlainName('a.', 'win32') || isPlainName('nul', 'win32')).toBe(
      false,
    );
    fc.assert(
      fc.property(
        fc.string({
          minLength: 1,
          maxLength: 12,
          unit: fc.integer({ min: 0, max: 127 }).map((c) => String.fromCharCode(c)),
        }),
        pick(RULES),
        (name, rules) => same(name, rules),
      ),
      { numRuns: FULL ? 100_000 : 3_000 },
    );
  });
});

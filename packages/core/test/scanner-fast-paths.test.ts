/**
 * The scanner's fast paths for a no-change rescan (issue #16: 100,000 files in ≤ 3 s) see
 * what the full checks see: a plain ASCII name skips the name decoding and path checks, yet
 * a name the rules would not send unchanged, a reserved name and a hostile one are still
 * skipped or mapped as before; the ignore rules' name prefilter and per-folder verdicts
 * answer as asking the \`ignore\` package of the path and each folder above it does.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import ignore, { type Ignore } from 'ignore';
import { describe, expect, it } from 'vitest';
import { DEFAULT_IGNORES, IgnoreRules, namePrefilter } from '../src/ignore-rules.ts';
import { LocalPaths, QUOTE } from '../src/local-path.ts';
import { scan } from '../src/scanner.ts';
import { later, scanFolder } from './support/scan-rig.ts';

const putPaths = (ops: readonly { kind: string; path?: string }[]): string[] =>
  ops.flatMap((o) => (o.kind === 'put' && o.path !== undefined ? [o.path] : [])).sort();

describe('the scanner’s plain-name fast path', () => {
  it('still skips names the rules would not send unchanged, and reserved names', async () => {
    const { root, journal } = await scanFolder('weft-scanfast-');
    await fsp.mkdir(nodePath.join(root, 'sub'));
    for (const name of ['plain.txt', 'a:b.txt', 'x.WeftLink', `q${QUOTE}.txt`, 'ctl\u0001.txt'])
      await fsp.writeFile(nodePath.join(root, 'sub', name), name);
    // macOS rules: ':' is stored as '：', so a literal ':' on disk is not a name Weft writes.
    const darwin = await scan(root, journal, new IgnoreRules(), {
      now: later,
      paths: new LocalPaths(root, 'darwin'),
    });
    expect(putPaths(darwin.ops)).toEqual(['sub/plain.txt', `sub/q${QUOTE}.txt`]);
    expect(darwin.warnings.some((w) => w.includes('a:b.txt') && w.includes('not one Weft'))).toBe(true);
    expect(darwin.warnings.some((w) => w.includes('sub/x.WeftLink') && w.includes('reserved'))).toBe(true);
    // POSIX rules: ':' is an ordinary character there.
    const posix = await scan(root, journal, new IgnoreRules(), {
      now: later,
      paths: new LocalPaths(root, 'posix'),
    });
    expect(putPaths(posix.ops)).toEqual(['sub/a:b.txt', 'sub/plain.txt', `sub/q${QUOTE}.txt`]);
    expect(posix.warnings.some((w) => w.includes('ctl\\u0001.txt'))).toBe(true);
  });
});

/** The verdict as the rules were asked before the fast paths: the path, then each folder above. */
function askedInFull(
  root: Ignore,
  folders: ReadonlyMap<string, Ignore>,
  path: string,
  isDir: boolean,
): boolean {
  const test = (ig: Ignore, rel: string): boolean => ig.ignores(isDir ? rel + '/' : rel);
  if (test(root, path)) return true;
  for (let i = path.indexOf('/'); i >= 0; i = path.indexOf('/', i + 1)) {
    const ancestor = path.slice(0, i);
    if (test(root, ancestor + '/') || root.ignores(ancestor)) return true;
  }
  for (const [folder, ig] of folders) {
    if (folder !== '' && !path.startsWith(folder + '/')) continue;
    const rel = folder === '' ? path : path.slice(folder.length + 1);
    if (test(ig, rel)) return true;
    const segs = rel.split('/');
    for (let i = 1; i < segs.length; i++) if (ig.ignores(segs.slice(0, i).join('/') + '/')) return true;
  }
  return false;
}

describe('the ignore rules’ fast paths', () => {
  const PATTERNS = [
    'build/',
    '*.log',
    '/dist',
    'docs/*.md',
    '!keep.log',
    'Node_Modules',
    'a?c',
    '**/cache',
    'sub/**/deep',
    'x.y+z',
    '$var',
    '~*',
    '#comment',
    '',
    '[Tt]emp',
    'trailing ',
    '\\#hash',
    'foo/**',
  ];
  const NAMES = [
    'build',
    'x.log',
    'keep.log',
    'dist',
    'docs',
    'a.md',
    'node_modules',
    'abc',
    'aXc',
    'cache',
    'deep',
    'sub',
    'x.y+z',
    'xy+z',
    '$var',
    '~lock',
    'temp',
    'Temp',
    'trailing',
    'trailing ',
    '#hash',
    'foo',
    'plain.txt',
    '.DS_Store',
    'THUMBS.DB',
    'file.TMP',
    '.weft-partial-1',
    '#comment',
  ];
  const paths: string[] = [];
  for (const a of NAMES) {
    paths.push(a);
    for (const b of NAMES.slice(0, 12)) {
      paths.push(`${a}/${b}`);
      for (const c of ['a.md', 'deep', 'plain.txt', 'x.log', 'keep.log']) paths.push(`${a}/${b}/${c}`);
    }
  }

  it('answer as the path and every folder above it asked of the rules, whatever the patterns', () => {
    const sets: string[][] = [
      [],
      ...PATTERNS.map((p) => [p]),
      PATTERNS.filter((p) => !p.includes('[')),
      PATTERNS,
    ];
    const folderRules = new Map([
      ['docs', '*.md\n!a.md\n'],
      ['sub/x.log', 'deep\n'],
    ]);
    let compared = 0;
    for (const patterns of sets) {
      for (const folders of [new Map<string, string>(), folderRules]) {
        const rules = new IgnoreRules(patterns);
        for (const [folder, text] of folders) rules.setFolderRules(folder, text);
        const root = ignore().add([...DEFAULT_IGNORES, ...patterns]);
        const matchers = new Map([...folders].map(([f, text]) => [f, ignore().add(text)]));
        for (const p of paths)
          for (const isDir of [false, true]) {
            const full = askedInFull(root, matchers, p, isDir);
            if (rules.ignores(p, isDir) !== full)
              expect(rules.ignores(p, isDir), `${JSON.stringify(patterns)} ${p}${isDir ? '/' : ''}`).toBe(
                full,
              );
            compared += 1;
          }
      }
    }
    expect(compared).toBeGreaterThan(150_000);
  });

  it('the name prefilter is wider than the patterns it reads, and absent for patterns beyond it', () => {
    const pre = namePrefilter([...DEFAULT_IGNORES, 'build/', '/dist', 'docs/*.md', '**/cache', '!keep']);
    expect(pre).toBeDefined();
    for (const name of [
      'build',
      'BUILD',
      'dist',
      'a.md',
      'cache',
      '.DS_Store',
      'thumbs.db',
      'x.TMP',
      '~$doc',
    ])
      expect(pre?.test(name), name).toBe(true);
    for (const name of ['plain.txt', 'keep', 'builds', 'a.mdx', 'xcache', 'f123.txt'])
      expect(pre?.test(name), name).toBe(false);
    for (const beyond of ['[Tt]emp', 'trailing ', '\\#x', 'a**b', 'foo/**', '**'])
      expect(namePrefilter([beyond]), beyond).toBeUndefined();
  });
});

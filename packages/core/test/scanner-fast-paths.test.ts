/**
 * The scanner's fast paths for a no-change rescan (issue #16: 100,000 files in ≤ 3 s) see
 * what the full checks see: a plain ASCII name skips the name decoding and path checks, yet
 * a name the rules would not send unchanged, a reserved name and a hostile one are still
 * skipped or mapped as before.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { IgnoreRules } from '../src/ignore-rules.ts';
import { Journal } from '../src/journal/journal.ts';
import { LocalPaths, QUOTE } from '../src/local-path.ts';
import { scan } from '../src/scanner.ts';

const later = (): number => Date.now() + 10_000; // every file counts as settled
const journals: Journal[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const j of journals.splice(0)) j.close();
  for (const d of dirs.splice(0)) await fsp.rm(d, { recursive: true, force: true });
});

async function setup(): Promise<{ root: string; journal: Journal }> {
  const base = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-scanfast-'));
  dirs.push(base);
  const root = nodePath.join(base, 'folder');
  await fsp.mkdir(root);
  const journal = new Journal(nodePath.join(base, 'journal.db'));
  journals.push(journal);
  return { root, journal };
}

const putPaths = (ops: readonly { kind: string; path?: string }[]): string[] =>
  ops.flatMap((o) => (o.kind === 'put' && o.path !== undefined ? [o.path] : [])).sort();

describe('the scanner’s plain-name fast path', () => {
  it('still skips names the rules would not send unchanged, and reserved names', async () => {
    const { root, journal } = await setup();
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

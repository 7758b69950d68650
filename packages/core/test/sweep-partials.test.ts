/**
 * Temp files a crash left in the folder are removed at start (local-fs.ts sweepPartials),
 * at any depth, and nothing else is.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { describe, expect, it } from 'vitest';
import { PARTIAL_PREFIX, sweepPartials } from '../src/local-fs.ts';

describe('sweepPartials', () => {
  it('removes the temp files at every depth and keeps everything else', async () => {
    const root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-sweep-'));
    try {
      const files = [
        `${PARTIAL_PREFIX}top`,
        'keep.txt',
        `a/${PARTIAL_PREFIX}1`,
        'a/keep',
        `a/b/c/${PARTIAL_PREFIX}deep`,
        'a/b/c/keep',
        `x${PARTIAL_PREFIX}not-a-prefix`,
      ];
      for (const f of files) {
        await fsp.mkdir(nodePath.join(root, nodePath.dirname(f)), { recursive: true });
        await fsp.writeFile(nodePath.join(root, f), f);
      }
      // A folder with the prefix is not a temp file (the engine writes files only): kept.
      await fsp.mkdir(nodePath.join(root, `${PARTIAL_PREFIX}dir`));
      expect(await sweepPartials(root)).toBe(3);
      const left: string[] = [];
      const list = async (rel: string): Promise<void> => {
        for (const e of await fsp.readdir(nodePath.join(root, rel), { withFileTypes: true })) {
          const p = rel === '' ? e.name : `${rel}/${e.name}`;
          if (e.isDirectory()) await list(p);
          else left.push(p);
        }
      };
      await list('');
      expect(left.sort()).toEqual(['a/b/c/keep', 'a/keep', 'keep.txt', `x${PARTIAL_PREFIX}not-a-prefix`]);
      expect((await fsp.stat(nodePath.join(root, `${PARTIAL_PREFIX}dir`))).isDirectory()).toBe(true);
    } finally {
      await fsp.rm(root, { recursive: true, force: true });
    }
  });
});

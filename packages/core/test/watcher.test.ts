import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FolderWatcher, minimalScope } from '../src/watcher.ts';

const watchers: FolderWatcher[] = [];
afterEach(() => {
  for (const w of watchers.splice(0)) w.dispose();
});

async function watched(
  options: ConstructorParameters<typeof FolderWatcher>[1] = {},
): Promise<{ root: string; w: FolderWatcher; scopes: string[][] }> {
  const root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-watch-'));
  await fsp.mkdir(nodePath.join(root, 'a'));
  await fsp.writeFile(nodePath.join(root, 'a', 'f.txt'), 'one');
  const w = new FolderWatcher(root, { debounceMs: 20, rescanMs: 0, perFolder: true, ...options });
  watchers.push(w);
  const scopes: string[][] = [];
  w.onDirty((s) => void scopes.push([...s]));
  await w.start();
  return { root, w, scopes };
}

/** Wait until some reported scope covers `path` (the scanner would look at it). */
async function reported(scopes: string[][], path: string): Promise<void> {
  const covers = (s: string): boolean => s === '' || path === s || path.startsWith(s + '/');
  for (let i = 0; i < 500; i++) {
    if (scopes.some((scope) => scope.some(covers))) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no scope covering ${path}: ${JSON.stringify(scopes)}`);
}

describe('folder watcher', () => {
  it('names the folder of a created, changed, renamed or deleted file', async () => {
    const { root, scopes } = await watched();
    const steps: [string, () => Promise<void>][] = [
      ['a', () => fsp.writeFile(nodePath.join(root, 'a', 'new.txt'), 'x')],
      ['a', () => fsp.appendFile(nodePath.join(root, 'a', 'f.txt'), 'more')],
      ['a', () => fsp.rename(nodePath.join(root, 'a', 'f.txt'), nodePath.join(root, 'a', 'g.txt'))],
      ['a', () => fsp.rm(nodePath.join(root, 'a', 'g.txt'))],
    ];
    for (const [folder, step] of steps) {
      scopes.length = 0;
      await step();
      await reported(scopes, `${folder}/x`);
      // A file event rescans its folder, not everything.
      expect(scopes.flat()).not.toContain('');
    }
  });

  it('watches folders that appear, and lets go of folders that leave', async () => {
    const { root, w, scopes } = await watched();
    expect(w.watchCount).toBe(2); // the root and a
    await fsp.mkdir(nodePath.join(root, 'b', 'c'), { recursive: true });
    await reported(scopes, 'b');
    for (let i = 0; i < 500 && w.watchCount < 4; i++) await new Promise((r) => setTimeout(r, 10));
    expect(w.watchCount).toBe(4);
    scopes.length = 0;
    await fsp.writeFile(nodePath.join(root, 'b', 'c', 'deep.txt'), 'x');
    await reported(scopes, 'b/c/deep.txt');
    expect(scopes.flat()).not.toContain('');
    await fsp.rm(nodePath.join(root, 'b'), { recursive: true });
    for (let i = 0; i < 500 && w.watchCount > 2; i++) await new Promise((r) => setTimeout(r, 10));
    expect(w.watchCount).toBe(2);
  });

  it('holds one watch per folder, none per file', async () => {
    const { root, w } = await watched();
    w.dispose();
    for (let d = 0; d < 5; d++) {
      await fsp.mkdir(nodePath.join(root, `d${d}`));
      for (let f = 0; f < 100; f++) await fsp.writeFile(nodePath.join(root, `d${d}`, `f${f}`), `${f}`);
    }
    const again = new FolderWatcher(root, { rescanMs: 0, perFolder: true });
    watchers.push(again);
    await again.start();
    expect(again.watchCount).toBe(7); // root, a, d0…d4 — not 500 files
  });

  it('without OS events, finds changes by full rescans', async () => {
    const { scopes } = await watched({ usePolling: true, pollMs: 30 });
    await reported(scopes, 'anything');
    expect(scopes[0]).toEqual(['']);
  });

  it('reduces a dirty set to its top-most folders', () => {
    expect(minimalScope(['a/b', 'a', 'c/d', 'c/de', 'a/b/c'])).toEqual(['a', 'c/d', 'c/de']);
    expect(minimalScope(['x', ''])).toEqual(['']);
  });
});

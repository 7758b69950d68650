/**
 * A rescan compares each folder's entries with the folder's own index rows as the walk reads
 * it (journal/scan-index.ts; issue #16), and reads below a folder it does not enter: a
 * folder deleted, replaced by a file, moved or left out still yields its deletions, moves
 * and counts, in a full scan and in a scoped one.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { describe, expect, it } from 'vitest';
import { IgnoreRules } from '../src/ignore-rules.ts';
import { Journal } from '../src/journal/journal.ts';
import { indexIn } from '../src/journal/scan-index.ts';
import { type ScanOptions, scan } from '../src/scanner.ts';
import { later, markSynced, scanFolder } from './support/scan-rig.ts';

async function write(root: string, files: readonly string[]): Promise<void> {
  for (const f of files) {
    const abs = nodePath.join(root, ...f.split('/'));
    await fsp.mkdir(nodePath.dirname(abs), { recursive: true });
    await fsp.writeFile(abs, f);
  }
}

/** Scan everything, commit, and mark every row synced (as after an upload). */
async function synced(root: string, journal: Journal): Promise<void> {
  (await scan(root, journal, new IgnoreRules(), { now: later })).commit();
  markSynced(journal);
}

const TREE = ['a.txt', 'd/a', 'd/b/c', 'd/b/d/e', 'd/b.txt', 'd.txt', 'd0/f', 'm/n/o', 'm/p', 'x.txt', 'z/1'];

describe('the index read folder by folder', () => {
  it('gives each folder its own rows and the heads of the rows below it, whatever the names', async () => {
    const { root, journal } = await scanFolder('weft-scanidx-');
    await write(root, [...TREE, 'd/b/d/e2', 'd/b0', 'd/b-/x', 'd/b/z', 'é/ü', 'z/2/..x']);
    await synced(root, journal);
    const all = journal.allFiles().map((r) => r.path);
    const folders = ['', ...all.filter((p) => journal.getFile(p)?.kind === 'dir'), 'nothing', 'd/b/d/e'];
    for (const dir of folders) {
      const prefix = dir === '' ? '' : `${dir}/`;
      const inside = all.filter((p) => p.startsWith(prefix) && p !== dir);
      const own = inside.filter((p) => !p.slice(prefix.length).includes('/'));
      const heads = [
        ...new Set(
          inside
            .filter((p) => p.slice(prefix.length).includes('/'))
            .map((p) => prefix + (p.slice(prefix.length).split('/')[0] as string)),
        ),
      ];
      const got = await indexIn(journal, dir);
      expect([...got.rows.keys()].sort(), dir).toEqual(own.sort());
      expect(got.files, dir).toBe(own.filter((p) => journal.getFile(p)?.kind === 'file').length);
      expect([...got.below].sort(), dir).toEqual(heads.sort());
    }
  });
});

describe('a rescan compared folder by folder', () => {
  it('finds a nested folder deleted, a file turned folder and back, and a folder moved', async () => {
    const { root, journal } = await scanFolder('weft-scanidx-');
    await write(root, TREE);
    await synced(root, journal);
    const known = journal.allFiles().filter((r) => r.kind === 'file').length;
    await fsp.rm(nodePath.join(root, 'd', 'b'), { recursive: true });
    await fsp.rm(nodePath.join(root, 'x.txt'));
    await write(root, ['x.txt/y']);
    await fsp.rm(nodePath.join(root, 'd0'), { recursive: true });
    await write(root, ['d0']);
    await fsp.rename(nodePath.join(root, 'm'), nodePath.join(root, 'q'));
    const r = await scan(root, journal, new IgnoreRules(), { now: later });
    expect(r.knownFilesBefore).toBe(known);
    expect(r.deletedFiles).toBe(3); // d/b/c, d/b/d/e, d0/f (x.txt is a folder now: a kind change)
    expect(r.ops.map((o) => (o.kind === 'move' ? `move ${o.from} ${o.to}` : `${o.kind} ${o.path}`))).toEqual([
      'move m q',
      'delete d0',
      'put d0',
      'delete x.txt',
      'mkdir x.txt',
      'put x.txt/y',
      'delete d/b',
      'delete d0/f', // the content of a folder turned file, as the full scan always sent it
    ]);
    // Once written, nothing more to send (files this fresh are hashed again: racily clean).
    r.commit();
    const again = await scan(root, journal, new IgnoreRules(), { now: later });
    expect(again.ops).toEqual([]);
    expect(again.scannedFiles).toBe(r.scannedFiles);
  });

  it('does the same in a scoped scan, with scope entries inside one another', async () => {
    const { root, journal } = await scanFolder('weft-scanidx-');
    await write(root, TREE);
    await synced(root, journal);
    await fsp.rm(nodePath.join(root, 'd', 'b'), { recursive: true });
    await fsp.rm(nodePath.join(root, 'z'), { recursive: true });
    await write(root, ['z']);
    const scoped = async (scope: ScanOptions['scope']): Promise<string[]> =>
      (await scan(root, journal, new IgnoreRules(), { now: later, scope })).ops.map(
        (o) => `${o.kind} ${'path' in o ? o.path : ''}`,
      );
    expect(await scoped(['d/b'])).toEqual(['delete d/b']);
    expect(await scoped(['d', 'd/b', 'd/b/d'])).toEqual(['delete d/b']);
    // (The content of a folder turned file is deleted after it, as the full scan always did.)
    expect(await scoped(['z'])).toEqual(['delete z', 'put z', 'delete z/1']);
    expect(await scoped(['m', 'a.txt'])).toEqual([]);
    const all = await scan(root, journal, new IgnoreRules(), { now: later, scope: ['d/b', 'z'] });
    expect(all.knownFilesBefore).toBe(3); // d/b/c, d/b/d/e, z/1
    expect(all.deletedFiles).toBe(3);
  });

  it('deletes rows below a path whose own row is missing (an index written by another version)', async () => {
    const { root, journal } = await scanFolder('weft-scanidx-');
    await write(root, TREE);
    await synced(root, journal);
    journal.deleteFile('d/b'); // its row only: d/b/c and d/b/d/e stay
    await fsp.rm(nodePath.join(root, 'd', 'b'), { recursive: true });
    const r = await scan(root, journal, new IgnoreRules(), { now: later });
    expect(r.ops.map((o) => `${o.kind} ${'path' in o ? o.path : ''}`)).toEqual([
      'delete d/b/c',
      'delete d/b/d',
    ]);
  });
});

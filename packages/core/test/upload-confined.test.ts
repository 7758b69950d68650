/**
 * A bundle upload reads each file confined to the folder (issue #16: one realpath per
 * uploaded file gave way, on Linux, to an O_NOFOLLOW open whose real place is read back
 * from /proc/self/fd — src/confined-open.ts). Here the files are scanned and
 * queued offline, then a folder and a file are swapped for symbolic links to the same
 * names outside the folder before the upload: nothing from outside reaches the server,
 * while the untouched files go up, opened that way (counted).
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openedConfined } from '../src/confined-open.ts';
import type { SyncContext } from '../src/sync/context.ts';
import { FakeCloud, sha256 } from './support/fake-cloud.ts';

let cloud: FakeCloud | undefined;
const cleanup: string[] = [];
afterEach(async () => {
  await cloud?.close();
  cloud = undefined;
  for (const d of cleanup.splice(0)) await fsp.rm(d, { recursive: true, force: true });
});

describe('a bundle upload', () => {
  it('reads nothing through a symbolic link swapped in between the scan and the upload', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop');
    await d.engine.waitIdle();
    const ok = Array.from({ length: 6 }, (_, i) => `ok/f${i}.txt`);
    for (const p of ok) await d.write(p, `fine ${p}`);
    await d.write('docs/a.txt', 'inside a');
    await d.write('docs/b.txt', 'inside b');
    await d.write('top.txt', 'inside top');
    d.offline = true;
    await d.sync().catch(() => undefined);
    expect(d.engine.journal.pendingOps().filter((q) => q.op.kind === 'put')).toHaveLength(ok.length + 3);

    // The same names outside the folder, with other bytes; then the swaps.
    const outside = await fsp.mkdtemp(nodePath.join(nodePath.dirname(d.abs('')), 'outside-'));
    cleanup.push(outside);
    await fsp.mkdir(nodePath.join(outside, 'docs'));
    for (const n of ['a.txt', 'b.txt']) await fsp.writeFile(nodePath.join(outside, 'docs', n), `SECRET ${n}`);
    await fsp.writeFile(nodePath.join(outside, 'top.txt'), 'SECRET top');
    // Swapped as the upload begins (its first look at a queued path), after the pass's scan.
    const journal = d.engine.journal;
    const whereNow = journal.whereNow.bind(journal);
    let swapped = false;
    journal.whereNow = (id: number, p: string): string => {
      if (!swapped) {
        swapped = true;
        fs.rmSync(d.abs('docs'), { recursive: true });
        fs.symlinkSync(nodePath.join(outside, 'docs'), d.abs('docs'));
        fs.rmSync(d.abs('top.txt'));
        fs.symlinkSync(nodePath.join(outside, 'top.txt'), d.abs('top.txt'));
      }
      return whereNow(id, p);
    };
    const paths = (d.engine as unknown as { ctx: SyncContext }).ctx.paths;
    const opened = openedConfined(paths);
    d.offline = false;
    await d.sync().catch(() => undefined);
    const tree = cloud.serverTree();
    const secrets = new Set(['SECRET a.txt', 'SECRET b.txt', 'SECRET top'].map((s) => sha256(s)));
    expect([...tree.values()].filter((h) => secrets.has(h))).toEqual([]);
    expect(swapped).toBe(true);
    for (const p of ok) expect(tree.get(p)).toBe(sha256(`fine ${p}`));
    // Linux: every untouched file was opened confined in one step (elsewhere: resolved first).
    if (process.platform === 'linux') expect(openedConfined(paths) - opened).toBe(ok.length);
  });
});

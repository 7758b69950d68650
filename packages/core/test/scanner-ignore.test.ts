/**
 * A pattern added to the ignore list while files it matches are already synced (Settings
 * apply at once, issue #19; or a `.weftignore` edit): those files stop syncing, and stay
 * where they are — never a delete sent for them.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { describe, expect, it } from 'vitest';
import { IgnoreRules } from '../src/ignore-rules.ts';
import { scan } from '../src/scanner.ts';
import { later, markSynced, scanFolder } from './support/scan-rig.ts';

describe('scanner and a newly ignored path', () => {
  it('forgets synced files and folders it now ignores without deleting them', async () => {
    const { root, journal } = await scanFolder('weft-scan-ign-');
    await fsp.mkdir(nodePath.join(root, 'build'), { recursive: true });
    await fsp.writeFile(nodePath.join(root, 'build', 'out.bin'), 'x');
    await fsp.writeFile(nodePath.join(root, 'notes.log'), 'log');
    await fsp.writeFile(nodePath.join(root, 'keep.txt'), 'keep');
    (await scan(root, journal, new IgnoreRules(), { now: later })).commit();
    markSynced(journal);

    const now = await scan(root, journal, new IgnoreRules(['build/', '*.log']), { now: later });
    now.commit();
    expect(now.ops).toEqual([]);
    expect(journal.allFiles().map((r) => r.path)).toEqual(['keep.txt']);
    // Lifted again: they are found as new files, uploaded as any other.
    const back = await scan(root, journal, new IgnoreRules(), { now: later });
    expect(back.ops.map((o) => o.kind).sort()).toEqual(['mkdir', 'put', 'put']);
  });
});

/**
 * A pattern added to the ignore list while files it matches are already synced (Settings
 * apply at once, issue #19; or a `.weftignore` edit): those files stop syncing, and stay
 * where they are — never a delete sent for them.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { describe, expect, it } from 'vitest';
import { IgnoreRules } from '../src/ignore-rules.ts';
import { Journal } from '../src/journal/journal.ts';
import { scan } from '../src/scanner.ts';

const later = () => Date.now() + 10_000; // every file counts as settled

describe('scanner and a newly ignored path', () => {
  it('forgets synced files and folders it now ignores without deleting them', async () => {
    const base = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-scan-ign-'));
    const root = nodePath.join(base, 'folder');
    await fsp.mkdir(nodePath.join(root, 'build'), { recursive: true });
    await fsp.writeFile(nodePath.join(root, 'build', 'out.bin'), 'x');
    await fsp.writeFile(nodePath.join(root, 'notes.log'), 'log');
    await fsp.writeFile(nodePath.join(root, 'keep.txt'), 'keep');
    const journal = new Journal(nodePath.join(base, 'journal.db'));
    try {
      (await scan(root, journal, new IgnoreRules(), { now: later })).commit();
      for (const r of journal.allFiles())
        journal.upsertFile({ ...r, syncedRev: `rev-${r.path}`, syncedHash: r.hash });

      const now = await scan(root, journal, new IgnoreRules(['build/', '*.log']), { now: later });
      now.commit();
      expect(now.ops).toEqual([]);
      expect(journal.allFiles().map((r) => r.path)).toEqual(['keep.txt']);
      // Lifted again: they are found as new files, uploaded as any other.
      const back = await scan(root, journal, new IgnoreRules(), { now: later });
      expect(back.ops.map((o) => o.kind).sort()).toEqual(['mkdir', 'put', 'put']);
    } finally {
      journal.close();
      await fsp.rm(base, { recursive: true, force: true });
    }
  });
});

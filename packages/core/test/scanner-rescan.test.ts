/**
 * A no-change rescan is a stat per entry against the journal's index (issue #16: 100,000
 * files in ≤ 3 s): no file read or hashed, no whole journal row read, the stats taken on the
 * event loop in slices with turns between them; the index rows it compares with are the
 * journal's; the ignore rules' remembered verdicts follow a change of the rules.
 */
import { createHash } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { describe, expect, it } from 'vitest';
import { IgnoreRules } from '../src/ignore-rules.ts';
import { Journal } from '../src/journal/journal.ts';
import { LocalPaths } from '../src/local-path.ts';
import { STAT_SLICE, scan } from '../src/scanner.ts';

const later = (): number => Date.now() + 10_000; // every file counts as settled

async function folderWith(files: number): Promise<{ root: string; journal: Journal }> {
  const base = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-rescan-'));
  const root = nodePath.join(base, 'folder');
  const old = new Date(Date.now() - 3_600_000);
  for (let i = 0; i < files; i++) {
    const dir = nodePath.join(root, `d${i % 3}`);
    await fsp.mkdir(dir, { recursive: true });
    const f = nodePath.join(dir, `f${i}.txt`);
    await fsp.writeFile(f, `content ${i}`);
    // Dated in the past: a stat this recent is smudged in the journal and hashed again.
    await fsp.utimes(f, old, old);
  }
  return { root, journal: new Journal(nodePath.join(base, 'journal.db')) };
}

describe('a no-change rescan', () => {
  it('hashes nothing, reads no whole row and writes none; a changed file is hashed and compared with its row; only what changed is held', async () => {
    const { root, journal } = await folderWith(30);
    const first = await scan(root, journal, new IgnoreRules(), { now: later });
    first.commit();
    expect(first.hashedFiles).toBe(30);
    for (const r of journal.allFiles())
      journal.upsertFile({ ...r, syncedRev: `rev-${r.path}`, syncedHash: r.hash });
    let wholeRows = 0;
    const getFile = journal.getFile.bind(journal);
    journal.getFile = (p) => {
      wholeRows += 1;
      return getFile(p);
    };
    let writes = 0;
    for (const m of ['upsertFile', 'deleteFile', 'deleteFilesUnder', 'moveFiles'] as const) {
      const real = journal[m].bind(journal) as (...a: unknown[]) => unknown;
      (journal as unknown as Record<string, unknown>)[m] = (...a: unknown[]) => ((writes += 1), real(...a));
    }
    const again = await scan(root, journal, new IgnoreRules(), { now: later });
    again.commit();
    expect(again.ops).toEqual([]);
    expect(again.hashedFiles).toBe(0);
    expect(wholeRows).toBe(0);
    expect(writes).toBe(0); // nothing written to the journal either
    // Nothing held beside the walk once the index is read: the matched entries were let go.
    expect(again.scannedFiles).toBe(33);
    expect(again.heldForComparison).toBe(0);
    // One edit: one file hashed, its whole row read, a put on its synced revision.
    const edit = nodePath.join(root, 'd1', 'f1.txt');
    await fsp.writeFile(edit, 'edited, longer');
    await fsp.utimes(edit, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
    const edited = await scan(root, journal, new IgnoreRules(), { now: later });
    expect(edited.hashedFiles).toBe(1);
    expect(wholeRows).toBe(1);
    expect(edited.heldForComparison).toBe(2); // the edited file and its row
    expect(edited.ops).toMatchObject([{ kind: 'put', path: 'd1/f1.txt', created: false }]);
    edited.commit();
    expect(writes).toBe(1); // its row, and only its row
    // A synced file deleted: its delete carries the revision from its whole row.
    await fsp.rm(nodePath.join(root, 'd2', 'f2.txt'));
    const deleted = await scan(root, journal, new IgnoreRules(), { now: later });
    expect(deleted.ops).toContainEqual({ kind: 'delete', path: 'd2/f2.txt', revision: 'rev-d2/f2.txt' });
    journal.close();
  });

  it('takes a turn of the event loop at least every STAT_SLICE entries', async () => {
    const { root, journal } = await folderWith(3 * STAT_SLICE);
    let turns = 0;
    let scanning = true;
    const tick = (): void => {
      turns += 1;
      if (scanning) setImmediate(tick);
    };
    setImmediate(tick);
    const r = await scan(root, journal, new IgnoreRules(), { now: later });
    scanning = false;
    expect(r.scannedFiles).toBe(3 * STAT_SLICE + 3);
    expect(turns).toBeGreaterThanOrEqual(3);
    journal.close();
  });

  it('hashes small files on the event loop through one buffer, larger ones through the pool', async () => {
    const { root, journal } = await folderWith(40);
    const big = nodePath.join(root, 'big.bin'); // past the on-loop size: read through the pool
    await fsp.writeFile(big, Buffer.alloc(300 * 1024, 7));
    await fsp.utimes(big, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
    const paths = new LocalPaths(root);
    const r = await scan(root, journal, new IgnoreRules(), { now: later, paths });
    expect(r.hashedFiles).toBe(41);
    const puts = new Map(r.ops.flatMap((o) => (o.kind === 'put' ? [[o.path, o.hash]] : [])));
    expect(puts.get('d1/f4.txt')).toBe(createHash('sha256').update('content 4').digest('hex'));
    expect(puts.get('big.bin')).toBe(
      createHash('sha256')
        .update(Buffer.alloc(300 * 1024, 7))
        .digest('hex'),
    );
    // 44 stats and 40 hashes on the loop, none sent to the pool (the big file is not asked).
    expect(paths.gate.calls).toEqual({ onLoop: 44 + 40, inPool: 0 });
    journal.close();
  });

  it('compares with the same index rows a whole-row read gives, a page at a time', async () => {
    const { root, journal } = await folderWith(25);
    (await scan(root, journal, new IgnoreRules(), { now: later })).commit();
    journal.upsertFile({
      ...(journal.getFile('d0/f0.txt') as NonNullable<ReturnType<Journal['getFile']>>),
      syncedRev: 'r',
    });
    for (const dir of ['', 'd1', 'nothing']) {
      const index = [];
      for await (const r of journal.indexUnderPaged(dir, 4)) index.push(r);
      expect(index, dir).toEqual(
        journal.filesUnder(dir).map((r) => ({
          path: r.path,
          kind: r.kind,
          size: r.size,
          mtimeNs: r.mtimeNs,
          inode: r.inode,
          hashed: r.hash !== null,
          synced: r.syncedRev !== null,
        })),
      );
    }
    journal.close();
  });
});

describe('ignore rules', () => {
  it('forget what they said of a folder once the patterns change', () => {
    const rules = new IgnoreRules();
    expect(rules.ignores('build/out/a.txt')).toBe(false);
    // `build` as a name, but not as a folder: only the check of each folder above sees it.
    rules.setExtraPatterns(['build', '!build/']);
    expect(rules.ignores('build/out/a.txt')).toBe(true);
    rules.setExtraPatterns([]);
    expect(rules.ignores('build/out/a.txt')).toBe(false);
  });
});

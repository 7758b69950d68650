/**
 * Two reads a pass makes, kept off the table scan (issue #16): the file count (trigger-kept,
 * sql/006) must equal COUNT(*) after any mix of writes, and the rows clashing by case with a
 * path come from one seek of the case-fold index (on a disk that folds case), not a read of a
 * folder's rows. Counted:
 * the figure against COUNT(*) after every step of a random schedule, and the query plans.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { type FileRow, Journal } from '../src/journal/journal.ts';
import { fileRow, journalFile } from './support/journal-rig.ts';

let journal: Journal | undefined;
afterEach(() => {
  journal?.close();
  journal = undefined;
});

function open(): Journal {
  journal = new Journal(journalFile('weft-journal-counts-'));
  return journal;
}

function row(path: string, kind: 'file' | 'dir'): FileRow {
  return fileRow(path, { kind, hash: kind === 'file' ? 'h' : null });
}

function countStar(j: Journal): number {
  return Number(
    (j.db.prepare("SELECT COUNT(*) AS n FROM files WHERE kind = 'file'").get() as { n: bigint }).n,
  );
}

function plan(j: Journal, sql: string): string {
  return (j.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[])
    .map((r) => r.detail)
    .join('; ');
}

describe('journal file count', () => {
  it('equalsCountStarAfterMixedWrites', () => {
    const j = open();
    let seed = 7;
    const rand = (n: number): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed % n;
    };
    const paths = ['a', 'a/b', 'a/b/c.txt', 'a/d.txt', 'e.txt', 'f', 'f/g.txt', 'f/h', 'f/h/i.txt', 'j.txt'];
    for (let step = 0; step < 400; step++) {
      const p = paths[rand(paths.length)] as string;
      const choice = rand(6);
      if (choice <= 1) j.upsertFile(row(p, 'file'));
      else if (choice === 2)
        j.upsertFile(row(p, 'dir')); // may change a file's kind
      else if (choice === 3) j.deleteFile(p);
      else if (choice === 4) j.deleteFilesUnder(p);
      else j.moveFiles(p, paths[rand(paths.length)] as string);
      expect(j.fileCount(), `step ${step}`).toBe(countStar(j));
    }
    expect(countStar(j)).toBeGreaterThan(0);
  });

  it('readsOneRowNotTheTable', () => {
    const j = open();
    expect(plan(j, 'SELECT n FROM file_count WHERE id = 0')).toMatch(
      /SEARCH file_count USING INTEGER PRIMARY KEY/,
    );
  });
});

describe('case-fold twins', () => {
  it('findsNamesClashingByCaseThroughTheIndex', () => {
    const j = open();
    // Made on a disk that folds case (SyncContext); rows already there are indexed too.
    j.upsertFile(row('Docs', 'dir'));
    expect(plan(j, "SELECT path FROM files WHERE weft_case_fold(path) = 'x' AND path <> 'x'")).toMatch(
      /SCAN files/,
    );
    j.ensureCaseFoldIndex();
    for (const p of [
      'Docs',
      'Docs/Report.txt',
      'Docs/report.TXT',
      'Docs/other.txt',
      'docs',
      'Straße.md',
      'Caf\u00e9',
    ])
      j.upsertFile(row(p, p.includes('.') ? 'file' : 'dir'));
    expect(j.caseFoldTwins('Docs/REPORT.txt').sort()).toEqual(['Docs/Report.txt', 'Docs/report.TXT']);
    expect(j.caseFoldTwins('Docs/Report.txt')).toEqual(['Docs/report.TXT']); // itself left out
    expect(j.caseFoldTwins('DOCS')).toEqual(expect.arrayContaining(['Docs', 'docs']));
    expect(j.caseFoldTwins('STRASSE.md')).toEqual(['Straße.md']); // ß folds to ss
    expect(j.caseFoldTwins('CAFE\u0301')).toEqual(['Caf\u00e9']); // NFC first
    expect(j.caseFoldTwins('Docs/none.txt')).toEqual([]);
    expect(plan(j, "SELECT path FROM files WHERE weft_case_fold(path) = 'x' AND path <> 'x'")).toMatch(
      /USING INDEX files_case_fold/,
    );
  });
});

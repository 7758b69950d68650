/**
 * What the journal's tests share: a journal file in a temporary folder (removed when the test
 * ends) and a file row with plain defaults, so that a test spells out only the fields it is about.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import type { FileRow } from '../../src/journal/journal.ts';

/** The path of a new journal in a temporary folder named after `prefix`, removed when the calling test ends. */
export function journalFile(prefix = 'weft-journal-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, 'journal.db');
}

/** A file row: one byte, mtime and inode 1, hash `h`, never synced, no signature — `fields` over these. */
export function fileRow(path: string, fields: Partial<FileRow> = {}): FileRow {
  return {
    path,
    kind: 'file',
    size: 1,
    mtimeNs: 1n,
    inode: 1n,
    hash: 'h',
    syncedRev: null,
    syncedHash: null,
    signature: null,
    signatureBlock: null,
    ...fields,
  };
}

/**
 * A namespace's used bytes on SQLite (store/sqlite.ts usedBytes, issue #16): summed once,
 * then kept by every change applied, so the quota's two reads per bundle stop being a SUM
 * over the whole namespace each (quadratic through a 1,000,000-file upload). Statements are
 * counted; the kept figure is checked against a fresh SUM after creates, overwrites, a
 * move, deletes and a folder delete, and against another connection's writes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ChangeInput } from '../src/store/metadata.ts';
import { SqliteMetadataStore } from '../src/store/sqlite.ts';

const file = (path: string, size: number, absent = false): ChangeInput => ({
  type: 'upsert',
  ...(absent ? { absent: true as const } : {}),
  entry: { path, kind: 'file', size, mtimeMs: 1, sha256: 'a'.repeat(64), tier: 'small', fsRevision: 'f' },
});
const dir = (path: string): ChangeInput => ({
  type: 'upsert',
  entry: { path, kind: 'dir', size: 0, mtimeMs: 1, fsRevision: 'f' },
});

describe('sqlite used bytes', () => {
  it('sums a namespace once and keeps the figure through every change', async () => {
    const base = mkdtempSync(join(tmpdir(), 'weft-usage-'));
    const run: string[] = [];
    const file0 = join(base, 'metadata.sqlite');
    const store = new SqliteMetadataStore(file0, { trace: (sql) => run.push(sql) });
    const sums = (): number => run.filter((s) => s.includes('SUM(size)')).length;
    /** What a fresh SUM says (another instance, nothing cached). */
    const truth = async (): Promise<number> => {
      const other = new SqliteMetadataStore(file0);
      try {
        return await other.usedBytes('u');
      } finally {
        await other.close();
      }
    };
    try {
      await store.ensureUser('u', 1);
      expect(await store.usedBytes('u')).toBe(0);
      let seq = 2;
      for (let b = 0; b < 20; b++)
        await store.applyChanges(
          'u',
          [dir(`d${b}`), ...Array.from({ length: 50 }, (_, i) => file(`d${b}/f${i}`, 100 + i, true))],
          'd',
          seq++,
        );
      await store.applyChanges('u', [dir('e'), file('d0/f1', 7), file('e/g', 3)], 'd', seq++, true);
      await store.applyChanges('u', [{ type: 'move', from: 'd1', path: 'e/d1' }], 'd', seq++);
      await store.applyChanges(
        'u',
        [
          { type: 'delete', path: 'd2/f3' },
          { type: 'delete', path: 'e' },
        ],
        'd',
        seq++,
      );
      const asked = await store.usedBytes('u');
      // One SUM, at the first question; every change since kept the figure.
      expect(sums()).toBe(1);
      expect(asked).toBe(await truth());
      // Another connection's write: summed again.
      const other = new SqliteMetadataStore(file0);
      await other.applyChanges('u', [file('x', 1000)], 'd', seq++);
      await other.close();
      expect(await store.usedBytes('u')).toBe(asked + 1000);
      expect(sums()).toBe(2);
    } finally {
      await store.close();
      rmSync(base, { recursive: true, force: true });
    }
  });
});

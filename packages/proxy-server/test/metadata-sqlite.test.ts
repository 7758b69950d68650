/** The metadata store conformance suite on SQLite: two instances on one file (WAL). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ChangeInput } from '../src/store/metadata.ts';
import { SqliteMetadataStore } from '../src/store/sqlite.ts';
import { runMetadataConformance } from './metadata-conformance.ts';

runMetadataConformance({
  name: 'sqlite',
  notifiesOtherInstances: false,
  open: async () => {
    const dir = mkdtempSync(join(tmpdir(), 'weft-meta-'));
    const a = new SqliteMetadataStore(join(dir, 'metadata.sqlite'));
    const b = new SqliteMetadataStore(join(dir, 'metadata.sqlite'));
    return {
      a,
      b,
      close: async () => {
        await a.close();
        await b.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
});

describe('sqlite applyChanges', () => {
  it('insertsAnAbsentRowWithoutLookingItUp', async () => {
    // A bundle's new files: the caller looked each path up under the scheduler's slot and
    // found nothing (issue #16: the store looked again per file, one SELECT each).
    const dir = mkdtempSync(join(tmpdir(), 'weft-meta-'));
    const run: string[] = [];
    const store = new SqliteMetadataStore(join(dir, 'metadata.sqlite'), { trace: (sql) => run.push(sql) });
    try {
      await store.ensureUser('u', 1);
      const file = (path: string, absent: boolean): ChangeInput => ({
        type: 'upsert',
        ...(absent ? { absent: true as const } : {}),
        entry: {
          path,
          kind: 'file',
          size: 1,
          mtimeMs: 1,
          sha256: 'a'.repeat(64),
          tier: 'small',
          fsRevision: 'f',
        },
      });
      const lookups = (): number => run.filter((s) => s.startsWith('SELECT * FROM entries')).length;
      run.length = 0;
      await store.applyChanges('u', [file('a', true), file('b', true), file('c', true)], 'd', 2);
      expect(lookups()).toBe(0);
      expect((await store.listEntries('u', '', true)).map((e) => e.path)).toEqual(['a', 'b', 'c']);
      // Without the hint (an overwrite, a single write) the row is still read: its version is kept.
      run.length = 0;
      await store.applyChanges('u', [file('a', false)], 'd', 3, true);
      expect(lookups()).toBe(1);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

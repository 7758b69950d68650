/** The metadata store conformance suite on SQLite: two instances on one file (WAL). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

/** The placement store suite on the SQLite store (the embedded default); PostgreSQL: proxy-server/test/placement-postgres.test.ts. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runPlacementStoreSuite } from '../src/conformance/placement-store.ts';
import { SqlitePlacementStore } from '../src/redundant/store.ts';

runPlacementStoreSuite('SQLite', async () =>
  SqlitePlacementStore.open(mkdtempSync(join(tmpdir(), 'weft-placement-suite-'))),
);

import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = join(import.meta.dirname, '../src');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? sources(join(dir, d.name)) : d.name.endsWith('.ts') ? [join(dir, d.name)] : [],
  );
}

describe('the metadata store is used through its interface (SQLite or PostgreSQL)', () => {
  it('onlyTheCompositionRootAndThePackageBarrelImportTheSqliteImplementation', () => {
    const importers = sources(SRC)
      .filter((f) => /from '(\.\.?\/)+(store\/)?sqlite\.ts'/.test(readFileSync(f, 'utf8')))
      .map((f) => relative(SRC, f))
      .sort();
    expect(importers).toEqual(['index.ts', 'server.ts']);
  });

  it('onlyTheCompositionRootAndThePackageBarrelImportThePostgresImplementation', () => {
    const importers = sources(SRC)
      .filter((f) => /from '(\.\.?\/)+(store\/)?postgres\.ts'/.test(readFileSync(f, 'utf8')))
      .map((f) => relative(SRC, f))
      .sort();
    expect(importers).toEqual(['index.ts', 'server.ts']);
  });
});

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { DECISIONS, type Observation, decide } from '../src/decisions.ts';

const hashFor = (state: string, base: string | undefined, other?: string): string | undefined => {
  switch (state) {
    case 'same':
      return base;
    case 'changed':
    case 'new':
      return other ?? 'H-local';
    default:
      return undefined;
  }
};

describe('sync decision table', () => {
  const contentRows = DECISIONS.filter((r) => r.hint === undefined);
  const hintRows = DECISIONS.filter((r) => r.hint !== undefined);

  it.each(contentRows)('$id: base=$base local=$local remote=$remote equal=$equal → $action', (row) => {
    const baseHash = row.base ? 'H-base' : undefined;
    const localHash = hashFor(row.local ?? 'absent', baseHash);
    const remoteHash = hashFor(row.remote ?? 'absent', baseHash, row.equal === true ? localHash : 'H-remote');
    expect(decide({ baseHash, localHash, remoteHash }).id).toBe(row.id);
  });

  it.each(hintRows)('$id: hint $hint → $action, whatever the contents', (row) => {
    for (const o of [
      { baseHash: undefined, localHash: undefined, remoteHash: undefined },
      { baseHash: 'A', localHash: 'B', remoteHash: 'C' },
      { baseHash: 'A', localHash: 'A', remoteHash: 'A' },
    ] satisfies Observation[]) {
      expect(decide({ ...o, hint: row.hint }).id).toBe(row.id);
    }
  });

  it('every row is reachable, by exactly one kind of observation', () => {
    const reached = new Set<string>();
    const hashes = [undefined, 'A', 'B', 'C'];
    for (const baseHash of hashes)
      for (const localHash of hashes)
        for (const remoteHash of hashes) reached.add(decide({ baseHash, localHash, remoteHash }).id);
    for (const r of hintRows)
      reached.add(
        decide({ baseHash: undefined, localHash: undefined, remoteHash: undefined, hint: r.hint }).id,
      );
    expect([...reached].sort()).toEqual(DECISIONS.map((r) => r.id).sort());
    expect(new Set(DECISIONS.map((r) => r.id)).size).toBe(DECISIONS.length);
    expect(new Set(hintRows.map((r) => r.hint)).size).toBe(hintRows.length);
  });

  it('covers every combination exactly once', () => {
    const hashes = [undefined, 'A', 'B', 'C'];
    for (const baseHash of hashes) {
      for (const localHash of hashes) {
        for (const remoteHash of hashes) {
          const row = decide({ baseHash, localHash, remoteHash });
          expect(row).toBeDefined();
          if (row.action === 'conflict') {
            // Syncthing's rule: both sides changed since the base, and to different content.
            expect(localHash).not.toBe(baseHash);
            expect(remoteHash).not.toBe(baseHash);
            expect(localHash).not.toBe(remoteHash);
            expect(localHash && remoteHash).toBeTruthy();
          }
        }
      }
    }
  });

  it('never loses an edit to a delete', () => {
    expect(decide({ baseHash: 'A', localHash: undefined, remoteHash: 'B' }).action).toBe('download');
    expect(decide({ baseHash: 'A', localHash: 'B', remoteHash: undefined }).action).toBe('upload');
  });

  it('docs/sync-decisions.md lists every row with its action', () => {
    const doc = readFileSync(
      fileURLToPath(new URL('../../../docs/sync-decisions.md', import.meta.url)),
      'utf8',
    );
    for (const row of DECISIONS) {
      expect(doc, row.id).toMatch(new RegExp(`\\|\\s*${row.id}\\s*\\|[^\\n]*\\|\\s*${row.action}\\s*\\|`));
    }
  });

  it('docs/sync-decisions.md lists exactly the rows the code has, in order', () => {
    const doc = readFileSync(
      fileURLToPath(new URL('../../../docs/sync-decisions.md', import.meta.url)),
      'utf8',
    );
    const listed = [...doc.matchAll(/^\|\s*(D\d+)\s*\|/gm)].map((m) => m[1]);
    expect(listed).toEqual(DECISIONS.map((r) => r.id));
  });
});

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { DECISIONS, type Hint, type Observation, decide, stated } from '../src/decisions.ts';

/** An observation by its three contents alone. */
const contents = (
  base: string | undefined,
  local: string | undefined,
  remote: string | undefined,
): Observation => ({
  path: 'p',
  base,
  local,
  remote,
  kind: {},
});

/**
 * Observations that reach a hint row with these contents: stated outright, or (moves and
 * kind changes) read from the move hint and the kinds.
 */
function withHint(o: Observation, hint: Hint): Observation[] {
  switch (hint) {
    case 'moved':
      return [{ ...o, moveHint: { from: 'q', sourceHere: true, destinationFree: true } }];
    case 'moved-blocked':
      return [
        { ...o, moveHint: { from: 'q', sourceHere: false, destinationFree: true } },
        { ...o, moveHint: { from: 'q', sourceHere: true, destinationFree: false } },
      ];
    case 'kind-changed':
      return [
        { ...o, kind: { base: 'file', remote: 'dir' } },
        { ...o, kind: { base: 'dir', local: 'dir', remote: 'file' } },
      ];
    case 'kind-clash':
      return [
        { ...o, kind: { local: 'dir', remote: 'file' } },
        { ...o, kind: { local: 'file', remote: 'dir' } },
      ];
    default:
      return [{ ...o, hint }];
  }
}

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
    expect(decide(contents(baseHash, localHash, remoteHash)).id).toBe(row.id);
  });

  it.each(hintRows)('$id: hint $hint → $action, whatever the contents', (row) => {
    for (const o of [
      contents(undefined, undefined, undefined),
      contents('A', 'B', 'C'),
      contents('A', 'A', 'A'),
    ])
      for (const seen of withHint(o, row.hint as Hint)) expect(decide(seen).id).toBe(row.id);
  });

  it('a stated hint outranks a move, a move outranks a kind change', () => {
    const move = { from: 'q', sourceHere: true, destinationFree: true };
    const kind = { base: 'file', remote: 'dir' } as const;
    expect(decide({ ...stated('p', 'refused'), moveHint: move, kind }).id).toBe('D26');
    expect(decide({ ...contents('A', 'A', 'B'), moveHint: move, kind }).id).toBe('D20');
    expect(decide({ ...contents('A', 'A', 'B'), kind }).id).toBe('D22');
    // The same kind on every side, or a base: no clash.
    expect(decide({ ...contents(undefined, 'A', 'B'), kind: { local: 'file', remote: 'file' } }).id).toBe(
      'D5',
    );
    expect(
      decide({ ...contents('A', 'A', 'B'), kind: { base: 'file', local: 'dir', remote: 'file' } }).id,
    ).toBe('D8');
  });

  it('every row is reachable, by exactly one kind of observation', () => {
    const reached = new Set<string>();
    const hashes = [undefined, 'A', 'B', 'C'];
    for (const baseHash of hashes)
      for (const localHash of hashes)
        for (const remoteHash of hashes) reached.add(decide(contents(baseHash, localHash, remoteHash)).id);
    for (const r of hintRows)
      for (const seen of withHint(contents(undefined, undefined, undefined), r.hint as Hint))
        reached.add(decide(seen).id);
    expect([...reached].sort()).toEqual(DECISIONS.map((r) => r.id).sort());
    expect(new Set(DECISIONS.map((r) => r.id)).size).toBe(DECISIONS.length);
    expect(new Set(hintRows.map((r) => r.hint)).size).toBe(hintRows.length);
  });

  it('covers every combination exactly once', () => {
    const hashes = [undefined, 'A', 'B', 'C'];
    for (const baseHash of hashes) {
      for (const localHash of hashes) {
        for (const remoteHash of hashes) {
          const row = decide(contents(baseHash, localHash, remoteHash));
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
    expect(decide(contents('A', undefined, 'B')).action).toBe('download');
    expect(decide(contents('A', 'B', undefined)).action).toBe('upload');
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

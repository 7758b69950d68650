import { describe, expect, it } from 'vitest';
import { decideWrite, deleteConflict, type WriteTarget } from '@weft/wire';

const SHA = 'a'.repeat(64);
const OTHER = 'b'.repeat(64);
const current: Record<string, WriteTarget | undefined> = {
  nothing: undefined,
  folder: { kind: 'dir', revision: 'r1' },
  sameFile: { kind: 'file', revision: 'r1', sha256: SHA },
  otherFile: { kind: 'file', revision: 'r1', sha256: OTHER },
  // A file whose hash the index does not know (recovered without one): other content.
  unhashedFile: { kind: 'file', revision: 'r1' },
};
const bases: Record<string, string | null | undefined> = {
  unconditional: undefined,
  mustNotExist: null,
  itsRevision: 'r1',
  anotherRevision: 'r2',
};

// Every input combination and its decision, written out (docs/formats/api.md, write-rule.ts).
const expected: Record<string, Record<string, string>> = {
  nothing: { unconditional: 'write', mustNotExist: 'write', itsRevision: 'write', anotherRevision: 'write' },
  folder: {
    unconditional: 'refuse-folder',
    mustNotExist: 'refuse-folder',
    itsRevision: 'refuse-folder',
    anotherRevision: 'refuse-folder',
  },
  sameFile: {
    unconditional: 'unchanged',
    mustNotExist: 'unchanged',
    itsRevision: 'unchanged',
    anotherRevision: 'unchanged',
  },
  otherFile: {
    unconditional: 'write',
    mustNotExist: 'conflict',
    itsRevision: 'write',
    anotherRevision: 'conflict',
  },
  unhashedFile: {
    unconditional: 'write',
    mustNotExist: 'conflict',
    itsRevision: 'write',
    anotherRevision: 'conflict',
  },
};

describe('the write rule shared by single writes and bundle entries', () => {
  for (const [cur, row] of Object.entries(expected)) {
    for (const [base, action] of Object.entries(row)) {
      it(`${cur} × ${base} → ${action}`, () => {
        const d = decideWrite(current[cur], bases[base], SHA);
        expect(d.action).toBe(action);
        if (d.action === 'conflict') {
          expect(d.serverRevision).toBe('r1');
          expect(d.baseRevision).toBe(bases[base]);
        }
      });
    }
  }
});

describe('own contents: a file holding content the writer sent and never heard back about', () => {
  const MINE = 'c'.repeat(64);
  const mine: WriteTarget = { kind: 'file', revision: 'r1', sha256: MINE };

  it('is the writer’s base whatever base it names: written over, no conflict', () => {
    for (const base of [null, 'r0', 'r2', undefined])
      expect(decideWrite(mine, base, SHA, [OTHER, MINE]).action).toBe('write');
    expect(deleteConflict('a.txt', mine, 'r0', [MINE])).toBeUndefined();
  });

  it('changes nothing when the file there holds other content, or none is named', () => {
    expect(decideWrite(mine, null, SHA, [OTHER]).action).toBe('conflict');
    expect(decideWrite(mine, 'r0', SHA, []).action).toBe('conflict');
    expect(decideWrite(mine, 'r0', SHA).action).toBe('conflict');
    // A file without a known hash is never taken for ours.
    expect(decideWrite({ kind: 'file', revision: 'r1' }, 'r0', SHA, [MINE]).action).toBe('conflict');
    expect(deleteConflict('a.txt', mine, 'r0', [OTHER])?.kind).toBe('delete-modified');
    // A folder stays in the way.
    expect(decideWrite({ kind: 'dir', revision: 'r1' }, null, SHA, [MINE]).action).toBe('refuse-folder');
  });
});

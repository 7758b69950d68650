/** Move detection over one batch of changes (move-detect.ts, pure). */
import { describe, expect, it } from 'vitest';
import type { Entry } from '@weft/providers';
import type { Seen, SyntheticChange } from '../src/context.ts';
import { detectMoves, sameAsSeen } from '../src/move-detect.ts';

const file = (path: string, revision: string, hash?: string): Entry => ({
  path,
  kind: 'file',
  size: 1,
  modifiedMs: 0,
  revision,
  ...(hash ? { hash: { algorithm: 'sha256', value: hash } } : {}),
});
const dir = (path: string): Entry => ({ path, kind: 'dir', size: 0, modifiedMs: 0, revision: '' });
const up = (e: Entry): SyntheticChange => ({ type: 'upsert', path: e.path, entry: e });
const del = (path: string): SyntheticChange => ({ type: 'delete', path });
const seenFile = (revision: string, hash?: string): Seen => ({
  kind: 'file',
  revision,
  sha256: `sha-${revision}`,
  ...(hash ? { hash } : {}),
});
const seenDir: Seen = { kind: 'dir', revision: '', sha256: '' };

describe('detectMoves', () => {
  it('a delete and an upsert of the same revision is a file move, in either order', () => {
    const seen = new Map([['a.txt', seenFile('r1')]]);
    expect(detectMoves(seen, [del('a.txt'), up(file('b.txt', 'r1'))])).toEqual(
      new Map([[0, { to: 'b.txt', kind: 'file', consumed: new Set([1]) }]]),
    );
    // "Latest state" feeds may list the new path first.
    expect(detectMoves(seen, [up(file('b.txt', 'r1')), del('a.txt')])).toEqual(
      new Map([[1, { to: 'b.txt', kind: 'file', consumed: new Set([0]) }]]),
    );
  });

  it('a provider hash matches when the revision changed with the move', () => {
    const seen = new Map([['a.txt', seenFile('r1', 'h1')]]);
    expect(detectMoves(seen, [del('a.txt'), up(file('b.txt', 'r2', 'h1'))]).get(0)?.to).toBe('b.txt');
    expect(detectMoves(seen, [del('a.txt'), up(file('b.txt', 'r2', 'h2'))]).size).toBe(0);
  });

  it('an upsert at a path already seen is an edit, not the move target', () => {
    const seen = new Map([
      ['a.txt', seenFile('r1')],
      ['b.txt', seenFile('r9')],
    ]);
    expect(detectMoves(seen, [del('a.txt'), up(file('b.txt', 'r1'))]).size).toBe(0);
  });

  it('a folder moved whole: every seen file unchanged under the new folder, sub-folders along', () => {
    const seen = new Map<string, Seen>([
      ['d', seenDir],
      ['d/x.txt', seenFile('rx')],
      ['d/s', seenDir],
      ['d/s/y.txt', seenFile('ry')],
    ]);
    const changes = [
      del('d'),
      up(dir('e')),
      up(dir('e/s')),
      up(file('e/x.txt', 'rx')),
      up(file('e/s/y.txt', 'ry')),
    ];
    expect(detectMoves(seen, changes)).toEqual(
      new Map([[0, { to: 'e', kind: 'dir', consumed: new Set([1, 3, 4, 2]) }]]),
    );
  });

  it('a folder whose files did not all arrive unchanged is not a move', () => {
    const seen = new Map<string, Seen>([
      ['d', seenDir],
      ['d/x.txt', seenFile('rx')],
      ['d/y.txt', seenFile('ry')],
    ]);
    const edited = [del('d'), up(dir('e')), up(file('e/x.txt', 'rx')), up(file('e/y.txt', 'changed'))];
    expect(detectMoves(seen, edited).size).toBe(0);
    const missing = [del('d'), up(dir('e')), up(file('e/x.txt', 'rx'))];
    expect(detectMoves(seen, missing).size).toBe(0);
  });

  it('sameAsSeen: kinds must agree; folders always match; files by revision or hash', () => {
    expect(sameAsSeen(undefined, file('a', 'r1'))).toBe(false);
    expect(sameAsSeen(seenDir, file('a', 'r1'))).toBe(false);
    expect(sameAsSeen(seenDir, dir('a'))).toBe(true);
    expect(sameAsSeen(seenFile('r1'), file('a', 'r1'))).toBe(true);
    expect(sameAsSeen({ kind: 'file', revision: '', sha256: 'x' }, file('a', ''))).toBe(false);
  });
});

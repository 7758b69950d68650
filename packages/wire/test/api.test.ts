import { describe, expect, it } from 'vitest';
import { EntryPath, DirPath, FileOp, OpsRequest, ChangeRecord, EnrolRequest } from '../src/api.ts';
import { conflictedCopyPath } from '../src/conflict.ts';
import { dirHash, fileLeafHash, dirSelfHash } from '../src/merkle.ts';

describe('api schemas', () => {
  it('acceptCanonicalPathsOnly', () => {
    expect(EntryPath.safeParse('a/b.txt').success).toBe(true);
    for (const bad of ['', '/a', 'a/../b', 'a//b', '.', 'x\0y', 'e\u0301', 'a/']) {
      expect(EntryPath.safeParse(bad).success).toBe(false);
    }
    expect(DirPath.safeParse('').success).toBe(true);
  });

  it('validateOps', () => {
    expect(FileOp.safeParse({ op: 'move', from: 'a', to: 'b' }).success).toBe(true);
    expect(FileOp.safeParse({ op: 'delete', path: 'a', baseRevision: null }).success).toBe(true);
    expect(FileOp.safeParse({ op: 'commit', path: 'a', sha256: 'x', size: 1, mtimeMs: 0 }).success).toBe(
      false,
    );
    expect(FileOp.safeParse({ op: 'rmrf', path: 'a' }).success).toBe(false);
    expect(OpsRequest.safeParse({ ops: [] }).success).toBe(false);
    expect(ChangeRecord.safeParse({ seq: 1, type: 'delete', path: 'a' }).success).toBe(true);
    expect(EnrolRequest.safeParse({ user: 'Alice', deviceName: 'x' }).success).toBe(false);
  });
});

describe('conflictedCopyPath', () => {
  it('namesTheCopyLikeDropbox', () => {
    const when = new Date(Date.UTC(2024, 0, 2, 3, 4, 5));
    expect(conflictedCopyPath('docs/report.final.pdf', when, 'laptop')).toBe(
      'docs/report.final (conflicted copy 2024-01-02 030405 from laptop).pdf',
    );
    expect(conflictedCopyPath('.bashrc', when, 'a/b')).toBe(
      '.bashrc (conflicted copy 2024-01-02 030405 from a-b)',
    );
  });
});

describe('merkle', () => {
  it('followsEq9', () => {
    const f = fileLeafHash('d/a', 'ab'.repeat(32));
    const sub = dirHash('d/s', []);
    expect(Buffer.from(sub)).toEqual(Buffer.from(dirSelfHash('d/s')));
    const h1 = dirHash('d', [
      { name: 's', kind: 'dir', hash: sub },
      { name: 'a', kind: 'file', hash: f },
    ]);
    const h2 = dirHash('d', [
      { name: 'a', kind: 'file', hash: f },
      { name: 's', kind: 'dir', hash: sub },
    ]);
    expect(Buffer.from(h1)).toEqual(Buffer.from(h2));
    expect(Buffer.from(fileLeafHash('d/b', 'ab'.repeat(32)))).not.toEqual(Buffer.from(f));
  });
});

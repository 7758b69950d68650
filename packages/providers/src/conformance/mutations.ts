/**
 * Conditional writes and removes, folders (mkdir idempotent, over a file, a write over a
 * folder), removal, and server-side move and copy of files and folders.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { AlreadyExistsError, InvalidPathError, NotFoundError, PreconditionFailedError } from '../errors.ts';
import { hasServerSideCopy, hasServerSideMove } from '../features.ts';
import { sha, readAll, listAll, expectReject, type SuiteContext } from './support.ts';

export function checkMutations({ fresh, test }: SuiteContext): void {
  test('conditionalWriteRejectsStaleRev', async () => {
    const p = await fresh();
    const v1 = await p.write('c.txt', Buffer.from('one'));
    await p.write('c.txt', Buffer.from('two, newer'));
    const err = await expectReject(
      p.write('c.txt', Buffer.from('stale edit'), { ifRevision: v1.revision }),
      PreconditionFailedError,
    );
    expect(err.message).toBeTruthy();
    expect((await readAll(p, 'c.txt')).toString()).toBe('two, newer');
    await expectReject(p.write('absent.txt', Buffer.from('x'), { ifRevision: v1.revision }), NotFoundError);
  });

  test('conditionalWriteAcceptsCurrentRev', async () => {
    const p = await fresh();
    const v1 = await p.write('c.txt', Buffer.from('one'));
    const v2 = await p.write('c.txt', Buffer.from('two'), { ifRevision: v1.revision });
    expect(v2.revision).not.toBe(v1.revision);
    expect((await readAll(p, 'c.txt')).toString()).toBe('two');
  });

  test('mustNotExistOnExisting', async () => {
    const p = await fresh();
    await p.write('once.txt', Buffer.from('first'));
    await expectReject(p.write('once.txt', Buffer.from('second'), { ifNotExists: true }), AlreadyExistsError);
    expect((await readAll(p, 'once.txt')).toString()).toBe('first');
    await p.write('new.txt', Buffer.from('fine'), { ifNotExists: true });
    expect((await readAll(p, 'new.txt')).toString()).toBe('fine');
  });

  test('mkdirIdempotent', async () => {
    const p = await fresh();
    await p.mkdir('x/y/z');
    await p.mkdir('x/y/z');
    await p.mkdir('x');
    expect((await p.stat('x/y/z')).kind).toBe('dir');
    expect((await p.stat('x/y')).kind).toBe('dir');
    expect(await listAll(p, 'x/y/z')).toEqual([]);
  });

  test('mkdirOverFile', async () => {
    const p = await fresh();
    await p.write('f', Buffer.from('file'));
    await expectReject(p.mkdir('f'), AlreadyExistsError);
    expect((await readAll(p, 'f')).toString()).toBe('file');
  });

  test('writeOverFolder', async () => {
    const p = await fresh();
    await p.write('d/inner.txt', Buffer.from('in'));
    await expectReject(p.write('d', Buffer.from('file over folder')), AlreadyExistsError);
    await p.write('plain', Buffer.from('file'));
    await expectReject(p.write('plain/child.txt', Buffer.from('under a file')), AlreadyExistsError);
    expect((await readAll(p, 'd/inner.txt')).toString()).toBe('in');
    expect((await readAll(p, 'plain')).toString()).toBe('file');
  });

  test('removeMissing', async () => {
    const p = await fresh();
    await expectReject(p.remove('ghost.txt'), NotFoundError);
  });

  test('removeFolderRecursive', async () => {
    const p = await fresh();
    await p.write('keep.txt', Buffer.from('k'));
    await p.write('gone/a.txt', Buffer.from('a'));
    await p.write('gone/sub/b.txt', Buffer.from('b'));
    await p.mkdir('gone/empty');
    await p.remove('gone');
    await expectReject(p.stat('gone'), NotFoundError);
    await expectReject(p.stat('gone/sub/b.txt'), NotFoundError);
    expect((await listAll(p, '', true)).map((e) => e.path)).toEqual(['keep.txt']);
    await p.remove('keep.txt');
    expect(await listAll(p, '', true)).toEqual([]);
  });

  test('conditionalRemove', async () => {
    const p = await fresh();
    const v1 = await p.write('r.txt', Buffer.from('one'));
    const v2 = await p.write('r.txt', Buffer.from('two'));
    await expectReject(p.remove('r.txt', { ifRevision: v1.revision }), PreconditionFailedError);
    expect((await readAll(p, 'r.txt')).toString()).toBe('two');
    await p.remove('r.txt', { ifRevision: v2.revision });
    await expectReject(p.stat('r.txt'), NotFoundError);
  });

  test('moveFile', async () => {
    const p = await fresh();
    if (!hasServerSideMove(p)) throw new Error('provider declares no move: declare the gap with a reason');
    await p.write('m/a.txt', Buffer.from('payload'));
    await p.write('m/taken.txt', Buffer.from('taken'));
    const moved = await p.move('m/a.txt', 'n/b.txt');
    expect(moved.path).toBe('n/b.txt');
    await expectReject(p.stat('m/a.txt'), NotFoundError);
    expect((await readAll(p, 'n/b.txt')).toString()).toBe('payload');
    await expectReject(p.move('n/b.txt', 'm/taken.txt'), AlreadyExistsError);
    await p.move('n/b.txt', 'm/taken.txt', { overwrite: true });
    expect((await readAll(p, 'm/taken.txt')).toString()).toBe('payload');
    await expectReject(p.move('nope.txt', 'x.txt'), NotFoundError);
  });

  test('moveFolder', async () => {
    const p = await fresh();
    if (!hasServerSideMove(p) || p.features.move !== 'files-and-folders') {
      throw new Error('provider declares no folder move: declare the gap with a reason');
    }
    await p.write('src/a.txt', Buffer.from('a'));
    await p.write('src/deep/b.txt', Buffer.from('b'));
    await p.move('src', 'dst/renamed');
    await expectReject(p.stat('src'), NotFoundError);
    expect((await readAll(p, 'dst/renamed/deep/b.txt')).toString()).toBe('b');
    expect((await listAll(p, '', true)).map((e) => e.path).sort()).toEqual(
      ['dst', 'dst/renamed', 'dst/renamed/a.txt', 'dst/renamed/deep', 'dst/renamed/deep/b.txt'].sort(),
    );
    await expectReject(p.move('dst', 'dst/renamed/inside'), InvalidPathError);
  });

  test('copyFile', async () => {
    const p = await fresh();
    if (!hasServerSideCopy(p)) throw new Error('provider declares no copy: declare the gap with a reason');
    const data = randomBytes(70_000);
    await p.write('c/a.bin', data);
    const copied = await p.copy('c/a.bin', 'c/b.bin');
    expect(copied.size).toBe(data.byteLength);
    expect(sha(await readAll(p, 'c/a.bin'))).toBe(sha(data));
    expect(sha(await readAll(p, 'c/b.bin'))).toBe(sha(data));
    await expectReject(p.copy('c/a.bin', 'c/b.bin'), AlreadyExistsError);
    await p.write('c/a.bin', Buffer.from('changed source'));
    expect(sha(await readAll(p, 'c/b.bin'))).toBe(sha(data));
  });

  test('copyFolder', async () => {
    const p = await fresh();
    if (!hasServerSideCopy(p) || p.features.copy !== 'files-and-folders') {
      throw new Error('provider declares no folder copy: declare the gap with a reason');
    }
    await p.write('tree/a.txt', Buffer.from('a'));
    await p.write('tree/sub/b.txt', Buffer.from('b'));
    await p.copy('tree', 'tree2');
    expect((await readAll(p, 'tree2/sub/b.txt')).toString()).toBe('b');
    expect((await readAll(p, 'tree/sub/b.txt')).toString()).toBe('b');
  });
}

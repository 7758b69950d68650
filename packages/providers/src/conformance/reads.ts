/**
 * Reads and names: missing items, listing (pagination, recursion, a missing folder), range
 * reads, Unicode and special-character names, hostile paths refused.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { InvalidArgumentError, InvalidPathError, NotFoundError } from '../errors.ts';
import { hasServerSideCopy, hasServerSideMove } from '../features.ts';
import { readAll, listAll, expectReject, HOSTILE_PATHS, type SuiteContext } from './support.ts';

export function checkReads({ fresh, test }: SuiteContext): void {
  test('statNotFound', async () => {
    const p = await fresh();
    await expectReject(p.stat('missing.txt'), NotFoundError);
    await expectReject(p.stat('missing/deeper.txt'), NotFoundError);
  });

  test('readNotFound', async () => {
    const p = await fresh();
    await expectReject(p.read('missing.txt'), NotFoundError);
  });

  test('listPaginates', async () => {
    const p = await fresh();
    const names = Array.from({ length: 2500 }, (_, i) => `many/f${String(i).padStart(4, '0')}.txt`);
    for (let i = 0; i < names.length; i += 32) {
      await Promise.all(names.slice(i, i + 32).map((n) => p.write(n, Buffer.from(n))));
    }
    const listed = await listAll(p, 'many', false, 1000);
    const paths = listed.map((e) => e.path);
    expect(new Set(paths).size).toBe(paths.length);
    expect([...paths].sort()).toEqual([...names].sort());
    for (const e of listed) {
      expect(e.kind).toBe('file');
      expect(e.size).toBe(e.path.length);
    }
  });

  test('listRecursive', async () => {
    const p = await fresh();
    await p.write('top.txt', Buffer.from('t'));
    await p.write('a/one.txt', Buffer.from('1'));
    await p.write('a/b/two.txt', Buffer.from('22'));
    await p.mkdir('a/empty');
    const shallow = await listAll(p, '');
    expect(shallow.map((e) => `${e.kind}:${e.path}`).sort()).toEqual(['dir:a', 'file:top.txt']);
    const inA = await listAll(p, 'a');
    expect(inA.map((e) => `${e.kind}:${e.path}`).sort()).toEqual([
      'dir:a/b',
      'dir:a/empty',
      'file:a/one.txt',
    ]);
    const deep = await listAll(p, '', true);
    const seen = deep.map((e) => `${e.kind}:${e.path}`);
    expect(new Set(seen).size).toBe(seen.length);
    expect([...seen].sort()).toEqual(
      ['dir:a', 'dir:a/b', 'dir:a/empty', 'file:a/b/two.txt', 'file:a/one.txt', 'file:top.txt'].sort(),
    );
    const sub = await listAll(p, 'a', true);
    expect(sub.map((e) => e.path).sort()).toEqual(['a/b', 'a/b/two.txt', 'a/empty', 'a/one.txt']);
  });

  test('listMissingFolder', async () => {
    const p = await fresh();
    await expectReject(listAll(p, 'nope'), NotFoundError);
    expect(await listAll(p, '')).toEqual([]);
  });

  test('rangeRead', async () => {
    const p = await fresh();
    const data = randomBytes(100_000);
    await p.write('r.bin', data);
    expect((await readAll(p, 'r.bin', 0, 10)).equals(data.subarray(0, 10))).toBe(true);
    expect((await readAll(p, 'r.bin', 50_000, 1234)).equals(data.subarray(50_000, 51_234))).toBe(true);
    expect((await readAll(p, 'r.bin', 99_990)).equals(data.subarray(99_990))).toBe(true);
    expect((await readAll(p, 'r.bin', 99_990, 500)).equals(data.subarray(99_990))).toBe(true);
    expect((await readAll(p, 'r.bin', 100_000)).byteLength).toBe(0);
    expect((await readAll(p, 'r.bin', 200_000, 10)).byteLength).toBe(0);
    expect((await readAll(p, 'r.bin', 10, 0)).byteLength).toBe(0);
  });

  test('rangeReadRejectsBadRange', async () => {
    const p = await fresh();
    await p.write('r.bin', Buffer.from('0123456789'));
    for (const bad of [
      { offset: -1 },
      { offset: 1.5 },
      { offset: Number.NaN },
      { length: -1 },
      { length: 2.5 },
    ])
      await expectReject(p.read('r.bin', bad), InvalidArgumentError);
    expect((await readAll(p, 'r.bin', 2, 3)).toString()).toBe('234');
  });

  test('unicodeNames', async () => {
    const p = await fresh();
    const nfc = 'caf\u00e9.txt';
    const nfd = 'cafe\u0301.txt';
    const names = [
      'emoji 😀🎉.txt',
      '日本語/ファイル.txt',
      'Ünïcödé/ß.txt',
      'ελληνικά.md',
      '한국어 파일.txt',
    ];
    await p.write(nfd, Buffer.from('nfd'));
    // NFD input is stored under its NFC form, and found by either form.
    expect((await p.stat(nfc)).path).toBe(nfc);
    expect((await readAll(p, nfd)).toString()).toBe('nfd');
    for (const n of names) await p.write(n, Buffer.from(n));
    for (const n of names) expect((await readAll(p, n)).toString()).toBe(n);
    const all = (await listAll(p, '', true)).filter((e) => e.kind === 'file').map((e) => e.path);
    expect(all.sort()).toEqual([nfc, ...names].sort());
  });

  test('specialCharacterNames', async () => {
    const p = await fresh();
    const names = [
      'with space.txt',
      'hash#tag.txt',
      'per%cent.txt',
      'plus+sign.txt',
      "quote'single.txt",
      'a&b=c;d.txt',
      'dir with space/x?y.txt',
      '~tilde',
      '[brackets]{braces}.txt',
    ];
    for (const n of names) await p.write(n, Buffer.from(n));
    for (const n of names) expect((await readAll(p, n)).toString()).toBe(n);
    const all = (await listAll(p, '', true)).filter((e) => e.kind === 'file').map((e) => e.path);
    expect(all.sort()).toEqual([...names].sort());
  });

  test('hostilePathsRejected', async () => {
    const p = await fresh();
    await p.write('inside.txt', Buffer.from('x'));
    for (const bad of HOSTILE_PATHS) {
      await expectReject(p.write(bad, Buffer.from('evil')), InvalidPathError);
      await expectReject(p.stat(bad), InvalidPathError);
      await expectReject(p.read(bad), InvalidPathError);
      await expectReject(p.remove(bad), InvalidPathError);
      await expectReject(p.mkdir(bad), InvalidPathError);
      if (hasServerSideCopy(p)) await expectReject(p.copy('inside.txt', bad), InvalidPathError);
      if (hasServerSideMove(p)) await expectReject(p.move('inside.txt', bad), InvalidPathError);
    }
    const all = await listAll(p, '', true);
    expect(all.map((e) => e.path)).toEqual(['inside.txt']);
  });
}

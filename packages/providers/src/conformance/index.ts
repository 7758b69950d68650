/**
 * The one conformance suite every provider runs (rclone's fstests, restic's backend
 * tests). A provider's test file only calls runProviderConformance. Each behaviour is
 * its own named test; a provider may declare a gap with a reason, shown in the test name.
 */
import { createHash, randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { collect } from '../body.ts';
import {
  AlreadyExistsError,
  InvalidPathError,
  NotFoundError,
  PreconditionFailedError,
  TransientError,
} from '../errors.ts';
import { hasChangeFeed, hasServerSideCopy, hasServerSideMove } from '../features.ts';
import type { Change, Entry, Provider } from '../provider.ts';
import { FaultInjectingProvider, failFirst } from '../testing/faults.ts';
import { wrapProvider } from '../wrappers/compose.ts';

export type ConformanceTest =
  | 'putZeroLength'
  | 'putOneByte'
  | 'putFiveMiBPlusOne'
  | 'putTwentyMiBMultipart'
  | 'putStreamUnknownLength'
  | 'overwriteReplacesContent'
  | 'failedPutLeavesNothing'
  | 'abortedPutLeavesNothing'
  | 'wrongSizeLeavesNothing'
  | 'statNotFound'
  | 'readNotFound'
  | 'listPaginates'
  | 'listRecursive'
  | 'listMissingFolder'
  | 'rangeRead'
  | 'unicodeNames'
  | 'specialCharacterNames'
  | 'hostilePathsRejected'
  | 'conditionalWriteRejectsStaleRev'
  | 'conditionalWriteAcceptsCurrentRev'
  | 'mustNotExistOnExisting'
  | 'mkdirIdempotent'
  | 'mkdirOverFile'
  | 'writeOverFolder'
  | 'removeMissing'
  | 'removeFolderRecursive'
  | 'conditionalRemove'
  | 'moveFile'
  | 'moveFolder'
  | 'copyFile'
  | 'copyFolder'
  | 'changeFeedOrderAndResume'
  | 'changeFeedFolderMove'
  | 'concurrentWriters'
  | 'retryRecoversFromTransient'
  | 'retryResumesBrokenRead'
  | 'sha256Verified';

export interface ConformanceOptions {
  readonly name: string;
  /** A provider over a fresh, empty namespace (a new folder, prefix or account subtree). */
  readonly create: () => Promise<Provider>;
  /** Declared gaps: test name → reason. */
  readonly skip?: Partial<Record<ConformanceTest, string>>;
  /** For backends with resumable/multipart uploads: how many unfinished uploads are left over. */
  readonly danglingUploads?: () => Promise<number>;
  /**
   * The backend's feed reports the latest state of each changed path rather than every
   * version (Dropbox list_folder/continue, Drive changes, Graph delta): the reason. The
   * feed test then asks for the last upsert to carry the newest revision instead of one
   * upsert per write; order, resume, deletes and reset are checked the same way.
   */
  readonly coalescedChangeFeed?: string;
  /** Per-test timeout in ms (remote backends need more). Default 60 s. */
  readonly timeoutMs?: number;
}

const MiB = 1024 * 1024;

function sha(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

async function readAll(p: Provider, path: string, offset?: number, length?: number): Promise<Buffer> {
  return collect(await p.read(path, { offset, length }));
}

async function listAll(p: Provider, dir = '', recursive = false, pageSize?: number): Promise<Entry[]> {
  const out: Entry[] = [];
  for await (const e of p.list(dir, { recursive, pageSize })) out.push(e);
  return out;
}

async function* chunked(data: Uint8Array, size: number): AsyncIterable<Uint8Array> {
  for (let i = 0; i < data.byteLength; i += size) yield data.subarray(i, i + size);
}

async function* failingStream(data: Uint8Array, failAfter: number): AsyncIterable<Uint8Array> {
  const chunk = 256 * 1024;
  for (let i = 0; i < failAfter; i += chunk) yield data.subarray(i, Math.min(failAfter, i + chunk));
  throw new Error('source failed mid-stream');
}

async function expectReject<T extends Error>(
  promise: Promise<unknown>,
  type: abstract new (...args: never[]) => T,
): Promise<T> {
  try {
    await promise;
  } catch (e) {
    expect(e, `expected ${type.name}, got ${String(e)}`).toBeInstanceOf(type);
    return e as T;
  }
  throw new Error(`expected ${type.name}, but the call succeeded`);
}

async function drainChanges(p: Provider, cursor: string): Promise<{ changes: Change[]; cursor: string }> {
  if (!hasChangeFeed(p)) throw new Error('no change feed');
  const all: Change[] = [];
  let c = cursor;
  for (;;) {
    const page = await p.changes(c);
    expect(page.reset).toBe(false);
    all.push(...page.changes);
    c = page.cursor;
    if (!page.hasMore) return { changes: all, cursor: c };
  }
}

export const HOSTILE_PATHS: readonly string[] = [
  '..',
  '../escape',
  'a/../../escape',
  'a/./b',
  '/etc/passwd',
  '/',
  'a//b',
  'a/',
  'nul\0byte',
  'x'.repeat(256),
  ('d'.repeat(200) + '/').repeat(21) + 'f',
  'lone\uD800surrogate',
  'trailing\uDC00',
];

export function runProviderConformance(options: ConformanceOptions): void {
  const open: Provider[] = [];
  const fresh = async (): Promise<Provider> => {
    const p = await options.create();
    open.push(p);
    return p;
  };
  const timeout = options.timeoutMs ?? 60_000;
  const test = (name: ConformanceTest, fn: () => Promise<void>): void => {
    const reason = options.skip?.[name];
    if (reason !== undefined) it.skip(`${name} — declared gap: ${reason}`, fn);
    else it(name, fn, timeout);
  };

  describe(`provider conformance: ${options.name}`, () => {
    afterEach(async () => {
      for (const p of open.splice(0)) await p.close?.();
    });

    const roundTrip = async (size: number, chunkSize?: number): Promise<void> => {
      const p = await fresh();
      const data = randomBytes(size);
      const entry = await p.write('dir/file.bin', chunkSize ? () => chunked(data, chunkSize) : data, {
        size,
      });
      expect(entry.kind).toBe('file');
      expect(entry.size).toBe(size);
      expect(entry.path).toBe('dir/file.bin');
      expect(entry.revision).not.toBe('');
      const stat = await p.stat('dir/file.bin');
      expect(stat.size).toBe(size);
      expect(stat.revision).toBe(entry.revision);
      if (stat.hash?.algorithm === 'sha256') expect(stat.hash.value).toBe(sha(data));
      const back = await readAll(p, 'dir/file.bin');
      expect(back.byteLength).toBe(size);
      expect(sha(back)).toBe(sha(data));
      if (options.danglingUploads) expect(await options.danglingUploads()).toBe(0);
    };

    test('putZeroLength', () => roundTrip(0));
    test('putOneByte', () => roundTrip(1));
    test('putFiveMiBPlusOne', () => roundTrip(5 * MiB + 1, 1 * MiB));
    test('putTwentyMiBMultipart', () => roundTrip(20 * MiB, 3 * MiB + 17));

    test('putStreamUnknownLength', async () => {
      const p = await fresh();
      const data = randomBytes(3 * MiB + 5);
      await p.write('stream.bin', chunked(data, 64 * 1024 + 3));
      expect(sha(await readAll(p, 'stream.bin'))).toBe(sha(data));
    });

    test('overwriteReplacesContent', async () => {
      const p = await fresh();
      const a = await p.write('f.txt', Buffer.from('first version'));
      const b = await p.write('f.txt', Buffer.from('second'));
      expect(b.revision).not.toBe(a.revision);
      expect((await readAll(p, 'f.txt')).toString()).toBe('second');
      expect((await p.stat('f.txt')).size).toBe(6);
    });

    test('failedPutLeavesNothing', async () => {
      const p = await fresh();
      const data = randomBytes(12 * MiB);
      await expect(p.write('fail/small.bin', failingStream(data, 1000))).rejects.toThrow();
      await expect(p.write('fail/large.bin', failingStream(data, 11 * MiB))).rejects.toThrow();
      await expectReject(p.stat('fail/small.bin'), NotFoundError);
      await expectReject(p.stat('fail/large.bin'), NotFoundError);
      // An existing file survives a failed overwrite unchanged.
      await p.write('keep.txt', Buffer.from('precious'));
      await expect(p.write('keep.txt', failingStream(data, 9 * MiB))).rejects.toThrow();
      expect((await readAll(p, 'keep.txt')).toString()).toBe('precious');
      if (options.danglingUploads) expect(await options.danglingUploads()).toBe(0);
    });

    test('abortedPutLeavesNothing', async () => {
      const p = await fresh();
      const controller = new AbortController();
      const data = randomBytes(10 * MiB);
      async function* slowThenAbort(): AsyncIterable<Uint8Array> {
        yield data.subarray(0, 9 * MiB);
        controller.abort(new Error('user cancelled'));
        yield data.subarray(9 * MiB);
      }
      await expect(p.write('aborted.bin', slowThenAbort(), { signal: controller.signal })).rejects.toThrow();
      await expectReject(p.stat('aborted.bin'), NotFoundError);
      if (options.danglingUploads) expect(await options.danglingUploads()).toBe(0);
    });

    test('wrongSizeLeavesNothing', async () => {
      const p = await fresh();
      await expect(p.write('short.bin', Buffer.from('12345'), { size: 10 })).rejects.toThrow();
      await expectReject(p.stat('short.bin'), NotFoundError);
    });

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
      await expectReject(
        p.write('once.txt', Buffer.from('second'), { ifNotExists: true }),
        AlreadyExistsError,
      );
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

    test('changeFeedOrderAndResume', async () => {
      const p = await fresh();
      if (!hasChangeFeed(p))
        throw new Error('provider declares no change feed: declare the gap with a reason');
      const start = await p.latestCursor();
      const created = await p.write('feed/a.txt', Buffer.from('v1'));
      const modified = await p.write('feed/a.txt', Buffer.from('v2'));
      const first = await drainChanges(p, start);
      const fileChanges = first.changes.filter((c) => c.path === 'feed/a.txt');
      const revs = fileChanges.map((c) => (c.type === 'upsert' ? c.entry.revision : ''));
      if (options.coalescedChangeFeed === undefined) {
        expect(fileChanges.map((c) => c.type)).toEqual(['upsert', 'upsert']);
        expect(revs).toEqual([created.revision, modified.revision]);
      } else {
        expect(fileChanges.length).toBeGreaterThanOrEqual(1);
        expect(fileChanges.every((c) => c.type === 'upsert')).toBe(true);
        expect(revs.at(-1)).toBe(modified.revision);
      }
      // Resume from the saved cursor: only what happened after it, exactly once.
      const saved = first.cursor;
      await p.remove('feed/a.txt');
      await p.write('feed/b.txt', Buffer.from('b'));
      const second = await drainChanges(p, saved);
      const relevant = second.changes.filter((c) => c.path.startsWith('feed/'));
      expect(relevant.map((c) => `${c.type}:${c.path}`)).toEqual(['delete:feed/a.txt', 'upsert:feed/b.txt']);
      // Nothing new: an empty page, same position.
      const third = await drainChanges(p, second.cursor);
      expect(third.changes).toEqual([]);
      // A cursor that was never issued asks the caller to re-list.
      const bogus = await p.changes('not-a-cursor');
      expect(bogus.reset).toBe(true);
    });

    test('changeFeedFolderMove', async () => {
      const p = await fresh();
      if (!hasChangeFeed(p))
        throw new Error('provider declares no change feed: declare the gap with a reason');
      if (!hasServerSideMove(p) || p.features.move !== 'files-and-folders')
        throw new Error('provider declares no folder move: declare the gap with a reason');
      await p.write('mv/a/sub/f.txt', Buffer.from('f'));
      await p.write('mv/a/sub/deep/g.txt', Buffer.from('g'));
      await p.mkdir('mv/a/sub/empty');
      const start = await p.latestCursor();
      await p.move('mv/a/sub', 'mv/b');
      const { changes } = await drainChanges(p, start);
      // The old path is deleted (a folder's delete implies its content)...
      const deletes = changes.filter((c) => c.type === 'delete').map((c) => c.path);
      expect(deletes.some((d) => d === 'mv/a/sub')).toBe(true);
      // ...and everything at the new one is reported, not only the folder itself.
      const upserts = new Set(changes.filter((c) => c.type === 'upsert').map((c) => c.path));
      for (const q of ['mv/b', 'mv/b/f.txt', 'mv/b/deep', 'mv/b/deep/g.txt', 'mv/b/empty'])
        expect(upserts.has(q), q).toBe(true);
      const moved = changes.find((c) => c.type === 'upsert' && c.path === 'mv/b/deep/g.txt');
      expect(moved?.type === 'upsert' && moved.entry.size).toBe(1);
    });

    test('concurrentWriters', async () => {
      const p = await fresh();
      const files = Array.from({ length: 16 }, (_, i) => ({
        path: `par/w${i}.bin`,
        data: randomBytes(200_000 + i),
      }));
      await Promise.all(files.map((f) => p.write(f.path, () => chunked(f.data, 50_000))));
      for (const f of files) expect(sha(await readAll(p, f.path))).toBe(sha(f.data));
    });

    test('retryRecoversFromTransient', async () => {
      const p = await fresh();
      const faulty = new FaultInjectingProvider(p, failFirst(3, ['write', 'stat'], 1234));
      const delays: number[] = [];
      const wrapped = wrapProvider(faulty, {
        retry: { maxAttempts: 5, sleep: async (ms) => void delays.push(ms), random: () => 0.5 },
      });
      await wrapped.write('retry.txt', Buffer.from('eventually'));
      expect((await readAll(p, 'retry.txt')).toString()).toBe('eventually');
      expect(delays).toEqual([1234, 1234, 1234]);
      expect(faulty.calls.filter((c) => c.failed)).toHaveLength(3);
      // Without Retry-After: exponential backoff with full jitter (random 0.5 → half the ceiling).
      const faulty2 = new FaultInjectingProvider(p, failFirst(3, ['stat']));
      const delays2: number[] = [];
      const wrapped2 = wrapProvider(faulty2, {
        retry: {
          maxAttempts: 5,
          baseDelayMs: 100,
          sleep: async (ms) => void delays2.push(ms),
          random: () => 0.5,
        },
      });
      expect((await wrapped2.stat('retry.txt')).size).toBe(10);
      expect(delays2).toEqual([50, 100, 200]);
      // A consumed stream cannot be re-sent: the error surfaces after one attempt.
      const faulty3 = new FaultInjectingProvider(p, failFirst(1, ['write']));
      const wrapped3 = wrapProvider(faulty3, { retry: { sleep: async () => undefined } });
      await expectReject(wrapped3.write('once.txt', chunked(Buffer.from('x'), 1)), TransientError);
      // Attempts are capped.
      const faulty4 = new FaultInjectingProvider(p, failFirst(10, ['stat']));
      const wrapped4 = wrapProvider(faulty4, { retry: { maxAttempts: 4, sleep: async () => undefined } });
      await expectReject(wrapped4.stat('retry.txt'), TransientError);
      expect(faulty4.calls).toHaveLength(4);
      // An abort during the backoff stops retrying.
      const controller = new AbortController();
      const faulty5 = new FaultInjectingProvider(p, failFirst(10, ['stat']));
      const wrapped5 = wrapProvider(faulty5, {
        retry: {
          sleep: async () => {
            controller.abort(new Error('stop'));
            throw new Error('stop');
          },
        },
      });
      await expect(wrapped5.stat('retry.txt', { signal: controller.signal })).rejects.toThrow('stop');
      expect(faulty5.calls).toHaveLength(1);
    });

    test('retryResumesBrokenRead', async () => {
      const p = await fresh();
      const data = randomBytes(3 * MiB);
      await p.write('big.bin', data);
      const faulty = new FaultInjectingProvider(p, {
        breakReadAfterBytes: (i) => (i === 0 ? MiB + 7 : i === 1 ? MiB : undefined),
      });
      const wrapped = wrapProvider(faulty, { retry: { sleep: async () => undefined } });
      const back = await collect(await wrapped.read('big.bin'));
      expect(sha(back)).toBe(sha(data));
      const part = await collect(await wrapped.read('big.bin', { offset: 100, length: 2 * MiB }));
      expect(part.equals(data.subarray(100, 100 + 2 * MiB))).toBe(true);
    });

    test('sha256Verified', async () => {
      const p = await fresh();
      const data = Buffer.from('content with a known digest');
      const wrong = sha(Buffer.from('something else'));
      await expect(p.write('v.txt', data, { sha256: wrong })).rejects.toThrow();
      await expectReject(p.stat('v.txt'), NotFoundError);
      const ok = await p.write('v.txt', data, { sha256: sha(data) });
      expect(ok.size).toBe(data.byteLength);
    });
  });
}

/**
 * Versions and deleted files (docs/proxy-server.md "Versions and deleted files"): overwrites
 * and deletes keep the previous version for the retention period, restorable through the
 * API as a normal write (it reaches the feed); content stays content-addressed and alive
 * while a version names it, and is freed once the retention has passed; usage reports the
 * bytes kept; a user sees only its own versions; hostile paths are refused.
 */
import { existsSync } from 'node:fs';
import * as nodePath from 'node:path';
import type { DeletedResponse, OpResult, UsageResponse, VersionsResponse } from '@weft/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { objectKey } from '../src/store/link-file.ts';
import { versionContentKey } from '../src/store/version-index.ts';
import { pseudoRandom, readFeed, sha, startTestServer, TestClient, uploadLarge } from './helpers.ts';

const MiB = 1024 * 1024;
const DAY = 24 * 3600 * 1000;
let clock = 1_800_000_000_000;
let server: Awaited<ReturnType<typeof startTestServer>>;

beforeAll(async () => {
  server = await startTestServer({ versions: { retentionDays: 30 }, smallFileBytes: 2 * MiB });
  // The store's clock (retention and GC) is driven by the test.
  (server.store as unknown as { now: () => number }).now = () => clock;
});
afterAll(async () => {
  await server.stop();
});

async function versionsOf(c: TestClient, path: string): Promise<VersionsResponse> {
  return c.json<VersionsResponse>('GET', `/v1/versions?path=${encodeURIComponent(path)}`);
}

async function restore(c: TestClient, path: string, version: number): Promise<OpResult> {
  return c.json<OpResult>('POST', '/v1/versions/restore', { path, version });
}

async function versionBytes(c: TestClient, path: string, version: number): Promise<Response> {
  return c.req('GET', `/v1/versions/content?path=${encodeURIComponent(path)}&version=${version}`);
}

describe('versions', () => {
  it('keepsTheReplacedVersionOfASmallFileAndRestoresItThroughTheFeed', async () => {
    const laptop = await TestClient.enrol(server, 'ann', 'laptop');
    const phone = await TestClient.enrol(server, 'ann', 'phone');
    await laptop.putSmall({ 'notes/a.txt': 'first draft' });
    clock += 1000;
    await phone.putSmall({ 'notes/a.txt': 'second draft, longer' });
    const v = await versionsOf(laptop, 'notes/a.txt');
    expect(v.retentionDays).toBe(30);
    expect(v.versions.map((x) => [x.current, x.deviceName, x.size, x.sha256])).toEqual([
      [true, 'phone', 20, sha('second draft, longer')],
      [false, 'laptop', 11, sha('first draft')],
    ]);
    const old = v.versions[1]!;
    expect(old).toMatchObject({ deleted: false, replacedByName: 'phone', replacedMs: clock });
    expect(old.expiresMs).toBe(clock + 30 * DAY);
    const res = await versionBytes(laptop, 'notes/a.txt', old.id);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('first draft');

    const cursor = (await laptop.json<{ seq: number }>('GET', '/v1/list?path=')).seq;
    const restored = await restore(laptop, 'notes/a.txt', old.id);
    expect(restored).toMatchObject({ status: 'applied', entry: { sha256: sha('first draft') } });
    const { changes } = await readFeed(phone, cursor, (c) => c.length >= 1);
    expect(changes[0]).toMatchObject({ type: 'upsert', path: 'notes/a.txt', deviceName: 'laptop' });
    expect(await phone.text('notes/a.txt')).toBe('first draft');
    // The version restored over is kept in turn: nothing is lost.
    const after = await versionsOf(laptop, 'notes/a.txt');
    expect(after.versions.map((x) => x.sha256)).toEqual([
      sha('first draft'),
      sha('second draft, longer'),
      sha('first draft'),
    ]);
    // Restoring what is already current changes nothing.
    expect(await restore(laptop, 'notes/a.txt', old.id)).toMatchObject({ status: 'applied', seq: 0 });
  });

  it('listsDeletedFilesUnderAFolderAndRestoresThem', async () => {
    const c = await TestClient.enrol(server, 'bob', 'desk');
    // Many files (more than one batch of kept content), some with the same content.
    const many = Object.fromEntries(
      Array.from({ length: 40 }, (_, i) => [`p/zz/f${i}.txt`, `same ${i % 5}`]),
    );
    await c.putSmall({ 'p/one.txt': 'one', 'p/sub/two.txt': 'two', 'q/three.txt': 'three', ...many });
    clock += 1000;
    expect((await c.ops({ op: 'delete', path: 'p' }))[0]?.status).toBe('applied');
    expect((await c.ops({ op: 'delete', path: 'q/three.txt' }))[0]?.status).toBe('applied');
    const underP = await c.json<DeletedResponse>('GET', '/v1/deleted?path=p');
    expect(underP.files.slice(0, 2).map((f) => [f.path, f.size, f.deletedByName])).toEqual([
      ['p/one.txt', 3, 'desk'],
      ['p/sub/two.txt', 3, 'desk'],
    ]);
    expect(underP.files).toHaveLength(42);
    const f17 = underP.files.find((f) => f.path === 'p/zz/f17.txt')!;
    expect(await (await versionBytes(c, f17.path, f17.version)).text()).toBe('same 2');
    expect(underP.truncated).toBe(false);
    const all = await c.json<DeletedResponse>('GET', '/v1/deleted?path=&limit=2');
    expect(all.files).toHaveLength(2);
    expect(all.truncated).toBe(true);
    // A deleted file's history ends with the delete.
    const two = underP.files[1]!;
    expect((await versionsOf(c, 'p/sub/two.txt')).versions).toMatchObject([
      { id: two.version, deleted: true },
    ]);
    // Restoring recreates the missing folders and the file.
    expect(await restore(c, 'p/sub/two.txt', two.version)).toMatchObject({ status: 'applied' });
    expect(await c.text('p/sub/two.txt')).toBe('two');
    const left = await c.json<DeletedResponse>('GET', '/v1/deleted?path=p');
    expect(left.files.map((f) => f.path).slice(0, 2)).toEqual(['p/one.txt', 'p/zz/f0.txt']);
  });

  it('keepsALargeVersionsObjectAliveUntilTheRetentionPassesAndReportsItsBytes', async () => {
    const c = await TestClient.enrol(server, 'cat', 'desk');
    const v1 = pseudoRandom(3 * MiB, 1);
    const v2 = pseudoRandom(3 * MiB, 2);
    expect((await uploadLarge(c, 'big.bin', v1)).status).toBe('applied');
    expect((await uploadLarge(c, 'big.bin', v2)).status).toBe('applied');
    await c.putSmall({ 'small.txt': 'kept small' });
    await c.putSmall({ 'small.txt': 'replaced' });
    const objectFile = nodePath.join(server.dir, 'objects', objectKey(sha(v1)));
    const smallFile = nodePath.join(server.dir, 'fs', versionContentKey(sha('kept small')));
    expect((await server.store.meta.getObject(sha(v1)))?.refcount).toBe(1); // the version's reference
    // Crash recovery recounts references from the index: kept versions count too.
    await server.store.meta.recomputeRefcounts(clock);
    expect(await server.store.meta.getObject(sha(v1))).toMatchObject({
      refcount: 1,
      unreferencedSinceMs: null,
    });
    expect(existsSync(smallFile)).toBe(true);
    expect(await c.json<UsageResponse>('GET', '/v1/usage')).toMatchObject({
      usedBytes: 3 * MiB + 8,
      versionsBytes: 3 * MiB + 10,
    });
    // The cost ledger bills the kept bytes to their user, on the tier that holds them.
    const held = (await server.cost.ledger.readStorage()).filter((r) => r.userId === 'cat');
    expect(held).toEqual([
      { userId: 'cat', tier: 'fs', bytes: 8 + 10 },
      { userId: 'cat', tier: 'objects', bytes: 6 * MiB },
    ]);
    // Within the retention: GC keeps both, whatever the grace period.
    clock += 29 * DAY;
    await server.gc(0);
    expect(existsSync(objectFile)).toBe(true);
    expect(existsSync(smallFile)).toBe(true);
    const [old] = (await versionsOf(c, 'big.bin')).versions.slice(1);
    const res = await versionBytes(c, 'big.bin', old!.id);
    expect(sha(Buffer.from(await res.arrayBuffer()))).toBe(sha(v1));
    // Past it: the versions are forgotten, their content freed (after the grace period).
    clock += 2 * DAY;
    expect((await server.gc(0)).versions).toBeGreaterThanOrEqual(2);
    expect((await versionsOf(c, 'big.bin')).versions).toHaveLength(1);
    // The object is unreferenced from now: collected once the (here zero) grace period has run.
    expect(existsSync(objectFile)).toBe(true);
    clock += 1;
    await server.gc(0);
    expect(existsSync(objectFile)).toBe(false);
    expect(existsSync(smallFile)).toBe(false);
    expect((await c.json<UsageResponse>('GET', '/v1/usage')).versionsBytes).toBe(0);
    expect((await versionBytes(c, 'big.bin', old!.id)).status).toBe(404);
  });

  it('confinesVersionsToTheirNamespaceAndRefusesHostilePaths', async () => {
    const owner = await TestClient.enrol(server, 'dan', 'desk');
    const other = await TestClient.enrol(server, 'eve', 'desk');
    await owner.putSmall({ 'secret.txt': 'mine' });
    await owner.ops({ op: 'delete', path: 'secret.txt' });
    const [gone] = (await owner.json<DeletedResponse>('GET', '/v1/deleted?path=')).files;
    expect(gone?.path).toBe('secret.txt');
    // The other user sees nothing of it, by path or by id.
    expect((await other.req('GET', '/v1/versions?path=secret.txt')).status).toBe(404);
    expect((await other.json<DeletedResponse>('GET', '/v1/deleted?path=')).files).toEqual([]);
    expect((await versionBytes(other, 'secret.txt', gone!.version)).status).toBe(404);
    const stolen = await other.req('POST', '/v1/versions/restore', {
      path: 'secret.txt',
      version: gone!.version,
    });
    expect(stolen.status).toBe(404);
    expect((await other.req('GET', '/v1/files?path=secret.txt')).status).toBe(404);
    // Hostile paths: a clear INVALID_PATH, nothing looked up.
    for (const bad of ['../dan/secret.txt', '/etc/passwd', 'a/../../b', 'a\u0000b']) {
      const res = await owner.req('GET', `/v1/versions?path=${encodeURIComponent(bad)}`);
      expect(res.status, bad).toBe(400);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('INVALID_PATH');
      const r2 = await owner.req('POST', '/v1/versions/restore', { path: bad, version: gone!.version });
      expect(((await r2.json()) as { error: { code: string } }).error.code).toBe('INVALID_PATH');
    }
    const dir = await owner.req('GET', `/v1/deleted?path=${encodeURIComponent('../eve')}`);
    expect(((await dir.json()) as { error: { code: string } }).error.code).toBe('INVALID_PATH');
    expect((await owner.req('GET', '/v1/versions/content?path=secret.txt&version=-1')).status).toBe(400);
  });

  it('isInTheOpenApiDocument', async () => {
    const doc = (await (await fetch(`${server.url}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, unknown>>;
    };
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(['/v1/versions', '/v1/deleted', '/v1/versions/restore', '/v1/versions/content']),
    );
    expect(Object.keys(doc.paths['/v1/versions/restore'] ?? {})).toEqual(['post']);
  });

  it('keepsNothingWhenTheRetentionIsZero', async () => {
    const s = await startTestServer({ versions: { retentionDays: 0 } });
    try {
      const c = await TestClient.enrol(s, 'fay', 'desk');
      await c.putSmall({ 'x.txt': 'one' });
      await c.putSmall({ 'x.txt': 'two' });
      await c.ops({ op: 'delete', path: 'x.txt' });
      expect((await c.req('GET', '/v1/versions?path=x.txt')).status).toBe(404);
      expect((await c.json<DeletedResponse>('GET', '/v1/deleted')).files).toEqual([]);
      expect((await c.json<UsageResponse>('GET', '/v1/usage')).versionsBytes).toBeUndefined();
    } finally {
      await s.stop();
    }
  });
});

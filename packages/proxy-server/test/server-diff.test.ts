/**
 * Server-side diff for downloads (issue #16): `GET /v1/files/delta?path=&baseSha256=` answers
 * the delta container of the current version against a base version the server holds for
 * the caller, from the base's stored signature (or one made then): the client sends no
 * signature. A base the caller never held is DELTA_BASE_UNKNOWN (409), whoever else holds it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collect, patch } from '@weft/rsync-wasm';
import { decodeDeltaContainer } from '@weft/wire';
import { signatureBlockSize, signatureKey } from '../src/store/link-file.ts';
import { pseudoRandom, sha, startTestServer, TestClient, uploadLarge } from './helpers.ts';

const MiB = 1024 * 1024;
let server: Awaited<ReturnType<typeof startTestServer>>;
let alice: TestClient;
let bob: TestClient;

beforeAll(async () => {
  server = await startTestServer();
  alice = await TestClient.enrol(server, 'alice');
  bob = await TestClient.enrol(server, 'bob');
});
afterAll(async () => server.stop());

const url = (path: string, base: string): string =>
  `/v1/files/delta?path=${encodeURIComponent(path)}&baseSha256=${base}`;

async function overwrite(c: TestClient, path: string, old: Buffer, cur: Buffer): Promise<void> {
  expect((await uploadLarge(c, path, old)).status).toBe('applied');
  const rev = (await c.json<{ revision: string }>('GET', `/v1/stat?path=${encodeURIComponent(path)}`))
    .revision;
  expect((await uploadLarge(c, path, cur, { baseRevision: rev })).status).toBe('applied');
}

describe('server-side diff', () => {
  it('answersADeltaAgainstABaseTheCallerHeldWithNoSignatureSent', async () => {
    const old = pseudoRandom(3 * MiB, 1);
    const cur = Buffer.concat([old.subarray(0, 2 * MiB), pseudoRandom(5000, 2), old.subarray(2 * MiB)]);
    await overwrite(alice, 'v/file.bin', old, cur);
    const res = await alice.req('GET', url('v/file.bin', sha(old)));
    expect(res.status).toBe(200);
    const container = decodeDeltaContainer(new Uint8Array(await res.arrayBuffer()));
    expect(container).toMatchObject({ baseSha256: sha(old), targetSha256: sha(cur), targetSize: cur.length });
    // An insert of 5,000 bytes: the delta is a few blocks, not the file.
    expect(container.storedLength).toBeLessThan(100_000);
    expect(sha(Buffer.from(await collect(patch(old, container.delta))))).toBe(sha(cur));
  });

  it('makesTheBaseSignatureWhenNoneIsStored', async () => {
    const old = pseudoRandom(3 * MiB, 3);
    const cur = Buffer.concat([pseudoRandom(100, 4), old]);
    await overwrite(alice, 'v/other.bin', old, cur);
    const objects = server.store['objects'];
    await objects.remove(signatureKey(sha(old), signatureBlockSize(old.length)));
    const res = await alice.req('GET', url('v/other.bin', sha(old)));
    expect(res.status).toBe(200);
    const container = decodeDeltaContainer(new Uint8Array(await res.arrayBuffer()));
    expect(container.storedLength).toBeLessThan(100_000);
    expect(sha(Buffer.from(await collect(patch(old, container.delta))))).toBe(sha(cur));
    // …and stores it again for the next one.
    await expect(objects.stat(signatureKey(sha(old), signatureBlockSize(old.length)))).resolves.toBeDefined();
  });

  it('refusesABaseTheCallerNeverHeld', async () => {
    const old = pseudoRandom(3 * MiB, 5);
    const cur = Buffer.concat([old, pseudoRandom(100, 6)]);
    await overwrite(alice, 'v/private.bin', old, cur);
    // bob holds a large file at the same path but never alice's old version.
    expect((await uploadLarge(bob, 'v/private.bin', pseudoRandom(3 * MiB, 7))).status).toBe('applied');
    const theirs = await bob.req('GET', url('v/private.bin', sha(old)));
    expect(theirs.status).toBe(409);
    expect(((await theirs.json()) as { error: { code: string } }).error.code).toBe('DELTA_BASE_UNKNOWN');
    const unknown = await alice.req('GET', url('v/private.bin', 'ab'.repeat(32)));
    expect(unknown.status).toBe(409);
    const bad = await alice.req('GET', url('v/private.bin', 'not-a-hash'));
    expect(bad.status).toBe(400);
  });
});

/**
 * Issue #14, confinement: user B holds user A's SHA-256 and size, and tries every endpoint
 * that takes a hash. Each answer must be the one B gets for a hash nobody has, so B can
 * neither obtain A's content nor learn that it exists; A, and B once B has uploaded the same
 * bytes itself, still deduplicate. And no write may create a name with a control character
 * or a bidirectional control (INVALID_PATH), while such names are still not a way in.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collect, signature } from '@weft/rsync-wasm';
import { encodeBundle, encodeDeltaContainer } from '@weft/wire';
import { pseudoRandom, sha, startTestServer, TestClient, uploadLarge } from './helpers.ts';

const MiB = 1024 * 1024;
let server: Awaited<ReturnType<typeof startTestServer>>;
let a: TestClient;
let b: TestClient;
const secret = pseudoRandom(3 * MiB, 41);
const nobody = pseudoRandom(3 * MiB, 42);
/** A delta that is only its magic ("WFTD"): the base is looked up before it is read. */
const WFTD = new Uint8Array([0x57, 0x46, 0x54, 0x44, 0]);

/** Status, error code and message: everything an answer tells. */
async function answer(r: Promise<Response>): Promise<unknown> {
  const res = await r;
  const text = await res.text();
  let body: unknown = text.length;
  try {
    body = (JSON.parse(text) as { error?: unknown; results?: unknown }).error ?? JSON.parse(text);
  } catch {
    /* binary: its length stands for it */
  }
  return { status: res.status, body };
}

function link(c: TestClient, path: string, sha256: string, size: number): Promise<Response> {
  return c.req('POST', '/v1/ops', { ops: [{ op: 'commit', path, sha256, size, mtimeMs: 1 }] });
}

beforeAll(async () => {
  server = await startTestServer({ smallFileBytes: MiB });
  a = await TestClient.enrol(server, 'alice', 'a-dev');
  b = await TestClient.enrol(server, 'bob', 'b-dev');
  expect(await uploadLarge(a, 'private/secret.bin', secret)).toMatchObject({ status: 'applied' });
});
afterAll(async () => server.stop());

describe('content claimed by its hash', () => {
  it('bCannotLinkAsContentByHashNorTellItExists', async () => {
    const known = sha(secret);
    const unknown = sha(nobody);
    // Right hash, right size: the old answer linked A's file into B's namespace.
    const claim = await answer(link(b, 'stolen.bin', known, secret.length));
    expect(claim).toEqual(await answer(link(b, 'stolen.bin', unknown, secret.length)));
    expect(claim).toMatchObject({ status: 200 });
    expect(JSON.stringify(claim)).toContain('OBJECT_UNKNOWN');
    // A wrong size must not tell "exists, other size" from "does not exist".
    expect(await answer(link(b, 'stolen.bin', known, secret.length + 1))).toEqual(
      await answer(link(b, 'stolen.bin', unknown, secret.length + 1)),
    );
    expect((await b.req('GET', '/v1/stat?path=stolen.bin')).status).toBe(404);
  });

  it('bGetsNothingFromAsHashThroughDeltasOrDownloads', async () => {
    const known = sha(secret);
    const unknown = sha(nobody);
    // A delta upload naming A's content as its base.
    const delta = (base: string): Uint8Array =>
      encodeDeltaContainer({ baseSha256: base, targetSha256: sha('x'), targetSize: 1, delta: WFTD });
    const up = (base: string): Promise<Response> =>
      b.req('POST', `/v1/deltas?path=${encodeURIComponent('d.bin')}&baseRevision=r1&mtimeMs=1`, delta(base));
    expect(await answer(up(known))).toEqual(await answer(up(unknown)));
    // A delta download against A's hash as the base.
    const sig = await collect(signature(new Uint8Array(10), { blockSize: 16 }));
    const down = (base: string): Promise<Response> =>
      b.req('POST', `/v1/files/delta?path=private/secret.bin&baseSha256=${base}`, sig);
    expect(await answer(down(known))).toEqual(await answer(down(unknown)));
    // A bundle entry that claims A's hash with other bytes is refused as a mismatch either way.
    const bundle = (h: string): Uint8Array =>
      encodeBundle([{ path: 'claim.bin', mtimeMs: 1, sha256: h, content: Buffer.from('not it') }]);
    const bundleAnswer = async (h: string): Promise<unknown> => {
      const got = (await answer(b.req('POST', '/v1/bundles', bundle(h)))) as {
        status: number;
        body: unknown;
      };
      // Drop the echo of the hash itself; everything else must match.
      return JSON.parse(JSON.stringify(got).replaceAll(h, 'HASH'));
    };
    expect(await bundleAnswer(known)).toEqual(await bundleAnswer(unknown));
    const list = await b.json<{ entries: unknown[] }>('GET', '/v1/list?path=&recursive=1');
    expect(list.entries).toEqual([]);
  });

  it('ownersStillDeduplicate', async () => {
    // A links its own content to a second path without sending it again.
    const [again] = await a.ops({
      op: 'commit',
      path: 'copy.bin',
      sha256: sha(secret),
      size: secret.length,
      mtimeMs: 1,
    });
    expect(again).toMatchObject({ status: 'applied' });
    expect(
      createHash('sha256')
        .update(await a.bytes('copy.bin'))
        .digest('hex'),
    ).toBe(sha(secret));
    // Once B has uploaded the same bytes itself, B may link them too.
    expect(await uploadLarge(b, 'mine.bin', secret)).toMatchObject({ status: 'applied' });
    const [bLink] = await b.ops({
      op: 'commit',
      path: 'mine2.bin',
      sha256: sha(secret),
      size: secret.length,
      mtimeMs: 1,
    });
    expect(bLink).toMatchObject({ status: 'applied' });
    expect((await b.bytes('mine2.bin')).equals(secret)).toBe(true);
  });
});

describe('names no platform should show', () => {
  const hostile = [
    'ctl\u0001.txt',
    'bell\u0007/x.txt',
    'del\u007f.txt',
    'c1\u0085.txt',
    'invoice\u202efdp.exe',
    'iso\u2066late.txt',
    'mark\u200f.txt',
    'arabic\u061cmark.txt',
    'tab\tname.txt',
    'line\nbreak.txt',
  ];

  it('refusesControlAndBidiCharactersOnEveryWritePathAndChangesNothing', async () => {
    const before = await a.json<{ entries: unknown[] }>('GET', '/v1/list?path=&recursive=1');
    for (const name of hostile) {
      const err = { status: 400, body: expect.objectContaining({ code: 'INVALID_PATH' }) as unknown };
      const bundle = encodeBundle([{ path: name, mtimeMs: 1, sha256: sha('x'), content: Buffer.from('x') }]);
      expect(await answer(a.req('POST', '/v1/bundles', bundle))).toMatchObject(err);
      expect(await answer(a.req('POST', '/v1/ops', { ops: [{ op: 'mkdir', path: name }] }))).toMatchObject(
        err,
      );
      expect(
        await answer(a.req('POST', '/v1/ops', { ops: [{ op: 'move', from: 'copy.bin', to: name }] })),
      ).toMatchObject(err);
      expect(
        await answer(a.req('POST', '/v1/ops', { ops: [{ op: 'copy', from: 'copy.bin', to: name }] })),
      ).toMatchObject(err);
      expect(
        await answer(
          a.req('POST', '/v1/transfers', { path: name, size: 3 * MiB, sha256: sha('y'), mtimeMs: 1 }),
        ),
      ).toMatchObject(err);
      expect(
        await answer(
          a.req(
            'POST',
            `/v1/deltas?path=${encodeURIComponent(name)}&baseRevision=r1&mtimeMs=1`,
            encodeDeltaContainer({
              baseSha256: sha(secret),
              targetSha256: sha('x'),
              targetSize: 1,
              delta: WFTD,
            }),
          ),
        ),
      ).toMatchObject(err);
    }
    const after = await a.json<{ entries: unknown[] }>('GET', '/v1/list?path=&recursive=1');
    expect(after.entries).toEqual(before.entries);
  });

  it('stillTakesNamesOtherPlatformsCannotHold', async () => {
    // Backslashes, drive letters, device names, trailing dots and spaces are legal here: the
    // agent stores them under an encoded local name (docs/client-engine.md).
    const names = ['back\\slash.txt', 'C:', 'CON', 'aux.txt', 'trailing.', 'space ', 'a:b?.txt'];
    await a.putSmall(Object.fromEntries(names.map((n) => [n, n])));
    for (const n of names) expect(await a.text(n)).toBe(n);
  });
});

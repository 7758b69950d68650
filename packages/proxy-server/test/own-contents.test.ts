/**
 * Own contents on the real proxy (issue #16): a write naming content this device sent to the
 * path and never heard back about takes a file holding it as its base — in a bundle (own
 * records, version 3), a large commit, a delta and a delete — and anything else there is
 * still a conflict. The crash it answers: a killed agent's request that the server finished
 * after the restarted agent had read the feed (packages/core/test/late-write.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collect, delta, signature } from '@weft/rsync-wasm';
import { encodeBundle, encodeDeltaContainer, type OpResult } from '@weft/wire';
import { pseudoRandom, sha, startTestServer, TestClient, uploadLarge } from './helpers.ts';

const MiB = 1024 * 1024;
let server: Awaited<ReturnType<typeof startTestServer>>;
let c: TestClient;

beforeAll(async () => {
  server = await startTestServer();
  c = await TestClient.enrol(server, 'own', 'laptop');
});
afterAll(async () => server.stop());

const text = (s: string) => new TextEncoder().encode(s);

async function bundle(path: string, content: string, rev: string | null, own?: string[]): Promise<OpResult> {
  const bytes = text(content);
  const body = encodeBundle([
    { path, rev, mtimeMs: 1_700_000_000_000, sha256: sha(bytes), content: bytes, ...(own ? { own } : {}) },
  ]);
  const res = await c.json<{ results: { result: OpResult }[] }>('POST', '/v1/bundles', body);
  return res.results[0]?.result as OpResult;
}

const revisionOf = (r: OpResult): string => (r.status === 'applied' ? (r.entry?.revision ?? '') : '');

async function paths(): Promise<string[]> {
  const l = await c.json<{ entries: { path: string }[] }>('GET', '/v1/list?path=&recursive=true');
  return l.entries.map((e) => e.path).sort();
}

describe('own contents', () => {
  it('a bundle entry: a file holding our unanswered content is written over; other content is a conflict', async () => {
    const first = await bundle('notes.txt', 'one', null);
    expect(first.status).toBe('applied');
    // "two" landed from a dead agent; the new one sends "three" against its old base.
    await bundle('notes.txt', 'two', revisionOf(first));
    const three = await bundle('notes.txt', 'three', revisionOf(first), [sha('two')]);
    expect(three.status).toBe('applied');
    expect(await c.text('notes.txt')).toBe('three');
    // Naming content that is not there changes nothing: a conflict as before.
    const four = await bundle('notes.txt', 'four', revisionOf(first), [sha('two')]);
    expect(four.status).toBe('conflict');
    expect((await paths()).filter((p) => p.startsWith('notes'))).toHaveLength(2);
  });

  it('a large commit naming the content there replaces it', async () => {
    const v1 = pseudoRandom(3 * MiB, 1);
    const v2 = Buffer.concat([v1, Buffer.from('grown after the crash')]);
    expect((await uploadLarge(c, 'big.bin', v1, { baseRevision: null })).status).toBe('applied');
    const stale = await uploadLarge(c, 'big.bin', v2, { baseRevision: null, own: [sha(v1)] });
    expect(stale.status).toBe('applied');
    expect(sha(await c.bytes('big.bin'))).toBe(sha(v2));
    expect((await paths()).filter((p) => p.startsWith('big'))).toEqual(['big.bin']);
  });

  it('a delta naming the content there replaces it', async () => {
    const v1 = pseudoRandom(3 * MiB, 2);
    const r1 = await uploadLarge(c, 'model.bin', v1, { baseRevision: null });
    const rev1 = revisionOf(r1);
    const v2 = Buffer.concat([v1.subarray(0, MiB), Buffer.from('the dead agent’s edit'), v1.subarray(MiB)]);
    expect((await uploadLarge(c, 'model.bin', v2, { baseRevision: rev1 })).status).toBe('applied');
    const v3 = Buffer.concat([v1.subarray(0, 2 * MiB), Buffer.from('the newer edit'), v1.subarray(2 * MiB)]);
    const sig = await collect(signature(v1, { blockSize: 64 * 1024 }));
    const container = encodeDeltaContainer({
      baseSha256: sha(v1),
      targetSha256: sha(v3),
      targetSize: v3.length,
      delta: await collect(delta(sig, v3)),
    });
    const bad = await c.req(
      'POST',
      `/v1/deltas?path=model.bin&baseRevision=${rev1}&mtimeMs=9&own=xyz`,
      container,
    );
    expect(bad.status).toBe(400);
    const res = await c.req(
      'POST',
      `/v1/deltas?path=model.bin&baseRevision=${rev1}&mtimeMs=9&own=${sha(v2)}`,
      container,
    );
    expect(await res.json()).toMatchObject({ status: 'applied' });
    expect(sha(await c.bytes('model.bin'))).toBe(sha(v3));
    expect((await paths()).filter((p) => p.startsWith('model'))).toEqual(['model.bin']);
  });

  it('a delete naming the content there goes ahead; naming other content it is dropped', async () => {
    const r1 = await bundle('gone.txt', 'one', null);
    await bundle('gone.txt', 'two', revisionOf(r1));
    const [kept] = await c.ops({
      op: 'delete',
      path: 'gone.txt',
      baseRevision: revisionOf(r1),
      own: [sha('x')],
    });
    expect(kept?.status).toBe('conflict');
    const [gone] = await c.ops({
      op: 'delete',
      path: 'gone.txt',
      baseRevision: revisionOf(r1),
      own: [sha('two')],
    });
    expect(gone?.status).toBe('applied');
    expect(await paths()).not.toContain('gone.txt');
  });

  it('refuses own contents that are not SHA-256s, or too many', async () => {
    const res = await c.req('POST', '/v1/ops', {
      ops: [{ op: 'delete', path: 'a', baseRevision: 'r1', own: ['nope'] }],
    });
    expect(res.status).toBe(400);
    const many = Array.from({ length: 17 }, (_, i) => sha(String(i)));
    const res2 = await c.req('POST', '/v1/ops', {
      ops: [{ op: 'delete', path: 'a', baseRevision: 'r1', own: many }],
    });
    expect(res2.status).toBe(400);
  });
});

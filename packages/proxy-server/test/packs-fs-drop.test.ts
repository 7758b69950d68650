/**
 * Dropping a small file's filesystem-tier copy once its pack is flushed (docs/formats/pack.md,
 * config `packs.fsCopy`), on the embedded object directory and on s3proxy: with 'drop' the
 * namespace file becomes a stub, reads (whole and ranged) come from the pack with one object
 * GET each, the tree (listing, move, delete) is unchanged, and recovery finds a stub the index
 * does not know; a forged stub (no valid MAC) stays the client's own bytes. With 'keep' the
 * copy stays whole and reads never touch the object tier. A batch download (POST
 * /v1/bundles/download) of dropped files reads adjacent ranges of one pack in one request.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeBundle } from '@weft/wire';
import type { ProxyConfigInput } from '../src/config.ts';
import type { SqlitePackIndex } from '../src/store/pack-index-sqlite.ts';
import { pseudoRandom, sha, startTestServer, tempDir, TestClient, packTiers } from './helpers.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

function tiers(): ReturnType<typeof packTiers> {
  return packTiers('packs-drop');
}

const started: Server[] = [];
afterAll(async () => {
  for (const s of started) await s.close().catch(() => undefined);
});

async function objectGets(server: Server): Promise<number> {
  const text = (await server.app.inject({ method: 'GET', url: '/metrics' })).body;
  const m = /weft_backend_requests_total\{backend="objects",kind="get"\} (\d+)/.exec(text);
  return m ? Number(m[1]) : 0;
}

const FORGED = `WEFTPACKED1\n${JSON.stringify({ sha256: 'a'.repeat(64), size: 5, mtimeMs: 1, mac: 'b'.repeat(64) })}\n`;

async function setup(
  objectTier: ProxyConfigInput['objectTier'] | undefined,
  fsCopy: 'keep' | 'drop',
): Promise<{ server: Server; alice: TestClient; files: Record<string, Buffer>; config: ProxyConfigInput }> {
  const config: ProxyConfigInput = {
    dataDir: await tempDir(),
    packs: { targetBytes: 64 * 1024 * 1024, timeoutMs: 2_000_000_000, gcIntervalMs: 0, fsCopy },
    // Each server its own prefix: a pack left by another test would be indexed at startup.
    ...(objectTier?.type === 's3'
      ? { objectTier: { ...objectTier, prefix: `${objectTier.prefix}-${Date.now()}-${fsCopy}` } }
      : {}),
  };
  const server = await startTestServer(config);
  started.push(server);
  const alice = await TestClient.enrol(server, 'alice');
  const files: Record<string, Buffer> = {};
  for (let i = 0; i < 6; i++) files[`d/f${i}.bin`] = pseudoRandom(5000 + i * 100, i + 1);
  files['d/forged.txt'] = Buffer.from(FORGED);
  for (const r of await alice.putSmall(files)) expect(r.result.status).toBe('applied');
  expect(await server.packer!.flush()).toBe(1);
  return { server, alice, files, config };
}

const stat = (c: TestClient, path: string): Promise<{ size: number; sha256?: string; revision: string }> =>
  c.json('GET', `/v1/stat?path=${encodeURIComponent(path)}`);

const onFs = (server: Server, path: string): Promise<Buffer> =>
  fsp.readFile(nodePath.join(server.config.dataDir, 'fs', 'ns', 'alice', path));

describe.each(tiers())('dropping packed fs copies on $name', ({ objectTier }) => {
  it('dropsTheCopyForAStubAndServesReadsFromThePackWithTheTreeUnchanged', async () => {
    const { server, alice, files, config } = await setup(objectTier, 'drop');
    for (const [path, body] of Object.entries(files)) {
      const stub = await onFs(server, path);
      expect(stub.subarray(0, 12).toString()).toBe('WEFTPACKED1\n');
      expect(stub.equals(body)).toBe(false);
      expect(stub.byteLength).toBeLessThan(512);
    }
    // Reads come from the pack: one ranged object GET per read, whole or a range of it.
    for (const [path, body] of Object.entries(files)) {
      const before = await objectGets(server);
      expect((await alice.bytes(path)).equals(body)).toBe(true);
      expect(await objectGets(server)).toBe(before + 1);
    }
    const res = await alice.get('d/f3.bin', 'bytes=100-199');
    expect(res.status).toBe(206);
    expect(Buffer.from(await res.arrayBuffer()).equals(files['d/f3.bin']!.subarray(100, 200))).toBe(true);
    // The tree is as it was: listing, sizes, hashes; a move and a delete work on the stub.
    const listed = await alice.json<{ entries: { path: string; size: number; sha256?: string }[] }>(
      'GET',
      '/v1/list?path=d',
    );
    for (const [path, body] of Object.entries(files))
      expect(listed.entries.find((e) => e.path === path)).toMatchObject({
        size: body.length,
        sha256: sha(body),
      });
    expect((await alice.ops({ op: 'move', from: 'd/f1.bin', to: 'd/moved.bin' }))[0]?.status).toBe('applied');
    expect((await alice.bytes('d/moved.bin')).equals(files['d/f1.bin']!)).toBe(true);
    expect((await alice.ops({ op: 'delete', path: 'd/f2.bin' }))[0]?.status).toBe('applied');
    // An overwrite writes a whole copy again; it is read from the fs tier until packed.
    const fresh = pseudoRandom(4000, 99);
    await alice.putSmall({ 'd/f4.bin': fresh }, { 'd/f4.bin': (await stat(alice, 'd/f4.bin')).revision });
    expect((await onFs(server, 'd/f4.bin')).equals(fresh)).toBe(true);
    expect((await alice.bytes('d/f4.bin')).equals(fresh)).toBe(true);

    // Recovery: the index still has f0's revision from before its stub (a kill -9 between
    // the stub's rename and the index update), and has lost f0's row of the dropped set; the
    // restarted server reconciles f0 from its stub and reads it from the pack again.
    const db = (server.packer!['o'].index as SqlitePackIndex)['db'];
    db.prepare(
      `UPDATE entries SET fs_revision = 'stale' WHERE user_id = 'alice' AND path IN ('d/f0.bin', 'd/forged.txt')`,
    ).run();
    db.prepare('DELETE FROM fs_dropped WHERE sha256 = ?').run(sha(files['d/f0.bin']!));
    await server.close();
    const again = await startTestServer(config);
    started.push(again);
    const alice2 = new TestClient(again.url, alice.token);
    expect((await stat(alice2, 'd/f0.bin')).sha256).toBe(sha(files['d/f0.bin']!));
    expect((await alice2.bytes('d/f0.bin')).equals(files['d/f0.bin']!)).toBe(true);
    expect((await alice2.bytes('d/moved.bin')).equals(files['d/f1.bin']!)).toBe(true);
    // The forged stub was the client's own upload: its MAC does not verify, it stays bytes.
    const forged = await stat(alice2, 'd/forged.txt');
    expect(forged.size).toBe(FORGED.length);
    expect(forged.sha256).not.toBe('a'.repeat(64));
  });

  it('batchDownloadReadsAdjacentRangesOfOnePackInOneRequest', async () => {
    const { server, alice, files } = await setup(objectTier, 'drop');
    // A second pack of 20 more files.
    const more: Record<string, Buffer> = {};
    for (let i = 0; i < 20; i++) more[`e/g${i}.bin`] = pseudoRandom(3000 + i, 500 + i);
    for (const r of await alice.putSmall(more)) expect(r.result.status).toBe('applied');
    expect(await server.packer!.flush()).toBe(1);
    const download = async (paths: string[]): Promise<ReturnType<typeof decodeBundle>> => {
      const res = await alice.req('POST', '/v1/bundles/download', { paths, compress: false });
      expect(res.status).toBe(200);
      return decodeBundle(new Uint8Array(await res.arrayBuffer()));
    };
    // All of the first pack's files: one ranged GET, not one per file.
    let before = await objectGets(server);
    let got = await download([...Object.keys(files), 'nope.bin']);
    expect(await objectGets(server)).toBe(before + 1);
    expect(got.entries).toHaveLength(Object.keys(files).length);
    for (const e of got.entries) expect(Buffer.from(e.content).equals(files[e.path]!)).toBe(true);
    expect(got.deferred).toEqual([{ index: Object.keys(files).length, reason: 'absent' }]);
    // Files of both packs, interleaved: one request per pack.
    const all = { ...files, ...more };
    const paths = Object.keys(all).sort((a, b) => (a.split('/')[1]! < b.split('/')[1]! ? -1 : 1));
    before = await objectGets(server);
    got = await download(paths);
    expect(await objectGets(server)).toBe(before + 2);
    expect(got.entries.map((e) => e.path)).toEqual(paths);
    for (const e of got.entries) expect(Buffer.from(e.content).equals(all[e.path]!)).toBe(true);
  });

  it('keepsTheCopyWhenThePolicySaysKeep', async () => {
    const { server, alice, files } = await setup(objectTier, 'keep');
    for (const [path, body] of Object.entries(files)) {
      expect((await onFs(server, path)).equals(body)).toBe(true);
      expect(await server.packer!.locate(sha(body))).toBeDefined();
    }
    const before = await objectGets(server);
    for (const [path, body] of Object.entries(files))
      expect((await alice.bytes(path)).equals(body)).toBe(true);
    expect(await objectGets(server)).toBe(before);
  });
});

/**
 * Reading a small file whose filesystem-tier copy is a pack stub that the pack index does not
 * know (issue #16): a process died after the stub replaced the copy but before the index
 * recorded it (or the fs_dropped row was lost), and reconciliation has not run yet (it runs
 * only at startup / on the controller). The stub's bytes must never be served as the file:
 * the read resolves the content the stub names (its MAC verified with the stub key, the bytes
 * checked against the content hash) from the packs, whole and ranged, and re-records the
 * dropped copy; when no pack holds the content, the read fails with a clear 5xx, at once.
 * Embedded object tier only: the path under test is the same on every object tier
 * (packs-fs-drop.test.ts covers s3proxy).
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { SqlitePackIndex } from '../src/store/pack-index-sqlite.ts';
import { pseudoRandom, sha, startTestServer, tempDir, TestClient } from './helpers.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

const started: Server[] = [];
afterAll(async () => {
  for (const s of started) await s.close().catch(() => undefined);
});

/** A GET that gives up after 5 s (a served stub under the file's Content-Length never ends). */
async function get(c: TestClient, path: string, range?: string): Promise<{ status: number; body: Buffer }> {
  const res = await fetch(`${c.url}/v1/files?path=${encodeURIComponent(path)}`, {
    headers: c.headers(range ? { range } : {}),
    signal: AbortSignal.timeout(5000),
  });
  return { status: res.status, body: Buffer.from(await res.arrayBuffer()) };
}

async function setup(): Promise<{ server: Server; alice: TestClient; files: Record<string, Buffer> }> {
  const server = await startTestServer({
    dataDir: await tempDir(),
    packs: { targetBytes: 64 * 1024 * 1024, timeoutMs: 2_000_000_000, gcIntervalMs: 0, fsCopy: 'drop' },
  });
  started.push(server);
  const alice = await TestClient.enrol(server, 'alice');
  const files: Record<string, Buffer> = {};
  for (let i = 0; i < 3; i++) files[`d/f${i}.bin`] = pseudoRandom(4000 + i * 100, i + 7);
  for (const r of await alice.putSmall(files)) expect(r.result.status).toBe('applied');
  expect(await server.packer!.flush()).toBe(1);
  return { server, alice, files };
}

describe('a stub the pack index does not know', () => {
  it('readsTheContentTheStubNamesFromItsPackWholeAndRangedNeverTheStubBytes', async () => {
    const { server, alice, files } = await setup();
    const body = files['d/f0.bin']!;
    const db = (server.packer!['o'].index as SqlitePackIndex)['db'];
    // The crash: the stub is on the fs tier, the dropped set has lost its row.
    db.prepare('DELETE FROM fs_dropped WHERE sha256 = ?').run(sha(body));
    const whole = await get(alice, 'd/f0.bin');
    expect(whole.status).toBe(200);
    expect(whole.body.equals(body)).toBe(true);
    const part = await get(alice, 'd/f0.bin', 'bytes=100-299');
    expect(part.status).toBe(206);
    expect(part.body.equals(body.subarray(100, 300))).toBe(true);
    // Repaired: the content is in the dropped set again.
    expect(db.prepare('SELECT count(*) AS n FROM fs_dropped WHERE sha256 = ?').get(sha(body))).toEqual({
      n: 1,
    });
    expect((await alice.bytes('d/f1.bin')).equals(files['d/f1.bin']!)).toBe(true);
  });

  it('failsTheReadWithA5xxWhenNoPackHoldsTheContentTheStubNames', async () => {
    const { server, alice, files } = await setup();
    const body = files['d/f2.bin']!;
    const db = (server.packer!['o'].index as SqlitePackIndex)['db'];
    db.prepare('DELETE FROM fs_dropped WHERE sha256 = ?').run(sha(body));
    db.prepare('DELETE FROM pack_entries WHERE sha256 = ?').run(sha(body));
    for (const range of [undefined, 'bytes=0-99']) {
      const res = await get(alice, 'd/f2.bin', range);
      expect(res.status).toBeGreaterThanOrEqual(500);
      expect(res.body.includes(Buffer.from('WEFTPACKED1'))).toBe(false);
      expect(res.body.toString()).toContain('pack');
    }
    // The other files of the pack still read.
    expect((await alice.bytes('d/f1.bin')).equals(files['d/f1.bin']!)).toBe(true);
  });
});

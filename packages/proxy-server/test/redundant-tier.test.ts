/**
 * The proxy with its object tier on the redundant tier (issue #17, docs/redundancy.md):
 * five directory backends, RS(3, 2). A large upload is stored as five fragment objects,
 * one per backend; it downloads whole and by range through the relay, also with two
 * backends' fragments deleted; GC removes a superseded object's fragments everywhere.
 * A bad redundant config is refused before anything starts.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TransferState } from '@weft/wire';
import { encodeTransferBlock } from '@weft/wire';
import { parseConfig } from '../src/config.ts';
import { pseudoRandom, sha, startTestServer, streamBlocks, tempDir, TestClient } from './helpers.ts';

const MiB = 1024 * 1024;
let server: Awaited<ReturnType<typeof startTestServer>>;
let c: TestClient;
let roots: string[] = [];

beforeAll(async () => {
  const base = await tempDir('weft-proxy-redundant-');
  roots = [0, 1, 2, 3, 4].map((i) => nodePath.join(base, `backend${i}`));
  server = await startTestServer({
    versions: { retentionDays: 0 },
    objectTier: {
      type: 'redundant',
      backends: roots.map((dir, i) => ({ id: `d${i}`, type: 'fs' as const, dir })),
      thresholdBytes: 64 * 1024,
      maxShardBytes: 512 * 1024,
      probeIntervalMs: 0,
    },
  });
  c = await TestClient.enrol(server, 'ruser', 'dev');
});
afterAll(async () => server?.stop());

async function upload(path: string, data: Buffer): Promise<void> {
  const t = await c.json<TransferState>('POST', '/v1/transfers', {
    path,
    size: data.length,
    sha256: sha(data),
    mtimeMs: 3,
  });
  const frames: Uint8Array[] = [];
  for (let off = 0, seq = 0; off < data.length; off += 4 * MiB, seq++) {
    frames.push(
      encodeTransferBlock({
        transferId: t.transferId,
        seq,
        offset: off,
        last: off + 4 * MiB >= data.length,
        payload: data.subarray(off, off + 4 * MiB),
      }),
    );
  }
  expect((await streamBlocks(c, frames)).every((r) => r.type === 'block-ack')).toBe(true);
  const [r] = await c.ops({
    op: 'commit',
    path,
    sha256: sha(data),
    size: data.length,
    mtimeMs: 3,
    transferId: t.transferId,
  });
  expect(r).toMatchObject({ status: 'applied', entry: { tier: 'large' } });
}

async function fragmentFiles(root: string): Promise<string[]> {
  const dir = nodePath.join(root, '.weft-redundant');
  const out: string[] = [];
  for (const sub of await fsp.readdir(dir).catch(() => [])) {
    for (const f of await fsp.readdir(nodePath.join(dir, sub))) out.push(nodePath.join(dir, sub, f));
  }
  return out.filter((f) => /\.f\d+$/.test(f));
}

describe('object tier on the redundant tier', () => {
  it('storesLargeFilesAsFragmentsAndReadsThemWithTwoBackendsLost', async () => {
    const data = pseudoRandom(6 * MiB + 5, 17);
    await upload('big/one.bin', data);
    const perBackend = await Promise.all(roots.map(fragmentFiles));
    for (const files of perBackend) expect(files).toHaveLength(1);
    await server.store.relay.forget(sha(data));
    expect(sha(await c.bytes('big/one.bin'))).toBe(sha(data));
    const part = await c.get('big/one.bin', 'bytes=3000000-3999999');
    expect(part.status).toBe(206);
    expect(Buffer.from(await part.arrayBuffer()).equals(data.subarray(3_000_000, 4_000_000))).toBe(true);
    // Two backends lose their fragment: the download still succeeds, from the other three.
    await fsp.rm(perBackend[0]![0]!);
    await fsp.rm(perBackend[3]![0]!);
    await server.store.relay.forget(sha(data));
    expect(sha(await c.bytes('big/one.bin'))).toBe(sha(data));
    // A superseded object's fragments go at GC, from every backend that still had one.
    const v2 = pseudoRandom(2 * MiB, 18);
    await upload('big/two.bin', v2);
    await c.ops({ op: 'delete', path: 'big/one.bin' });
    await server.gc(0);
    const left = (await Promise.all(roots.map(fragmentFiles))).flat();
    expect(left).toHaveLength(5);
    await server.store.relay.forget(sha(v2));
    expect(sha(await c.bytes('big/two.bin'))).toBe(sha(v2));
    const text = (await server.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(text).toMatch(/weft_redundant_backend_up\{backend="d0"\} 1/);
    expect(text).toMatch(/weft_redundant_outage_log_entries\{backend="d4"\} 0/);
    // The deleted fragments were found bad on the download that followed.
    expect(text).toMatch(/weft_redundant_events_total\{kind="failedFragmentReads"\} [1-9]/);
  });

  it('refusesABadRedundantConfig', () => {
    const tier = (extra: object) => ({
      objectTier: {
        type: 'redundant',
        backends: [
          { id: 'a', type: 'fs', dir: '/x' },
          { id: 'a', type: 'fs', dir: '/y' },
        ],
        ...extra,
      },
    });
    expect(() => parseConfig(tier({}))).toThrow(/distinct/);
    expect(() => parseConfig({ objectTier: { type: 'redundant', backends: [] } })).toThrow();
    expect(() => parseConfig(tier({ k: 1 }))).toThrow();
  });
});

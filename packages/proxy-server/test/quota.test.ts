/**
 * Per-user storage quotas (issue #14): usage is the logical bytes a namespace holds, counted
 * at the stored (expanded) size; every write path refuses a write that would pass the limit
 * with 507 QUOTA_EXCEEDED (used/limit in the body) and stores nothing of it; a compressed
 * bundle is refused while it is expanded; deleting frees quota; usage is served at /v1/usage.
 */
import { readFileSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collect, delta, signature } from '@weft/rsync-wasm';
import {
  encodeBundle,
  encodeDeltaContainer,
  encodeTransferBlock,
  type BundleEntry,
  type OpResult,
  type TransferState,
  type UsageResponse,
} from '@weft/wire';
import { QuotaExceededError } from '@weft/providers';
import { parseConfig, quotaLimit } from '../src/config.ts';
import { NamespaceProvider } from '../src/shares/namespace-provider.ts';
import { pseudoRandom, sha, startTestServer, TestClient } from './helpers.ts';

const MiB = 1024 * 1024;
const LIMIT = 8 * MiB;

/** Bytes this process has passed to write(2) so far (Linux /proc/self/io `wchar`). */
function bytesWritten(): number {
  const m = /^wchar:\s+(\d+)$/m.exec(readFileSync('/proc/self/io', 'utf8'));
  return Number(m?.[1] ?? NaN);
}

function entry(path: string, content: Uint8Array): BundleEntry {
  return { path, mtimeMs: 1_700_000_000_000, sha256: sha(content), content };
}

async function errorOf(
  res: Response,
): Promise<{ status: number; code?: string; details?: Record<string, unknown> }> {
  const body = (await res.json()) as { error?: { code?: string; details?: Record<string, unknown> } };
  return { status: res.status, code: body.error?.code, details: body.error?.details };
}

/** Every file under a namespace's directory on the filesystem tier, with its size. */
async function tierFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await fsp.readdir(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) out.push(nodePath.relative(dir, nodePath.join(e.parentPath, e.name)));
  }
  return out.sort();
}

let server: Awaited<ReturnType<typeof startTestServer>>;

beforeAll(async () => {
  server = await startTestServer({
    // Kept versions (versions.test.ts) are left out: usage here is the live files only.
    versions: { retentionDays: 0 },
    quota: { defaultBytes: LIMIT, users: { roomy: null, small: 2 * MiB } },
  });
});
afterAll(async () => {
  await server.stop();
});

async function usage(c: TestClient): Promise<UsageResponse> {
  return c.json<UsageResponse>('GET', '/v1/usage');
}

describe('quota', () => {
  it('servesUsageAndLimitPerUser', async () => {
    const c = await TestClient.enrol(server, 'usage');
    expect(await usage(c)).toEqual({ user: 'usage', usedBytes: 0, limitBytes: LIMIT });
    await c.putSmall({ 'a.txt': 'hello', 'd/b.txt': 'world!' });
    expect(await usage(c)).toEqual({ user: 'usage', usedBytes: 11, limitBytes: LIMIT });
    expect((await usage(await TestClient.enrol(server, 'roomy'))).limitBytes).toBeNull();
    expect((await usage(await TestClient.enrol(server, 'small'))).limitBytes).toBe(2 * MiB);
  });

  it('refusesACompressedBundleThatExpandsPastTheRemainingQuota', async () => {
    const c = await TestClient.enrol(server, 'bomb');
    await c.putSmall({ 'keep.bin': pseudoRandom(MiB, 1) });
    const before = await c.json<unknown>('GET', '/v1/list?path=&recursive=1');
    const remaining = LIMIT - MiB;
    // 60 MiB of zeros in one entry: a bundle of about 61 KB.
    const bomb = encodeBundle([entry('bomb.bin', new Uint8Array(60 * MiB))], { compress: true });
    expect(bomb.byteLength).toBeLessThan(64 * 1024);
    const written = bytesWritten();
    const res = await c.req('POST', '/v1/bundles', bomb);
    const wrote = bytesWritten() - written;
    expect(await errorOf(res)).toMatchObject({
      status: 507,
      code: 'QUOTA_EXCEEDED',
      details: { usedBytes: MiB, limitBytes: LIMIT },
    });
    expect(wrote, 'bytes written while refusing').toBeLessThan(remaining + 64 * 1024);
    // Many 1 MiB entries: refused at the first one past the quota, none of them applied.
    const many = encodeBundle(
      Array.from({ length: 12 }, (_, i) => entry(`many/${i}.bin`, new Uint8Array(MiB))),
      { compress: true },
    );
    expect(await errorOf(await c.req('POST', '/v1/bundles', many))).toMatchObject({
      status: 507,
      code: 'QUOTA_EXCEEDED',
    });
    expect(await c.json<unknown>('GET', '/v1/list?path=&recursive=1')).toEqual(before);
    expect(await tierFiles(nodePath.join(server.dir, 'fs', 'ns', 'bomb'))).toEqual(['keep.bin']);
    expect((await usage(c)).usedBytes).toBe(MiB);
  });

  it('refusesALargeEntryOfABundleWholeBundleAndAll', async () => {
    const c = await TestClient.enrol(server, 'mixed', 'dev');
    await c.putSmall({ 'base.bin': pseudoRandom(3.5 * MiB, 2) });
    // A small file that fits and a large one that does not: neither is stored.
    const res = await c.req(
      'POST',
      '/v1/bundles',
      encodeBundle([entry('fits.txt', new Uint8Array(10)), entry('big.bin', new Uint8Array(4.5 * MiB + 1))], {
        compress: true,
      }),
    );
    expect(await errorOf(res)).toMatchObject({ status: 507, code: 'QUOTA_EXCEEDED' });
    expect((await usage(c)).usedBytes).toBe(3.5 * MiB);
    expect((await c.get('fits.txt')).status).toBe(404);
  });

  it('refusesAtTheLimitOnEveryWritePath', async () => {
    const c = await TestClient.enrol(server, 'paths');
    const six = pseudoRandom(6 * MiB, 4);
    // A large file through a transfer (fits: 6 of 8 MiB).
    const up = async (path: string, data: Buffer): Promise<OpResult> => {
      const t = await c.json<TransferState>('POST', '/v1/transfers', {
        path,
        size: data.length,
        sha256: sha(data),
        mtimeMs: 1,
      });
      for (let off = 0, seq = 0; off < data.length; off += 4 * MiB, seq++) {
        const block = encodeTransferBlock({
          transferId: t.transferId,
          seq,
          offset: off,
          last: off + 4 * MiB >= data.length,
          payload: data.subarray(off, off + 4 * MiB),
        });
        await c.json('PUT', `/v1/transfers/${t.transferId}/blocks`, block);
      }
      const [r] = await c.ops({
        op: 'commit',
        path,
        transferId: t.transferId,
        sha256: sha(data),
        size: data.length,
        mtimeMs: 1,
      });
      return r!;
    };
    const first = await up('big.bin', six);
    expect(first.status).toBe('applied');
    const rev = first.status === 'applied' ? first.entry?.revision : undefined;

    // Transfer: a declared size past the remaining 2 MiB is refused when it is opened.
    const three = pseudoRandom(3 * MiB, 5);
    const open = await c.req('POST', '/v1/transfers', {
      path: 'more.bin',
      size: three.length,
      sha256: sha(three),
      mtimeMs: 1,
    });
    expect(await errorOf(open)).toMatchObject({
      status: 507,
      code: 'QUOTA_EXCEEDED',
      details: { usedBytes: 6 * MiB, limitBytes: LIMIT },
    });

    // Commit: a transfer opened while it fitted, committed after the space was taken.
    const oneHalf = pseudoRandom(1.5 * MiB, 6);
    const t = await c.json<TransferState>('POST', '/v1/transfers', {
      path: 'late.bin',
      size: oneHalf.length,
      sha256: sha(oneHalf),
      mtimeMs: 1,
    });
    await c.json(
      'PUT',
      `/v1/transfers/${t.transferId}/blocks`,
      encodeTransferBlock({ transferId: t.transferId, seq: 0, offset: 0, last: true, payload: oneHalf }),
    );
    await c.putSmall({ 'filler.bin': pseudoRandom(MiB, 7) });
    const [late] = await c.ops({
      op: 'commit',
      path: 'late.bin',
      transferId: t.transferId,
      sha256: sha(oneHalf),
      size: oneHalf.length,
      mtimeMs: 1,
    });
    expect(late).toMatchObject({ status: 'error', error: { code: 'QUOTA_EXCEEDED' } });

    // Copy: 6 MiB more than the 1 MiB left.
    const [copied] = await c.ops({ op: 'copy', from: 'big.bin', to: 'big-copy.bin' });
    expect(copied).toMatchObject({ status: 'error', error: { code: 'QUOTA_EXCEEDED' } });

    // Delta: a target 2 MiB longer than its base.
    const v2 = Buffer.concat([six, pseudoRandom(2 * MiB, 8)]);
    const d = await collect(delta(await collect(signature(six, { blockSize: 4096 })), v2));
    const container = encodeDeltaContainer(
      { baseSha256: sha(six), targetSha256: sha(v2), targetSize: v2.length, delta: d },
      { compress: true },
    );
    const res = await c.req('POST', `/v1/deltas?path=big.bin&baseRevision=${rev}&mtimeMs=2`, container);
    expect(await errorOf(res)).toMatchObject({ status: 507, code: 'QUOTA_EXCEEDED' });

    // Mirror writes (a shared folder's replica in this namespace): the provider's QuotaExceeded.
    const ns = new NamespaceProvider({
      store: server.store,
      scheduler: server.scheduler,
      writer: { userId: 'paths', deviceId: 'mirror:test', deviceName: 'mirror' },
    });
    await expect(ns.write('mirrored.bin', pseudoRandom(2 * MiB, 9))).rejects.toBeInstanceOf(
      QuotaExceededError,
    );

    // Nothing of any refused write is there, and usage is what was accepted.
    expect((await usage(c)).usedBytes).toBe(7 * MiB);
    for (const p of ['more.bin', 'late.bin', 'big-copy.bin', 'mirrored.bin'])
      expect((await c.get(p)).status).toBe(404);
    expect(sha(await c.bytes('big.bin'))).toBe(sha(six));

    // A write that frees space or keeps the size still goes through at the limit.
    const [smaller] = await c.putSmall({ 'filler.bin': 'tiny' });
    expect(smaller?.result.status).toBe('applied');
  });

  it('deletingFreesQuota', async () => {
    const c = await TestClient.enrol(server, 'small');
    await c.putSmall({ 'one.bin': pseudoRandom(MiB, 10), 'two.bin': pseudoRandom(MiB - 100, 11) });
    const refused = await c.req(
      'POST',
      '/v1/bundles',
      encodeBundle([entry('three.bin', pseudoRandom(MiB, 12))]),
    );
    expect((await errorOf(refused)).status).toBe(507);
    const [del] = await c.ops({ op: 'delete', path: 'one.bin' });
    expect(del?.status).toBe('applied');
    expect((await usage(c)).usedBytes).toBe(MiB - 100);
    const [ok] = await c.putSmall({ 'three.bin': pseudoRandom(MiB, 12) });
    expect(ok?.result.status).toBe('applied');
    expect(await usage(c)).toEqual({ user: 'small', usedBytes: 2 * MiB - 100, limitBytes: 2 * MiB });
  });

  it('concurrentWritesCannotTogetherPassTheLimit', async () => {
    const c = await TestClient.enrol(server, 'race');
    const bundles = Array.from({ length: 4 }, (_, k) =>
      encodeBundle([
        entry(`r${k}/x.bin`, pseudoRandom(1.5 * MiB, 20 + k)),
        entry(`r${k}/y.bin`, pseudoRandom(1.5 * MiB, 30 + k)),
      ]),
    );
    const statuses = await Promise.all(
      bundles.map(async (b) => (await c.req('POST', '/v1/bundles', b)).status),
    );
    expect(statuses.filter((s) => s === 200)).toHaveLength(2);
    expect(statuses.filter((s) => s === 507)).toHaveLength(2);
    expect((await usage(c)).usedBytes).toBe(6 * MiB);
  });
});

describe('quota config', () => {
  it('defaultsToUnlimitedWithPerUserOverrides', () => {
    const none = parseConfig({});
    expect(quotaLimit(none.quota, 'anyone')).toBeUndefined();
    const set = parseConfig({ quota: { users: { alice: 5 } } }, { WEFT_PROXY_QUOTA_BYTES: '1000' });
    expect(quotaLimit(set.quota, 'bob')).toBe(1000);
    expect(quotaLimit(set.quota, 'alice')).toBe(5);
    expect(() => parseConfig({ quota: { defaultBytes: -1 } })).toThrow(/quota/);
  });
});

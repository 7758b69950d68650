/** The same store with the object tier on S3 (s3proxy started by the global setup). */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { collect, delta, signature } from '@weft/rsync-wasm';
import { encodeDeltaContainer, encodeTransferBlock, type OpResult, type TransferState } from '@weft/wire';
import { pseudoRandom, sha, startTestServer, streamBlocks, TestClient } from './helpers.ts';

const MiB = 1024 * 1024;
let server: Awaited<ReturnType<typeof startTestServer>>;
let c: TestClient;

beforeAll(async () => {
  const s3 = inject('proxyS3');
  server = await startTestServer({
    // The superseded object must go at the first GC past the grace period: no kept versions.
    versions: { retentionDays: 0 },
    objectTier: {
      type: 's3',
      bucket: s3.bucket,
      prefix: `run-${Date.now()}`,
      endpoint: s3.endpoint,
      region: s3.region,
      forcePathStyle: s3.forcePathStyle,
      accessKeyId: s3.accessKeyId,
      secretAccessKey: s3.secretAccessKey,
    },
  });
  c = await TestClient.enrol(server, 's3user', 'dev');
});
afterAll(async () => server?.stop());

describe('object tier on S3', () => {
  it('storesLargeFilesAsObjectsAndServesThemThroughTheRelay', async () => {
    const data = pseudoRandom(6 * MiB + 5, 11);
    const t = await c.json<TransferState>('POST', '/v1/transfers', {
      path: 'big/one.bin',
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
      path: 'big/one.bin',
      sha256: sha(data),
      size: data.length,
      mtimeMs: 3,
      transferId: t.transferId,
    });
    expect(r).toMatchObject({ status: 'applied', entry: { tier: 'large' } });
    await server.store.relay.forget(sha(data));
    expect(sha(await c.bytes('big/one.bin'))).toBe(sha(data));
    // Delta upload with the base staged from S3.
    const rev = r?.status === 'applied' ? r.entry?.revision : '';
    const v2 = Buffer.concat([data.subarray(0, 3 * MiB), Buffer.from('edit'), data.subarray(3 * MiB)]);
    await server.store.relay.forget(sha(data));
    const d = await collect(delta(await collect(signature(data, { blockSize: 8192 })), v2));
    const res = await c.req(
      'POST',
      `/v1/deltas?path=big%2Fone.bin&baseRevision=${rev}&mtimeMs=4`,
      encodeDeltaContainer(
        { baseSha256: sha(data), targetSha256: sha(v2), targetSize: v2.length, delta: d },
        { compress: true },
      ),
    );
    expect(((await res.json()) as OpResult).status).toBe('applied');
    expect(sha(await c.bytes('big/one.bin'))).toBe(sha(v2));
    // GC after the grace period removes the superseded object from S3.
    expect((await server.gc(0)).objects).toBe(1);
    expect(sha(await c.bytes('big/one.bin'))).toBe(sha(v2));
  });
});

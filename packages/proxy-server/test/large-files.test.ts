import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as nodePath from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collect, delta, patch, signature } from '@weft/rsync-wasm';
import {
  decodeBundle,
  decodeDeltaContainer,
  encodeDeltaContainer,
  type BlockAck,
  type EntryInfo,
  type OpResult,
  type TransferState,
} from '@weft/wire';
import {
  decodeLinkFile,
  objectKey,
  signatureBlockSize,
  signatureKey,
  signatureStrongLength,
} from '../src/index.ts';
import {
  pseudoRandom,
  sha,
  startTestServer,
  streamBlocks,
  TestClient,
  transferFrames,
  uploadLarge as uploadTo,
} from './helpers.ts';

const MiB = 1024 * 1024;
let server: Awaited<ReturnType<typeof startTestServer>>;
let c: TestClient;

beforeAll(async () => {
  // No kept versions: these tests watch objects freed as soon as nothing references them
  // (versions.test.ts covers objects kept by versions).
  server = await startTestServer({ versions: { retentionDays: 0 } });
  c = await TestClient.enrol(server, 'big', 'desk');
});
afterAll(async () => server.stop());

const frames = transferFrames;

function uploadLarge(path: string, data: Buffer, base?: string | null): Promise<OpResult> {
  return uploadTo(c, path, data, {
    mtimeMs: 1_700_000_000_000,
    ...(base !== undefined ? { baseRevision: base } : {}),
  });
}

describe('large files', () => {
  it('uploadsBlocksWithAsyncAcksResumesAndCommits', async () => {
    const data = pseudoRandom(5 * MiB + 123, 1);
    const t = await c.json<TransferState>('POST', '/v1/transfers', {
      path: 'media/video.bin',
      size: data.length,
      sha256: sha(data),
      mtimeMs: 5,
    });
    expect(t.haveObject).toBe(false);
    const all = frames(t.transferId, data, MiB, true);
    // First connection: only some blocks arrive (out of order), then the link drops.
    const first = await streamBlocks(
      c,
      [all[3], all[0], all[5]].filter((f): f is Uint8Array => f !== undefined),
    );
    expect(first.map((r) => (r as BlockAck).seq).sort()).toEqual([0, 3, 5]);
    const state = await c.json<TransferState>('GET', `/v1/transfers/${t.transferId}`);
    expect(state.received).toEqual([
      { offset: 0, length: MiB },
      { offset: 3 * MiB, length: MiB },
      { offset: 5 * MiB, length: 123 },
    ]);
    const [early] = await c.ops({
      op: 'commit',
      path: 'media/video.bin',
      sha256: sha(data),
      size: data.length,
      mtimeMs: 5,
      transferId: t.transferId,
    });
    expect(early).toMatchObject({ status: 'error', error: { code: 'TRANSFER_INCOMPLETE' } });
    // Second connection: only the missing blocks (one also over plain HTTP).
    const second = await streamBlocks(
      c,
      [all[1], all[2]].filter((f): f is Uint8Array => f !== undefined),
    );
    expect(second.every((r) => r.type === 'block-ack')).toBe(true);
    const put = await c.req('PUT', `/v1/transfers/${t.transferId}/blocks`, all[4]);
    expect(((await put.json()) as BlockAck).receivedBytes).toBe(data.length);
    const [done] = await c.ops({
      op: 'commit',
      path: 'media/video.bin',
      sha256: sha(data),
      size: data.length,
      mtimeMs: 5,
      transferId: t.transferId,
    });
    expect(done).toMatchObject({
      status: 'applied',
      entry: { tier: 'large', size: data.length, sha256: sha(data) },
    });
    // Stored as a link file in the filesystem tier and an object in the object tier.
    const link = decodeLinkFile(
      readFileSync(nodePath.join(server.dir, 'fs/ns/big/media/video.bin.weftlink')),
    );
    expect(link).toMatchObject({ sha256: sha(data), size: data.length, object: objectKey(sha(data)) });
    expect(link.chunks.map((ch) => ch.length)).toEqual([4 * MiB, MiB + 123]);
    expect(existsSync(nodePath.join(server.dir, 'objects', objectKey(sha(data))))).toBe(true);
    expect(sha(await c.bytes('media/video.bin'))).toBe(sha(data));
    const part = await c.get('media/video.bin', `bytes=${4 * MiB}-${4 * MiB + 9}`);
    expect(part.status).toBe(206);
    expect(Buffer.from(await part.arrayBuffer())).toEqual(data.subarray(4 * MiB, 4 * MiB + 10));
    expect((await c.req('GET', `/v1/transfers/${t.transferId}`)).status).toBe(404);
  });

  it('rejectsACommitWhoseBytesDoNotHash', async () => {
    const data = pseudoRandom(3 * MiB, 2);
    const t = await c.json<TransferState>('POST', '/v1/transfers', {
      path: 'bad.bin',
      size: data.length,
      sha256: sha('other'),
      mtimeMs: 1,
    });
    await streamBlocks(c, frames(t.transferId, data, MiB));
    const [r] = await c.ops({
      op: 'commit',
      path: 'bad.bin',
      sha256: sha('other'),
      size: data.length,
      mtimeMs: 1,
      transferId: t.transferId,
    });
    expect(r).toMatchObject({ status: 'error', error: { code: 'HASH_MISMATCH' } });
    expect((await c.req('GET', '/v1/stat?path=bad.bin')).status).toBe(404);
  });

  it('copyIsANewReferenceAndGcWaitsForTheGracePeriod', async () => {
    const data = pseudoRandom(3 * MiB, 3);
    await uploadLarge('dedup/a.bin', data);
    const t = await c.json<TransferState>('POST', '/v1/transfers', {
      path: 'dedup/b.bin',
      size: data.length,
      sha256: sha(data),
      mtimeMs: 1,
    });
    expect(t.haveObject).toBe(true);
    const [linked] = await c.ops({
      op: 'commit',
      path: 'dedup/b.bin',
      sha256: sha(data),
      size: data.length,
      mtimeMs: 1,
    });
    expect(linked?.status).toBe('applied');
    const [copied] = await c.ops({ op: 'copy', from: 'dedup', to: 'dedup2' });
    expect(copied?.status).toBe('applied');
    expect((await server.store.meta.getObject(sha(data)))?.refcount).toBe(4);
    await c.ops({ op: 'delete', path: 'dedup' }, { op: 'delete', path: 'dedup2' });
    expect(await server.store.meta.getObject(sha(data))).toMatchObject({ refcount: 0 });
    expect((await server.gc()).objects).toBe(0); // within the 24 h grace period
    expect(await server.store.meta.getObject(sha(data))).toBeDefined();
    expect((await server.gc(0)).objects).toBeGreaterThanOrEqual(1);
    expect(await server.store.meta.getObject(sha(data))).toBeUndefined();
    expect(existsSync(nodePath.join(server.dir, 'objects', objectKey(sha(data))))).toBe(false);
  });

  it('appliesADeltaUploadAndRejectsAnUnknownBase', async () => {
    const v1 = pseudoRandom(4 * MiB, 4);
    const r1 = await uploadLarge('doc/model.bin', v1);
    const rev1 = r1.status === 'applied' ? r1.entry?.revision : undefined;
    const v2 = Buffer.concat([
      v1.subarray(0, MiB),
      Buffer.from('an edit in the middle'),
      v1.subarray(MiB + 100),
    ]);
    const sig = await collect(signature(v1, { blockSize: 4096 }));
    const d = await collect(delta(sig, v2));
    const container = encodeDeltaContainer(
      { baseSha256: sha(v1), targetSha256: sha(v2), targetSize: v2.length, delta: d },
      { compress: true },
    );
    expect(container.byteLength).toBeLessThan(v2.length / 10);
    const res = await c.req(
      'POST',
      `/v1/deltas?path=doc%2Fmodel.bin&baseRevision=${rev1}&mtimeMs=7`,
      container,
    );
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: 'applied', entry: { sha256: sha(v2), tier: 'large' } });
    expect(sha(await c.bytes('doc/model.bin'))).toBe(sha(v2));
    const unknown = encodeDeltaContainer({
      baseSha256: sha('never seen'),
      targetSha256: sha(v2),
      targetSize: v2.length,
      delta: d,
    });
    const bad = await c.req(
      'POST',
      `/v1/deltas?path=doc%2Fmodel.bin&baseRevision=${rev1}&mtimeMs=7`,
      unknown,
    );
    expect(bad.status).toBe(409);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe('DELTA_BASE_UNKNOWN');
    // A stale base revision with a known base still applies — as a conflicted copy.
    const stale = await c.req(
      'POST',
      `/v1/deltas?path=doc%2Fmodel.bin&baseRevision=${rev1}&mtimeMs=7`,
      container,
    );
    expect(await stale.json()).toMatchObject({ status: 'applied' }); // same content already current: no conflict
    const v3 = Buffer.concat([
      v1.subarray(0, 2 * MiB),
      Buffer.from('a different edit'),
      v1.subarray(2 * MiB),
    ]);
    const d3 = await collect(delta(sig, v3));
    const c3 = encodeDeltaContainer({
      baseSha256: sha(v1),
      targetSha256: sha(v3),
      targetSize: v3.length,
      delta: d3,
    });
    const conflict = await c.req(
      'POST',
      `/v1/deltas?path=doc%2Fmodel.bin&baseRevision=${rev1}&mtimeMs=8`,
      c3,
    );
    const body = (await conflict.json()) as OpResult;
    expect(body.status).toBe('conflict');
    if (body.status !== 'conflict') return;
    expect(sha(await c.bytes(body.conflict.conflictPath))).toBe(sha(v3));
    expect(sha(await c.bytes('doc/model.bin'))).toBe(sha(v2));
  });

  it('storesTheSignatureAndServesItAsADeltaUploadBase', async () => {
    const v1 = pseudoRandom(5 * MiB + 123, 11);
    const r1 = await uploadLarge('sig/data.bin', v1);
    const rev1 = r1.status === 'applied' ? r1.entry?.revision : undefined;
    // The link file names the signature, stored content-addressed in the object tier.
    const link = decodeLinkFile(
      readFileSync(nodePath.join(server.dir, 'fs', 'ns', 'big', 'sig', 'data.bin.weftlink')),
    );
    const blockSize = signatureBlockSize(v1.length);
    expect(link.signature).toEqual({ object: signatureKey(sha(v1), blockSize), blockSize });
    const stored = readFileSync(nodePath.join(server.dir, 'objects', link.signature!.object));
    // Strong hash sized as rsync would, plus a byte: 3 bytes a block here, not the default 8.
    const strongLength = signatureStrongLength(v1.length, blockSize);
    expect(strongLength).toBe(3);
    expect(sha(stored)).toBe(sha(await collect(signature(v1, { blockSize, strongLength }))));
    // A client holding only its edited copy fetches the signature and sends a delta.
    const res = await c.req('GET', '/v1/signature?path=sig%2Fdata.bin');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-weft-sha256')).toBe(sha(v1));
    const sig = new Uint8Array(await res.arrayBuffer());
    expect(sha(sig)).toBe(sha(stored));
    const v2 = Buffer.concat([v1.subarray(0, 2 * MiB), Buffer.from('edited'), v1.subarray(2 * MiB + 6)]);
    const d = await collect(delta(sig, v2));
    const container = encodeDeltaContainer(
      { baseSha256: sha(v1), targetSha256: sha(v2), targetSize: v2.length, delta: d },
      { compress: true },
    );
    expect(container.byteLength).toBeLessThan(v2.length / 20);
    const up = await c.req(
      'POST',
      `/v1/deltas?path=sig%2Fdata.bin&baseRevision=${rev1}&mtimeMs=9`,
      container,
    );
    expect(await up.json()).toMatchObject({ status: 'applied', entry: { sha256: sha(v2) } });
    expect(sha(await c.bytes('sig/data.bin'))).toBe(sha(v2));
    // Small files have none; the new version has its own.
    await c.putSmall({ 'sig/small.txt': 'small' });
    expect((await c.req('GET', '/v1/signature?path=sig%2Fsmall.txt')).status).toBe(404);
    const again = await c.req('GET', '/v1/signature?path=sig%2Fdata.bin');
    expect(sha(new Uint8Array(await again.arrayBuffer()))).toBe(
      sha(
        await collect(
          signature(v2, {
            blockSize: signatureBlockSize(v2.length),
            strongLength: signatureStrongLength(v2.length, signatureBlockSize(v2.length)),
          }),
        ),
      ),
    );
    const cur = decodeLinkFile(
      readFileSync(nodePath.join(server.dir, 'fs', 'ns', 'big', 'sig', 'data.bin.weftlink')),
    );
    expect(cur.signature).not.toBeNull();
    // Collected with its object once unreferenced past the grace period.
    await c.ops({ op: 'delete', path: 'sig' });
    await server.gc(0);
    expect(existsSync(nodePath.join(server.dir, 'objects', link.signature!.object))).toBe(false);
    expect(existsSync(nodePath.join(server.dir, 'objects', cur.signature!.object))).toBe(false);
  });

  it('makesASignatureOnDemandForALinkFileWithoutOne', async () => {
    const v1 = pseudoRandom(3 * MiB, 12);
    await uploadLarge('old/legacy.bin', v1);
    const linkPath = nodePath.join(server.dir, 'fs', 'ns', 'big', 'old', 'legacy.bin.weftlink');
    const link = decodeLinkFile(readFileSync(linkPath));
    // As a version-1 server before signatures wrote it: signature null, none stored.
    rmSync(nodePath.join(server.dir, 'objects', link.signature!.object));
    writeFileSync(linkPath, JSON.stringify({ ...link, signature: null }) + '\n');
    const res = await c.req('GET', '/v1/signature?path=old%2Flegacy.bin');
    expect(res.status).toBe(200);
    const blockSize = signatureBlockSize(v1.length);
    const strongLength = signatureStrongLength(v1.length, blockSize);
    expect(sha(new Uint8Array(await res.arrayBuffer()))).toBe(
      sha(await collect(signature(v1, { blockSize, strongLength }))),
    );
    expect(existsSync(nodePath.join(server.dir, 'objects', signatureKey(sha(v1), blockSize)))).toBe(true);
  });

  it('servesDeltaDownloadsAgainstTheClientsOldVersion', async () => {
    const old = pseudoRandom(3 * MiB, 5);
    const cur = Buffer.concat([old.subarray(0, 2 * MiB), pseudoRandom(5000, 6), old.subarray(2 * MiB)]);
    await uploadLarge('dl/file.bin', cur);
    const sig = await collect(signature(old, { blockSize: 2048 }));
    const res = await c.req('POST', `/v1/files/delta?path=dl%2Ffile.bin&baseSha256=${sha(old)}`, sig);
    expect(res.status).toBe(200);
    const container = decodeDeltaContainer(new Uint8Array(await res.arrayBuffer()));
    expect(container).toMatchObject({ baseSha256: sha(old), targetSha256: sha(cur), targetSize: cur.length });
    expect(container.storedLength).toBeLessThan(100_000);
    const rebuilt = await collect(patch(old, container.delta));
    expect(sha(rebuilt)).toBe(sha(cur));
    const junk = await c.req(
      'POST',
      `/v1/files/delta?path=dl%2Ffile.bin&baseSha256=${sha(old)}`,
      new Uint8Array([1, 2, 3]),
    );
    expect(junk.status).toBe(400);
  });

  it('sharesOneRelayStagingBetweenConcurrentDownloads', async () => {
    const data = pseudoRandom(3 * MiB, 8);
    await uploadLarge('relay/shared.bin', data);
    await server.store.relay.forget(sha(data));
    const before = { ...server.store.relay.stats };
    const bodies = await Promise.all(Array.from({ length: 5 }, () => c.bytes('relay/shared.bin')));
    expect(bodies.every((b) => sha(b) === sha(data))).toBe(true);
    expect(server.store.relay.stats.misses - before.misses).toBe(1);
    expect(server.store.relay.stats.hits - before.hits).toBe(4);
  });

  it('batchDownloadsSmallFilesAsABundle', async () => {
    await c.putSmall({ 'batch/1.txt': 'one', 'batch/2.txt': 'two'.repeat(1000) });
    const res = await c.req('POST', '/v1/bundles/download', {
      paths: ['batch/1.txt', 'batch/2.txt', 'relay/shared.bin', 'batch/none'],
    });
    expect(res.headers.get('x-weft-deferred')).toBeNull();
    const bundle = decodeBundle(new Uint8Array(await res.arrayBuffer()));
    expect(bundle.version).toBe(2);
    expect(bundle.deferred).toEqual([
      { index: 2, reason: 'large' },
      { index: 3, reason: 'absent' },
    ]);
    expect(bundle.compressed).toBe(true);
    expect(bundle.entries.map((e) => [e.path, Buffer.from(e.content).toString()])).toEqual([
      ['batch/1.txt', 'one'],
      ['batch/2.txt', 'two'.repeat(1000)],
    ]);
    const st = await c.json<EntryInfo>('GET', '/v1/stat?path=batch%2F1.txt');
    expect(bundle.entries[0]?.rev).toBe(st.revision);
  });

  it('answersTenThousandDeferredPathsInTheBodyNotAHeader', async () => {
    // 10,000 long paths, none of which fits: the old JSON header would have been ~1 MB.
    const paths = Array.from(
      { length: 10_000 },
      (_, i) => `deferred/${'long-folder-name/'.repeat(4)}file-${i}`,
    );
    const res = await c.req('POST', '/v1/bundles/download', { paths });
    expect(res.status).toBe(200);
    expect([...res.headers.keys()].join('').length).toBeLessThan(1024);
    const bundle = decodeBundle(new Uint8Array(await res.arrayBuffer()));
    expect(bundle.entries).toEqual([]);
    expect(bundle.deferred).toHaveLength(10_000);
    expect(bundle.deferred.every((d, i) => d.index === i && d.reason === 'absent')).toBe(true);
    // The same path twice is refused, not answered twice.
    const twice = await c.req('POST', '/v1/bundles/download', { paths: ['batch/1.txt', 'batch/1.txt'] });
    expect(twice.status).toBe(400);
  });

  it('replacesSmallWithLargeAndBack', async () => {
    await c.putSmall({ 'swap.bin': 'small' });
    const big = pseudoRandom(3 * MiB, 9);
    const r = await uploadLarge('swap.bin', big);
    expect(r).toMatchObject({ status: 'applied', entry: { tier: 'large' } });
    expect(existsSync(nodePath.join(server.dir, 'fs/ns/big/swap.bin'))).toBe(false);
    await c.putSmall({ 'swap.bin': 'small again' });
    expect(existsSync(nodePath.join(server.dir, 'fs/ns/big/swap.bin.weftlink'))).toBe(false);
    expect(await c.text('swap.bin')).toBe('small again');
  });
});

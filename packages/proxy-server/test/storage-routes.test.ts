/**
 * The storage routes (issue #17, http/storage.ts) on a proxy whose object tier is redundant
 * over five directory backends: the scheduled scrub runs by itself (short interval) and
 * shows in /metrics; the operator's routes need the admin token (a device token is
 * refused); a user's health view counts only their own files and says what one more
 * failure would do; a backend that fails shows as down since then; an operator's scrub and
 * a replacement run as jobs with progress; the OpenAPI document lists the routes.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AdminStorageResponse,
  encodeTransferBlock,
  type JobResponse,
  type StorageHealthResponse,
  type StorageJob,
  type TransferState,
} from '@weft/wire';
import { pseudoRandom, sha, startTestServer, streamBlocks, tempDir, TestClient } from './helpers.ts';

const MiB = 1024 * 1024;
const POLL = { timeout: 60_000 };
let server: Awaited<ReturnType<typeof startTestServer>>;
let alice: TestClient;
let bob: TestClient;
let base: string;
let roots: string[] = [];

beforeAll(async () => {
  base = await tempDir('weft-proxy-storage-');
  roots = [0, 1, 2, 3, 4].map((i) => nodePath.join(base, `backend${i}`));
  server = await startTestServer({
    versions: { retentionDays: 0 },
    objectTier: {
      type: 'redundant',
      backends: roots.map((dir, i) => ({ id: `d${i}`, type: 'fs' as const, dir })),
      thresholdBytes: 64 * 1024,
      maxShardBytes: 512 * 1024,
      probeIntervalMs: 0,
      // A short interval: the proxy scrubs by itself while the test runs.
      scrub: { intervalMs: 200, bytesPerSecond: 0 },
    },
  });
  alice = await TestClient.enrol(server, 'alice', 'dev');
  bob = await TestClient.enrol(server, 'bob', 'dev');
});
afterAll(async () => {
  await server?.stop();
  await fsp.rm(base, { recursive: true, force: true });
});

async function upload(c: TestClient, path: string, data: Buffer): Promise<void> {
  const t = await c.json<TransferState>('POST', '/v1/transfers', {
    path,
    size: data.length,
    sha256: sha(data),
    mtimeMs: 3,
  });
  const frames = [];
  for (let off = 0, seq = 0; off < data.length; off += 4 * MiB, seq++)
    frames.push(
      encodeTransferBlock({
        transferId: t.transferId,
        seq,
        offset: off,
        last: off + 4 * MiB >= data.length,
        payload: data.subarray(off, off + 4 * MiB),
      }),
    );
  expect((await streamBlocks(c, frames)).every((r) => r.type === 'block-ack')).toBe(true);
  const [r] = await c.ops({
    op: 'commit',
    path,
    sha256: sha(data),
    size: data.length,
    mtimeMs: 3,
    transferId: t.transferId,
  });
  expect(r).toMatchObject({ status: 'applied' });
}

function admin(method: string, url: string, body?: unknown, token = server.adminToken): Promise<Response> {
  return fetch(`${server.url}${url}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

async function job(id?: string): Promise<StorageJob | null> {
  const res = await admin('GET', `/v1/admin/storage/job${id ? `?id=${id}` : ''}`);
  return ((await res.json()) as JobResponse).job;
}

describe('storage routes on a redundant object tier', () => {
  it('scrubsOnTheConfiguredScheduleByItself', async () => {
    await upload(alice, 'a.bin', pseudoRandom(3 * MiB, 1));
    // A scrub that started before the upload had nothing to check: wait for one that checked it.
    await expect
      .poll(async () => {
        const text = (await server.app.inject({ method: 'GET', url: '/metrics' })).body;
        return (
          /weft_redundant_scrub_runs_total\{result="done",trigger="schedule"\} [1-9]/.test(text) &&
          /weft_redundant_scrub_blobs_checked_total [1-9]/.test(text)
        );
      }, POLL)
      .toBe(true);
    const text = (await server.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(text).toMatch(/weft_redundant_scrub_last_run_timestamp_seconds [1-9]/);
    expect(text).toMatch(/weft_redundant_scrub_missing_total 0/);
  });

  it('guardsTheOperatorRoutesWithTheAdminToken', async () => {
    for (const [method, url] of [
      ['GET', '/v1/admin/storage'],
      ['GET', '/v1/admin/storage/job'],
      ['POST', '/v1/admin/storage/scrub'],
      ['POST', '/v1/admin/storage/replace'],
    ] as const) {
      expect((await admin(method, url, method === 'POST' ? {} : undefined, 'wrong-token')).status).toBe(403);
      expect((await admin(method, url, method === 'POST' ? {} : undefined, alice.token)).status).toBe(403);
    }
    expect((await fetch(`${server.url}/v1/storage/health`)).status).toBe(401);
  });

  it('showsAUserOnlyTheirOwnFilesAndWhatOneMoreFailureWouldDo', async () => {
    await upload(bob, 'b1.bin', pseudoRandom(3 * MiB, 2));
    await upload(bob, 'b2.bin', pseudoRandom(3 * MiB, 3));
    const mine = await alice.json<StorageHealthResponse>('GET', '/v1/storage/health');
    expect(mine).toMatchObject({
      redundant: true,
      state: 'available',
      files: { total: 1, whole: 1, atMinimum: 0, unreadable: 0 },
    });
    if (!mine.redundant) throw new Error('unreachable');
    expect(mine.backends.map((b) => b.id)).toEqual(['d0', 'd1', 'd2', 'd3', 'd4']);
    expect(Object.keys(mine.backends[0]!).sort()).toEqual(['class', 'id', 'state']);
    expect(mine.ifFails).toHaveLength(5);
    expect(mine.ifFails.every((f) => f.unreadable === 0 && f.atMinimum === 0)).toBe(true);
    expect(mine.lastScrubMs).toBeGreaterThan(0);
    const theirs = await bob.json<StorageHealthResponse>('GET', '/v1/storage/health');
    expect(theirs).toMatchObject({ files: { total: 2 } });

    // d2's disk goes: its folder becomes a file. The next large upload finds it failing.
    await fsp.rm(roots[2]!, { recursive: true, force: true });
    await fsp.writeFile(roots[2]!, 'not a folder any more');
    const before = Date.now();
    await upload(alice, 'a2.bin', pseudoRandom(3 * MiB, 4));
    const now = await alice.json<StorageHealthResponse>('GET', '/v1/storage/health');
    if (!now.redundant) throw new Error('unreachable');
    expect(now.state).toBe('degraded');
    const d2 = now.backends.find((b) => b.id === 'd2')!;
    expect(d2.state).toBe('down');
    expect(d2.since).toBeGreaterThanOrEqual(before - 1000);
    // Both of Alice's files have one spare left (RS(3, 2), one holder down): any other failure leaves them at minimum.
    expect(now.files).toMatchObject({ total: 2, reduced: 2, atMinimum: 0 });
    expect(now.ifFails.map((f) => f.backend).sort()).toEqual(['d0', 'd1', 'd3', 'd4']);
    for (const f of now.ifFails) expect(f).toMatchObject({ unreadable: 0, atMinimum: 2 });

    const full = (await (await admin('GET', '/v1/admin/storage')).json()) as AdminStorageResponse;
    expect(full.objectTier).toBe('redundant');
    const r = full.redundant!;
    expect(r.state).toBe('degraded');
    expect(r.layout).toEqual({ replicas: 2, k: 3, m: 2, thresholdBytes: 64 * 1024 });
    expect(r.backends.find((b) => b.id === 'd2')).toMatchObject({ state: 'down', outageLog: 1 });
    expect(r.backends.find((b) => b.id === 'd0')!.name).toMatch(/backend0/);
    expect(r.outageLog).toBe(1);
    expect(r.objects.total).toBeGreaterThanOrEqual(4);
    expect(r.scrub).toMatchObject({ intervalMs: 200, bytesPerSecond: 0 });
  });

  it('replacesABackendGoneForGoodAsAJobWithProgress', async () => {
    await expect.poll(async () => (await job())?.state, POLL).not.toBe('running');
    const refused = await admin('POST', '/v1/admin/storage/replace', { backend: 'd2' });
    expect(refused.status).toBe(400);
    const replace = { backend: 'd2', with: { id: 'd5', type: 'fs', dir: nodePath.join(base, 'backend5') } };
    let res = await admin('POST', '/v1/admin/storage/replace', replace);
    // The scheduled scrub may hold the tier for a moment: then 409, and the operator asks again.
    if (res.status === 409) {
      await expect.poll(async () => (await job())?.state, POLL).not.toBe('running');
      res = await admin('POST', '/v1/admin/storage/replace', replace);
    }
    expect(res.status).toBe(202);
    const started = (await res.json()) as StorageJob;
    await expect.poll(async () => (await job(started.id))?.state, POLL).toBe('done');
    const done = (await job(started.id))!;
    expect(done).toMatchObject({ kind: 'replace', replace: { from: 'd2', to: 'd5' } });
    expect(done.replace!.done).toBe(done.replace!.total);
    const full = (await (await admin('GET', '/v1/admin/storage')).json()) as AdminStorageResponse;
    expect(full.redundant!.backends.map((b) => b.id)).toEqual(['d0', 'd1', 'd3', 'd4', 'd5']);
    expect(full.redundant!.outageLog).toBe(0);
    expect(full.redundant!.objects.unreadable).toBe(0);
    expect(full.redundant!.objects.reduced + full.redundant!.objects.atMinimum).toBe(0);
    await server.store.relay.forget(sha(pseudoRandom(3 * MiB, 4)));
    expect(sha(await alice.bytes('a2.bin'))).toBe(sha(pseudoRandom(3 * MiB, 4)));
  });

  it('runsAnOperatorScrubAndRefusesASecondWhileItRuns', async () => {
    await expect.poll(async () => (await job())?.state, POLL).not.toBe('running');
    // Paced at 1 byte/s it runs until the server closes (which aborts it).
    let res = await admin('POST', '/v1/admin/storage/scrub', { bytesPerSecond: 1 });
    if (res.status === 409) {
      await expect.poll(async () => (await job())?.state, POLL).not.toBe('running');
      res = await admin('POST', '/v1/admin/storage/scrub', { bytesPerSecond: 1 });
    }
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ kind: 'scrub', trigger: 'admin', state: 'running' });
    const second = await admin('POST', '/v1/admin/storage/scrub', {});
    expect(second.status).toBe(409);
    expect(await second.json()).toMatchObject({ error: { code: 'ALREADY_EXISTS' } });
    expect((await admin('POST', '/v1/admin/storage/scrub', { bytesPerSecond: -1 })).status).toBe(400);
  });

  it('documentsTheRoutesInTheOpenApiDocument', async () => {
    const doc = (await (await fetch(`${server.url}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { security: unknown[] }>>;
    };
    expect(doc.paths['/v1/storage/health']!.get!.security).toEqual([{ device: [] }]);
    for (const [p, m] of [
      ['/v1/admin/storage', 'get'],
      ['/v1/admin/storage/scrub', 'post'],
      ['/v1/admin/storage/replace', 'post'],
      ['/v1/admin/storage/job', 'get'],
    ] as const)
      expect(doc.paths[p]![m]!.security).toEqual([{ admin: [] }]);
  });
});

describe('storage routes on a plain object tier', () => {
  it('saysThereIsNoRedundancyAndRefusesJobs', async () => {
    const plain = await startTestServer({ objectTier: { type: 'fs' } });
    try {
      const c = await TestClient.enrol(plain, 'carol', 'dev');
      expect(await c.json('GET', '/v1/storage/health')).toEqual({ redundant: false });
      const res = await fetch(`${plain.url}/v1/admin/storage`, {
        headers: { authorization: `Bearer ${plain.adminToken}` },
      });
      expect(await res.json()).toEqual({ objectTier: 'fs' });
      const scrub = await fetch(`${plain.url}/v1/admin/storage/scrub`, {
        method: 'POST',
        headers: { authorization: `Bearer ${plain.adminToken}`, 'content-type': 'application/json' },
        body: '{}',
      });
      expect(scrub.status).toBe(400);
    } finally {
      await plain.stop();
    }
  });
});

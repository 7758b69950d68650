/**
 * Weft storage full (issue #14): a real proxy with a small per-user quota. The agent reads its
 * usage (`GET /v1/usage` through ProxyClient.usage), shows it in its status, and when an upload
 * is refused with 507 QUOTA_EXCEEDED it enters the state `full`: the upload stays queued and is
 * not sent again (only usage is read, on a slow backoff), downloads and deletes go on, and it
 * resumes by itself once space is freed (a delete) or the quota is raised (a proxy restarted
 * with a larger one) — then every device converges and nothing is lost.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ProxyClient } from '@weft/core';
import { type Device, enrol, localTree, startDevice, startTestProxy } from '../src/harness.ts';

const KB = 1000;
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function proxyWithQuota(quotaBytes: number, dataDir?: string, port = 0) {
  const proxy = await startTestProxy('fs', dataDir, port, '', { quota: { defaultBytes: quotaBytes } });
  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await proxy.close();
  };
  cleanups.push(close);
  return { ...proxy, close, port: Number(new URL(proxy.url).port) };
}

/** A device whose requests are counted by route ("GET /usage", "POST /bundles", …). */
async function countedDevice(
  proxy: { url: string; adminToken: string; dataDir: string; s3Prefix: string; close(): Promise<void> },
  name: string,
): Promise<Device & { calls: Map<string, number> }> {
  const token = await enrol(proxy, 'alice', name);
  const calls = new Map<string, number>();
  const client = new ProxyClient({
    baseUrl: proxy.url,
    token,
    onRequest: ({ method, route }) => {
      const key = `${method} ${route.replace(/\/transfers\/[^/]+/, '/transfers/:id')}`;
      calls.set(key, (calls.get(key) ?? 0) + 1);
    },
  });
  const device = await startDevice(proxy, name, {
    token,
    engine: {
      client,
      storageTimings: { activityMs: 50, fullCheckMs: 100, fullCheckMaxMs: 400, refreshMs: 60_000 },
    },
  });
  cleanups.push(() => device.stop());
  return Object.assign(device, { calls });
}

async function until(what: string, ok: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const write = (d: Device, p: string, bytes: number): Promise<Buffer> => {
  const content = randomBytes(bytes);
  return fsp.writeFile(nodePath.join(d.folder, p), content).then(() => content);
};
const uploads = (d: { calls: Map<string, number> }): number =>
  (d.calls.get('POST /bundles') ?? 0) + (d.calls.get('POST /transfers') ?? 0);

describe('Weft storage full', () => {
  it('shows usage, stops uploading when full, keeps the upload, goes on with deletes and downloads, and resumes once a delete frees space', async () => {
    const proxy = await proxyWithQuota(4000 * KB);
    const a = await countedDevice(proxy, 'laptop');
    const b = await countedDevice(proxy, 'desktop');

    // Usage through ProxyClient against the real proxy, and in the status.
    expect(await a.client.usage()).toEqual({
      user: 'alice',
      usedBytes: 0,
      limitBytes: 4000 * KB,
      versionsBytes: 0,
    });
    await write(a, 'keep.bin', 1000 * KB);
    await write(a, 'old.bin', 1500 * KB);
    await a.engine.syncNow();
    expect(await a.client.usage()).toMatchObject({ usedBytes: 2500 * KB, limitBytes: 4000 * KB });
    await until(
      'usage in the status after the upload',
      () => a.engine.getStatus().storage?.usedBytes === 2500 * KB,
    );
    expect(a.engine.getStatus().storage).toMatchObject({ limitBytes: 4000 * KB });
    expect(a.engine.getStatus().storage?.full).toBeUndefined();

    // A large file (a transfer) that does not fit: refused, kept, the state says so.
    const big = await write(a, 'big.bin', 2500 * KB);
    await a.engine.syncNow();
    const full = a.engine.getStatus();
    expect(full.state).toBe('full');
    expect(full.error).toMatch(/^Weft storage is full \(2\.5 MB of 4 MB used\): 1 change waits to upload/);
    expect(full.pendingOperations).toBe(1);
    expect(full.storage?.full?.neededBytes).toBeGreaterThan(0);
    expect(await proxyHas(a.client, 'big.bin')).toBe(false);

    // No retry loop: several usage checks later (backoff), not one upload more.
    const sent = uploads(a);
    const checks = a.calls.get('GET /usage') ?? 0;
    await until('three more usage checks', () => (a.calls.get('GET /usage') ?? 0) >= checks + 3);
    await a.engine.syncNow(); // a pass of its own (what the watcher or the feed would start)
    expect(uploads(a)).toBe(sent);
    expect(a.engine.getStatus().state).toBe('full');

    // Downloads go on while full: another device rewrites a file (same size: it adds nothing).
    const rewritten = randomBytes(1000 * KB);
    await fsp.writeFile(nodePath.join(b.folder, 'keep.bin'), rewritten);
    await b.engine.syncNow();
    await until('the edit reached the full device', async () =>
      (await fsp.readFile(nodePath.join(a.folder, 'keep.bin'))).equals(rewritten),
    );
    expect(a.engine.getStatus().state).toBe('full');
    expect(uploads(a)).toBe(sent);

    // Operations that add no bytes and do not touch the waiting upload go on: a folder, a move.
    await fsp.mkdir(nodePath.join(a.folder, 'kept'));
    await fsp.rename(nodePath.join(a.folder, 'keep.bin'), nodePath.join(a.folder, 'kept', 'keep.bin'));
    a.engine.markDirty(['']);
    await a.engine.syncNow();
    await until('the move reached the server', () => proxyHas(a.client, 'kept/keep.bin'));
    expect(await proxyHas(a.client, 'keep.bin')).toBe(false);
    expect(a.engine.getStatus()).toMatchObject({ state: 'full', pendingOperations: 1 });
    expect(uploads(a)).toBe(sent);

    // A delete goes through while full, frees space, and the waiting upload resumes by itself.
    await fsp.rm(nodePath.join(a.folder, 'old.bin'));
    a.engine.markDirty(['old.bin']);
    await until('the upload that waited is on the server', () => proxyHas(a.client, 'big.bin'));
    await a.engine.syncNow();
    expect(a.engine.getStatus()).toMatchObject({ state: 'idle', pendingOperations: 0 });
    expect(a.engine.getStatus().error).toBeUndefined();
    await until('usage after the resume', () => a.engine.getStatus().storage?.usedBytes === 3500 * KB);
    expect(a.engine.getStatus().storage?.full).toBeUndefined();

    // Every device converges on the same tree; nothing was lost.
    await b.engine.syncNow();
    await until('the other device has the upload', async () =>
      (await fsp.readFile(nodePath.join(b.folder, 'big.bin')).catch(() => Buffer.alloc(0))).equals(big),
    );
    expect(await localTree(b.folder)).toEqual(await localTree(a.folder));
  });

  it('resumes by itself when the quota is raised', async () => {
    const first = await proxyWithQuota(500 * KB);
    const a = await countedDevice(first, 'laptop');
    const kept = await write(a, 'a.bin', 400 * KB);
    await a.engine.syncNow();
    const waiting = await write(a, 'b.bin', 300 * KB); // small: a bundle, refused whole
    a.engine.markDirty(['b.bin']);
    await a.engine.syncNow();
    expect(a.engine.getStatus().state).toBe('full');
    expect(a.engine.getStatus().error).toMatch(/Weft storage is full/);
    const sent = uploads(a);
    const checks = a.calls.get('GET /usage') ?? 0;
    await until('two more usage checks', () => (a.calls.get('GET /usage') ?? 0) >= checks + 2);
    expect(uploads(a)).toBe(sent);

    // The operator raises the quota: the same server (data and port) with a larger limit.
    await first.close();
    const raised = await proxyWithQuota(5000 * KB, first.dataDir, first.port);
    await until('the waiting upload is on the server', () => proxyHas(a.client, 'b.bin'), 60_000);
    await a.engine.syncNow();
    expect(a.engine.getStatus()).toMatchObject({ state: 'idle', pendingOperations: 0 });
    await until('usage with the raised quota', () => a.engine.getStatus().storage?.limitBytes === 5000 * KB);

    const b = await countedDevice(raised, 'desktop');
    await b.engine.syncNow();
    expect(await fsp.readFile(nodePath.join(b.folder, 'a.bin'))).toEqual(kept);
    expect(await fsp.readFile(nodePath.join(b.folder, 'b.bin'))).toEqual(waiting);
  });
});

async function proxyHas(client: ProxyClient, p: string): Promise<boolean> {
  return (await client.stat(p).catch(() => undefined)) !== undefined;
}

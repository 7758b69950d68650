/**
 * A bundle upload sends a small file under the hash its scan took, without hashing it again,
 * when nothing about the file can have changed since that scan read it (issue #16:
 * sync/propagate/upload-read.ts) — and hashes the bytes it read whenever something may have:
 * here a file rewritten after the scan with its size and mtime put back, which only its
 * ctime tells. Sent under the scan's hash, the server would refuse the whole bundle (its
 * SHA-256 check) or, without that check, store the new bytes under the old hash.
 *
 * The files must be older than the upload's timestamp margin (RACY_MS, 2 s) when the scan
 * begins, or nothing is trusted: the test waits that long once.
 */
import * as fsp from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_RECENT } from '../src/status.ts';
import { OUTCOMES_PER_TRANSACTION, ROWS_PER_QUERY } from '../src/sync/propagate/upload-bundle.ts';
import { RACY_MS } from '../src/sync/propagate/upload-read.ts';
import type { SyncContext } from '../src/sync/context.ts';
import { FakeCloud, sha256 } from './support/fake-cloud.ts';

let cloud: FakeCloud | undefined;
afterEach(async () => {
  await cloud?.close();
  cloud = undefined;
});

describe('the scan hash in a bundle upload', () => {
  it('is trusted for unchanged files and never for a file rewritten since the scan', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop');
    await d.engine.waitIdle();
    const ctx = (d.engine as unknown as { ctx: SyncContext }).ctx;
    const files = Array.from({ length: 12 }, (_, i) => [
      `docs/f${i}.txt`,
      `content of file ${i}`.padEnd(64, '.'),
    ]);
    // Dated a minute back on a whole second, so the mtime can be put back exactly below.
    const mtime = Math.floor(Date.now() / 1000) - 60;
    for (const [p, c] of files) {
      await d.write(p as string, c as string);
      await fsp.utimes(d.abs(p as string), mtime, mtime);
    }
    await new Promise((resolve) => setTimeout(resolve, RACY_MS + 200));

    // Scanned and queued while offline: nothing leaves yet.
    d.offline = true;
    await d.sync().catch(() => undefined);
    expect(d.engine.journal.pendingOps().filter((q) => q.op.kind === 'put')).toHaveLength(files.length);

    // Rewritten after the scan, same size, its mtime put back: size, mtime and inode all match
    // what the scan recorded.
    const edited = 'docs/f3.txt';
    const before = await fsp.stat(d.abs(edited), { bigint: true });
    const newContent = 'REWRITTEN after the scan'.padEnd(64, '!');
    const fh = await fsp.open(d.abs(edited), 'r+');
    await fh.write(newContent, 0);
    await fh.close();
    await fsp.utimes(d.abs(edited), mtime, mtime);
    const after = await fsp.stat(d.abs(edited), { bigint: true });
    expect([after.size, after.mtimeNs, after.ino]).toEqual([before.size, before.mtimeNs, before.ino]);
    expect(after.ctimeNs).not.toBe(before.ctimeNs);

    d.offline = false;
    await d.sync();
    expect(d.engine.journal.pendingCount()).toBe(0);
    const server = cloud.serverTree();
    for (const [p, c] of files)
      expect(server.get(p as string)).toBe(sha256(p === edited ? newContent : (c as string)));
    // Hashed once by the scan, not again: every file but the rewritten one.
    expect(ctx.scanHashes.trusted).toBe(files.length - 1);
    expect(ctx.scanHashes.hashed).toBe(1);
  });

  it('trusts no scan hash once a bundle holding such files failed', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop');
    await d.engine.waitIdle();
    const ctx = (d.engine as unknown as { ctx: SyncContext }).ctx;
    const mtime = Math.floor(Date.now() / 1000) - 60;
    for (let i = 0; i < 5; i++) {
      await d.write(`f${i}.txt`, `file ${i}`);
      await fsp.utimes(d.abs(`f${i}.txt`), mtime, mtime);
    }
    await new Promise((resolve) => setTimeout(resolve, RACY_MS + 200));
    d.offline = true;
    await d.sync().catch(() => undefined);
    d.offline = false;
    // The server refuses the first bundle (as it does one whose SHA-256 check fails).
    const upload = ctx.client.uploadBundle.bind(ctx.client);
    let refused = 0;
    ctx.client.uploadBundle = async (body) => {
      if (refused++ === 0) throw new Error('bundle refused');
      return upload(body);
    };
    await d.sync().catch(() => undefined); // the engine may retry within the pass
    if (d.engine.journal.pendingCount() > 0) await d.sync();
    expect(refused).toBeGreaterThanOrEqual(2);
    expect(d.engine.journal.pendingCount()).toBe(0);
    for (let i = 0; i < 5; i++) expect(cloud.serverTree().get(`f${i}.txt`)).toBe(sha256(`file ${i}`));
    expect([ctx.scanHashes.trusted, ctx.scanHashes.hashed]).toEqual([5, 5]); // hashed on the retry
  });

  it('reads the index rows of a bundle upload ROWS_PER_QUERY files at a time', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop');
    await d.engine.waitIdle();
    const n = 2 * ROWS_PER_QUERY + 10;
    for (let i = 0; i < n; i++) await d.write(`many/f${i}.txt`, `file ${i}`);
    const journal = d.engine.journal;
    let queries = 0;
    let paths = 0;
    const uploadRows = journal.uploadRows.bind(journal);
    journal.uploadRows = (p) => {
      queries += 1;
      paths += p.length;
      return uploadRows(p);
    };
    const syncedRevOf = journal.syncedRevOf.bind(journal);
    let oneByOne = 0;
    journal.syncedRevOf = (p) => {
      oneByOne += 1;
      return syncedRevOf(p);
    };
    await d.sync();
    expect(cloud.serverTree().get(`many/f${n - 1}.txt`)).toBe(sha256(`file ${n - 1}`));
    expect(journal.pendingCount()).toBe(0);
    expect([queries, paths, oneByOne]).toEqual([3, n, 0]);
  });

  it('changes the status once per outcome transaction, not once per uploaded file', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop');
    await d.engine.waitIdle();
    const n = 2 * OUTCOMES_PER_TRANSACTION + 5;
    for (let i = 0; i < n; i++) await d.write(`act/f${i}.txt`, `file ${i}`);
    let recentChanges = 0;
    let last = d.engine.status.get().recent;
    const sub = d.engine.status.onChange((s) => {
      if (s.recent !== last) recentChanges += 1;
      last = s.recent;
    });
    await d.sync();
    sub.dispose();
    expect(d.engine.journal.pendingCount()).toBe(0);
    const recent = d.engine.status.get().recent;
    // The newest MAX_RECENT are kept: all of them uploads (the folder act/ went first).
    expect(n).toBeGreaterThan(MAX_RECENT);
    expect(recent).toHaveLength(MAX_RECENT);
    expect(recent.every((a) => a.kind === 'uploaded')).toBe(true);
    // Three outcome transactions of a bundle's files, and the folder act/ made before them.
    expect(recentChanges).toBe(3 + 1);
  });

  it('hashes again what a scan of this process did not hash (a put queued before a restart)', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop');
    await d.engine.waitIdle();
    await d.write('a.txt', 'alpha');
    await d.write('b.txt', 'beta');
    await new Promise((resolve) => setTimeout(resolve, RACY_MS + 200));
    d.offline = true;
    await d.sync().catch(() => undefined);
    expect(d.engine.journal.pendingCount()).toBe(2);
    await d.restart();
    d.offline = false;
    await d.sync();
    const ctx = (d.engine as unknown as { ctx: SyncContext }).ctx;
    expect(cloud.serverTree().get('a.txt')).toBe(sha256('alpha'));
    expect(cloud.serverTree().get('b.txt')).toBe(sha256('beta'));
    expect(ctx.scanHashes.trusted).toBe(0);
    expect(ctx.scanHashes.hashed).toBe(2);
  });
});

/**
 * Durability per bundle (issue #16): an acknowledged bundle is in the fs tier's write-ahead
 * log (one sync), its files synced in place only at the log's checkpoint. The server is
 * killed with SIGKILL before that checkpoint, and what a power loss would also take — the
 * files only the page cache held — is deleted from the tier by hand; the restarted server
 * replays the log before reconciling, and every acknowledged file is back at its last
 * acknowledged content.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import type { ListResponse } from '@weft/wire';
import { startProxyServer } from '../src/index.ts';
import { sha, tempDir, TestClient } from './helpers.ts';
import { startProxyChild } from './proxy-child.ts';

const ADMIN = 'bundle-log-admin-token';

let dataDir = '';
afterAll(async () => {
  if (dataDir) await fsp.rm(dataDir, { recursive: true, force: true });
});

describe('bundle durability through the write-ahead log', () => {
  it('replaysAcknowledgedBundlesLostWithThePageCache', async () => {
    dataDir = await tempDir('weft-bundle-log-');
    const data = nodePath.join(dataDir, 'data');
    const configFile = nodePath.join(dataDir, 'config.json');
    // The checkpoint far away: the kill always comes before it.
    const config = { dataDir: data, adminToken: ADMIN, gcIntervalMs: 0, bundleSyncMs: 600_000 };
    await fsp.writeFile(configFile, JSON.stringify({ ...config, logLevel: 'silent' }));
    const { child, url } = await startProxyChild(configFile);
    const c = await TestClient.enrol({ url, adminToken: ADMIN }, 'wal', 'dev');
    const want = new Map<string, string>();
    for (let b = 0; b < 3; b++) {
      const files: Record<string, string> = {};
      for (let i = 0; i < 40; i++)
        files[`b${b}/d${i % 3}/f${i}.txt`] = `bundle ${b} file ${i} `.repeat(1 + i);
      // The third bundle overwrites half of the first: the later content must win.
      if (b === 2) for (let i = 0; i < 20; i++) files[`b0/d${i % 3}/f${i}.txt`] = `newer ${i}`;
      const results = await c.putSmall(files);
      for (const r of results) expect(r.result.status, r.path).toBe('applied');
      for (const [p, content] of Object.entries(files)) want.set(p, content);
    }
    expect((await fsp.readdir(nodePath.join(data, 'fs', '.weft-fs', 'batch-log'))).length).toBe(1);
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    // What the page cache alone held: every file and folder of the namespaces.
    const ns = nodePath.join(data, 'fs', 'ns');
    let lost = 0;
    for (const user of await fsp.readdir(ns))
      for (const e of await fsp.readdir(nodePath.join(ns, user))) {
        await fsp.rm(nodePath.join(ns, user, e), { recursive: true });
        lost++;
      }
    expect(lost).toBe(3);

    const server = await startProxyServer(config, { logger: pino({ level: 'silent' }) });
    try {
      const check = await TestClient.enrol(server, 'wal', 'check');
      const list = await check.json<ListResponse>('GET', '/v1/list?path=&recursive=1');
      const files = list.entries.filter((e) => e.kind === 'file');
      expect(files.map((e) => e.path).sort()).toEqual([...want.keys()].sort());
      for (const e of files) {
        const body = await check.bytes(e.path);
        expect(Buffer.from(body).toString(), e.path).toBe(want.get(e.path));
        expect(e.sha256).toBe(sha(body));
      }
      // Replayed, synced and gone.
      expect(await fsp.readdir(nodePath.join(data, 'fs', '.weft-fs', 'batch-log'))).toEqual([]);
    } finally {
      await server.close();
    }
  }, 60_000);
});

/**
 * kill -9 during ingest: the server process is killed at a random moment while devices
 * upload bundles and large files; after a restart on the same data directory every file
 * is either absent or complete (never partial), every acknowledged write is present,
 * the index matches the filesystem tier, no object is referenced but missing, and
 * orphaned objects are collected.
 */
import { existsSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ListResponse } from '@weft/wire';
import { objectKey } from '../src/index.ts';
import { pseudoRandom, sha, startTestServer, tempDir, TestClient, uploadLarge } from './helpers.ts';
import { startProxyChild } from './proxy-child.ts';

const ROUNDS = process.env.WEFT_FULL === '1' ? 20 : 3;
const ADMIN = 'crash-test-admin-token';
const MiB = 1024 * 1024;

let dataDir = '';
afterAll(async () => {
  if (dataDir) await fsp.rm(dataDir, { recursive: true, force: true });
});

/** What the client was told, per path: the content it sent and whether it was acknowledged. */
interface Sent {
  content: Buffer;
  acked: boolean;
}

async function load(
  c: TestClient,
  round: number,
  sent: Map<string, Sent>,
  stop: { now: boolean },
): Promise<void> {
  const small = async (worker: number) => {
    for (let i = 0; !stop.now; i++) {
      const files: Record<string, Buffer> = {};
      for (let j = 0; j < 15; j++) {
        const path = `r${round}/w${worker}/b${i}/f${j}.txt`;
        files[path] = Buffer.concat([
          Buffer.from(path),
          pseudoRandom(200 + j * 50, round * 1000 + i * 31 + j),
        ]);
        sent.set(path, { content: files[path], acked: false });
      }
      const results = await c.putSmall(files);
      for (const r of results) if (r.result.status === 'applied') sent.get(r.path)!.acked = true;
    }
  };
  const large = async () => {
    for (let i = 0; !stop.now; i++) {
      const path = `r${round}/large/${i}.bin`;
      const data = pseudoRandom(3 * MiB + i, round * 7 + i);
      sent.set(path, { content: data, acked: false });
      const r = await uploadLarge(c, path, data, { via: 'put' });
      if (r.status === 'applied') sent.get(path)!.acked = true;
    }
  };
  await Promise.allSettled([small(0), small(1), large()]);
}

describe('crash safety', () => {
  it(
    'survivesKill9DuringIngest',
    async () => {
      dataDir = await tempDir('weft-crash-');
      const configFile = nodePath.join(dataDir, 'config.json');
      await fsp.writeFile(
        configFile,
        JSON.stringify({
          dataDir: nodePath.join(dataDir, 'data'),
          adminToken: ADMIN,
          logLevel: 'silent',
          gcIntervalMs: 0,
          // Every object not named by a file must be an orphan after GC: no kept versions.
          versions: { retentionDays: 0 },
        }),
      );
      const sent = new Map<string, Sent>();
      for (let round = 0; round < ROUNDS; round++) {
        const { child, url } = await startProxyChild(configFile);
        const c = await TestClient.enrol({ url, adminToken: ADMIN }, 'crash', `dev${round}`);
        const stop = { now: false };
        const running = load(c, round, sent, stop);
        // Kill at a random moment once some work is under way.
        await new Promise((r) => setTimeout(r, 300 + Math.floor(Math.random() * 1500)));
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGKILL');
        stop.now = true;
        await running;
        await exited;

        // Restart in-process on the same data and check every invariant.
        const server = await startTestServer({
          dataDir: nodePath.join(dataDir, 'data'),
          adminToken: ADMIN,
          versions: { retentionDays: 0 },
        });
        const check = await TestClient.enrol(server, 'crash', `check${round}`);
        const list = await check.json<ListResponse>('GET', '/v1/list?path=&recursive=1');
        const files = list.entries.filter((e) => e.kind === 'file');
        for (const e of files) {
          const body = await check.bytes(e.path);
          expect(sha(body), e.path).toBe(e.sha256); // index and content agree: never partial
          const s = sent.get(e.path);
          expect(s, `unexpected file ${e.path}`).toBeDefined();
          expect(sha(body), `${e.path} is the content the client sent`).toBe(sha(s!.content));
          if (e.tier === 'large') {
            expect(existsSync(nodePath.join(dataDir, 'data/objects', objectKey(e.sha256 ?? '')))).toBe(true);
          }
        }
        const present = new Set(files.map((e) => e.path));
        for (const [path, s] of sent)
          if (s.acked) expect(present.has(path), `acknowledged ${path} lost`).toBe(true);
        // Orphans (objects uploaded but never linked when the kill came) are collected.
        await server.gc(0);
        const referenced = new Set(files.filter((e) => e.tier === 'large').map((e) => e.sha256));
        const objectsDir = nodePath.join(dataDir, 'data/objects/objects');
        const stored = existsSync(objectsDir) ? await listFiles(objectsDir) : [];
        expect(stored.filter((f) => !referenced.has(nodePath.basename(f)))).toEqual([]);
        await server.close();
      }
      expect([...sent.values()].filter((s) => s.acked).length).toBeGreaterThan(0);
    },
    ROUNDS * 60_000,
  );
});

async function listFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await fsp.readdir(dir, { withFileTypes: true })) {
    const p = nodePath.join(dir, e.name);
    if (e.isDirectory()) out.push(...(await listFiles(p)));
    else out.push(p);
  }
  return out;
}

/**
 * kill -9 during packing: the server process packs continuously (64 KiB target, 20 ms
 * timeout) while a device uploads small files, and is killed at a random moment. After a
 * restart on the same data: every acknowledged file is present and intact, every global-index
 * entry names a pack that exists and whose range holds exactly that content (no
 * referenced-but-missing entry), and a flush then packs everything left.
 * CI: 1 round; WEFT_FULL=1: 20.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { PackLocation } from '../src/store/packs.ts';
import type { SqlitePackIndex } from '../src/store/pack-index-sqlite.ts';
import { pseudoRandom, sha, startTestServer, tempDir, TestClient } from './helpers.ts';
import { startProxyChild } from './proxy-child.ts';

const ROUNDS = process.env.WEFT_FULL === '1' ? 20 : 1;
const ADMIN = 'packs-crash-admin-token';

let dataDir = '';
afterAll(async () => {
  if (dataDir) await fsp.rm(dataDir, { recursive: true, force: true });
});

describe('packs and kill -9', () => {
  it(
    'losesNothingAndLeavesNoIndexEntryWithoutItsPack',
    async () => {
      dataDir = await tempDir('weft-packs-crash-');
      const data = nodePath.join(dataDir, 'data');
      const configFile = nodePath.join(dataDir, 'config.json');
      const packs = { targetBytes: 64 * 1024, timeoutMs: 20 };
      await fsp.writeFile(
        configFile,
        JSON.stringify({ dataDir: data, adminToken: ADMIN, logLevel: 'silent', gcIntervalMs: 0, packs }),
      );
      const sent = new Map<string, { content: Buffer; acked: boolean }>();
      for (let round = 0; round < ROUNDS; round++) {
        const { child, url } = await startProxyChild(configFile);
        const c = await TestClient.enrol({ url, adminToken: ADMIN }, 'crash', `dev${round}`);
        const stop = { now: false };
        let acked!: () => void;
        const firstAck = new Promise<void>((r) => (acked = r));
        const running = (async () => {
          for (let i = 0; !stop.now; i++) {
            const files: Record<string, Buffer> = {};
            for (let j = 0; j < 20; j++) {
              const path = `r${round}/b${i}/f${j}.bin`;
              files[path] = pseudoRandom(500 + ((i * 20 + j) % 40) * 100, round * 100_000 + i * 20 + j);
              sent.set(path, { content: files[path], acked: false });
            }
            const results = await c.putSmall(files).catch(() => []);
            for (const r of results)
              if (r.result.status === 'applied') {
                sent.get(r.path)!.acked = true;
                acked();
              }
          }
        })();
        // Killed while uploading and packing: after the first acknowledged bundle (a loaded
        // machine can take over a second to get there), then a random 0–800 ms more.
        await Promise.race([firstAck, new Promise((r) => setTimeout(r, 30_000))]);
        await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 800)));
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGKILL');
        stop.now = true;
        await running;
        await exited;

        const server = await startTestServer({ dataDir: data, adminToken: ADMIN, packs });
        const packer = server.packer!;
        const db = (packer['o'].index as SqlitePackIndex)['db'];
        const index = async (): Promise<PackLocation[]> => {
          const out: PackLocation[] = [];
          for (const r of db.prepare('SELECT sha256 FROM pack_entries').all() as { sha256: string }[])
            out.push((await packer.locate(r.sha256))!);
          return out;
        };
        const checkIndex = async (): Promise<number> => {
          const locs = await index();
          const got = await packer.readMany(locs); // throws on a missing pack or a bad range
          for (const l of locs) expect(sha(got.get(l.sha256)!)).toBe(l.sha256);
          return locs.length;
        };
        await checkIndex();
        await packer.flush();
        expect(await packer.pending()).toEqual([]);
        expect(await checkIndex()).toBeGreaterThan(0);
        const check = await TestClient.enrol(server, 'crash', `check${round}`);
        for (const [path, s] of sent) {
          if (!s.acked) continue;
          expect(sha(await check.bytes(path)), `acknowledged ${path}`).toBe(sha(s.content));
          expect(await packer.locate(sha(s.content)), `${path} packed`).toBeDefined();
        }
        await server.close();
      }
      expect([...sent.values()].filter((s) => s.acked).length).toBeGreaterThan(0);
    },
    ROUNDS * 60_000,
  );
});

/**
 * With `packs.fsCopy: 'drop'` a flushed pack's small files are replaced by their stubs in one
 * batch (pack-stub.ts dropFsCopies → FsProvider.replaceMany): one sync of the write-ahead log
 * for the pack, the index's revisions in one transaction. Each drop was a single write: a
 * checkpoint of the log when it held the path (a sync of the whole filesystem), then an fsync
 * of the temp file and of its folder — 600 syncs for these 300 files, and 206 s with 184
 * CPU-seconds of the proxy for the 100,000-file bench against 34 s with 'keep' (issue #16).
 * The stubs, reads and the tree stay as packs-fs-drop.test.ts checks them.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { FsProvider } from '@weft/providers';
import { pseudoRandom, startTestServer, tempDir, TestClient } from './helpers.ts';
import { countSyncs } from '@weft/providers/testing';

type Server = Awaited<ReturnType<typeof startTestServer>>;
const started: Server[] = [];
afterAll(async () => {
  for (const s of started) await s.stop().catch(() => undefined);
});

describe("packs.fsCopy 'drop': a pack's copies dropped in one batch", () => {
  it.skipIf(process.env.WEFT_TEST_METADATA === 'postgres')(
    'replaces 300 copies by stubs with one log sync and no checkpoint, the index following (SQLite: the log is off on PostgreSQL)',
    async () => {
      const server = await startTestServer({
        dataDir: await tempDir(),
        // The log checkpoints only when asked: every file of the bundle is in it at the flush.
        bundleSyncMs: 600_000,
        packs: { targetBytes: 64 * 1024 * 1024, timeoutMs: 2_000_000_000, gcIntervalMs: 0, fsCopy: 'drop' },
      });
      started.push(server);
      const alice = await TestClient.enrol(server, 'alice');
      const files: Record<string, Buffer> = {};
      for (let i = 0; i < 300; i++) files[`d${i % 5}/f${i}.bin`] = pseudoRandom(700 + i, i + 1);
      for (const r of await alice.putSmall(files)) expect(r.result.status).toBe('applied');
      const fs = (server.store as unknown as { fs: FsProvider }).fs;
      const checkpoints = fs.batchLogStats!.checkpoints;
      const syncs = await countSyncs(async () => {
        expect(await server.packer!.flush()).toBe(1);
      });
      // The pack's own write (embedded object directory: its temp file and folder) and the
      // stubs' log record — not two per file, and no checkpoint.
      expect(syncs).toBeLessThanOrEqual(5);
      expect(fs.batchLogStats!.checkpoints).toBe(checkpoints);
      const ns = nodePath.join(server.config.dataDir, 'fs', 'ns', 'alice');
      for (const path of Object.keys(files)) {
        const onFs = await fsp.readFile(nodePath.join(ns, path));
        expect(onFs.subarray(0, 12).toString()).toBe('WEFTPACKED1\n');
        // The index took the stub's revision: the file is not "changed" to a reconcile.
        const st = await fs.stat(`ns/alice/${path}`);
        const row = await server.store['meta'].getEntry('alice', path);
        expect(row?.fsRevision).toBe(st.revision);
      }
      for (const path of ['d0/f0.bin', 'd3/f148.bin', 'd4/f299.bin'])
        expect((await alice.bytes(path)).equals(files[path]!)).toBe(true);
    },
  );
});

/**
 * Uploads start before the scan ends (issue #16; sync/early-push.ts). The scan hands what it
 * has found to its caller chunk by chunk (ScanOptions.found), each operation with its index
 * row — a first scan as it walks; a push beside the scan sends a bundle as soon as a bundle's worth of creates is queued
 * and waits for more until the scan is over; with operations already waiting (queued
 * offline) sending waits for the scan as before, so nothing the scan queues can merge into
 * an operation on its way. Counted, never timed.
 */
import { createHash } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { IgnoreRules } from '../src/ignore-rules.ts';
import { Journal } from '../src/journal/journal.ts';
import type { Op } from '../src/ops.ts';
import { CHUNK_ENTRIES, scan } from '../src/scanner.ts';
import type { SyncContext } from '../src/sync/context.ts';
import { EarlyPush } from '../src/sync/early-push.ts';
import { noise } from './drop-shared.ts';
import { FakeCloud, type FakeDevice } from './support/fake-cloud.ts';

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

/** Count the device's bundles, and the files its journal knew when the first one left. */
function watchBundles(d: FakeDevice): { bundles: number; filesKnownAtFirst?: number } {
  const seen: { bundles: number; filesKnownAtFirst?: number } = { bundles: 0 };
  const upload = d.remote.uploadBundle.bind(d.remote);
  d.remote.uploadBundle = async (bytes) => {
    seen.bundles += 1;
    seen.filesKnownAtFirst ??= d.engine.journal.fileCount();
    return upload(bytes);
  };
  return seen;
}

/** Turns of the event loop until `done` holds (at most `turns`). */
async function until(done: () => boolean, turns = 2_000): Promise<boolean> {
  for (let i = 0; i < turns && !done(); i++) await new Promise<void>((r) => setImmediate(r));
  return done();
}

let cloud: FakeCloud | undefined;
afterEach(async () => {
  await cloud?.close();
  cloud = undefined;
});

describe('early push', () => {
  it('the scan hands over what it found chunk by chunk, each operation with its row', async () => {
    const base = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-early-scan-'));
    try {
      const root = nodePath.join(base, 'folder');
      const files = 2 * CHUNK_ENTRIES + 500;
      for (let i = 0; i < files; i += 500) {
        await fsp.mkdir(nodePath.join(root, `d${i / 500}`), { recursive: true });
        await Promise.all(
          Array.from({ length: 500 }, (_, k) =>
            fsp.writeFile(nodePath.join(root, `d${i / 500}`, `f${i + k}`), `${i + k}`),
          ),
        );
      }
      const journal = new Journal(nodePath.join(base, 'journal.db'));
      const handed: { ops: number; rows: number; walked: number }[] = [];
      // Entries the walk has looked at (each is asked of the ignore rules once).
      const ignore = new IgnoreRules();
      let walked = 0;
      const ignores = ignore.ignores.bind(ignore);
      ignore.ignores = (p, isDir) => ((walked += 1), ignores(p, isDir));
      const result = await scan(root, journal, ignore, {
        now: () => Date.now() + 10_000,
        found: (ops: readonly Op[], commitThrough) => {
          commitThrough(ops.length);
          handed.push({ ops: ops.length, rows: journal.allFiles().length, walked });
        },
      });
      // A first scan hands over its first chunk before the walk is over.
      expect(handed[0]?.walked).toBe(CHUNK_ENTRIES);
      // One call a chunk of entries (files and their 6 folders), operations and rows growing together.
      expect(handed.length).toBe(Math.ceil((files + 6) / CHUNK_ENTRIES));
      expect(handed[0]).toMatchObject({ ops: CHUNK_ENTRIES, rows: CHUNK_ENTRIES });
      expect(handed.map((h) => h.ops)).toEqual([...handed.map((h) => h.ops)].sort((a, b) => a - b));
      expect(handed.at(-1)).toMatchObject({ ops: files + 5, rows: files + 5 });
      expect(result.ops.length).toBe(files + 5);
      journal.close();
    } finally {
      await fsp.rm(base, { recursive: true, force: true });
    }
  });

  it('sends a bundle once a bundle’s worth is queued, then waits for more until the scan is over', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop');
    await d.engine.waitIdle();
    const files = 400; // 400 × 16 KiB: a full bundle and a partial one
    for (let i = 0; i < files; i++) await d.write(`drop/f${i}.bin`, noise(16 * 1024, i));
    const seen = watchBundles(d);
    const ctx = (d.engine as unknown as { ctx: SyncContext }).ctx;
    const control = { paused: () => false, stopped: () => false, storageFull: () => false };
    const early = EarlyPush.forScan(ctx, control, true);
    expect(early).toBeDefined();
    const put = (i: number): Op => ({
      kind: 'put',
      path: `drop/f${i}.bin`,
      hash: sha(noise(16 * 1024, i)),
      size: 16 * 1024,
      created: true,
    });
    // Less than a bundle's worth: nothing goes while the scan goes on.
    d.engine.journal.enqueueMany(Array.from({ length: 100 }, (_, i) => put(i)));
    early?.queued();
    expect(await until(() => seen.bundles > 0, 200)).toBe(false);
    // More than a bundle's worth: it goes before the scan is over.
    d.engine.journal.enqueueMany(Array.from({ length: files - 100 }, (_, i) => put(100 + i)));
    early?.queued();
    expect(await until(() => seen.bundles >= 1)).toBe(true);
    await early?.finish();
    expect(d.engine.journal.pendingCount()).toBe(0);
    const server = cloud.serverTree();
    for (let i = 0; i < files; i++) expect(server.get(`drop/f${i}.bin`)).toBe(sha(noise(16 * 1024, i)));
  });

  it('a first sync sends everything it found, and says "syncing" once the scan is over', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop');
    await d.engine.waitIdle();
    const files = CHUNK_ENTRIES + 200;
    for (let i = 0; i < files; i++) await d.write(`drop/d${i % 4}/f${i}.bin`, noise(8 * 1024, i));
    const states: string[] = [];
    d.engine.status.onChange((s) => {
      if (states.at(-1) !== s.state) states.push(s.state);
    });
    await d.sync();
    expect(d.engine.journal.pendingCount()).toBe(0);
    const server = cloud.serverTree();
    for (let i = 0; i < files; i++)
      expect(server.get(`drop/d${i % 4}/f${i}.bin`)).toBe(sha(noise(8 * 1024, i)));
    expect(states.indexOf('scanning')).toBeLessThan(states.indexOf('syncing'));
    expect(states.at(-1)).toBe('idle');
  });

  it('waits for the scan when operations were queued before it', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop');
    await d.engine.waitIdle();
    d.offline = true;
    await d.write('queued-offline.txt', 'edit made offline');
    await d.sync().catch(() => undefined); // the pass fails offline, the put stays queued
    expect(d.engine.journal.pendingCount()).toBe(1);
    d.offline = false;
    const ctx = (d.engine as unknown as { ctx: SyncContext }).ctx;
    const control = { paused: () => false, stopped: () => false, storageFull: () => false };
    expect(EarlyPush.forScan(ctx, control, true)).toBeUndefined();
    const files = CHUNK_ENTRIES + 200;
    for (let i = 0; i < files; i++) await d.write(`drop/d${i % 4}/f${i}.bin`, noise(8 * 1024, i));
    const seen = watchBundles(d);
    await d.sync();
    expect(d.engine.journal.pendingCount()).toBe(0);
    expect(seen.filesKnownAtFirst).toBe(files + 1);
  });
});

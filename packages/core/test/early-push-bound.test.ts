/**
 * A scan with a push beside it stays a bounded number of operations ahead of the push
 * (sync/early-push.ts `room()`, issue #16): a 1,000,000-file first sync walked far faster
 * than it uploaded and held 800,000 queued operations in memory (~550 MiB of agent RSS).
 * The queue's length is counted after every batch the scan queues, never timed; and the
 * scanner lets go of the operations its caller took (ScanOptions.found's answer), counted in
 * the array it hands over.
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
import { discoverLocal } from '../src/sync/discovery/local.ts';
import { EarlyPush } from '../src/sync/early-push.ts';
import { FakeCloud, type FakeDevice } from './support/fake-cloud.ts';

let cloud: FakeCloud | undefined;
afterEach(async () => {
  await cloud?.close();
  cloud = undefined;
});

/** A server that answers each bundle only after `turns` turns of the event loop (a slow link). */
function slowBundles(d: FakeDevice, turns: number): void {
  const upload = d.remote.uploadBundle.bind(d.remote);
  d.remote.uploadBundle = async (bytes) => {
    for (let i = 0; i < turns; i++) await new Promise<void>((r) => setImmediate(r));
    return upload(bytes);
  };
}

/** The first sync's scan of `files` files beside an early push; the longest the queue grew. */
async function firstScan(
  d: FakeDevice,
  files: number,
  ahead?: number,
): Promise<{ most: number; early: EarlyPush }> {
  for (let i = 0; i < files; i++) await d.write(`drop/d${i % 8}/f${i}.txt`, `file ${i} `.repeat(1000));
  const ctx = (d.engine as unknown as { ctx: SyncContext }).ctx;
  let most = 0;
  const enqueueMany = ctx.journal.enqueueMany.bind(ctx.journal);
  ctx.journal.enqueueMany = (ops, also) => {
    const n = enqueueMany(ops, also);
    most = Math.max(most, n);
    return n;
  };
  const control = { paused: () => false, stopped: () => false, storageFull: () => false };
  const early = EarlyPush.forScan(ctx, control, true, ahead);
  if (!early) throw new Error('no early push');
  const outcome = await discoverLocal(
    ctx,
    [''],
    { folder: d.folder, settleMs: 0, massDeleteFraction: 0.5, massDeleteCount: 1000, stopped: () => false },
    early,
  );
  expect(outcome).toBe('queued');
  await early.finish();
  expect(ctx.journal.pendingCount()).toBe(0);
  const server = cloud?.serverTree();
  for (let i = 0; i < files; i++)
    expect(server?.get(`drop/d${i % 8}/f${i}.txt`)).toBe(
      createHash('sha256').update(`file ${i} `.repeat(1000)).digest('hex'),
    );
  return { most, early };
}

describe('early push: the scan stays a bounded number of operations ahead', () => {
  it('waits for the push once `ahead` operations are queued, and everything still goes', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop', { watch: false });
    await d.engine.waitIdle();
    slowBundles(d, 200);
    const files = 3 * CHUNK_ENTRIES;
    const { most, early } = await firstScan(d, files, 500);
    // At most `ahead`, plus the chunk the scan hands over at once (its files and folders).
    expect(most).toBeLessThanOrEqual(500 + CHUNK_ENTRIES + 16);
    expect(early.waits).toBeGreaterThan(0);
  });

  it('without the bound the same slow scan queues everything at once (what the bound prevents)', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop', { watch: false });
    await d.engine.waitIdle();
    slowBundles(d, 200);
    const files = 3 * CHUNK_ENTRIES;
    const { most } = await firstScan(d, files, Number.POSITIVE_INFINITY);
    expect(most).toBeGreaterThan(500 + CHUNK_ENTRIES + 16);
  });
});

describe('the scanner lets go of what its caller took', () => {
  it('holds only the operations not yet taken when found answers how many it took', async () => {
    const base = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-scan-let-go-'));
    try {
      const root = nodePath.join(base, 'folder');
      const files = 3 * CHUNK_ENTRIES + 200;
      for (let d = 0; d < 4; d++) await fsp.mkdir(nodePath.join(root, `d${d}`), { recursive: true });
      for (let i = 0; i < files; i += 500)
        await Promise.all(
          Array.from({ length: Math.min(500, files - i) }, (_, k) =>
            fsp.writeFile(nodePath.join(root, `d${(i + k) % 4}`, `f${i + k}`), `${i + k}`),
          ),
        );
      const run = async (
        takes: boolean,
      ): Promise<{ held: number[]; result: readonly (Op | undefined)[] }> => {
        const journal = new Journal(nodePath.join(base, `journal-${String(takes)}.db`));
        const held: number[] = [];
        const result = await scan(root, journal, new IgnoreRules(), {
          now: () => Date.now() + 10_000,
          found: (ops, commitThrough) => {
            held.push(ops.filter((op) => op !== undefined).length);
            commitThrough(ops.length);
            return takes ? ops.length : undefined;
          },
        });
        journal.close();
        return { held, result: result.ops };
      };
      const taking = await run(true);
      // Each call holds only what was found since the last one: a chunk (and its folders).
      expect(Math.max(...taking.held)).toBeLessThanOrEqual(CHUNK_ENTRIES + 4);
      expect(taking.result.length).toBe(files + 4);
      expect(taking.result.filter((op) => op !== undefined)).toEqual([]);
      // A caller that takes nothing for good gets every operation, as before.
      const keeping = await run(false);
      expect(keeping.held.at(-1)).toBe(files + 4);
      expect(keeping.result.filter((op) => op !== undefined).length).toBe(files + 4);
    } finally {
      await fsp.rm(base, { recursive: true, force: true });
    }
  });
});

/**
 * The early push's argument (sync/early-push.ts), tested: a push runs beside the scan only
 * when the queue was empty as the scan began, because then the scan queues each path once
 * and nothing it queues later merges into an operation already queued — which the push may be
 * sending (an operation is completed by its id: a later one merged into it would be lost).
 *
 * Each test checks that invariant on every enqueue of the pass (no queued operation changes
 * or goes away when more are queued), while the files whose operations were already handed to
 * the push are edited, renamed and deleted — at the head of the queue, maybe on their way,
 * and at its tail — and then that the folder and the server converge with nothing lost. The
 * other side (operations queued before the scan: no push beside it) is early-push.test.ts's.
 * Counted, never timed.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { CHUNK_ENTRIES } from '../src/scanner.ts';
import type { SyncContext } from '../src/sync/context.ts';
import { EarlyPush } from '../src/sync/early-push.ts';
import { noise } from './drop-shared.ts';
import { FakeCloud, type FakeDevice, sorted } from './support/fake-cloud.ts';

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

let cloud: FakeCloud | undefined;
afterEach(async () => {
  await cloud?.close();
  cloud = undefined;
});

/**
 * Check every enqueue of the device's journal: the operations queued before it are all still
 * there, unchanged. At the second enqueue while the scan goes on (the first chunk's puts
 * handed to the push beside it, which may be sending them), edit, rename and delete three of
 * those files at the head of the queue and three at its tail, before the scan queues more.
 */
function guardMerges(d: FakeDevice): { violations: string[]; enqueues: number; changed: string[] } {
  const seen = { violations: [] as string[], enqueues: 0, changed: [] as string[] };
  const journal = d.engine.journal;
  const enqueueMany = journal.enqueueMany.bind(journal);
  journal.enqueueMany = (ops, also) => {
    const before = journal.pendingOps().map((q) => [q.id, JSON.stringify(q.op)] as const);
    seen.enqueues += 1;
    if (seen.enqueues === 2 && d.engine.getStatus().state === 'scanning') {
      const puts = journal.pendingOps().flatMap((q) => (q.op.kind === 'put' ? [q.op.path] : []));
      for (const [k, p] of [...puts.slice(0, 3), ...puts.slice(-3)].entries()) {
        if (k % 3 === 0) fs.writeFileSync(d.abs(p), `edited while on its way: ${p}`);
        else if (k % 3 === 1) fs.renameSync(d.abs(p), d.abs(`${p}.renamed`));
        else fs.rmSync(d.abs(p));
        seen.changed.push(`${['edit', 'rename', 'delete'][k % 3]} ${p}`);
      }
    }
    const n = enqueueMany(ops, also);
    const after = new Map(journal.pendingOps().map((q) => [q.id, JSON.stringify(q.op)]));
    for (const [id, op] of before)
      if (after.get(id) !== op) seen.violations.push(`${op} became ${after.get(id) ?? 'nothing'}`);
    return n;
  };
  return seen;
}

async function expectConverged(d: FakeDevice): Promise<void> {
  await cloud!.settle();
  expect(d.engine.journal.pendingCount()).toBe(0);
  expect(sorted(cloud!.serverTree())).toEqual(sorted(await d.tree()));
}

describe('early push beside the scan', () => {
  it('a first sync: files changed after their puts were handed to the push', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop');
    await d.engine.waitIdle();
    // Three chunks of the walk: the second is handed over while the walk goes on.
    const files = 2 * CHUNK_ENTRIES + 200;
    for (let i = 0; i < files; i++) await d.write(`drop/d${i % 4}/f${i}.bin`, noise(6 * 1024, i));
    const merges = guardMerges(d);
    await d.sync();
    expect(merges.changed).toHaveLength(6);
    expect(merges.enqueues).toBeGreaterThan(2);
    expect(merges.violations).toEqual([]);
    await expectConverged(d);
  });

  it('a later scan (moves, a file turned folder and back, deletions) with an empty queue', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop');
    await d.engine.waitIdle();
    for (let i = 0; i < 40; i++) await d.write(`old/d${i % 4}/f${i}.txt`, `old ${i}`);
    await d.write('becomes-folder', 'a file first');
    await d.write('becomes-file/inside.txt', 'a folder first');
    await d.sync();
    expect(d.engine.journal.pendingCount()).toBe(0);
    // Changes made while nothing was queued: more than a bundle's worth of new files, moves,
    // a file turned folder, a folder turned file, and deletions.
    // More entries than a chunk of the scan's comparison: the second is queued while the
    // first is being sent.
    const files = CHUNK_ENTRIES + 100;
    for (let i = 0; i < files; i++) await d.write(`new/d${i % 4}/f${i}.bin`, noise(6 * 1024, i));
    await d.mv('old/d0', 'moved/d0');
    await d.mv('old/d1/f1.txt', 'moved/f1.txt');
    await d.rm('old/d2');
    await d.rm('becomes-folder');
    await d.write('becomes-folder/now.txt', 'a folder now');
    await d.rm('becomes-file');
    await d.write('becomes-file', 'a file now');
    const ctx = (d.engine as unknown as { ctx: SyncContext }).ctx;
    const control = { paused: () => false, stopped: () => false, storageFull: () => false };
    expect(EarlyPush.forScan(ctx, control, true)).toBeDefined(); // the queue is empty
    const merges = guardMerges(d);
    await d.sync();
    expect(merges.changed).toHaveLength(6);
    expect(merges.violations).toEqual([]);
    await expectConverged(d);
    const server = cloud.serverTree();
    expect(server.get('moved/d0/f0.txt')).toBe(sha(Buffer.from('old 0')));
    expect(server.get('becomes-folder')).toBe('dir');
    expect(server.get('becomes-file')).toMatch(/^[0-9a-f]{64}$/); // a file (maybe edited by the guard)
    expect(server.get('old/d2')).toBeUndefined();
  });
});

/**
 * A first scan with a push beside it (sync/discovery/local.ts, ScanOptions.found) queues what
 * it found in transactions of at most ENQUEUE_BATCH operations, a turn of the event loop
 * between them — a chunk of CHUNK_ENTRIES in one transaction held the agent's loop 50–80 ms
 * of CPU in a 100,000-file first scan (issue #16: the UI answers within 100 ms). Counted, never
 * timed.
 */
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { Op } from '../src/ops.ts';
import { CHUNK_ENTRIES, ENQUEUE_BATCH } from '../src/scanner.ts';
import { noise } from './drop-shared.ts';
import { FakeCloud } from './support/fake-cloud.ts';

let cloud: FakeCloud | undefined;
afterEach(async () => {
  await cloud?.close();
  cloud = undefined;
});

describe('a first scan beside a push', () => {
  it('queues a chunk in transactions of at most ENQUEUE_BATCH operations, a turn between them', async () => {
    expect(CHUNK_ENTRIES).toBeGreaterThan(ENQUEUE_BATCH);
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop');
    await d.engine.waitIdle();
    const files = CHUNK_ENTRIES + 200;
    for (let i = 0; i < files; i++) await d.write(`drop/d${i % 4}/f${i}.bin`, noise(512, i));
    // Each enqueue transaction's size, and the turns of the loop taken between two of them.
    const sizes: number[] = [];
    const turnsBefore: number[] = [];
    let turns = 0;
    let syncing = true;
    const tick = (): void => {
      turns += 1;
      if (syncing) setImmediate(tick);
    };
    setImmediate(tick);
    const journal = d.engine.journal;
    const enqueueMany = journal.enqueueMany.bind(journal);
    journal.enqueueMany = (ops: readonly Op[], also?: () => void) => {
      sizes.push(ops.length);
      turnsBefore.push(turns);
      return enqueueMany(ops, also);
    };
    await d.sync();
    syncing = false;
    expect(journal.pendingCount()).toBe(0);
    const server = cloud.serverTree();
    for (let i = 0; i < files; i++)
      expect(server.get(`drop/d${i % 4}/f${i}.bin`)).toBe(
        createHash('sha256').update(noise(512, i)).digest('hex'),
      );
    // Every file and folder went through the queue, never more than a batch at once…
    expect(sizes.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(files);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(ENQUEUE_BATCH);
    // …and the loop turned between any two of them.
    for (let i = 1; i < turnsBefore.length; i++)
      expect(turnsBefore[i], `before enqueue ${i}`).toBeGreaterThan(turnsBefore[i - 1] as number);
  });
});

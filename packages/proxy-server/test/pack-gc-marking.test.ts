/**
 * Dating dead pack entries after changes (store/pack-gc.ts markSoon, issue #16): a marking
 * looks at every pack entry, so one runs only once the changes since the last are worth it
 * (MARK_ENTRIES_PER_CHANGE entries looked at per change at most). Marking once a second
 * through an upload of 100,000 files looked at every packed file again each time — quadratic.
 * Markings and the entries they look at are counted (fake timers), never timed.
 */
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { CostService } from '../src/cost/service.ts';
import { MARK_DELAY_MS, MARK_ENTRIES_PER_CHANGE, PackCollector } from '../src/store/pack-gc.ts';
import type { Packer } from '../src/store/packs.ts';

afterEach(() => {
  vi.useRealTimers();
});

/** A packer whose pack entries grow as files come in; counts the entries its markings look at. */
function growingPacker(): { packer: Packer; files: { n: number }; looked: { n: number } } {
  const files = { n: 0 };
  const looked = { n: 0 };
  const packer = {
    markDead: async () => {
      looked.n += files.n;
      return { died: 0, revived: 0, entries: files.n };
    },
  } as unknown as Packer;
  return { packer, files, looked };
}

/** `total` files written in bursts of `burst`, a marking delay apart (an upload's bundles). */
async function upload(c: PackCollector, files: { n: number }, total: number, burst: number): Promise<void> {
  for (let i = 0; i < total; i += burst) {
    for (let k = 0; k < burst; k++) {
      files.n += 1;
      c.markSoon();
    }
    await vi.advanceTimersByTimeAsync(MARK_DELAY_MS);
  }
}

describe('pack collector: marking after changes', () => {
  it('looks at a bounded number of pack entries per change, whatever the number of files', async () => {
    vi.useFakeTimers();
    const perFile: number[] = [];
    for (const total of [10_000, 40_000]) {
      const { packer, files, looked } = growingPacker();
      const c = new PackCollector({
        packer,
        cost: {} as CostService,
        log: pino({ level: 'silent' }),
        intervalMs: 0,
      });
      await upload(c, files, total, 100);
      perFile.push(looked.n / total);
      expect(c.markings).toBeGreaterThan(1);
      await c.close();
    }
    // Marking at every burst looked at total²/(2 × burst) entries: 50 and 200 a file here.
    for (const x of perFile) expect(x).toBeLessThanOrEqual(2 * MARK_ENTRIES_PER_CHANGE);
  });

  it('still dates the first changes a marking delay after them', async () => {
    vi.useFakeTimers();
    const { packer, files } = growingPacker();
    const c = new PackCollector({
      packer,
      cost: {} as CostService,
      log: pino({ level: 'silent' }),
      intervalMs: 0,
    });
    files.n = 1;
    c.markSoon();
    expect(c.markings).toBe(0);
    await vi.advanceTimersByTimeAsync(MARK_DELAY_MS);
    expect(c.markings).toBe(1);
    await c.close();
  });
});

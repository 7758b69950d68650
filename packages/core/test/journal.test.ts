import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Journal } from '../src/journal/journal.ts';

const dirs: string[] = [];
const fresh = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'weft-journal-'));
  dirs.push(d);
  return join(d, 'journal.db');
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('journal: transfers, delta history, activity', () => {
  it('keeps a large upload in progress across a reopen, until it is cleared', () => {
    const file = fresh();
    const j = new Journal(file);
    expect(j.getTransfer('big.bin')).toBeUndefined();
    j.saveTransfer('big.bin', 't-1', 'aa', 10);
    j.saveTransfer('big.bin', 't-2', 'bb', 20); // a new content replaces the old transfer
    j.close();
    const again = new Journal(file);
    expect(again.getTransfer('big.bin')).toEqual({ transferId: 't-2', hash: 'bb', size: 20 });
    again.clearTransfer('big.bin');
    expect(again.getTransfer('big.bin')).toBeUndefined();
    again.close();
  });

  it('stores a block-size history and reads an unreadable one as none', () => {
    const j = new Journal(fresh());
    expect(j.deltaHistory('a')).toBeUndefined();
    j.setDeltaHistory('a', [0.25, 0.75], 3);
    expect(j.deltaHistory('a')).toEqual({ probs: [0.25, 0.75], n: 3 });
    j.db.prepare("UPDATE delta_history SET block_probs = '{not json' WHERE path = 'a'").run();
    expect(j.deltaHistory('a')).toBeUndefined();
    j.db.prepare("UPDATE delta_history SET block_probs = '[\"x\"]' WHERE path = 'a'").run();
    expect(j.deltaHistory('a')).toBeUndefined();
    j.close();
  });

  it('keeps recent activity across a reopen, newest first, the last 200 only', () => {
    const file = fresh();
    const j = new Journal(file);
    for (let i = 0; i < 250; i++)
      j.addActivity({ atMs: 1000 + i, kind: 'uploaded', path: `f${i}`, ...(i % 2 ? { row: 'D2' } : {}) });
    j.addActivity({ atMs: 5000, kind: 'error', path: 'x', detail: 'refused' });
    j.close();
    const again = new Journal(file);
    const recent = again.recentActivity();
    expect(recent).toHaveLength(Journal.ACTIVITY_KEPT);
    expect(recent[0]).toEqual({ atMs: 5000, kind: 'error', path: 'x', detail: 'refused' });
    expect(recent[1]).toEqual({ atMs: 1249, kind: 'uploaded', path: 'f249', row: 'D2' });
    expect(recent[2]).toEqual({ atMs: 1248, kind: 'uploaded', path: 'f248' });
    // Trimming keeps the table bounded (within one trim interval of the limit).
    const count = Number((again.db.prepare('SELECT COUNT(*) AS n FROM activity').get() as { n: bigint }).n);
    expect(count).toBeLessThanOrEqual(Journal.ACTIVITY_KEPT + 32);
    again.close();
  });
});

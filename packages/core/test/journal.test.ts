import { describe, expect, it } from 'vitest';
import { Journal } from '../src/journal/journal.ts';
import type { Op } from '../src/ops.ts';
import { fileRow, journalFile } from './support/journal-rig.ts';

const fresh = (): string => journalFile('weft-journal-');

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

  it('keeps its page cache at 4 MiB, not the 16 MB better-sqlite3 builds in (issue #16)', () => {
    const j = new Journal(fresh());
    expect(j.db.pragma('cache_size', { simple: true })).toBe(-4096n); // safe integers: a bigint
    j.close();
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

  it('says the revision a path was last synced at from one column: null when never or unknown', () => {
    const j = new Journal(fresh());
    const row = fileRow('a.txt');
    expect(j.syncedRevOf('a.txt')).toBeNull();
    j.upsertFile(row);
    expect(j.syncedRevOf('a.txt')).toBeNull();
    j.upsertFile({ ...row, syncedRev: 'rev-7', syncedHash: 'h' });
    expect(j.syncedRevOf('a.txt')).toBe('rev-7');
    expect(j.syncedRevOf('a.txt')).toBe(j.getFile('a.txt')?.syncedRev);
    // A page of echoes in one statement answers as syncedEchoHash does for each (issue #16).
    j.upsertFile({ ...row, path: 'edited.txt', syncedRev: 'rev-1', syncedHash: 'old' });
    j.upsertFile({ ...row, path: 'dir', kind: 'dir', syncedRev: 'rev-2', hash: null });
    const page = [
      { path: 'a.txt', revision: 'rev-7' },
      { path: 'edited.txt', revision: 'rev-1' },
      { path: 'dir', revision: 'rev-2' },
      { path: 'none.txt', revision: 'rev-3' },
    ];
    const together = j.syncedEchoHashes([...page, { path: 'b.txt', revision: 'rev-9' }]);
    for (const e of page) expect(together.get(e.path)).toBe(j.syncedEchoHash(e.path, e.revision));
    expect([...together]).toEqual([['a.txt', 'h']]);
    expect(j.syncedEchoHashes([{ path: 'a.txt', revision: 'rev-6' }]).size).toBe(0);
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

describe('journal: the queue in memory', () => {
  const put = (path: string): Op => ({ kind: 'put', path, hash: 'h', size: 1, created: true });

  it('says where a queued file is now: its path carried through the moves queued after it', () => {
    const j = new Journal(fresh());
    j.enqueueMany([
      put('a/f'),
      { kind: 'move', from: 'a', to: 'b', replaces: false },
      put('c/g'),
      { kind: 'move', from: 'b/f', to: 'b/f2', replaces: false },
    ]);
    const [first, folderMove, third, fileMove] = j.pendingOps();
    expect(first?.op).toEqual(put('a/f'));
    // The moves alone, from the queue's index of them (held.ts asks each pull).
    expect(j.queuedMoves()).toEqual([folderMove, fileMove]);
    expect(j.whereNow(first?.id ?? 0, 'a/f')).toBe('b/f2');
    expect(j.whereNow(third?.id ?? 0, 'c/g')).toBe('c/g');
    // A move queued before the put does not carry it.
    expect(j.whereNow(folderMove?.id ?? 0, 'a/f')).toBe('a/f');
    // The folder move sent: only the file's own move is left, and it names b/f, not a/f.
    j.completeOp(folderMove?.id ?? 0, () => undefined);
    expect(j.whereNow(first?.id ?? 0, 'a/f')).toBe('a/f');
    expect(j.queuedMoves()).toEqual([fileMove]);
    j.close();
  });

  it('hands out the same list of waiting operations until the queue changes, then the new one', () => {
    const file = fresh();
    const j = new Journal(file);
    j.enqueueMany([put('x'), put('y')]);
    const before = j.pendingOps();
    expect(j.pendingOps()).toBe(before);
    j.enqueue(put('z'));
    expect(j.pendingOps().map((q) => q.op)).toEqual([put('x'), put('y'), put('z')]);
    j.completeOp(before[0]?.id ?? 0, () => undefined);
    expect(j.pendingOps().map((q) => q.op)).toEqual([put('y'), put('z')]);
    // A transaction that fails leaves the queue as the table has it, in memory too.
    expect(j.pendingOps()).toHaveLength(2);
    expect(() =>
      j.transaction(() => {
        j.enqueue(put('w'));
        expect(j.pendingOps()).toHaveLength(3);
        throw new Error('disk full');
      }),
    ).toThrow('disk full');
    expect(j.pendingOps().map((q) => q.op)).toEqual([put('y'), put('z')]);
    j.close();
    const again = new Journal(file);
    expect(again.pendingOps().map((q) => q.op)).toEqual([put('y'), put('z')]);
    again.close();
  });
});

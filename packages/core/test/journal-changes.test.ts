/**
 * The journal changes a propagation returns (src/journal/changes.ts) are recorded in order,
 * in one transaction: all of them, or — when one fails — none, the queue included.
 */
import { describe, expect, it } from 'vitest';
import { JournalChanges, commitChanges } from '../src/journal/changes.ts';
import { type FileRow, Journal } from '../src/journal/journal.ts';
import { fileRow, journalFile } from './support/journal-rig.ts';

const fresh = (): Journal => new Journal(journalFile('weft-changes-'));

/** A file synced at r1 with content `hash`. */
const file = (path: string, hash: string): FileRow =>
  fileRow(path, { hash, syncedRev: 'r1', syncedHash: hash });

describe('journal changes', () => {
  it('are recorded in the order they were made', () => {
    const j = fresh();
    j.enqueue({ kind: 'put', path: 'old.txt', hash: 'h0', size: 1, created: true });
    const [queued] = j.pendingOps();
    const changes = new JournalChanges()
      .upsertFile(file('a/x.txt', 'h1'))
      .moveFiles('a', 'b') // sees the row just upserted
      .upsertFile({ ...file('b/x.txt', 'h1'), syncedRev: 'r2' })
      .completeOp(queued?.id ?? -1)
      .enqueue([{ kind: 'mkdir', path: 'c', created: true }])
      .recordLocalName('b/x.txt', 'x＿.txt', 'reserved')
      .setDeltaHistory('b/x.txt', [0.5, 0.5], 3);
    expect(changes.touchesLocalNames).toBe(true);
    commitChanges(j, changes);
    expect(j.getFile('a/x.txt')).toBeUndefined();
    expect(j.getFile('b/x.txt')?.syncedRev).toBe('r2');
    expect(j.pendingOps().map((q) => q.op)).toEqual([{ kind: 'mkdir', path: 'c', created: true }]);
    expect(j.localNames()).toEqual([{ path: 'b/x.txt', localName: 'x＿.txt', reason: 'reserved' }]);
    expect(j.deltaHistory('b/x.txt')).toEqual({ probs: [0.5, 0.5], n: 3 });
    j.close();
  });

  it('are all recorded or none: a failing change leaves the rows and the queue as they were', () => {
    const j = fresh();
    j.upsertFile(file('keep.txt', 'h1'));
    j.enqueue({ kind: 'put', path: 'keep.txt', hash: 'h2', size: 1, created: false });
    const before = j.pendingOps();
    const [queued] = before;
    const bad = { ...file('bad.txt', 'h3'), kind: 'link' } as unknown as FileRow; // the table's CHECK refuses it
    const changes = new JournalChanges()
      .deleteFile('keep.txt')
      .completeOp(queued?.id ?? -1)
      .enqueue([{ kind: 'delete', path: 'keep.txt' }])
      .upsertFile(bad);
    expect(() => commitChanges(j, changes)).toThrow();
    expect(j.getFile('keep.txt')?.hash).toBe('h1');
    expect(j.getFile('bad.txt')).toBeUndefined();
    expect(j.pendingOps()).toEqual(before);
    j.close();
  });

  it('write the queue once per transaction, however many operations they complete', () => {
    const j = fresh();
    const ops = Array.from({ length: 100 }, (_, i) => ({
      kind: 'put' as const,
      path: `d/f${i}.txt`,
      hash: `h${i}`,
      size: 1,
      created: true,
    }));
    j.enqueueMany(ops);
    expect(j.queueWrites).toBe(1);
    const changes = new JournalChanges();
    for (const q of j.pendingOps().slice(0, 64))
      changes.add(
        new JournalChanges().completeOp(q.id).upsertFile(file(q.op.kind === 'put' ? q.op.path : '', 'h')),
      );
    commitChanges(j, changes);
    // One write of the queue, not one (and a savepoint) per completed operation (issue #16).
    expect(j.queueWrites).toBe(2);
    expect(j.pendingCount()).toBe(36);
    const rows = j.db.prepare('SELECT path FROM ops ORDER BY id').all() as { path: string }[];
    expect(rows.map((r) => r.path)).toEqual(ops.slice(64).map((o) => o.path));
    expect(j.getFile('d/f0.txt')?.hash).toBe('h');
    j.close();
  });

  it('mark a row synced in place, and make no row where there is none', () => {
    const j = fresh();
    const row = { ...file('a.txt', 'h1'), syncedRev: null, syncedHash: null, mtimeNs: 7n };
    j.upsertFile(row);
    commitChanges(
      j,
      new JournalChanges()
        .setSynced('a.txt', 'r9', 'h1', Buffer.from('sig'), 512)
        .setSynced('gone.txt', 'r1', 'h'),
    );
    expect(j.getFile('a.txt')).toEqual({
      ...row,
      syncedRev: 'r9',
      syncedHash: 'h1',
      signature: Buffer.from('sig'),
      signatureBlock: 512,
    });
    expect(j.getFile('gone.txt')).toBeUndefined();
    j.close();
  });

  it('an empty list touches nothing', () => {
    const j = fresh();
    const changes = new JournalChanges().enqueue([]);
    expect(changes.size).toBe(0);
    commitChanges(j, changes);
    expect(j.pendingOps()).toEqual([]);
    j.close();
  });
});

/**
 * What a bundle upload writes to the journal, counted in statements (issue #16: four SQLite
 * statements per uploaded file — the contents marked sent, then with each outcome the queue
 * entry deleted, the sent mark cleared and the synced columns set — were a measurable share
 * of the agent's CPU per file). A bundle's contents are marked sent ROWS_PER_STATEMENT (64) at a time, and
 * each outcome transaction (OUTCOMES_PER_TRANSACTION files) clears the marks and deletes
 * the queue entries in one statement each, and sets the synced columns ROWS_PER_STATEMENT
 * at a time; the rows end as one statement per file left them. The recent activity is
 * written 64 items a statement, not one an item. Counted, never timed.
 */
import type Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { JournalChanges, commitChanges } from '../src/journal/changes.ts';
import { type FileRow, Journal } from '../src/journal/journal.ts';
import { ROWS_PER_STATEMENT } from '../src/journal/rows.ts';
import { OUTCOMES_PER_TRANSACTION } from '../src/sync/propagate/upload-bundle.ts';
import { FakeCloud, sha256 } from './support/fake-cloud.ts';
import { fileRow, journalFile } from './support/journal-rig.ts';

let cloud: FakeCloud | undefined;
afterEach(async () => {
  await cloud?.close();
  cloud = undefined;
});

/** Counts the statements the journal runs, by their text (its prepared statements pass through `sql`). */
function countStatements(journal: Journal): Map<string, number> {
  const counts = new Map<string, number>();
  const j = journal as unknown as { sql: (text: string) => Database.Statement };
  const sql = j.sql.bind(journal);
  j.sql = (text: string) => {
    const st = sql(text);
    return new Proxy(st, {
      get(target, name) {
        const v = Reflect.get(target, name, target) as unknown;
        if (typeof v !== 'function') return v;
        if (name !== 'run' && name !== 'get' && name !== 'all' && name !== 'iterate') return v.bind(target);
        return (...args: unknown[]) => {
          counts.set(text, (counts.get(text) ?? 0) + 1);
          return (v as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
  };
  return counts;
}

describe("a bundle upload's journal writes", () => {
  it('are a few statements per outcome transaction, not four per file', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop');
    await d.engine.waitIdle();
    const n = 2 * OUTCOMES_PER_TRANSACTION + 5;
    for (let i = 0; i < n; i++) await d.write(`w/f${i}.txt`, `file ${i}`);
    // Scanned and queued while offline: the count below is the upload's alone.
    d.offline = true;
    await d.sync().catch(() => undefined);
    const journal = d.engine.journal;
    expect(journal.pendingOps().filter((q) => q.op.kind === 'put')).toHaveLength(n);
    const counts = countStatements(journal);
    d.offline = false;
    await d.sync();
    for (let i = 0; i < n; i++) expect(cloud.serverTree().get(`w/f${i}.txt`)).toBe(sha256(`file ${i}`));
    expect(journal.pendingCount()).toBe(0);
    const of = (re: RegExp): number =>
      [...counts].filter(([text]) => re.test(text)).reduce((s, [, c]) => s + c, 0);
    const transactions = Math.ceil(n / OUTCOMES_PER_TRANSACTION);
    // Each outcome transaction sets its files' synced columns ROWS_PER_STATEMENT at a time.
    let perKind = 0;
    for (let at = 0; at < n; at += OUTCOMES_PER_TRANSACTION)
      perKind += Math.ceil(Math.min(OUTCOMES_PER_TRANSACTION, n - at) / ROWS_PER_STATEMENT);
    // One bundle (n small files): its contents marked sent ROWS_PER_STATEMENT at a time.
    expect(of(/^INSERT[^]*INTO sent/)).toBe(Math.ceil(n / ROWS_PER_STATEMENT));
    expect(of(/^DELETE FROM sent/)).toBe(transactions);
    expect(of(/UPDATE files SET synced_rev/)).toBe(perKind);
    expect(of(/^DELETE FROM ops/)).toBe(transactions + 1); // and the folder w's mkdir
    // The recent activity: one statement for each turn's items (and its trim), not one an item.
    expect(of(/^INSERT INTO activity/)).toBeGreaterThan(0);
    expect(of(/^INSERT INTO activity/)).toBeLessThanOrEqual(
      of(/^DELETE FROM activity/) + Math.ceil(n / ROWS_PER_STATEMENT),
    );
    expect(of(/^INSERT INTO activity/)).toBeLessThanOrEqual(
      transactions + 2 + Math.ceil(n / ROWS_PER_STATEMENT),
    );
    // The rows as one statement per file left them: synced at the server's revision, nothing sent.
    const db = (journal as unknown as { db: Database.Database }).db;
    expect(db.prepare('SELECT count(*) AS n FROM sent').get()).toEqual({ n: 0n });
    expect(db.prepare('SELECT count(*) AS n FROM ops').get()).toEqual({ n: 0n });
    const rows = db
      .prepare("SELECT path, synced_rev, synced_hash FROM files WHERE path LIKE 'w/%'")
      .all() as {
      path: string;
      synced_rev: string | null;
      synced_hash: string | null;
    }[];
    expect(rows).toHaveLength(n);
    const revs = new Map(
      cloud.server
        .ns('alice')
        .subtree('w')
        .map((e) => [e.path, e.revision]),
    );
    for (const r of rows) {
      expect(r.synced_hash).toBe(sha256(`file ${r.path.slice('w/f'.length, -'.txt'.length)}`));
      expect(r.synced_rev).toBe(revs.get(r.path));
    }
  });
});

describe('runs of outcomes in one statement', () => {
  const row = (path: string): FileRow => fileRow(path);

  it('leave the rows as the changes one by one would, in order (a path twice, a signature, an upsert between)', () => {
    const j = new Journal(journalFile('weft-journal-writes-'));
    try {
      for (const p of ['a', 'b', 'c', 'd']) j.upsertFile(row(p));
      j.markSent(['a', 'b', 'c', 'd'].map((path) => ({ path, sha256: `s-${path}` })));
      j.markSent([{ path: 'a', sha256: 's-a2' }]);
      expect(j.wasSent('a', 's-a2') && j.wasSent('d', 's-d')).toBe(true);
      for (const path of ['a', 'b', 'c']) j.enqueue({ kind: 'put', path, hash: 'h', size: 1, created: true });
      const ids = j.pendingOps().map((q) => q.id);
      expect(ids).toHaveLength(3);
      const changes = new JournalChanges()
        .completeOp(ids[0] as number)
        .clearSent('a')
        .setSynced('a', 'r1', 'h1')
        .completeOp(ids[1] as number)
        .clearSent('b')
        .setSynced('b', 'r1', 'hb')
        .setSynced('a', 'r2', 'h2') // the last one holds
        .setSynced('c', 'r1', 'hc', Buffer.from([1, 2]), 512) // with a signature: its own statement
        .setSynced('c', 'r2', 'hc2') // after it, and holds
        .upsertFile({ ...row('b'), hash: 'new', syncedRev: 'rX', syncedHash: 'hX' }) // ends the run
        .setSynced('d', 'r1', 'hd');
      commitChanges(j, changes);
      const got = (p: string) => {
        const r = j.getFile(p);
        return [
          r?.hash,
          r?.syncedRev,
          r?.syncedHash,
          r?.signature ? [...r.signature] : null,
          r?.signatureBlock,
        ];
      };
      expect(got('a')).toEqual(['h', 'r2', 'h2', null, null]);
      expect(got('b')).toEqual(['new', 'rX', 'hX', null, null]);
      expect(got('c')).toEqual(['h', 'r2', 'hc2', null, null]);
      expect(got('d')).toEqual(['h', 'r1', 'hd', null, null]);
      expect([j.wasSent('a', 's-a'), j.wasSent('a', 's-a2'), j.wasSent('b', 's-b')]).toEqual([
        false,
        false,
        false,
      ]);
      expect([j.wasSent('c', 's-c'), j.wasSent('d', 's-d')]).toEqual([true, true]);
      expect(j.pendingOps().map((q) => q.id)).toEqual([ids[2]]);
    } finally {
      j.close();
    }
  });
});

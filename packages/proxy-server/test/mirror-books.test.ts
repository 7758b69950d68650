/**
 * The share mirror's books (the ShareStore interface of packages/mirror/src/books-store.ts):
 * one suite, two implementations — SQLite (the embedded default, packages/mirror/src/store.ts)
 * and PostgreSQL (src/shares/mirror-books-postgres.ts, pg-migrations/007) on a real cluster
 * (src/testing/postgres.ts; skipped with the reason only where the machine has no PostgreSQL
 * server binaries). Then, on PostgreSQL only, the fencing of the books' writes by the
 * controller lease: a store of a term that has ended writes nothing.
 */
import Database from 'better-sqlite3';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type MirrorBooks, migrate, type Op, type ShareStore, SqliteMirrorBooks } from '@weft/mirror';
import { FencedError, PgLease } from '../src/cluster/lease.ts';
import { PostgresMirrorBooks, termFence } from '../src/shares/mirror-books-postgres.ts';
import { connect, migratePostgres, type Sql } from '../src/store/postgres-db.ts';
import { postgresBinaries, type RunningPostgres, startPostgres } from '../src/testing/postgres.ts';
import { adminSql } from './pg-admin.ts';

const bins = postgresBinaries();
const noPg = 'missing' in bins ? bins.missing : undefined;

const file = (path: string): Op => ({ type: 'file', path, revision: 'r', sha256: 'ab', size: 2 });

interface Impl {
  readonly name: string;
  /** Fresh, empty books. */
  open(): Promise<MirrorBooks>;
  close(): Promise<void>;
}

const sqlite = (): Impl => {
  const dbs: Database.Database[] = [];
  return {
    name: 'SQLite',
    async open() {
      const db = new Database(':memory:');
      migrate(db);
      dbs.push(db);
      return new SqliteMirrorBooks(db);
    },
    async close() {
      for (const db of dbs.splice(0)) db.close();
    },
  };
};

let cluster: RunningPostgres | undefined;
afterAll(async () => {
  await cluster?.stop();
});
async function database(): Promise<{ url: string; sql: Sql }> {
  cluster ??= await startPostgres(adminSql);
  const url = await cluster.createDatabase();
  const sql = connect(url, 4);
  await migratePostgres(sql);
  return { url, sql };
}

const postgresImpl = (): Impl => {
  const pools: Sql[] = [];
  return {
    name: 'PostgreSQL',
    async open() {
      const { sql } = await database();
      pools.push(sql);
      return new PostgresMirrorBooks(sql);
    },
    async close() {
      await Promise.all(pools.splice(0).map((s) => s.end()));
    },
  };
};

const impls: { impl: () => Impl; skip?: string }[] = [
  { impl: sqlite },
  { impl: postgresImpl, ...(noPg ? { skip: noPg } : {}) },
];

for (const { impl, skip } of impls) {
  const it0 = impl();
  describe.skipIf(skip !== undefined)(
    `mirror books on ${it0.name}${skip ? ` (skipped: ${skip})` : ''}`,
    () => {
      let books: MirrorBooks;
      let s: ShareStore;
      beforeAll(async () => {
        books = await it0.open();
      });
      afterAll(() => it0.close());
      let n = 0;
      const fresh = (): ShareStore => (s = books.share(`share-${++n}`));

      it('keepsCursorsPerShareAndReplica', async () => {
        fresh();
        const other = books.share(`share-${++n}`);
        expect(await s.cursor('a')).toBeUndefined();
        await s.setCursor('a', 'c1');
        await s.setCursor('a', 'c2');
        await s.setCursor('b', 'x');
        await other.setCursor('a', 'o');
        expect(await s.cursor('a')).toBe('c2');
        expect(await s.cursor('b')).toBe('x');
        expect(await other.cursor('a')).toBe('o');
      });

      it('listsKnownEntriesAtOrBelowAPathInCodePointOrder', async () => {
        fresh();
        const paths = ['b', 'a/x', 'a', 'a-b', 'a.b', 'B', 'ab', 'a/y/z', 'é'];
        for (const p of paths) await s.setKnown('r', p, { kind: 'file', revision: `v${p}`, sha256: p });
        await s.setKnown('other', 'a/x', { kind: 'dir', revision: '', sha256: '' });
        const all = (await s.knownUnder('r', '')).map((k) => k.path);
        expect(all).toEqual([...paths].sort());
        // 'a' covers a and a/…, not a-b, a.b or ab.
        expect((await s.knownUnder('r', 'a')).map((k) => k.path)).toEqual(['a', 'a/x', 'a/y/z']);
        expect(await s.known('r', 'a/x')).toEqual({ kind: 'file', revision: 'va/x', sha256: 'a/x' });
        expect(await s.known('other', 'a/x')).toEqual({ kind: 'dir', revision: '', sha256: '' });
        await s.setKnown('r', 'a/x', { kind: 'file', revision: 'v2', sha256: 'h2' });
        expect((await s.known('r', 'a/x'))?.revision).toBe('v2');
        await s.setKnown('r', 'b', undefined);
        expect(await s.known('r', 'b')).toBeUndefined();
        await s.dropKnownUnder('r', 'a');
        expect((await s.knownUnder('r', '')).map((k) => k.path)).toEqual(['B', 'a-b', 'a.b', 'ab', 'é']);
        expect(await s.known('other', 'a/x')).toBeDefined();
      });

      it('movesTheHeadAndRemembersEveryFileVersionItHad', async () => {
        fresh();
        await s.setHead('d', { kind: 'dir', sha256: '' });
        await s.setHead('d/f', { kind: 'file', sha256: 'h1' });
        await s.setHead('d/f', { kind: 'file', sha256: 'h2' });
        await s.setHead('df', { kind: 'file', sha256: 'h3' });
        expect(await s.head('d/f')).toEqual({ kind: 'file', sha256: 'h2', revision: '' });
        expect(await s.headUnder('d')).toEqual([
          { path: 'd', kind: 'dir', sha256: '' },
          { path: 'd/f', kind: 'file', sha256: 'h2' },
        ]);
        expect(await s.wasHead('d/f', 'h1')).toBe(true);
        expect(await s.wasHead('d/f', 'h3')).toBe(false);
        expect(await s.wasHead('d', '')).toBe(false);
        await s.dropHeadUnder('d');
        expect((await s.headUnder('')).map((h) => h.path)).toEqual(['df']);
        await s.setHead('df', undefined);
        expect(await s.head('df')).toBeUndefined();
        expect(await s.wasHead('d/f', 'h2')).toBe(true);
      });

      it('prunesHeadHistoryToTheVersionsSomeReplicasBooksStillHold', async () => {
        fresh();
        const other = books.share(`share-${++n}`);
        for (const h of ['h1', 'h2', 'h3', 'h4']) await s.setHead('f', { kind: 'file', sha256: h });
        await s.setHead('g', { kind: 'file', sha256: 'h1' });
        await s.setHead('g', { kind: 'file', sha256: 'g2' });
        await s.setHead('gone', { kind: 'file', sha256: 'x1' });
        await s.setHead('gone', undefined);
        await other.setHead('f', { kind: 'file', sha256: 'h1' });
        await other.setHead('f', { kind: 'file', sha256: 'h2' });
        // r1 is behind at f (h2), r2 has the head; at g r1 holds h1 — held at f, not at g.
        await s.setKnown('r1', 'f', { kind: 'file', revision: 'a', sha256: 'h2' });
        await s.setKnown('r2', 'f', { kind: 'file', revision: 'b', sha256: 'h4' });
        await s.setKnown('r1', 'g', { kind: 'file', revision: 'c', sha256: 'g2' });
        await s.setKnown('r2', 'g', { kind: 'dir', revision: '', sha256: '' });

        // Forgotten: f's h1 and h3, g's h1, and everything of 'gone'.
        expect(await s.pruneHeadHistory()).toBe(4);
        expect(await s.wasHead('f', 'h1')).toBe(false);
        expect(await s.wasHead('f', 'h2')).toBe(true); // r1's books hold it: r1 is behind
        expect(await s.wasHead('f', 'h3')).toBe(false);
        expect(await s.wasHead('f', 'h4')).toBe(true); // the head
        expect(await s.wasHead('g', 'h1')).toBe(false);
        expect(await s.wasHead('g', 'g2')).toBe(true);
        expect(await s.wasHead('gone', 'x1')).toBe(false);
        // Another share's history is its own.
        expect(await other.wasHead('f', 'h1')).toBe(true);
        expect(await s.pruneHeadHistory()).toBe(0);
        // Inside a transaction, like every call.
        await s.setHead('f', { kind: 'file', sha256: 'h5' });
        await s.setKnown('r2', 'f', { kind: 'file', revision: 'd', sha256: 'h5' });
        expect(await s.transaction((tx) => tx.pruneHeadHistory())).toBe(1);
        expect(await s.wasHead('f', 'h4')).toBe(false);
        expect(await s.wasHead('f', 'h2')).toBe(true);
      });

      it('appendsInOrderAndTracksWhatIsDoneWhere', async () => {
        fresh();
        const other = books.share(`share-${++n}`);
        expect(await s.maxSeq()).toBe(0);
        const one = await s.append('r1', file('a'), new Uint8Array([1, 2]), 1000);
        await other.append('r1', file('z'), undefined, 1000);
        const two = await s.append('r2', { type: 'dir', path: 'd' }, undefined, 2000, ['r2', 'r3']);
        const three = await s.append('r1', file('b'), new Uint8Array([3]), 3000);
        expect(one).toBeLessThan(two);
        expect(two).toBeLessThan(three);
        expect(await s.maxSeq()).toBe(three);
        expect(await s.pendingCount()).toBe(3);
        expect(await s.logLength()).toBe(3);
        const pending = await s.pending();
        expect(pending.map((e) => [e.seq, e.origin, e.op, e.doneTargets, e.createdMs])).toEqual([
          [one, 'r1', file('a'), [], 1000],
          [two, 'r2', { type: 'dir', path: 'd' }, ['r2', 'r3'], 2000],
          [three, 'r1', file('b'), [], 3000],
        ]);
        expect([...(pending[0]?.data ?? [])]).toEqual([1, 2]);
        expect(pending[1]?.data).toBeUndefined();
        expect((await s.pending(one, false)).map((e) => [e.seq, e.data])).toEqual([
          [two, undefined],
          [three, undefined],
        ]);
        expect([...((await s.data(three)) ?? [])]).toEqual([3]);
        expect(await s.pendingFor('r3')).toBe(2);
        await s.markTargetDone(one, ['r1', 'r3']);
        expect(await s.pendingFor('r3')).toBe(1);
        expect(await s.pendingFor('r1')).toBe(2);
        await s.markDone(one);
        expect(await s.data(one)).toBeUndefined();
        expect((await s.pending()).map((e) => e.seq)).toEqual([two, three]);
        expect(await s.pendingCount()).toBe(2);
        expect(await s.logLength()).toBe(3);
        const records = await s.logRecords();
        expect(records.map((r) => [r.seq, r.done, JSON.parse(r.doneTargets)])).toEqual([
          [one, true, ['r1', 'r3']],
          [two, false, ['r2', 'r3']],
          [three, false, []],
        ]);
      });

      it('recordsWhereTheEngineTouchedAPathAtTheLogsEnd', async () => {
        fresh();
        expect(await s.touchedAt('r', 'a')).toBe(0);
        await s.touch('r', 'a/b');
        expect(await s.touchedAt('r', 'a/b')).toBe(0);
        const seq = await s.append('r', file('x'), undefined, 1);
        await s.touch('r', 'a/b');
        expect(await s.touchedAt('r', 'a/b')).toBe(seq);
        expect(await s.touchedUnderSince('r', 'a', seq)).toBe(true);
        expect(await s.touchedUnderSince('r', 'a/b', seq + 1)).toBe(false);
        expect(await s.touchedUnderSince('r', 'ab', 0)).toBe(false);
        expect(await s.touchedUnderSince('other', '', 0)).toBe(false);
      });

      it('reservesEachConflictCopyNameForOneEntry', async () => {
        fresh();
        expect(await s.reserveCopy(7, 'x (conflicted copy)')).toBe(true);
        expect(await s.reserveCopy(7, 'x (conflicted copy)')).toBe(true);
        expect(await s.reserveCopy(8, 'x (conflicted copy)')).toBe(false);
        expect(await s.reserveCopy(8, 'x (conflicted copy 2)')).toBe(true);
        expect(await s.copiesOf(7)).toEqual(['x (conflicted copy)']);
        expect(await s.copiesOf(8)).toEqual(['x (conflicted copy 2)']);
        expect(await books.share('elsewhere').reserveCopy(9, 'x (conflicted copy)')).toBe(true);
      });

      it('keepsAReplicasOutage', async () => {
        fresh();
        const o = { cause: 'full' as const, sinceMs: 5, failures: 2, nextProbeMs: 9, error: 'quota' };
        await s.setOutage('r', o);
        expect(await s.outage('r')).toEqual(o);
        await s.setOutage('r', { ...o, cause: 'failing', failures: 3 });
        expect((await s.outage('r'))?.failures).toBe(3);
        await s.setOutage('r', undefined);
        expect(await s.outage('r')).toBeUndefined();
      });

      it('commitsATransactionWhole', async () => {
        fresh();
        const seq = await s.transaction(async (tx) => {
          const q = await tx.append('r', file('a'), undefined, 1);
          await tx.setCursor('r', 'c');
          expect(await tx.maxSeq()).toBe(q);
          return q;
        });
        expect(await s.maxSeq()).toBe(seq);
        expect(await s.cursor('r')).toBe('c');
      });

      it('runsTransactionsOfSeveralSharesAtOnce_eachWhole', async () => {
        const stores = [0, 1, 2, 3].map(() => books.share(`share-${++n}`));
        // Started in one turn, each yielding inside: none may join or break another.
        const seqs = await Promise.all(
          stores.map((st, i) =>
            st.transaction(async (tx) => {
              const q = await tx.append('r', file(`f${i}`), undefined, i);
              await new Promise((r) => setTimeout(r, 5));
              await tx.setCursor('r', `c${i}`);
              return q;
            }),
          ),
        );
        expect(new Set(seqs).size).toBe(4);
        for (const [i, st] of stores.entries()) {
          expect(await st.cursor('r')).toBe(`c${i}`);
          expect((await st.pending()).map((e) => e.op)).toEqual([file(`f${i}`)]);
        }
      });

      it('rollsATransactionBackWhole_andACallFromOutsideIsNotPartOfIt', async () => {
        fresh();
        const other = books.share(`share-${++n}`);
        let outside: Promise<void> | undefined;
        await expect(
          s.transaction(async (tx) => {
            await tx.append('r', file('a'), undefined, 1);
            await tx.setKnown('r', 'a', { kind: 'file', revision: 'v', sha256: 'h' });
            // Another share's engine writes meanwhile: it is not rolled back with this one.
            outside = other.setCursor('r', 'kept');
            await new Promise((r) => setTimeout(r, 20));
            throw new Error('boom');
          }),
        ).rejects.toThrow('boom');
        await outside;
        expect(await s.pendingCount()).toBe(0);
        expect(await s.known('r', 'a')).toBeUndefined();
        expect(await other.cursor('r')).toBe('kept');
      });
    },
  );
}

describe.skipIf(noPg !== undefined)(
  `mirror books on PostgreSQL fenced by the controller lease${noPg ? ` (skipped: ${noPg})` : ''}`,
  () => {
    const log = pino({ level: 'silent' });

    it('aStoreOfAnEndedTermWritesNothing', async () => {
      const { url, sql } = await database();
      const a = new PgLease({ url, instanceId: 'a', log, ttlMs: 1000, renewMs: 200 });
      const books = new PostgresMirrorBooks(sql, { fenceFor: termFence(a) });
      try {
        await a.start();
        expect(a.isController()).toBe(true);
        const store = books.share('s'); // made in a's term
        const seq = await store.append('r', file('a'), undefined, 1);
        await store.setCursor('r', 'c1');
        // a's term ends without a's knowing yet (a long pause): another instance, b, has
        // taken the lease over in the next term (as PgLease.acquire does after expiry).
        await sql`UPDATE cluster_lease SET holder = 'b', fencing_token = fencing_token + 1,
          expires_ms = (extract(epoch from clock_timestamp()) * 1000)::bigint + 60000
          WHERE name = 'controller'`;
        // Every kind of write from the old term is refused, and nothing of it applied.
        await expect(store.append('r', file('late'), undefined, 2)).rejects.toBeInstanceOf(FencedError);
        await expect(store.setCursor('r', 'c2')).rejects.toBeInstanceOf(FencedError);
        await expect(store.markDone(seq)).rejects.toBeInstanceOf(FencedError);
        await expect(
          store.transaction(async (tx) => {
            await tx.setKnown('r', 'a', { kind: 'file', revision: 'v', sha256: 'h' });
          }),
        ).rejects.toBeInstanceOf(FencedError);
        expect(await store.cursor('r')).toBe('c1');
        expect((await store.pending()).map((e) => e.seq)).toEqual([seq]);
        expect(await store.known('r', 'a')).toBeUndefined();
        // A store made while not the controller writes nothing either.
        await expect.poll(() => a.isController(), { timeout: 5000, interval: 20 }).toBe(false);
        await expect(books.share('s').setCursor('r', 'c3')).rejects.toBeInstanceOf(FencedError);
      } finally {
        await a.close({ abrupt: true });
        await sql.end();
      }
    });
  },
);

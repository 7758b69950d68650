/**
 * One suite, every metadata store (as packages/providers' conformance suite is for providers):
 * metadata-sqlite.test.ts and metadata-postgres.test.ts call it with their store. Each test
 * opens fresh stores: `a`, and `b`, a second instance on the same database (its own
 * connection) standing for another proxy process.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { ChangeRecord } from '@weft/wire';
import type { ChangeInput, EntryRow, MetadataStore } from '../src/store/metadata.ts';

export interface MetadataStoreFixture {
  readonly a: MetadataStore;
  readonly b: MetadataStore;
  close(): Promise<void>;
}

export interface MetadataConformanceOptions {
  readonly name: string;
  /** Two instances on one new, empty database. */
  open(): Promise<MetadataStoreFixture>;
  /**
   * Whether watchChanges hears the other instance's changes (PostgreSQL); false: it is a
   * store one process writes (SQLite) and watchChanges never calls back.
   */
  readonly notifiesOtherInstances: boolean;
}

const U = 'alice';
const T0 = 1_000_000;

function file(path: string, sha: string, size: number, tier: 'small' | 'large' = 'small') {
  return { path, kind: 'file' as const, size, mtimeMs: 5, sha256: sha, tier, fsRevision: `fs-${path}` };
}
function dir(path: string) {
  return { path, kind: 'dir' as const, size: 0, mtimeMs: 5, fsRevision: `fs-${path}` };
}
const up = (entry: Omit<EntryRow, 'revision'> & { revision?: string }): ChangeInput => ({
  type: 'upsert',
  entry,
});

/** The index a client builds from the feed alone. */
function replay(records: readonly ChangeRecord[]): Map<string, string | undefined> {
  const index = new Map<string, string | undefined>();
  const under = (p: string, root: string) => p === root || p.startsWith(root + '/');
  for (const r of records) {
    if (r.type === 'upsert') {
      index.set(r.path, r.entry.sha256);
    } else if (r.type === 'delete') {
      for (const k of [...index.keys()]) if (under(k, r.path)) index.delete(k);
    } else {
      const moved = [...index.entries()].filter(([k]) => under(k, r.from));
      for (const k of [...index.keys()]) if (under(k, r.from) || under(k, r.path)) index.delete(k);
      for (const [k, v] of moved) index.set(r.path + k.slice(r.from.length), v);
    }
  }
  return index;
}

async function feed(s: MetadataStore, user: string): Promise<ChangeRecord[]> {
  const out: ChangeRecord[] = [];
  for (let cursor = 0; ;) {
    const page = await s.changesSince(user, cursor, 7);
    if (page.length === 0) return out;
    out.push(...page);
    cursor = page.at(-1)!.seq;
  }
}

export function runMetadataConformance(o: MetadataConformanceOptions): void {
  describe(`metadata store conformance: ${o.name}`, () => {
    let fx: MetadataStoreFixture | undefined;
    const open = async (): Promise<MetadataStoreFixture> => {
      fx = await o.open();
      await fx.a.ensureUser(U, T0);
      return fx;
    };
    afterEach(async () => {
      await fx?.close();
      fx = undefined;
    });

    it('usersStartAtSeqZero', async () => {
      const { a, b } = await open();
      await a.ensureUser(U, T0 + 1); // again: nothing changes
      await b.ensureUser('bob', T0);
      expect(await b.listUsers()).toEqual(['alice', 'bob']);
      expect(await a.currentSeq('bob')).toBe(0);
      expect(await a.currentSeq('nobody')).toBe(0);
    });

    it('devicesTokensAndRevocation', async () => {
      const { a, b } = await open();
      await a.addDevice({ id: 'd1', userId: U, name: 'laptop' }, 'tok1', T0);
      await a.addDevice({ id: 'd2', userId: U, name: 'phone' }, 'tok2', T0 + 1);
      expect(await b.lookupToken('tok1')).toEqual({
        state: 'active',
        device: { id: 'd1', userId: U, name: 'laptop' },
      });
      expect(await b.lookupToken('nope')).toEqual({ state: 'unknown' });
      await b.touchDevice('d2', T0 + 50);
      expect(await a.listDevices(U)).toEqual([
        { id: 'd1', userId: U, name: 'laptop', createdMs: T0, lastSeenMs: null },
        { id: 'd2', userId: U, name: 'phone', createdMs: T0 + 1, lastSeenMs: T0 + 50 },
      ]);
      expect(await a.revokeDevice('bob', 'd1', T0 + 2)).toBe(false); // another user's: unknown
      expect(await a.revokeDevice(U, 'd1', T0 + 2)).toBe(true);
      expect(await b.revokeDevice(U, 'd1', T0 + 3)).toBe(false); // already revoked
      expect((await b.lookupToken('tok1')).state).toBe('revoked');
      expect(await b.deviceByTokenHash('tok1')).toBeUndefined();
      expect(await b.deviceByTokenHash('tok2')).toEqual({ id: 'd2', userId: U, name: 'phone' });
      expect((await a.listDevices(U)).map((d) => d.id)).toEqual(['d2']);
    });

    it('invitesAreUsedOnceAcrossInstances', async () => {
      const { a, b } = await open();
      await a.addInvite('inv', U, T0, T0 + 1000);
      await a.addInvite('old', U, T0, T0 + 10);
      expect(await a.consumeInvite('inv', 'bob', T0 + 1)).toEqual({ ok: false, reason: 'other-user' });
      expect(await a.consumeInvite('nope', U, T0 + 1)).toEqual({ ok: false, reason: 'unknown' });
      expect(await a.consumeInvite('old', U, T0 + 10)).toEqual({ ok: false, reason: 'expired' });
      // Both instances at once: exactly one takes it.
      const both = await Promise.all([a.consumeInvite('inv', U, T0 + 2), b.consumeInvite('inv', U, T0 + 2)]);
      expect(both.filter((r) => r.ok)).toHaveLength(1);
      expect(both.find((r) => !r.ok)).toEqual({ ok: false, reason: 'used' });
    });

    it('upsertsGetConsecutiveSeqsAndRevisions', async () => {
      const { a, b } = await open();
      const recs = await a.applyChanges(U, [up(dir('docs')), up(file('docs/a.txt', 'h1', 3))], 'd1', T0);
      expect(recs.map((r) => r.seq)).toEqual([1, 2]);
      expect(recs[1]).toMatchObject({ type: 'upsert', path: 'docs/a.txt', device: 'd1' });
      expect(await b.currentSeq(U)).toBe(2);
      const e = await b.getEntry(U, 'docs/a.txt');
      expect(e).toEqual({ ...file('docs/a.txt', 'h1', 3), revision: 'r2' });
      const kept = await a.applyChanges(
        U,
        [up({ ...file('docs/a.txt', 'h2', 4), revision: 'mine' })],
        undefined,
        T0,
      );
      expect(kept[0]).toMatchObject({ seq: 3, entry: { revision: 'mine', sha256: 'h2' } });
      expect(kept[0]).not.toHaveProperty('device');
      await b.setFsRevision(U, 'docs/a.txt', 'fs-new');
      expect((await a.getEntry(U, 'docs/a.txt'))?.fsRevision).toBe('fs-new');
      expect(await a.currentSeq(U)).toBe(3); // no change recorded for a tier revision
      expect(await a.usedBytes(U)).toBe(4);
    });

    it('listsInByteOrder', async () => {
      const { a } = await open();
      const names = ['a', 'a/b', 'a/b/c.txt', 'a/z.txt', 'a-b', 'a0', 'é.txt', 'B.txt'];
      await a.applyChanges(
        U,
        names.map((p) => up(p.endsWith('.txt') ? file(p, 'h', 1) : dir(p))),
        undefined,
        T0,
      );
      const sorted = [...names].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
      expect((await a.listEntries(U, '', true)).map((e) => e.path)).toEqual(sorted);
      expect((await a.listEntries(U, '', false)).map((e) => e.path)).toEqual([
        'B.txt',
        'a',
        'a-b',
        'a0',
        'é.txt',
      ]);
      expect((await a.listEntries(U, 'a', false)).map((e) => e.path)).toEqual(['a/b', 'a/z.txt']);
      expect((await a.listEntries(U, 'a', true)).map((e) => e.path)).toEqual(['a/b', 'a/b/c.txt', 'a/z.txt']);
      expect(await a.listEntries('bob', '', true)).toEqual([]);
    });

    it('deleteAndMoveTakeTheSubtree', async () => {
      const { a, b } = await open();
      await a.applyChanges(
        U,
        [up(dir('x')), up(dir('x/y')), up(file('x/y/f', 'h1', 1)), up(file('x-z', 'h2', 2)), up(dir('t'))],
        undefined,
        T0,
      );
      const moved = await b.applyChanges(U, [{ type: 'move', from: 'x', path: 't/x' }], 'd1', T0);
      expect(moved[0]).toMatchObject({
        seq: 6,
        type: 'move',
        from: 'x',
        path: 't/x',
        entry: { kind: 'dir' },
      });
      expect((await a.listEntries(U, '', true)).map((e) => e.path)).toEqual([
        't',
        't/x',
        't/x/y',
        't/x/y/f',
        'x-z',
      ]);
      expect((await a.getEntry(U, 't/x/y/f'))?.revision).toBe('r3'); // a move keeps revisions
      await a.applyChanges(U, [{ type: 'delete', path: 't' }], undefined, T0);
      expect((await b.listEntries(U, '', true)).map((e) => e.path)).toEqual(['x-z']);
      expect(await a.usedBytes(U)).toBe(2);
    });

    it('aFailedApplyChangesLeavesNothing', async () => {
      const { a, b } = await open();
      await a.applyChanges(U, [up(file('keep', 'h', 1))], undefined, T0);
      await expect(
        a.applyChanges(
          U,
          [up(file('half', 'h2', 2)), { type: 'move', from: 'missing', path: 'there' }],
          undefined,
          T0,
        ),
      ).rejects.toThrow(/missing/);
      expect(await b.currentSeq(U)).toBe(1);
      expect(await b.getEntry(U, 'half')).toBeUndefined();
      expect(await feed(b, U)).toHaveLength(1);
    });

    it('refcountsFollowEntriesAcrossNamespaces', async () => {
      const { a, b } = await open();
      await a.ensureUser('bob', T0);
      await a.addObject('big', 100, T0);
      expect(await b.getObject('big')).toEqual({
        sha256: 'big',
        size: 100,
        refcount: 0,
        unreferencedSinceMs: T0,
      });
      await a.applyChanges(
        U,
        [up(file('one', 'big', 100, 'large')), up(file('two', 'big', 100, 'large'))],
        undefined,
        T0 + 1,
      );
      await b.applyChanges('bob', [up(file('three', 'big', 100, 'large'))], undefined, T0 + 1);
      expect(await a.getObject('big')).toMatchObject({ refcount: 3, unreferencedSinceMs: null });
      expect(await a.userLargeContent(U, 'big')).toBe(100);
      expect(await a.userLargeContent('bob', 'big')).toBe(100);
      expect(await a.userLargeContent('carol', 'big')).toBeUndefined();
      await a.applyChanges(
        U,
        [up(file('one', 'small', 1)), { type: 'delete', path: 'two' }],
        undefined,
        T0 + 2,
      );
      expect(await b.deleteObject('big')).toBe(false); // bob's file still holds it
      await b.applyChanges('bob', [{ type: 'delete', path: 'three' }], undefined, T0 + 3);
      expect(await a.getObject('big')).toMatchObject({ refcount: 0, unreferencedSinceMs: T0 + 3 });
      expect(await a.collectableObjects(T0 + 3)).toEqual([]);
      expect((await a.collectableObjects(T0 + 4)).map((x) => x.sha256)).toEqual(['big']);
      expect(await b.deleteObject('big')).toBe(true);
      expect(await a.getObject('big')).toBeUndefined();
      expect(await a.userLargeContent(U, 'big')).toBeUndefined();
    });

    it('recomputeRefcountsCountsEntriesAndVersions', async () => {
      const { a, b } = await open();
      await a.applyChanges(U, [up(file('f', 'big', 100, 'large'))], undefined, T0);
      await a.applyChanges(U, [up(file('f', 'big2', 200, 'large'))], undefined, T0 + 1, true);
      await a.addObject('orphan', 5, T0);
      await b.recomputeRefcounts(T0 + 9);
      expect(await a.getObject('big')).toMatchObject({ refcount: 1, unreferencedSinceMs: null }); // the version
      expect(await a.getObject('big2')).toMatchObject({ refcount: 1, unreferencedSinceMs: null });
      expect(await a.getObject('orphan')).toMatchObject({ refcount: 0, unreferencedSinceMs: T0 });
    });

    it('keptVersionsAndPurge', async () => {
      const { a, b } = await open();
      await a.addDevice({ id: 'd1', userId: U, name: 'laptop' }, 'tok1', T0);
      await a.applyChanges(
        U,
        [up(dir('d')), up(file('d/f', 'v1', 10)), up(file('d/g', 'big', 100, 'large'))],
        'd1',
        T0,
      );
      await a.applyChanges(U, [up(file('d/f', 'v2', 20))], 'd1', T0 + 10, true);
      await a.applyChanges(U, [up(file('d/f', 'v2', 20))], 'd1', T0 + 11, true); // same content: no version
      await b.applyChanges(U, [{ type: 'delete', path: 'd/g' }], undefined, T0 + 20, true);
      const vs = await b.versions.list(U, 'd/f');
      expect(vs).toHaveLength(1);
      expect(vs[0]).toMatchObject({
        path: 'd/f',
        sha256: 'v1',
        size: 10,
        tier: 'small',
        writtenMs: T0,
        device: 'd1',
        deviceName: 'laptop',
        replacedMs: T0 + 10,
        replacedBy: 'd1',
        replacedByName: 'laptop',
        deleted: false,
      });
      expect(await a.versions.get(U, 'd/f', vs[0]!.id)).toEqual(vs[0]);
      expect(await a.versions.get('bob', 'd/f', vs[0]!.id)).toBeUndefined();
      expect(await a.versions.written(U, 'd/f')).toEqual({ writtenMs: T0 + 11, deviceName: 'laptop' });
      const gone = await a.versions.deleted(U, '', 10);
      expect(gone.map((v) => [v.path, v.deleted])).toEqual([['d/g', true]]);
      expect(await a.versions.deleted(U, 'other', 10)).toEqual([]);
      expect(await a.versions.bytes(U)).toEqual({ small: 10, large: 100 });
      expect(await a.versions.holdsSmall('v1')).toBe(true);
      expect(await a.versions.holdsSmall('v2')).toBe(false);
      expect(await a.getObject('big')).toMatchObject({ refcount: 1 }); // held by the version
      expect(await b.versions.purge(T0 + 15, T0 + 30)).toBe(1); // the one replaced at T0 + 10
      expect(await a.versions.purge(T0 + 21, T0 + 31)).toBe(1);
      expect(await a.getObject('big')).toMatchObject({ refcount: 0, unreferencedSinceMs: T0 + 31 });
      expect(await a.versions.bytes(U)).toEqual({ small: 0, large: 0 });
    });

    it('transfersAndTheirRanges', async () => {
      const { a, b } = await open();
      const t = { id: 't1', userId: U, path: 'big.bin', size: 1000, sha256: 's', mtimeMs: 7, createdMs: T0 };
      await a.addTransfer(t);
      await a.addTransfer({ ...t, id: 't2', path: 'other.bin', size: 500, createdMs: T0 + 100 });
      expect(await b.getTransfer('t1')).toEqual(t);
      expect(await b.getTransfer('nope')).toBeUndefined();
      expect(await b.addTransferRange('t1', 512, 488, T0 + 10)).toBe(true);
      expect(await a.addTransferRange('t1', 0, 512, T0 + 5)).toBe(true); // a clock behind: kept at T0 + 10
      expect(await a.addTransferRange('t1', 0, 512, T0 + 5)).toBe(true); // a resent block
      expect(await a.addTransferRange('nope', 0, 512, T0)).toBe(false);
      expect(await a.transferRanges('nope')).toEqual([]);
      expect(await b.transferRanges('t1')).toEqual([
        { offset: 0, length: 512 },
        { offset: 512, length: 488 },
      ]);
      expect(await a.openTransferBytes(U, 'big.bin')).toBe(500);
      expect(await a.openTransferBytes(U, '')).toBe(1500);
      // Idle: no activity since the cutoff, however long ago it was opened.
      expect((await a.idleTransfers(T0 + 10)).map((x) => x.id)).toEqual([]);
      expect((await a.idleTransfers(T0 + 11)).map((x) => x.id)).toEqual(['t1']);
      // Activity after GC listed it (a commit attempt) keeps it.
      expect(await b.touchTransfer('t1', T0 + 200)).toBe(true);
      expect(await a.deleteIdleTransfer('t1', T0 + 11)).toBe(false);
      expect((await a.idleTransfers(T0 + 150)).map((x) => x.id)).toEqual(['t2']);
      expect(await a.deleteIdleTransfer('t2', T0 + 150)).toBe(true);
      expect(await a.getTransfer('t2')).toBeUndefined();
      expect(await a.touchTransfer('t2', T0 + 300)).toBe(false);
      expect(await a.addTransferRange('t2', 0, 500, T0 + 300)).toBe(false);
      expect(await a.transferRanges('t2')).toEqual([]);
      await b.deleteTransfer('t1');
      expect(await a.getTransfer('t1')).toBeUndefined();
      expect(await a.transferRanges('t1')).toEqual([]);
    });

    it('feedResumesFromACursorInOrder', async () => {
      const { a, b } = await open();
      await a.addDevice({ id: 'd1', userId: U, name: 'laptop' }, 'tok1', T0);
      for (let i = 0; i < 20; i++)
        await (i % 2 ? a : b).applyChanges(U, [up(file(`f${i}`, `h${i}`, i))], 'd1', T0);
      const page = await b.changesSince(U, 5, 4);
      expect(page.map((r) => r.seq)).toEqual([6, 7, 8, 9]);
      expect(page[0]).toMatchObject({ device: 'd1', deviceName: 'laptop', path: 'f5' });
      expect(await a.changesSince(U, 20, 10)).toEqual([]);
      expect((await feed(a, U)).map((r) => r.seq)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    });

    it('watchChangesHearsTheOtherInstanceAfterCommit', async () => {
      const { a, b } = await open();
      const heard: string[] = [];
      const stop = await b.watchChanges((user) => heard.push(user));
      await a.applyChanges(U, [up(file('f', 'h', 1))], undefined, T0);
      await a.ensureUser('bob', T0);
      await a.applyChanges('bob', [up(file('g', 'h', 1))], undefined, T0);
      if (o.notifiesOtherInstances) {
        await expect.poll(() => heard).toEqual([U, 'bob']);
      } else {
        // Give a notification every chance to arrive: none does.
        await new Promise((r) => setTimeout(r, 100));
        expect(heard).toEqual([]);
      }
      await stop();
      await a.applyChanges(U, [up(file('f2', 'h', 1))], undefined, T0);
      await new Promise((r) => setTimeout(r, 100));
      expect(heard).toHaveLength(o.notifiesOtherInstances ? 2 : 0); // stopped: nothing more
    });

    it('twoInstancesConcurrentlyGetDistinctGaplessSeqsAndAConsistentFeed', async () => {
      const { a, b } = await open();
      const N = 40;
      // Each writer: files of its own, some on shared paths (overwrites), a large object both
      // reference, moves and deletes; all at once from both instances.
      const work = (s: MetadataStore, w: string) =>
        Array.from({ length: N }, (_, i) => {
          const changes: ChangeInput[] =
            i % 10 === 9
              ? [{ type: 'delete', path: `shared-${i % 3}` }]
              : i % 7 === 6
                ? [up(dir(`${w}-d${i}`)), { type: 'move', from: `${w}-d${i}`, path: `${w}-m${i}` }]
                : [
                    up(file(`shared-${i % 3}`, `${w}${i}`, i, i % 2 ? 'large' : 'small')),
                    up(file(`${w}-${i}`, 'obj', 10, 'large')),
                  ];
          return s.applyChanges(U, changes, w, T0 + i);
        });
      const results = await Promise.all([...work(a, 'A'), ...work(b, 'B')]);
      const seqs = results
        .flat()
        .map((r) => r.seq)
        .sort((x, y) => x - y);
      expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1));
      // Each call's records are consecutive (one transaction, nothing interleaved).
      for (const r of results) for (let k = 1; k < r.length; k++) expect(r[k]!.seq).toBe(r[k - 1]!.seq + 1);
      expect(await a.currentSeq(U)).toBe(seqs.length);
      // The feed, read from either instance, is exactly the records returned, in seq order.
      const fa = await feed(a, U);
      expect(fa.map((r) => r.seq)).toEqual(seqs);
      expect(await feed(b, U)).toEqual(fa);
      // Replaying it gives the index.
      const index = await b.listEntries(U, '', true);
      expect(replay(fa)).toEqual(new Map(index.map((e) => [e.path, e.sha256])));
      // Refcounts equal the entries that name each large object.
      const large = new Map<string, number>();
      for (const e of index)
        if (e.tier === 'large' && e.sha256) large.set(e.sha256, (large.get(e.sha256) ?? 0) + 1);
      for (const [sha, n] of large) expect((await a.getObject(sha))?.refcount).toBe(n);
      expect((await a.getObject('obj'))?.refcount).toBe(2 * N - 2 * (N / 10) - 2 * Math.floor(N / 7));
    });
  });
}

/**
 * The suite every placement store of the redundant tier runs (redundant/placement-store.ts):
 * SQLite here (test/redundant-placement-store.test.ts), PostgreSQL in the proxy
 * (proxy-server/test/placement-postgres.test.ts). `open` gives an empty store each time.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { AlreadyExistsError, InvalidPathError, NotFoundError, PreconditionFailedError } from '../errors.ts';
import type { NewObject, PlacementStore } from '../redundant/placement-store.ts';

let n = 0;

/** A new object's rows: replicated on `backends`, or striped RS(2, 1) when `striped`. */
function newObject(
  backends: readonly string[],
  striped = false,
  states?: readonly ('ok' | 'owed')[],
): NewObject {
  const id = (++n).toString(16).padStart(32, '0');
  return {
    row: {
      id,
      size: striped ? 3000 : 10,
      sha256: 'a'.repeat(64),
      layout: striped ? 'striped' : 'replicated',
      k: striped ? 2 : 1,
      m: striped ? 1 : 0,
      shard_bytes: striped ? 1500 : 0,
      shard_sha: striped ? Buffer.alloc(96, 7) : null,
    },
    locations: backends.map((backend, slot) => ({
      slot,
      backend,
      blob_sha256: `${slot}`.repeat(64).slice(0, 64),
      state: states?.[slot] ?? 'ok',
    })),
  };
}

export function runPlacementStoreSuite(name: string, open: () => Promise<PlacementStore>): void {
  describe(`placement store: ${name}`, () => {
    const opened: PlacementStore[] = [];
    const fresh = async (): Promise<PlacementStore> => {
      const s = await open();
      opened.push(s);
      return s;
    };
    afterEach(async () => {
      for (const s of opened.splice(0)) await s.close();
    });

    it('commitMakesParentsAndListsInPathOrder', async () => {
      const s = await fresh();
      const o = newObject(['b0', 'b1']);
      const { entry, released } = await s.commitFile('a/b/c.txt', o, {}, 1234.6);
      expect(released).toEqual([]);
      expect(entry).toMatchObject({ path: 'a/b/c.txt', kind: 'file', size: 10, modifiedMs: 1235 });
      expect(entry.hash).toEqual({ algorithm: 'sha256', value: 'a'.repeat(64) });
      await s.commitFile('a/B.txt', newObject(['b0']), {}, 1);
      await s.commitFile('a/a-z.txt', newObject(['b0']), {}, 1);
      expect((await s.list('', false)).map((e) => e.path)).toEqual(['a']);
      // Bytewise order (uppercase before '-' … before lowercase), as SQLite's BINARY.
      expect((await s.list('a', false)).map((e) => e.path)).toEqual(['a/B.txt', 'a/a-z.txt', 'a/b']);
      expect((await s.list('a', true)).map((e) => e.path)).toEqual([
        'a/B.txt',
        'a/a-z.txt',
        'a/b',
        'a/b/c.txt',
      ]);
      expect(await s.objectOf('a/b/c.txt')).toBe(o.row.id);
      expect(await s.objectOf('a/b')).toBeUndefined();
      await expect(s.list('a/b/c.txt', false)).rejects.toBeInstanceOf(NotFoundError);
      await expect(s.list('nope', true)).rejects.toBeInstanceOf(NotFoundError);
    });

    it('conditionsAreCheckedInTheCommitAndNothingChangesOnRefusal', async () => {
      const s = await fresh();
      const first = await s.commitFile('f', newObject(['b0']), { ifNotExists: true }, 1);
      const again = newObject(['b0']);
      await expect(s.commitFile('f', again, { ifNotExists: true }, 2)).rejects.toBeInstanceOf(
        AlreadyExistsError,
      );
      await expect(s.commitFile('f', again, { ifRevision: 'stale' }, 2)).rejects.toBeInstanceOf(
        PreconditionFailedError,
      );
      await expect(s.commitFile('g', again, { ifRevision: 'x' }, 2)).rejects.toBeInstanceOf(NotFoundError);
      expect(await s.object(again.row.id)).toBeUndefined();
      expect(await s.entry('f')).toEqual(first.entry);
      await expect(s.checkPut('f', { ifNotExists: true })).rejects.toBeInstanceOf(AlreadyExistsError);
      await expect(s.checkPut('f/under', {})).rejects.toBeInstanceOf(AlreadyExistsError);
      await s.checkPut('f', { ifRevision: first.entry.revision });
      await expect(s.mkdirs('f/x', 1)).rejects.toBeInstanceOf(AlreadyExistsError);
      await s.mkdirs('d/e', 1);
      await expect(s.commitFile('d', newObject(['b0']), {}, 1)).rejects.toBeInstanceOf(AlreadyExistsError);
      const next = await s.commitFile('f', newObject(['b1']), { ifRevision: first.entry.revision }, 3);
      expect(next.entry.revision).not.toBe(first.entry.revision);
    });

    it('anOverwriteReleasesTheOldObjectUntilForgotten', async () => {
      const s = await fresh();
      const a = newObject(['b0', 'b1']);
      await s.commitFile('f', a, {}, 1);
      const { released } = await s.commitFile('f', newObject(['b2']), {}, 2);
      expect(released.map((o) => [o.id, o.refs])).toEqual([[a.row.id, 0]]);
      expect((await s.unreferenced()).map((o) => o.id)).toEqual([a.row.id]);
      expect(await s.locations(a.row.id)).toHaveLength(2);
      await s.forgetObject(a.row.id);
      expect(await s.object(a.row.id)).toBeUndefined();
      expect(await s.locations(a.row.id)).toEqual([]);
      expect(await s.unreferenced()).toEqual([]);
    });

    it('copiesShareAnObjectAndMovesTakeFoldersAlong', async () => {
      const s = await fresh();
      const a = newObject(['b0', 'b1'], true);
      const made = await s.commitFile('dir/x', a, {}, 1);
      const copy = await s.transfer('dir/x', 'other/y', false, 'copy');
      expect(copy.entry.revision).not.toBe(made.entry.revision);
      expect((await s.object(a.row.id))?.refs).toBe(2);
      const moved = await s.transfer('dir', 'moved', false, 'move');
      expect(moved.entry.kind).toBe('dir');
      expect((await s.list('moved', true)).map((e) => e.path)).toEqual(['moved/x']);
      expect(await s.entry('dir/x')).toBeUndefined();
      expect((await s.entry('moved/x'))?.revision).toBe(made.entry.revision);
      expect(await s.remove('moved')).toEqual([]);
      const last = await s.remove('other/y');
      expect(last.map((o) => o.id)).toEqual([a.row.id]);
      expect(last[0]!.shard_sha).toEqual(Buffer.alloc(96, 7));
    });

    it('refusesTransfersThatWouldLoseOrLoop', async () => {
      const s = await fresh();
      await s.commitFile('a/f', newObject(['b0']), {}, 1);
      await s.commitFile('g', newObject(['b0']), {}, 1);
      await expect(s.transfer('a', 'a/inside', false, 'move')).rejects.toBeInstanceOf(InvalidPathError);
      await expect(s.transfer('g', 'a/f', false, 'move')).rejects.toBeInstanceOf(AlreadyExistsError);
      await expect(s.transfer('g', 'a', true, 'move')).rejects.toBeInstanceOf(AlreadyExistsError);
      await expect(s.transfer('none', 'x', false, 'copy')).rejects.toBeInstanceOf(NotFoundError);
      const over = await s.transfer('g', 'a/f', true, 'move');
      expect(over.released).toHaveLength(1);
      await expect(s.remove('a/f', 'stale')).rejects.toBeInstanceOf(PreconditionFailedError);
      await expect(s.remove('missing')).rejects.toBeInstanceOf(NotFoundError);
    });

    it('owedBlobsAreLoggedWithTheCommitAndReplayedInOrder', async () => {
      const s = await fresh();
      const a = newObject(['b0', 'b1'], false, ['ok', 'owed']);
      await s.commitFile('f', a, {}, 1, [{ backend: 'b1', slot: 1, blobKey: 'k1' }]);
      await s.logAppend('b1', 'delete', 'other', 0, 'k2');
      await s.logAppend('b2', 'put', 'third', 2, 'k3');
      expect(await s.logCount()).toBe(3);
      expect(await s.logCount('b1')).toBe(2);
      const pending = await s.logPending('b1');
      expect(pending.map((r) => [r.op, r.object_id, r.slot, r.blob_key])).toEqual([
        ['put', a.row.id, 1, 'k1'],
        ['delete', 'other', 0, 'k2'],
      ]);
      expect(pending[0]!.seq).toBeLessThan(pending[1]!.seq);
      expect(await s.logPending('b1', 1)).toHaveLength(1);
      await s.logDone(pending[0]!.seq);
      expect((await s.logPending('b1')).map((r) => r.blob_key)).toEqual(['k2']);
      await s.logRename('b1', 'b9');
      expect(await s.logCount('b1')).toBe(0);
      expect(await s.logCount('b9')).toBe(1);
      await s.logClear('b9');
      expect(await s.logCount()).toBe(1);
      // A refused commit logs nothing.
      await expect(
        s.commitFile('f', newObject(['b0']), { ifNotExists: true }, 1, [
          { backend: 'b0', slot: 0, blobKey: 'x' },
        ]),
      ).rejects.toBeInstanceOf(AlreadyExistsError);
      expect(await s.logCount('b0')).toBe(0);
    });

    it('locationsChangeAndAreCountedPerBackend', async () => {
      const s = await fresh();
      const a = newObject(['b0', 'b1', 'b2'], true);
      const b = newObject(['b1', 'b2']);
      await s.commitFile('a', a, {}, 1);
      await s.commitFile('b', b, {}, 1);
      await s.setLocation(a.row.id, 1, { state: 'bad' });
      await s.setLocation(a.row.id, 2, { backend: 'b3' });
      await s.setLocation(a.row.id, 9, { state: 'bad' });
      expect((await s.locations(a.row.id)).map((l) => [l.slot, l.backend, l.state])).toEqual([
        [0, 'b0', 'ok'],
        [1, 'b1', 'bad'],
        [2, 'b3', 'ok'],
      ]);
      expect(await s.objectIds('b2')).toEqual([b.row.id]);
      expect(await s.objectIds()).toEqual([a.row.id, b.row.id].sort());
      const counts = await s.backendCounts();
      expect(Object.fromEntries(counts)).toEqual({
        b0: { blobs: 1, bad: 0 },
        b1: { blobs: 2, bad: 1 },
        b2: { blobs: 1, bad: 0 },
        b3: { blobs: 1, bad: 0 },
      });
      const first = await s.holdings('', 1);
      expect(first.map((h) => [h.object_id, h.layout, h.k, h.backend, h.state])).toEqual([
        [a.row.id, 'striped', 2, 'b0', 'ok'],
        [a.row.id, 'striped', 2, 'b1', 'bad'],
        [a.row.id, 'striped', 2, 'b3', 'ok'],
      ]);
      const second = await s.holdings(a.row.id, 1);
      expect(second.map((h) => h.object_id)).toEqual([b.row.id, b.row.id]);
      expect(await s.holdings(b.row.id, 1)).toEqual([]);
    });

    it('keepsTheFirstTimeABackendWasSeenDown', async () => {
      const s = await fresh();
      expect(await s.downSince('b0')).toBeUndefined();
      await s.setDown('b0', 5);
      await s.setDown('b0', 9);
      expect(await s.downSince('b0')).toBe(5);
      await s.setUp('b0');
      expect(await s.downSince('b0')).toBeUndefined();
    });

    it('keepsTheBackgroundJobsRecordsByName', async () => {
      const s = await fresh();
      expect(await s.jobRecord('last-scrub')).toBeUndefined();
      await s.setJobRecord('last-scrub', '{"finishedMs":1}');
      await s.setJobRecord('last-sweep', '{"finishedMs":2}', { fenced: true });
      await s.setJobRecord('last-scrub', '{"finishedMs":3}');
      expect(await s.jobRecord('last-scrub')).toBe('{"finishedMs":3}');
      expect(await s.jobRecord('last-sweep')).toBe('{"finishedMs":2}');
      await s.clearJobRecord('last-sweep');
      await s.clearJobRecord('nothing');
      expect(await s.jobRecord('last-sweep')).toBeUndefined();
      expect(await s.whileFenced(async () => 7)).toBe(7);
    });
  });
}

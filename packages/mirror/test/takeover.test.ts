/**
 * An engine that takes over books another process left (a controller killed mid-write, a
 * crash) verifies as soon as its backlog is drained (MirrorEngineOptions.verifyAtStart):
 * whatever the dead engine left between a replica and the books — a write the books record
 * that never landed, a write that landed but was never recorded, a feed change lost — is
 * found and converged by the new engine, not an hour later (issue #18: a share member lost
 * one file across a controller failover while the books showed nothing pending).
 *
 * The divergences are made by hand, with every feed cursor moved past them, so no feed will
 * ever report them: only a comparison of the replicas with the books can.
 */
import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MemoryProvider } from '@weft/providers';
import type { MirrorBooks, ShareStore } from '../src/books-store.ts';
import { MirrorEngine } from '../src/engine.ts';
import { SqliteMirrorBooks, SqliteShareStore, migrate } from '../src/store.ts';
import { text, treeOf } from './helpers.ts';

const MEMBERS = ['ann', 'ben'];

const open: Database.Database[] = [];
const running: MirrorEngine[] = [];
afterEach(async () => {
  for (const e of running.splice(0)) await e.stop();
  for (const db of open.splice(0)) db.close();
});

function setup() {
  const db = new Database(':memory:');
  open.push(db);
  migrate(db);
  const mem = MEMBERS.map((m) => new MemoryProvider({ name: m })) as [MemoryProvider, MemoryProvider];
  const make = (verifyAtStart: boolean) =>
    new MirrorEngine({
      shareId: 's',
      db,
      pollIntervalMs: 10,
      verifyAtStart,
      replicas: mem.map((p, i) => ({ id: `r${i}`, member: MEMBERS[i] ?? '', provider: p, root: '' })),
    });
  return { db, mem, make, store: new SqliteShareStore(db, 's') };
}

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');

/** Move every cursor past what the replicas hold now: no feed reports it. */
async function hideFromFeeds(store: SqliteShareStore, mem: MemoryProvider[]): Promise<void> {
  for (const [i, p] of mem.entries()) await store.setCursor(`r${i}`, await p.latestCursor());
}

describe('an engine taking over books (verifyAtStart)', () => {
  it('puts back a file the books say a replica holds and it lacks, and logs one only a replica holds', async () => {
    const { mem, make, store } = setup();
    const [ann, ben] = mem;
    for (let i = 0; i < 5; i++) await ann.write(`batch/f${i}.txt`, text(`content ${i}`));
    await make(false).quiesce();
    expect([...(await treeOf(ben, ''))]).toEqual([...(await treeOf(ann, ''))]);
    // What a dead controller can leave: ben lost f2 with its books still recording it, and
    // holds f9, written to it and never recorded anywhere; no feed will say so.
    await ben.remove('batch/f2.txt');
    await ben.write('batch/f9.txt', text('content 9'));
    await hideFromFeeds(store, mem);
    expect((await store.known('r1', 'batch/f2.txt'))?.sha256).toBe(sha('content 2'));
    // A backlog the new engine drains first: a new file at ann, reported by its feed.
    await ann.write('batch/f5.txt', text('content 5'));

    const engine = make(true);
    running.push(engine);
    engine.start();
    await vi.waitFor(
      async () => {
        expect([...(await treeOf(ann, '')).keys()]).toContain('batch/f9.txt');
        expect([...(await treeOf(ben, ''))]).toEqual([...(await treeOf(ann, ''))]);
      },
      { timeout: 20_000, interval: 20 },
    );
    expect([...(await treeOf(ben, '')).keys()]).toEqual([
      'batch',
      ...[0, 1, 2, 3, 4, 5, 9].map((i) => `batch/f${i}.txt`),
    ]);
    expect(engine.stats.verifications).toBeGreaterThanOrEqual(1);
    expect(engine.stats.verifyFound).toBe(2);
    // Resumed from the cursors: the verification's listings are not counted as re-listings.
    expect(engine.stats.relistings).toBe(0);
    expect(engine.stats.conflicts).toBe(0);
  });
});

/**
 * Books that die (every later call throws, as for a killed process) right after the first
 * transaction that made a call named `after` has committed.
 */
function dyingBooks(db: Database.Database, after: keyof ShareStore): MirrorBooks {
  const inner = new SqliteMirrorBooks(db);
  let dead = false;
  const wrap = (s: ShareStore): ShareStore =>
    new Proxy(s, {
      get(target, key) {
        if (dead) return () => Promise.reject(new Error('process killed'));
        if (key === 'transaction')
          return async <T>(fn: (tx: ShareStore) => Promise<T>): Promise<T> => {
            let hit = false;
            const r = await target.transaction((tx) =>
              fn(
                new Proxy(tx, {
                  get(t, k) {
                    if (k === after) hit = true;
                    const v: unknown = Reflect.get(t, k);
                    return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
                  },
                }),
              ),
            );
            if (hit) dead = true;
            return r;
          };
        const v: unknown = Reflect.get(target, key);
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
  return { share: (id) => wrap(inner.share(id)) };
}

/** Writes per path a provider was asked to make. */
class CountingProvider extends MemoryProvider {
  readonly writes = new Map<string, number>();
  override write(...args: Parameters<MemoryProvider['write']>): ReturnType<MemoryProvider['write']> {
    this.writes.set(args[0], (this.writes.get(args[0]) ?? 0) + 1);
    return super.write(...args);
  }
}

describe("a controller killed between an entry's books and its progress", () => {
  async function killedThenResumed(after: keyof ShareStore) {
    const db = new Database(':memory:');
    open.push(db);
    migrate(db);
    const ann = new MemoryProvider({ name: 'ann' });
    const ben = new CountingProvider({ name: 'ben' });
    const replicas = [ann, ben].map((p, i) => ({
      id: `r${i}`,
      member: MEMBERS[i] ?? '',
      provider: p,
      root: '',
    }));
    await ann.write('seed.txt', text('seed'));
    await new MirrorEngine({ shareId: 's', db, replicas }).quiesce();
    for (let i = 0; i < 5; i++) await ann.write(`batch/f${i}.txt`, text(`content ${i}`));
    const dying = new MirrorEngine({ shareId: 's', books: dyingBooks(db, after), replicas });
    await expect(dying.step()).rejects.toThrow('process killed');
    // The next controller, on the same books, without a verification: the log alone.
    const next = new MirrorEngine({ shareId: 's', db, replicas });
    for (let i = 0; i < 20 && (await next.step()) > 0; i++);
    expect(await next.pendingCount()).toBe(0);
    expect([...(await treeOf(ben, ''))]).toEqual([...(await treeOf(ann, ''))]);
    return ben;
  }

  it('after the origin was booked (the share head moved): every file still reaches the other member', async () => {
    await killedThenResumed('setHead');
  });

  it('after a target write was recorded: the file is not written there twice', async () => {
    const ben = await killedThenResumed('touch');
    for (let i = 0; i < 5; i++) expect(ben.writes.get(`batch/f${i}.txt`)).toBe(1);
  });
});

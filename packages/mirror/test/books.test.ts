/**
 * The engine's books (what it knows each replica holds) must match the replicas once it is
 * quiescent: a restarted engine starts from those books, and re-lists Drive and OneDrive
 * against them, so a stale entry becomes a phantom delete after a restart (the shape of the
 * random-seed share bench's "quiescent, then changed" failures).
 */
import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryProvider, TransientError } from '@weft/providers';
import { FaultInjectingProvider } from '@weft/providers/testing';
import { MirrorEngine } from '../src/engine.ts';
import { SqliteShareStore, migrate } from '../src/store.ts';
import { text, treeOf } from './helpers.ts';

const MEMBERS = ['ann', 'ben', 'cat'];

const open: Database.Database[] = [];
afterEach(() => {
  for (const db of open.splice(0)) db.close();
});

/** Each replica's books, as path → 'dir' or SHA-256, beside its real tree. */
async function books(db: Database.Database, providers: MemoryProvider[]) {
  const store = new SqliteShareStore(db, 's');
  return Promise.all(
    providers.map(async (p, i) => ({
      books: new Map(
        (await store.knownUnder(`r${i}`, '')).map(
          (k) => [k.path, k.kind === 'dir' ? 'dir' : k.sha256] as const,
        ),
      ),
      tree: await treeOf(p, ''),
    })),
  );
}

describe('the books after a delete of a folder the engine wrote into meanwhile', () => {
  it('forget what the deleter no longer holds, so a restart re-lists nothing', async () => {
    const db = new Database(':memory:');
    open.push(db);
    migrate(db);
    let clock = Date.UTC(2026, 10, 22, 12, 0, 0);
    const mem = MEMBERS.map((m) => new MemoryProvider({ name: m, now: () => clock }));
    let failBenWrite = false;
    const ben = new FaultInjectingProvider(mem[1] as MemoryProvider, {
      before(info) {
        if (!failBenWrite || info.op !== 'write') return undefined;
        failBenWrite = false;
        return new TransientError('injected: ben is throttled');
      },
    });
    const providers = [mem[0], ben, mem[2]] as MemoryProvider[];
    const engine = (relist = false) =>
      new MirrorEngine({
        shareId: 's',
        db,
        now: () => (clock += 1000),
        replicas: providers.map((p, i) => ({
          id: `r${i}`,
          member: MEMBERS[i] ?? '',
          provider: p,
          root: '',
          wrap: { retry: { maxAttempts: 1 } },
          ...(relist ? { relistOnStart: true } : {}),
        })),
      });
    const [ann, benMem] = mem as [MemoryProvider, MemoryProvider, MemoryProvider];
    await ann.write('notes/old/f0.txt', text('f0\n'));
    await ann.write('notes/old/f1.txt', text('f1\n'));
    const first = engine();
    await first.quiesce();

    // Ann adds a file there; the engine's write of it to Ben fails once, so it is still
    // pending for Ben when Ben deletes the folder.
    await ann.write('notes/old/a.txt', text('a\n'));
    failBenWrite = true;
    await first.step();
    expect(await first.pendingCount()).toBeGreaterThan(0);
    await benMem.remove('notes/old');
    await first.quiesce();

    for (const [i, b] of (await books(db, mem)).entries()) {
      expect([...b.books].sort(), MEMBERS[i]).toEqual([...b.tree].sort());
    }
    // A restarted engine that re-lists every replica finds nothing to do.
    const trees = await Promise.all(mem.map((p) => treeOf(p, '')));
    const second = engine(true);
    expect(await second.step()).toBe(0);
    expect(await Promise.all(mem.map((p) => treeOf(p, '')))).toEqual(trees);
  });
});

/** A cloud whose feed never reports one file (Drive's feed is known to drop changes). */
class LossyFeed extends MemoryProvider {
  override async changes(cursor: string, options?: { signal?: AbortSignal; limit?: number }) {
    const page = await super.changes(cursor, options);
    return { ...page, changes: page.changes.filter((c) => !c.path.endsWith('missed.txt')) };
  }
}

describe('quiesce verifies against full listings', () => {
  it('a change the feed never reported still reaches everyone before quiesce returns', async () => {
    const db = new Database(':memory:');
    open.push(db);
    migrate(db);
    const providers = [new LossyFeed({ name: 'ann' }), new MemoryProvider({ name: 'ben' })];
    const engine = new MirrorEngine({
      shareId: 's',
      db,
      replicas: providers.map((p, i) => ({ id: `r${i}`, member: MEMBERS[i] ?? '', provider: p, root: '' })),
    });
    await providers[0]?.write('seen.txt', text('s\n'));
    await engine.quiesce();
    await providers[0]?.write('missed.txt', text('m\n'));
    await providers[0]?.write('also.txt', text('a\n'));
    await engine.quiesce();
    expect([...(await treeOf(providers[1] as MemoryProvider, ''))]).toEqual([
      ...(await treeOf(providers[0] as MemoryProvider, '')),
    ]);
    expect(engine.stats.verifyFound).toBe(1);
  });
});

describe('quiesce reconciles replicas whose books are true but differ from the share', () => {
  it('a version one replica alone holds reaches everyone; a replica missing a share file gets it', async () => {
    const db = new Database(':memory:');
    open.push(db);
    migrate(db);
    const mem = MEMBERS.map((m) => new MemoryProvider({ name: m }));
    const make = () =>
      new MirrorEngine({
        shareId: 's',
        db,
        replicas: mem.map((p, i) => ({ id: `r${i}`, member: MEMBERS[i] ?? '', provider: p, root: '' })),
      });
    const [ann, ben, cat] = mem as [MemoryProvider, MemoryProvider, MemoryProvider];
    await ann.write('a.txt', text('a\n'));
    await make().quiesce();
    // Two states no feed will report (the cursors are moved past them), with the books
    // true to each replica: what a lost propagation leaves behind.
    const store = new SqliteShareStore(db, 's');
    const orphan = await cat.write('orphan.txt', text('only on cat\n'));
    await store.setKnown('r2', 'orphan.txt', {
      kind: 'file',
      revision: orphan.revision,
      sha256: createHash('sha256').update('only on cat\n').digest('hex'),
    });
    await ben.remove('a.txt');
    await store.setKnown('r1', 'a.txt', undefined);
    for (const [i, p] of mem.entries()) await store.setCursor(`r${i}`, await p.latestCursor());

    const engine = make();
    expect(await engine.step()).toBe(0);
    await engine.quiesce();
    const trees = await Promise.all(mem.map((p) => treeOf(p, '')));
    for (const t of trees) expect([...t.keys()]).toEqual(['a.txt', 'orphan.txt']);
    expect(trees[1]).toEqual(trees[0]);
    expect(trees[2]).toEqual(trees[0]);
    expect(engine.stats.verifyFound).toBe(2);
  });
});

describe('the head history after a verification', () => {
  it('keeps only versions some replica still holds: past ones are forgotten', async () => {
    const db = new Database(':memory:');
    open.push(db);
    migrate(db);
    const mem = MEMBERS.slice(0, 2).map((m) => new MemoryProvider({ name: m }));
    const engine = new MirrorEngine({
      shareId: 's',
      db,
      replicas: mem.map((p, i) => ({ id: `r${i}`, member: MEMBERS[i] ?? '', provider: p, root: '' })),
    });
    const sha = (s: string): string => createHash('sha256').update(s).digest('hex');
    const [ann] = mem as [MemoryProvider, MemoryProvider];
    for (const v of ['v1\n', 'v2\n', 'v3\n']) {
      await ann.write('f.txt', text(v));
      await engine.quiesce();
    }
    const store = new SqliteShareStore(db, 's');
    expect((await store.head('f.txt'))?.sha256).toBe(sha('v3\n'));
    expect(await store.wasHead('f.txt', sha('v3\n'))).toBe(true);
    expect(await store.wasHead('f.txt', sha('v1\n'))).toBe(false);
    expect(await store.wasHead('f.txt', sha('v2\n'))).toBe(false);
    expect(db.prepare('SELECT COUNT(*) AS n FROM head_history').get()).toEqual({ n: 1 });
  });
});

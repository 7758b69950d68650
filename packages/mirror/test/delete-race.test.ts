/**
 * A member deletes a file the engine wrote into their replica while an earlier log entry
 * for that path is still pending there: the earlier entry, applied after the delete was
 * read from the feed, re-creates the file on the deleter's replica — and the delete, whose
 * origin is that replica, must not leave it there while it removes it everywhere else.
 * (The shape of the 5-minute four-cloud run's divergence: a conflicted copy written on two
 * replicas, deleted by one member, still held by that member only.)
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryProvider, TransientError } from '@weft/providers';
import { FaultInjectingProvider } from '@weft/providers/testing';
import { MirrorEngine } from '../src/engine.ts';
import { migrate } from '../src/store.ts';
import { readText, text, treeOf } from './helpers.ts';

const MEMBERS = ['ann', 'ben', 'cat', 'dan'];

const open: Database.Database[] = [];
afterEach(() => {
  for (const db of open.splice(0)) db.close();
});

describe('a delete racing a pending entry of the same path on the deleting replica', () => {
  it('the deleted conflicted copy is gone from every replica, the deleter’s too', async () => {
    const db = new Database(':memory:');
    open.push(db);
    migrate(db);
    let clock = Date.UTC(2026, 10, 21, 12, 0, 0);
    const mem = MEMBERS.map((m) => new MemoryProvider({ name: m, now: () => clock }));
    // Cat's cloud refuses one write when told to: that drain stops before the conflicted
    // copies' own entries are applied, so they are still pending at the next round.
    let failCatWrite = false;
    const cat = new FaultInjectingProvider(mem[2] as MemoryProvider, {
      before(info) {
        if (!failCatWrite || info.op !== 'write') return undefined;
        failCatWrite = false;
        return new TransientError('injected: cat is throttled');
      },
    });
    const providers = [mem[0], mem[1], cat, mem[3]] as MemoryProvider[];
    const engine = new MirrorEngine({
      shareId: 's',
      db,
      now: () => (clock += 1000),
      replicas: providers.map((p, i) => ({
        id: `r${i}`,
        member: MEMBERS[i] ?? '',
        provider: p,
        root: '',
        wrap: { retry: { maxAttempts: 1 } },
      })),
    });
    const [ann, ben, , dan] = mem as [MemoryProvider, MemoryProvider, MemoryProvider, MemoryProvider];
    await ann.write('doc.txt', text('v0\n'));
    await engine.quiesce();

    // Ann, Ben and Dan edit at once; Ann's version reaches the share first and becomes a
    // conflicted copy on Ben's and Dan's replicas (two log entries for the same copy).
    await ann.write('doc.txt', text('v0\nann\n'));
    await ben.write('doc.txt', text('v0\nben\n'));
    await dan.write('doc.txt', text('v0\ndan\n'));
    failCatWrite = true;
    await engine.step();
    const copies = [...(await treeOf(dan, '')).keys()].filter((k) => k.includes('conflicted copy'));
    expect(copies.length).toBeGreaterThan(0);
    const copy = copies[0] as string;
    expect(await readText(dan, copy)).toBe('v0\nann\n');

    // Dan deletes that copy before the engine's next round.
    const st = await dan.stat(copy);
    await dan.remove(copy, { ifRevision: st.revision });
    await engine.quiesce();

    const trees = await Promise.all(mem.map((p) => treeOf(p, '')));
    for (const [i, t] of trees.entries()) expect([...t], MEMBERS[i]).toEqual([...(trees[0] ?? [])]);
    expect(trees[0]?.has(copy)).toBe(false);
  });
});

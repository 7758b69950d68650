/**
 * Two members move the same folder to two different places before either move has reached
 * the other (docs/sharing.md, "Moving the same folder twice at once"): the first move in
 * the share's log wins everywhere; the later move, whose source is gone by then, becomes a
 * copy of what that member moved at its own destination — so every replica holds both
 * places, identical, and nothing is lost.
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryProvider } from '@weft/providers';
import { MirrorEngine } from '../src/engine.ts';
import { migrate } from '../src/store.ts';
import { text, treeOf } from './helpers.ts';

const MEMBERS = ['ann', 'ben', 'cat', 'dan'];
const ROOTS = ['', 'Team/share', 'share', 'x/y'];
const open: Database.Database[] = [];
afterEach(() => {
  for (const db of open.splice(0)) db.close();
});

function full(i: number, rel: string): string {
  const root = ROOTS[i] ?? '';
  return root === '' ? rel : `${root}/${rel}`;
}

async function setup(): Promise<{ mem: MemoryProvider[]; make: () => MirrorEngine }> {
  const db = new Database(':memory:');
  open.push(db);
  migrate(db);
  let clock = Date.UTC(2026, 10, 21, 12, 0, 0);
  const mem = MEMBERS.map((m) => new MemoryProvider({ name: m, now: () => clock }));
  const make = (): MirrorEngine =>
    new MirrorEngine({
      shareId: 's',
      db,
      now: () => (clock += 1000),
      replicas: mem.map((p, i) => ({
        id: `r${i}`,
        member: MEMBERS[i] ?? '',
        provider: p,
        root: ROOTS[i] ?? '',
      })),
    });
  return { mem, make };
}

async function converged(mem: MemoryProvider[]): Promise<Map<string, string>> {
  const trees = await Promise.all(mem.map((p, i) => treeOf(p, ROOTS[i] ?? '')));
  for (const [i, t] of trees.entries()) expect([...t], MEMBERS[i]).toEqual([...(trees[0] ?? [])]);
  return trees[0] ?? new Map();
}

describe('the same folder moved to two places at once', () => {
  for (const [label, second] of [
    ['by two members', 1],
    ['by two members, the second one on the last replica', 3],
  ] as const) {
    it(`${label}: both destinations everywhere, nothing lost`, async () => {
      const { mem, make } = await setup();
      const engine = make();
      const [ann] = mem as [MemoryProvider];
      await ann.write('d/a.txt', text('a\n'));
      await ann.write('d/sub/b.txt', text('b\n'));
      await engine.quiesce();
      await converged(mem);

      await ann.move('d', 'moved1');
      await (mem[second] as MemoryProvider).move(full(second, 'd'), full(second, 'notes/moved2'));
      await engine.quiesce();
      const tree = await converged(mem);
      const files = [...tree].filter(([, v]) => v !== 'dir').map(([k]) => k);
      expect(files).toEqual([
        'moved1/a.txt',
        'moved1/sub/b.txt',
        'notes/moved2/a.txt',
        'notes/moved2/sub/b.txt',
      ]);
    });
  }

  it('while the engine is down (a restart), then an edit inside one destination', async () => {
    const { mem, make } = await setup();
    let engine = make();
    const [ann, ben] = mem as [MemoryProvider, MemoryProvider];
    await ann.write('d/a.txt', text('a\n'));
    await engine.quiesce();
    await ben.move(full(1, 'd'), full(1, 'e'));
    await ann.move('d', 'f');
    engine = make();
    await engine.quiesce();
    await ben.write(full(1, 'e/a.txt'), text('a\nben\n'));
    await engine.quiesce();
    const tree = await converged(mem);
    expect([...tree].filter(([, v]) => v !== 'dir').map(([k]) => k)).toEqual(['e/a.txt', 'f/a.txt']);
  });
});

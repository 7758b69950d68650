/**
 * Property: random operations on all four replicas at once — creates, edits, deletes,
 * moves of files and folders, some made while the engine is applying the log — and when
 * activity stops every replica holds the same tree, and every version written anywhere
 * is present (in place or as a conflicted copy) unless a later delete by someone who had
 * seen it removed it. Contents are lines of unique tokens and an edit appends one, so a
 * version is "present" when its newest token is.
 */
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemoryProvider, collect } from '@weft/providers';
import { MirrorEngine } from '../src/engine.ts';
import { migrate } from '../src/store.ts';
import { contentsOf, text, treeOf } from './helpers.ts';

const ROOTS = ['', 'Apps/Weft/share', 'team', 'a/b'];
const FULL = process.env.WEFT_FULL === '1';

type Cmd =
  | { k: 'create'; r: number; dir: number; name: number }
  | { k: 'edit'; r: number; pick: number }
  | { k: 'mkdir'; r: number; dir: number; name: number }
  | { k: 'delete'; r: number; pick: number }
  | { k: 'move'; r: number; pick: number; dir: number }
  | { k: 'step' }
  | { k: 'restart' };

const r = fc.integer({ min: 0, max: 3 });
const n = fc.nat(1000);
const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ k: fc.constant('create' as const), r, dir: n, name: fc.nat(5) }) },
  { weight: 6, arbitrary: fc.record({ k: fc.constant('edit' as const), r, pick: n }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('mkdir' as const), r, dir: n, name: fc.nat(3) }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('delete' as const), r, pick: n }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('move' as const), r, pick: n, dir: n }) },
  { weight: 3, arbitrary: fc.constant({ k: 'step' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'restart' as const }) },
);

function full(i: number, rel: string): string {
  const root = ROOTS[i] ?? '';
  if (rel === '') return root;
  return root === '' ? rel : `${root}/${rel}`;
}

async function run(cmds: Cmd[]): Promise<void> {
  const db = new Database(':memory:');
  migrate(db);
  const providers = ROOTS.map((_, i) => new MemoryProvider({ name: `m${i}` }));
  for (const [i, p] of providers.entries()) if (ROOTS[i]) await p.mkdir(ROOTS[i] ?? '');
  const make = (): MirrorEngine =>
    new MirrorEngine({
      shareId: 'prop',
      db,
      concurrency: 4,
      replicas: providers.map((p, i) => ({
        id: `r${i}`,
        member: `m${i}`,
        provider: p,
        root: ROOTS[i] ?? '',
      })),
    });
  let engine = make();
  let stepping: Promise<number> | undefined;
  const written = new Set<string>();
  const retired = new Set<string>();
  let token = 0;
  let fresh = 0;
  const settle = async (): Promise<void> => {
    if (stepping) await stepping;
    stepping = undefined;
  };
  const entries = async (i: number) => {
    const out: { rel: string; kind: 'file' | 'dir'; revision: string }[] = [];
    const p = providers[i] as MemoryProvider;
    for await (const e of p.list(ROOTS[i] ?? '', { recursive: true })) {
      const root = ROOTS[i] ?? '';
      out.push({
        rel: root === '' ? e.path : e.path.slice(root.length + 1),
        kind: e.kind,
        revision: e.revision,
      });
    }
    return out;
  };
  const edit = async (i: number, rel: string): Promise<void> => {
    const p = providers[i] as MemoryProvider;
    for (let attempt = 0; attempt < 10; attempt++) {
      let before = '';
      let rev: string | undefined;
      try {
        const st = await p.stat(full(i, rel));
        if (st.kind !== 'file') return;
        rev = st.revision;
        before = Buffer.from(await collect(await p.read(full(i, rel)))).toString('utf8');
      } catch {
        rev = undefined;
      }
      const t = `t${token++}`;
      try {
        await p.write(
          full(i, rel),
          text(`${before}${t}\n`),
          rev ? { ifRevision: rev } : { ifNotExists: true },
        );
        written.add(t);
        return;
      } catch {
        // the engine wrote meanwhile: look again, as a person would
      }
    }
  };

  for (const c of cmds) {
    if (c.k === 'step') {
      await settle();
      stepping = engine.step();
      continue;
    }
    if (c.k === 'restart') {
      await settle();
      engine = make();
      continue;
    }
    const i = c.r;
    const p = providers[i] as MemoryProvider;
    if (c.k === 'create' || c.k === 'mkdir') {
      const dirs = ['', ...(await entries(i)).filter((e) => e.kind === 'dir').map((e) => e.rel)];
      const dir = dirs[c.dir % dirs.length] ?? '';
      const name = c.k === 'create' ? `f${c.name}.txt` : `d${c.name}`;
      const rel = dir === '' ? name : `${dir}/${name}`;
      if (c.k === 'create') await edit(i, rel);
      else await p.mkdir(full(i, rel)).catch(() => undefined);
    } else if (c.k === 'edit') {
      const files = (await entries(i)).filter((e) => e.kind === 'file');
      const f = files[c.pick % Math.max(1, files.length)];
      if (f) await edit(i, f.rel);
    } else {
      // Deletes and moves happen between the engine's steps (a person does them on a tree
      // the engine is not writing into at that instant); other replicas still run ahead.
      await settle();
      const all = await entries(i);
      const pick = all[c.pick % Math.max(1, all.length)];
      if (!pick) continue;
      if (c.k === 'delete') {
        const contents =
          pick.kind === 'file'
            ? [Buffer.from(await collect(await p.read(full(i, pick.rel)))).toString('utf8')]
            : [...(await contentsOf(p, full(i, pick.rel))).values()];
        for (const content of contents) for (const line of content.split('\n')) if (line) retired.add(line);
        await p.remove(full(i, pick.rel));
      } else {
        const dirs = ['', ...all.filter((e) => e.kind === 'dir').map((e) => e.rel)].filter(
          (d) => d !== pick.rel && !d.startsWith(pick.rel + '/'),
        );
        const dir = dirs[c.dir % dirs.length] ?? '';
        const name = pick.kind === 'file' ? `m${fresh++}.txt` : `dm${fresh++}`;
        await p.move(full(i, pick.rel), full(i, dir === '' ? name : `${dir}/${name}`));
      }
    }
    await new Promise((res) => setImmediate(res));
  }
  await settle();
  await engine.quiesce();
  // Files compared exactly; empty folders are best-effort (see docs/mirror.md, limits).
  const trees = (await Promise.all(providers.map((p, i) => treeOf(p, ROOTS[i] ?? '')))).map(
    (t) => new Map([...t].filter(([, v]) => v !== 'dir')),
  );
  for (const t of trees.slice(1)) expect([...t]).toEqual([...(trees[0] ?? [])]);
  const present = new Set<string>();
  for (const content of (await contentsOf(providers[0] as MemoryProvider, ROOTS[0] ?? '')).values()) {
    for (const line of content.split('\n')) if (line) present.add(line);
  }
  const lost = [...written].filter((t) => !retired.has(t) && !present.has(t));
  expect(lost).toEqual([]);
  db.close();
}

describe('convergence under random concurrent operations', () => {
  it('all replicas identical, every write present in place or as a conflicted copy', async () => {
    await fc.assert(fc.asyncProperty(fc.array(cmd, { minLength: 10, maxLength: FULL ? 200 : 100 }), run), {
      numRuns: FULL ? 1000 : 100,
      seed: 20261121,
    });
  }, 120_000);
});

/**
 * Model-based: random activity on three replicas with random fault schedules — long
 * write-only outages (503 on writes, account full, token revoked) and whole-service
 * outages (reads fail too), several replicas at once, engine restarts during an outage —
 * then every fault heals, and:
 * - no replica ever had a version replaced by an older one (checked after every step:
 *   contents are lines of unique tokens and an edit appends one, so an older version of a
 *   file is a proper prefix of a newer one);
 * - nothing dropped: every token written is present (in place or in a conflicted copy)
 *   unless a delete by someone who had it removed it;
 * - all replicas hold the same tree, all are available, nothing waits.
 */
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AuthError, MemoryProvider, QuotaExceededError, TransientError, collect } from '@weft/providers';
import { FaultInjectingProvider } from '@weft/providers/testing';
import { MirrorEngine } from '../src/engine.ts';
import { migrate } from '../src/store.ts';
import { contentsOf, text, treeOf } from './helpers.ts';

const ROOTS = ['', 'Apps/Weft/share', 'team'];
const FULL = process.env.WEFT_FULL === '1';
const WRITES = new Set(['write', 'remove', 'mkdir', 'move', 'copy']);

type FaultKind = 'writes-503' | 'full' | 'auth' | 'all-503';
type Cmd =
  | { k: 'create'; r: number; dir: number; name: number }
  | { k: 'edit'; r: number; pick: number }
  | { k: 'mkdir'; r: number; dir: number; name: number }
  | { k: 'delete'; r: number; pick: number }
  | { k: 'move'; r: number; pick: number; dir: number }
  | { k: 'fault'; r: number; kind: FaultKind }
  | { k: 'heal'; r: number }
  | { k: 'steps'; n: number }
  | { k: 'restart' };

const r = fc.integer({ min: 0, max: ROOTS.length - 1 });
const n = fc.nat(1000);
const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ k: fc.constant('create' as const), r, dir: n, name: fc.nat(5) }) },
  { weight: 7, arbitrary: fc.record({ k: fc.constant('edit' as const), r, pick: n }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('mkdir' as const), r, dir: n, name: fc.nat(3) }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('delete' as const), r, pick: n }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('move' as const), r, pick: n, dir: n }) },
  {
    weight: 2,
    arbitrary: fc.record({
      k: fc.constant('fault' as const),
      r,
      kind: fc.constantFrom<FaultKind>('writes-503', 'full', 'auth', 'all-503'),
    }),
  },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('heal' as const), r }) },
  // Up to 12 rounds in a row: longer than any retry limit.
  {
    weight: 4,
    arbitrary: fc.record({ k: fc.constant('steps' as const), n: fc.integer({ min: 1, max: 12 }) }),
  },
  { weight: 1, arbitrary: fc.constant({ k: 'restart' as const }) },
);

function full(i: number, rel: string): string {
  const root = ROOTS[i] ?? '';
  if (rel === '') return root;
  return root === '' ? rel : `${root}/${rel}`;
}

function faultError(kind: FaultKind): Error {
  if (kind === 'full') return new QuotaExceededError('injected: insufficient storage');
  if (kind === 'auth') return new AuthError('injected: token revoked');
  return new TransientError('injected: 503');
}

async function run(cmds: Cmd[]): Promise<void> {
  const db = new Database(':memory:');
  migrate(db);
  const mem = ROOTS.map((_, i) => new MemoryProvider({ name: `m${i}` }));
  for (const [i, p] of mem.entries()) if (ROOTS[i]) await p.mkdir(ROOTS[i] ?? '');
  const faults = new Map<number, FaultKind>();
  const wrapped = mem.map(
    (p, i) =>
      new FaultInjectingProvider(p, {
        before(info) {
          const f = faults.get(i);
          if (!f || (f !== 'all-503' && !WRITES.has(info.op))) return undefined;
          return faultError(f);
        },
      }),
  );
  const make = (): MirrorEngine =>
    new MirrorEngine({
      shareId: 'model',
      db,
      concurrency: 4,
      probeBackoffMs: { first: 0, max: 0 },
      replicas: wrapped.map((p, i) => ({
        id: `r${i}`,
        member: `m${i}`,
        provider: p,
        root: ROOTS[i] ?? '',
        wrap: { retry: { maxAttempts: 1 } },
      })),
    });
  let engine = make();
  const written = new Set<string>();
  const retired = new Set<string>();
  const rollbacks: string[] = [];
  let token = 0;
  let fresh = 0;

  /** Per replica: path → its tokens at the last look. */
  let last = await Promise.all(mem.map((_, i) => tokensOf(i)));
  async function tokensOf(i: number): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>();
    for (const [path, content] of await contentsOf(mem[i] as MemoryProvider, ROOTS[i] ?? ''))
      out.set(path, content.split('\n').filter(Boolean));
    return out;
  }
  /** Versions replaced by an older one (a proper prefix of their tokens) since the last look. */
  const look = async (): Promise<void> => {
    const now = await Promise.all(mem.map((_, i) => tokensOf(i)));
    for (const [i, m] of now.entries()) {
      for (const [path, toks] of m) {
        const before = last[i]?.get(path);
        if (!before || toks.length >= before.length) continue;
        if (toks.every((t, j) => before[j] === t))
          rollbacks.push(`r${i} ${path}: [${before.join(',')}] -> [${toks.join(',')}]`);
      }
    }
    last = now;
  };
  const step = async (): Promise<void> => {
    await look(); // the people's own changes since
    await engine.step();
    await look();
  };

  const entries = async (i: number) => {
    const out: { rel: string; kind: 'file' | 'dir'; revision: string }[] = [];
    const root = ROOTS[i] ?? '';
    for await (const e of (mem[i] as MemoryProvider).list(root, { recursive: true })) {
      out.push({
        rel: root === '' ? e.path : e.path.slice(root.length + 1),
        kind: e.kind,
        revision: e.revision,
      });
    }
    return out;
  };
  // People use their own cloud directly (their app, not the engine's failing token).
  const edit = async (i: number, rel: string): Promise<void> => {
    const p = mem[i] as MemoryProvider;
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
      await p.write(full(i, rel), text(`${before}${t}\n`), rev ? { ifRevision: rev } : { ifNotExists: true });
      written.add(t);
    } catch {
      // a folder of that name, or a parent gone: nothing written
    }
  };

  for (const c of cmds) {
    if (c.k === 'steps') {
      for (let s = 0; s < c.n; s++) await step();
      continue;
    }
    if (c.k === 'restart') {
      await engine.stop();
      engine = make();
      continue;
    }
    if (c.k === 'fault') {
      faults.set(c.r, c.kind);
      continue;
    }
    if (c.k === 'heal') {
      faults.delete(c.r);
      continue;
    }
    const i = c.r;
    const p = mem[i] as MemoryProvider;
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
  }
  // Recovery: every cloud takes writes again.
  faults.clear();
  await look();
  await engine.quiesce();
  await look();
  expect(rollbacks).toEqual([]);
  const trees = (await Promise.all(mem.map((p, i) => treeOf(p, ROOTS[i] ?? '')))).map(
    (t) => new Map([...t].filter(([, v]) => v !== 'dir')),
  );
  for (const t of trees.slice(1)) expect([...t]).toEqual([...(trees[0] ?? [])]);
  const present = new Set<string>();
  for (const content of (await contentsOf(mem[0] as MemoryProvider, ROOTS[0] ?? '')).values()) {
    for (const line of content.split('\n')) if (line) present.add(line);
  }
  expect([...written].filter((t) => !retired.has(t) && !present.has(t))).toEqual([]);
  expect((await engine.replicaStatus()).map((s) => [s.state, s.waiting])).toEqual(
    ROOTS.map(() => ['available', 0]),
  );
  await engine.stop();
  db.close();
}

describe('the mirror under random outages of its replicas', () => {
  it(
    'never rolls back, drops nothing, and converges once every cloud is back',
    async () => {
      await fc.assert(fc.asyncProperty(fc.array(cmd, { minLength: 10, maxLength: FULL ? 160 : 80 }), run), {
        numRuns: FULL ? 1000 : 30,
        seed: 20261214,
      });
    },
    FULL ? 3_600_000 : 120_000,
  );
});

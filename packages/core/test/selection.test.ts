/**
 * Selective sync, the pure part (selection.ts) and the views built on it: the path checks
 * against a brute-force model (property tests), the state plan, the feed as a device that
 * leaves folders out sees it (selective-remote.ts), and the scanner not looking inside them.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import type { ChangeRecord, EntryInfo } from '@weft/wire';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { IgnoreRules } from '../src/ignore-rules.ts';
import { Journal } from '../src/journal/journal.ts';
import { scan } from '../src/scanner.ts';
import { filterChanges } from '../src/selective-remote.ts';
import {
  Selection,
  SelectionError,
  type SelectionState,
  normalizeExcluded,
  planSelection,
  selfOrAncestor,
} from '../src/selection.ts';

const segment = fc.constantFrom('a', 'b', 'c', 'a b', 'é', 'a.b');
const path = fc.array(segment, { minLength: 1, maxLength: 4 }).map((s) => s.join('/'));
const state = fc.constantFrom<SelectionState>('leaving', 'excluded', 'including');

/** The model: `p` is `q` or inside it. */
const within = (p: string, q: string): boolean => p === q || p.startsWith(q + '/');

describe('selection: path checks', () => {
  it('selfOrAncestor finds exactly the nearest listed self-or-ancestor', () => {
    fc.assert(
      fc.property(fc.uniqueArray(path, { maxLength: 12 }), path, (listed, p) => {
        const set = new Set(listed);
        const found = selfOrAncestor(p, (q) => set.has(q));
        const model = listed.filter((q) => within(p, q)).sort((x, y) => y.length - x.length)[0];
        expect(found).toBe(model);
      }),
    );
  });

  it('isExcluded and isDeselected agree with the model', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(path, state), { maxLength: 12 }), path, (entries, p) => {
        const s = new Selection(entries);
        const states = new Map(entries);
        const covering = [...states].filter(([q]) => within(p, q)).map(([, st]) => st);
        expect(s.isExcluded(p)).toBe(covering.includes('excluded'));
        expect(s.isDeselected(p)).toBe(covering.some((st) => st !== 'including'));
      }),
    );
  });

  it('normalizeExcluded: no duplicates, nothing inside another, same coverage, idempotent', () => {
    fc.assert(
      fc.property(fc.array(path, { maxLength: 12 }), path, (raw, p) => {
        const out = normalizeExcluded(raw);
        expect(new Set(out).size).toBe(out.length);
        for (const a of out) for (const b of out) if (a !== b) expect(within(a, b)).toBe(false);
        expect(out.some((q) => within(p, q))).toBe(raw.some((q) => within(p, q)));
        expect(normalizeExcluded(out)).toEqual(out);
      }),
    );
  });

  it('normalizeExcluded refuses bad paths with a clear error', () => {
    expect(normalizeExcluded(['b/', 'a', 'a/x', 'a'])).toEqual(['a', 'b']);
    expect(normalizeExcluded(['Cafe\u0301'])).toEqual(['Café']);
    for (const bad of ['', '/', '/abs', 'a//b', '../up', 'a/./b', 'x\0y'])
      expect(() => normalizeExcluded([bad])).toThrow(SelectionError);
    expect(() => normalizeExcluded([7])).toThrow(/not a path/);
    expect(() => normalizeExcluded('a' as unknown as string[])).toThrow(SelectionError);
  });
});

describe('selection: the plan from one choice to the next', () => {
  const plan = (cur: [string, SelectionState][], req: string[]) =>
    [...planSelection(new Map(cur), req)].sort((a, b) => (a[0] < b[0] ? -1 : 1));

  it('new choices leave, left-out ones keep their state, ones taken back come down', () => {
    expect(plan([], ['A'])).toEqual([['A', 'leaving']]);
    expect(plan([['A', 'excluded']], ['A'])).toEqual([['A', 'excluded']]);
    expect(plan([['A', 'excluded']], [])).toEqual([['A', 'including']]);
    expect(plan([['A', 'leaving']], [])).toEqual([]);
    expect(plan([['A', 'including']], ['A'])).toEqual([['A', 'leaving']]);
    // Inside a folder that is not here: nothing of it is here either.
    expect(plan([['A', 'excluded']], ['A/B'])).toEqual([
      ['A', 'including'],
      ['A/B', 'excluded'],
    ]);
    expect(plan([['A', 'leaving']], ['A/B'])).toEqual([['A/B', 'leaving']]);
    // A wider choice takes over the folders inside it.
    expect(plan([['A/B', 'excluded']], ['A'])).toEqual([['A', 'leaving']]);
    expect(() => plan([['A', 'excluded']], ['../x'])).toThrow(SelectionError);
  });

  it('after a plan, exactly the requested folders are deselected and nothing stays excluded unasked', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(path, state), { maxLength: 8 }),
        fc.array(path, { maxLength: 8 }),
        path,
        (cur, req, p) => {
          // A state the engine can be in: no left-out folder inside another.
          const curMap = new Map<string, SelectionState>();
          for (const [q, s] of cur)
            if (![...curMap].some(([r, rs]) => rs !== 'including' && (within(q, r) || within(r, q))))
              curMap.set(q, s);
          const next = new Selection(planSelection(curMap, req));
          expect(next.isDeselected(p)).toBe(req.some((q) => within(p, q)));
          // Excluded (not here) only if it was not here before.
          if (next.isExcluded(p)) expect(new Selection(curMap).isExcluded(p)).toBe(true);
        },
      ),
    );
  });
});

describe('selection: the feed seen without left-out folders', () => {
  const entry = (p: string): EntryInfo =>
    ({ path: p, kind: 'file', size: 1, revision: 'r1', sha256: 'a'.repeat(64), mtimeMs: 0 }) as EntryInfo;
  const out = (p: string): boolean => within(p, 'Out');

  it('drops changes inside, turns a move in into a delete, keeps a move out', () => {
    const changes: ChangeRecord[] = [
      { seq: 1, type: 'upsert', path: 'Out/a', entry: entry('Out/a') },
      { seq: 2, type: 'delete', path: 'Out/b' },
      { seq: 3, type: 'upsert', path: 'In/a', entry: entry('In/a') },
      { seq: 4, type: 'move', from: 'In/a', path: 'Out/a', entry: entry('Out/a'), deviceName: 'x' },
      { seq: 5, type: 'move', from: 'Out/c', path: 'In/c', entry: entry('In/c') },
      { seq: 6, type: 'move', from: 'Out/c', path: 'Out/d', entry: entry('Out/d') },
    ];
    const moves: string[] = [];
    expect(filterChanges(changes, out, (from, to) => moves.push(`${from}>${to}`))).toEqual([
      changes[2],
      { seq: 4, type: 'delete', path: 'In/a', deviceName: 'x' },
      changes[4],
    ]);
    expect(moves).toEqual(['In/a>Out/a', 'Out/c>In/c', 'Out/c>Out/d']);
  });
});

describe('selection: the scanner does not look inside an excluded folder', () => {
  it('files made there are not uploaded', async () => {
    const root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-selection-'));
    const journal = new Journal(nodePath.join(root, 'journal.db'));
    try {
      const folder = nodePath.join(root, 'Weft');
      await fsp.mkdir(nodePath.join(folder, 'Out'), { recursive: true });
      await fsp.mkdir(nodePath.join(folder, 'In'), { recursive: true });
      await fsp.writeFile(nodePath.join(folder, 'Out', 'x.txt'), 'x');
      await fsp.writeFile(nodePath.join(folder, 'In', 'y.txt'), 'y');
      const rules = new IgnoreRules();
      const excluded = new Selection([['Out', 'excluded']]);
      rules.setExcluded((p) => excluded.isExcluded(p));
      const result = await scan(folder, journal, rules, { settleMs: 0 });
      const touched = result.ops.map((op) => (op.kind === 'move' ? op.to : op.path)).sort();
      expect(touched).toEqual(['In', 'In/y.txt']);
      // Without the selection the same scan would upload it: the check is what keeps it out.
      const plain = await scan(folder, journal, new IgnoreRules(), { settleMs: 0 });
      expect(plain.ops.some((op) => op.kind === 'put' && op.path === 'Out/x.txt')).toBe(true);
    } finally {
      journal.close();
      await fsp.rm(root, { recursive: true, force: true });
    }
  });
});

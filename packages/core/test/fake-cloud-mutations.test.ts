/**
 * The harness catches a wrong decision table: each row of docs/sync-decisions.md in turn is
 * given a wrong action (through decisions.ts, the one place the engine asks), and the
 * directed scenarios (support/scenarios.ts) and random schedules must fail. A mutant that
 * survives means a row the harness does not check — this test names it.
 *
 * Per row, the scenarios run first (a second each), then random seeds until one fails that
 * is not a known failure with the true table (support/known-failures.ts), at most
 * WEFT_MUTATION_SEEDS (default 60).
 */
import { describe, expect, it, vi } from 'vitest';
import type { Action, DecisionRow, Observation } from '../src/decisions.ts';
import { KNOWN } from './support/known-failures.ts';
import { SCENARIOS } from './support/scenarios.ts';
import { runSchedule } from './support/schedule.ts';

const mutation = vi.hoisted(() => ({
  row: undefined as string | undefined,
  action: undefined as string | undefined,
}));

vi.mock('../src/decisions.ts', async (importOriginal) => {
  const real = await importOriginal<typeof import('../src/decisions.ts')>();
  const mutate = (r: DecisionRow): DecisionRow =>
    r.id === mutation.row ? { ...r, action: mutation.action as Action } : r;
  return {
    ...real,
    decide: (o: Observation) => mutate(real.decide(o)),
  };
});

/** For each action, the wrong one a mistaken table would most plausibly hold. */
const WRONG: Record<Action, Action> = {
  nothing: 'conflict',
  upload: 'download',
  download: 'nothing',
  'delete-remote': 'nothing',
  'delete-local': 'nothing',
  record: 'conflict',
  forget: 'nothing',
  conflict: 'download',
  'move-local': 'nothing',
  'keep-changed': 'delete-local',
  skip: 'download',
  'replace-kind': 'nothing',
  'adopt-server-copy': 'nothing',
  'move-to-copy': 'nothing',
  reupload: 'nothing',
  reconcile: 'nothing',
};

/** Rows whose default wrong action above the engine cannot tell from the right one (same code path). */
const WRONG_FOR_ROW: Record<string, Action> = {
  D15: 'delete-local', // a wrong "upload" is mended by the next scan; "the delete wins" loses the edit
};

/**
 * Rows no mutation through decisions.ts can show today, and why (issue #15 report): the
 * engine does not ask the table there, or asks and then does the same whatever the row says.
 */
const UNCHECKABLE: Record<string, string> = {
  D1: 'unreachable: nothing anywhere is never observed (no scan, feed entry or listing names such a path), so no action is taken on it',
};

const MAX_SEEDS = Number(process.env.WEFT_MUTATION_SEEDS ?? 60);

/** How the harness catches the current mutant: a failing scenario or seed, or undefined. */
async function caught(): Promise<string | undefined> {
  for (const [name, scenario] of Object.entries(SCENARIOS)) {
    try {
      await scenario();
    } catch (e) {
      return `scenario "${name}": ${(e as Error).message.split('\n')[0]}`;
    }
  }
  for (let seed = 1; seed <= MAX_SEEDS; seed++) {
    if (KNOWN[seed] !== undefined) continue;
    const r = await runSchedule(seed);
    if (r.problems.length > 0) return `seed ${seed}: ${r.problems[0]}`;
  }
  return undefined;
}

describe('a wrong decision-table row makes the harness fail', async () => {
  const { DECISIONS } = await vi.importActual<typeof import('../src/decisions.ts')>('../src/decisions.ts');

  it('with the true table, every scenario passes', async () => {
    mutation.row = undefined;
    for (const [name, scenario] of Object.entries(SCENARIOS)) {
      await expect(scenario(), name).resolves.toBeUndefined();
    }
  });

  const rows = DECISIONS.map((r) => [r.id, r.action, WRONG_FOR_ROW[r.id] ?? WRONG[r.action]] as const);
  it.each(rows.filter(([id]) => UNCHECKABLE[id] === undefined))(
    'row %s: %s → %s is caught',
    async (id, _action, wrong) => {
      mutation.row = id;
      mutation.action = wrong;
      try {
        const how = await caught();
        expect(how, `the mutant of ${id} survived every scenario and ${MAX_SEEDS} seeds`).toBeDefined();
      } finally {
        mutation.row = undefined;
      }
    },
    600_000,
  );

  // Written reasons, one per row (see UNCHECKABLE).
  it.skip.each(rows.filter(([id]) => UNCHECKABLE[id] !== undefined).map(([id]) => [id, UNCHECKABLE[id]]))(
    'row %s is not checked: %s',
    () => undefined,
  );
});

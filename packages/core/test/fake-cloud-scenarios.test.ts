/**
 * The directed engine scenarios of support/scenarios.ts (decision rows D3–D27, conflicts,
 * offline coalescing, case clashes, the mass-delete guard, consistency repair), each on its
 * own in-memory cloud.
 */
import { describe, it } from 'vitest';
import { KNOWN_BUG_SCENARIOS, SCENARIOS } from './support/scenarios.ts';

describe('engine scenarios on the harness', () => {
  it.each(Object.entries(SCENARIOS))('%s', async (_name, scenario) => {
    await scenario();
  });
});

// Only when there are any (none today): an empty table is no test at all.
const knownBugs = Object.entries(KNOWN_BUG_SCENARIOS);
if (knownBugs.length > 0)
  describe('engine bugs found by the harness, not fixed yet (expected to fail)', () => {
    it.fails.each(knownBugs)('%s', async (_name, { scenario }) => {
      await scenario();
    });
  });

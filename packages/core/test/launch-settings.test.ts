/**
 * The agent's node flags and environment live in one module (bin/launch-settings.js) that
 * the benches and the e2e harness read; bin/weft.js's #! line must say the same, so `weft`
 * started as a command runs as the measured agents did.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { AGENT_ENV, AGENT_NODE_FLAGS, shebang } from '../bin/launch-settings.js';

describe('launch settings', () => {
  it("are what bin/weft.js's #! line says", () => {
    const first = readFileSync(new URL('../bin/weft.js', import.meta.url), 'utf8').split('\n')[0];
    expect(first).toBe(shebang());
    expect(first).toContain(AGENT_NODE_FLAGS.join(' '));
    for (const [k, v] of Object.entries(AGENT_ENV)) expect(first).toContain(`${k}=${v}`);
  });
});

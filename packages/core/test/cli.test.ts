import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const WEFT = fileURLToPath(new URL('../bin/weft.js', import.meta.url));
const run = (...args: string[]) =>
  spawnSync(process.execPath, [WEFT, ...args], { encoding: 'utf8', timeout: 60_000 });

// Each case starts a Node process that loads the agent's modules: seconds on a busy machine.
describe('weft CLI', { timeout: 60_000 }, () => {
  it('refuses a malformed bandwidth limit with a clear message and exit 2', () => {
    const r = run('agent', '--folder', '/tmp/x', '--server', 'http://127.0.0.1:9', '--up-limit', 'fast');
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--up-limit takes a rate');
  });

  it('needs a folder and a server', () => {
    const r = run('agent');
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('usage: weft agent');
  });

  it('says when no agent is running', () => {
    const r = run('status', '--state', '/nonexistent/weft-state');
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('no agent is running');
  });
});

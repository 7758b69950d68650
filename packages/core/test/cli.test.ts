import { spawnSync } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { readSecretFile } from '../src/token-file.ts';

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

  it('refuses a token on the command line (every local user sees it in ps) and points to a file', () => {
    const device = run(
      'agent',
      '--folder',
      '/tmp/x',
      '--server',
      'http://127.0.0.1:9',
      '--token',
      'wfd_secret_device_token',
    );
    expect(device.status).toBe(2);
    expect(device.stderr).toContain('--token-file FILE');
    const admin = run(
      'agent',
      '--folder',
      '/tmp/x',
      '--server',
      'http://127.0.0.1:9',
      '--admin-token',
      'wfa_secret_admin_token',
    );
    expect(admin.status).toBe(2);
    expect(admin.stderr).toContain('--admin-token-file FILE');
  });

  it('reads the device token from a file only its owner can read', async () => {
    const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-token-file-'));
    try {
      const file = nodePath.join(dir, 'token');
      await fsp.writeFile(file, 'wfd_' + 'a'.repeat(40) + '\n', { mode: 0o644 });
      await fsp.chmod(file, 0o644);
      const open = run('agent', '--folder', dir, '--server', 'http://127.0.0.1:9', '--token-file', file);
      expect(open.status).toBe(2);
      expect(open.stderr).toContain(`chmod 600 ${file}`);
      await expect(readSecretFile(file + '.none', 'device token')).rejects.toThrow(
        /cannot read the device token file/,
      );
      await fsp.chmod(file, 0o600);
      expect(await readSecretFile(file, 'device token')).toBe('wfd_' + 'a'.repeat(40));
      await fsp.writeFile(file, 'two\nlines of text here');
      await expect(readSecretFile(file, 'device token')).rejects.toThrow(/alone, on one line/);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });

  it('says when no agent is running', () => {
    const r = run('status', '--state', '/nonexistent/weft-state');
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('no agent is running');
  });
});

/**
 * The agent's state folder under the common umask 022 (issue #14): the folder, the journal
 * database (-wal, -shm), device.json, the encrypted secrets, agent.json — owner-only, folders
 * 0700 and files 0600, also when an older version left the folder or the journal readable.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startAgent } from '../src/agent.ts';
import { keyFileSecretStore } from '../src/secret-store.ts';

/** Every path under `root` (root included) whose mode is not owner-only. */
async function notPrivate(root: string): Promise<string[]> {
  const bad: string[] = [];
  const check = async (p: string): Promise<void> => {
    const st = await fsp.lstat(p);
    const mode = st.mode & 0o777;
    if (mode !== (st.isDirectory() ? 0o700 : 0o600))
      bad.push(`${nodePath.relative(root, p) || '.'} ${mode.toString(8)}`);
    if (st.isDirectory()) for (const n of await fsp.readdir(p)) await check(nodePath.join(p, n));
  };
  await check(root);
  return bad;
}

let oldUmask: number;
let root: string;
beforeEach(async () => {
  oldUmask = process.umask(0o022);
  root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-state-modes-'));
});
afterEach(async () => {
  process.umask(oldUmask);
  await fsp.rm(root, { recursive: true, force: true });
});

describe('agent state folder', () => {
  it('isOwnerOnlyWhateverTheUmask', async () => {
    const stateDir = nodePath.join(root, 'state');
    // What an older version left: a world-readable folder and journal.
    await fsp.mkdir(stateDir, { mode: 0o755 });
    await fsp.writeFile(nodePath.join(stateDir, 'journal.db'), '', { mode: 0o644 });
    const agent = await startAgent({
      folder: nodePath.join(root, 'Weft'),
      stateDir,
      // Nothing listens there: the agent starts offline, which is enough to make its files.
      server: 'http://127.0.0.1:9',
      token: 'wfd_' + 'x'.repeat(40),
      secrets: keyFileSecretStore({
        dir: nodePath.join(stateDir, 'secrets'),
        keyFile: nodePath.join(root, 'key'),
      }),
      uiDir: '',
    });
    try {
      const names = await fsp.readdir(stateDir);
      expect(names).toEqual(
        expect.arrayContaining(['journal.db', 'journal.db-wal', 'device.json', 'agent.json', 'secrets']),
      );
      expect(await notPrivate(stateDir)).toEqual([]);
    } finally {
      await agent.stop();
    }
  });
});

/**
 * Settings apply at once (issue #19): bandwidth limits changed through the UI API reach the
 * running agent's transfer client without a restart; command-line limits still win.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startAgent } from '../src/agent.ts';
import { memorySecretStore } from '../src/secret-store.ts';

const roots: string[] = [];
afterEach(async () => {
  for (const r of roots.splice(0)) await fsp.rm(r, { recursive: true, force: true });
});

async function agentAt(extra: { uploadBytesPerSecond?: number } = {}) {
  const root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-settings-'));
  roots.push(root);
  return startAgent({
    folder: nodePath.join(root, 'Weft'),
    stateDir: nodePath.join(root, 'state'),
    // Nothing listens there: the agent starts offline, enough for its session and client.
    server: 'http://127.0.0.1:9',
    token: 'wfd_' + 'x'.repeat(40),
    secrets: memorySecretStore(),
    uiDir: '',
    watch: false,
    ...extra,
  });
}

describe('settings apply at once', () => {
  it('bandwidth limits set in Settings reach the running client, and can be lifted', async () => {
    const agent = await agentAt();
    try {
      expect(agent.client.limits()).toEqual({ uploadBytesPerSecond: 0, downloadBytesPerSecond: 0 });
      await agent.ui.handlers.setSettings({ uploadLimitKiBps: 64, downloadLimitKiBps: 128 });
      expect(agent.client.limits()).toEqual({
        uploadBytesPerSecond: 65_536,
        downloadBytesPerSecond: 131_072,
      });
      await agent.ui.handlers.setSettings({ uploadLimitKiBps: 0 });
      expect(agent.client.limits()).toEqual({ uploadBytesPerSecond: 0, downloadBytesPerSecond: 131_072 });
      await agent.ui.handlers.setSettings({ ignorePatterns: ['*.log'] });
      expect(agent.engine.ignorePatterns()).toEqual(['*.log']);
    } finally {
      await agent.stop();
    }
  });

  it('a limit given on the command line wins over Settings', async () => {
    const agent = await agentAt({ uploadBytesPerSecond: 1000 });
    try {
      await agent.ui.handlers.setSettings({ uploadLimitKiBps: 64 });
      expect(agent.client.limits().uploadBytesPerSecond).toBe(1000);
    } finally {
      await agent.stop();
    }
  });
});

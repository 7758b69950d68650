/**
 * Settings apply at once (issue #19), in Chromium: the bandwidth limits and ignore patterns
 * typed into the Settings screen reach the running agent when saved — no restart. The
 * transfer client takes the new limits; a file matching a new pattern is not uploaded while
 * a file beside it is; a file synced before and now ignored stays where it is, here and in
 * Weft storage; removing the pattern uploads what was held back. The screen says so, and is
 * axe-clean in light and dark at 100 % and 200 % (screenshots settings-applied-*).
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { ProxyClient, type RunningAgent } from '@weft/core';
import type { RunningProxyServer } from '@weft/proxy-server';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DesktopWorld, startDesktopWorld } from '../src/desktop-world.ts';
import { checkVariants } from '../src/ui-browser.ts';

const POLL = { timeout: 60_000 };

describe('Settings screen: limits and ignore patterns apply without a restart', () => {
  let folder: string;
  let server: RunningProxyServer;
  let agent: RunningAgent;
  let probe: ProxyClient;
  let page: Page;

  let world: DesktopWorld;

  beforeAll(async () => {
    world = await startDesktopWorld('settings-live');
    ({ folder, server, agent, page } = world);
    // Another device of Alice's: sees what reached Weft storage.
    probe = new ProxyClient({ baseUrl: server.url, token: (await server.enrol('alice', 'probe')).token });
  });

  afterAll(async () => {
    await world?.stop();
  });

  const onServer = async (path: string): Promise<boolean> => (await probe.stat(path)) !== undefined;
  const idle = async (): Promise<void> => {
    await expect.poll(() => agent.engine.getStatus().state, POLL).toBe('idle');
  };
  const openSettings = async (): Promise<void> => {
    await page.goto(`${new URL(page.url()).origin}/#settings`);
    await page.locator('#settings-save').waitFor();
  };
  const save = async (): Promise<void> => {
    await page.locator('#settings-saved').evaluate((el) => (el.textContent = ''));
    await page.getByRole('button', { name: 'Save settings' }).click();
    await expect.poll(() => page.locator('#settings-saved').textContent(), POLL).toContain('apply now');
  };

  it('saves limits and patterns in the UI, and the running agent follows at once', async () => {
    await fsp.writeFile(nodePath.join(folder, 'old.log'), 'synced before it was ignored\n');
    await fsp.writeFile(nodePath.join(folder, 'notes.txt'), 'notes\n');
    await idle();
    await expect.poll(() => onServer('old.log'), POLL).toBe(true);
    expect(agent.client.limits()).toEqual({ uploadBytesPerSecond: 0, downloadBytesPerSecond: 0 });

    await openSettings();
    await page.fill('#upload-limit', '64');
    await page.fill('#download-limit', '128');
    await page.fill('#ignore-patterns', '*.log\nbuild/\n');
    await save();
    // The transfer client of this very agent (no restart: the same object) has the limits.
    expect(agent.client.limits()).toEqual({ uploadBytesPerSecond: 65_536, downloadBytesPerSecond: 131_072 });
    expect((await agent.ui.handlers.getSettings({})).ignorePatterns).toEqual(['*.log', 'build/']);

    // New files: the ignored ones stay here only, the others sync.
    await fsp.writeFile(nodePath.join(folder, 'debug.log'), 'noise\n');
    await fsp.mkdir(nodePath.join(folder, 'build'));
    await fsp.writeFile(nodePath.join(folder, 'build', 'out.bin'), randomBytes(1000));
    await fsp.writeFile(nodePath.join(folder, 'after.txt'), 'synced\n');
    await expect.poll(() => onServer('after.txt'), POLL).toBe(true);
    await idle();
    expect(await onServer('debug.log')).toBe(false);
    expect(await onServer('build/out.bin')).toBe(false);
    // Synced before, ignored now: kept on both sides, nothing deleted.
    expect(await onServer('old.log')).toBe(true);
    expect(await fsp.readFile(nodePath.join(folder, 'old.log'), 'utf8')).toBe(
      'synced before it was ignored\n',
    );

    // What was saved is what the screen shows after a reload.
    await page.reload();
    await page.locator('#settings-save').waitFor();
    expect(await page.inputValue('#upload-limit')).toBe('64');
    expect(await page.inputValue('#download-limit')).toBe('128');
    expect(await page.inputValue('#ignore-patterns')).toBe('*.log\nbuild/');
    await page.fill('#upload-limit', '0');
    await page.fill('#download-limit', '0');
    await page.fill('#ignore-patterns', 'build/');
    await save();
    expect(agent.client.limits()).toEqual({ uploadBytesPerSecond: 0, downloadBytesPerSecond: 0 });
    // The pattern gone, what it held back syncs — without touching the file again.
    await expect.poll(() => onServer('debug.log'), POLL).toBe(true);
    await idle();
    expect(await onServer('build/out.bin')).toBe(false);

    await checkVariants(page, 'settings-applied', (what, violations, overflows) => {
      expect(violations, what).toEqual([]);
      expect(overflows, `${what} reflows`).toBe(false);
    });
  });

  it('a limit the form cannot take is refused and changes nothing', async () => {
    await openSettings();
    const before = agent.client.limits();
    const saved = await agent.ui.handlers.getSettings({});
    await page.fill('#upload-limit', '-5');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await expect.poll(() => page.locator('#errors').textContent(), POLL).toContain('uploadLimitKiBps');
    expect(agent.client.limits()).toEqual(before);
    expect(await agent.ui.handlers.getSettings({})).toEqual(saved);
  });
});

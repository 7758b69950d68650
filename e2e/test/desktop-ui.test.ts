/**
 * The desktop renderer, for real, in Debian's Chromium: served by an agent (engine + UI
 * server) against a real proxy, with a second device of the same person and the Dropbox
 * emulator for the OAuth sign-in. Screenshots of every screen go to
 * test-artifacts/screenshots/, and axe-core checks every screen.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { RunningAgent } from '@weft/core';
import { openDesktopUi } from '@weft/desktop';
import { DropboxEmulator } from '@weft/cloud-emulators';
import { buildRenderer } from '@weft/desktop/build';
import { dropboxOAuth } from '@weft/providers';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Device, type TestProxy, startDevice, startTestProxy, tempDir } from '../src/harness.ts';
import {
  ensureChromium,
  launchChromium,
  overflowsHorizontally,
  runAxe,
  screenshot,
} from '../src/ui-browser.ts';

const SCREENS = ['status', 'accounts', 'sharing', 'settings'] as const;
/** Waits are about correctness, not speed: generous on a shared machine. */
const POLL = { timeout: 30_000 };

describe('desktop UI in Chromium', () => {
  let proxy: TestProxy;
  let dropbox: DropboxEmulator;
  let agent: RunningAgent;
  let other: Device;
  let folder: string;
  let context: BrowserContext;
  let page: Page;

  beforeAll(async () => {
    ensureChromium();
    const root = await tempDir('desktop-ui');
    const uiDir = await buildRenderer(nodePath.join(root, 'renderer'));
    proxy = await startTestProxy('fs');
    dropbox = await new DropboxEmulator().start();
    folder = nodePath.join(root, 'Weft');
    // What `npm start` calls, without opening a window (the test drives its own Chromium).
    const ui = await openDesktopUi({
      open: 'none',
      folder,
      server: proxy.url,
      stateDir: nodePath.join(root, 'state'),
      deviceName: 'laptop',
      user: 'alice',
      adminToken: proxy.adminToken,
      settleMs: 50,
      uiDir,
      oauth: { dropbox: dropboxOAuth('weft-desktop-test', { www: dropbox.url, api: dropbox.url }) },
    });
    expect(ui.openedWith).toBe('none');
    if (!ui.agent) throw new Error('openDesktopUi with open: none serves the UI from this process');
    agent = ui.agent;
    other = await startDevice(proxy, 'phone', { user: 'alice' });
    context = await launchChromium(nodePath.join(root, 'chromium-profile'));
    page = await context.newPage();
    await page.goto(agent.statusUrl);
  });

  afterAll(async () => {
    await context?.close();
    await agent?.stop();
    await other?.stop();
    await dropbox?.close();
    await proxy?.close();
  });

  const state = (): Promise<string | null> => page.locator('#folder-state').textContent();

  it('shows files written into the folder syncing, with progress, then up to date', async () => {
    await expect.poll(state, POLL).toBe('Up to date');
    // Record every headline and whether a progress bar was ever drawn.
    await page.evaluate(`(() => {
      window.__seen = { states: [], progress: false };
      const note = () => {
        const s = document.getElementById('folder-state');
        if (s && window.__seen.states.at(-1) !== s.textContent) window.__seen.states.push(s.textContent);
        if (document.querySelector('#transfers-list progress')) window.__seen.progress = true;
      };
      new MutationObserver(note).observe(document.getElementById('main'), { subtree: true, childList: true, characterData: true });
    })()`);
    await fsp.writeFile(nodePath.join(folder, 'hello.txt'), 'hello from the laptop\n');
    await fsp.mkdir(nodePath.join(folder, 'docs'));
    await fsp.writeFile(nodePath.join(folder, 'docs', 'plan.md'), '# plan\n');
    await fsp.writeFile(nodePath.join(folder, 'big.bin'), randomBytes(48 * 1024 * 1024));
    await expect
      .poll(() => page.locator('#activity-list').textContent(), { timeout: 120_000 })
      .toContain('big.bin');
    await expect.poll(state, { timeout: 120_000 }).toBe('Up to date');
    const seen = (await page.evaluate('window.__seen')) as { states: string[]; progress: boolean };
    expect(seen.states).toContain('Syncing');
    expect(seen.progress).toBe(true);
    expect(seen.states.at(-1)).toBe('Up to date');
    // Search narrows the activity list.
    await page.getByLabel('Search recent activity').fill('plan');
    await expect.poll(() => page.locator('#activity-list tbody tr').count(), POLL).toBe(1);
    await expect(page.locator('#activity-list').textContent()).resolves.toContain('docs/plan.md');
    await page.getByLabel('Search recent activity').fill('');
    await expect.poll(() => page.locator('#storage').textContent(), POLL).toMatch(/Object tier/);
    await page.getByRole('button', { name: 'Refresh storage' }).click();
    await expect
      .poll(() => page.locator('#storage').textContent(), POLL)
      .toMatch(/Object tier \(large files\)[\d.]+ MB in 1 file$/);
  });

  it('pauses and resumes from the UI; a conflict appears and is resolved with "keep mine"', async () => {
    await other.engine.syncNow();
    expect(await fsp.readFile(nodePath.join(other.folder, 'hello.txt'), 'utf8')).toBe(
      'hello from the laptop\n',
    );

    await page.getByRole('button', { name: 'Pause for 1 hour' }).click();
    await expect.poll(state, POLL).toMatch(/^Paused for \d+ more min$/);
    await expect.poll(() => page.locator('#headline').textContent(), POLL).toBe('Paused');
    // While paused, a local edit stays local.
    await fsp.writeFile(nodePath.join(folder, 'hello.txt'), 'laptop version\n');
    await fsp.writeFile(nodePath.join(other.folder, 'hello.txt'), 'phone version\n');
    await other.engine.syncNow();
    expect(agent.engine.getStatus().state).toBe('paused');

    await page.getByRole('button', { name: 'Resume syncing' }).click();
    const keepMine = page.getByRole('button', { name: 'Keep mine: hello.txt' });
    await keepMine.waitFor({ timeout: 60_000 });
    await screenshot(page, 'status-conflict');
    // Record which file holds which version, so "keep mine" is checked whichever way round.
    const copy = (await fsp.readdir(folder)).find((n) => n.includes('conflicted copy'));
    expect(copy).toBeDefined();
    const versions = [
      await fsp.readFile(nodePath.join(folder, 'hello.txt'), 'utf8'),
      await fsp.readFile(nodePath.join(folder, copy ?? ''), 'utf8'),
    ];
    expect(versions.sort()).toEqual(['laptop version\n', 'phone version\n']);
    expect(await runAxe(page)).toEqual([]);
    await keepMine.click();
    await expect.poll(() => page.locator('#conflicts-list').textContent(), POLL).toBe('No conflicts.');
    await expect.poll(state, { timeout: 60_000 }).toBe('Up to date');
    expect(await fsp.readFile(nodePath.join(folder, 'hello.txt'), 'utf8')).toBe('laptop version\n');
    const names = await fsp.readdir(folder);
    expect(names.filter((n) => n.includes('conflicted copy'))).toEqual([]);
    // The other device converges on the kept version.
    await expect
      .poll(
        async () => {
          await other.engine.syncNow();
          return fsp.readFile(nodePath.join(other.folder, 'hello.txt'), 'utf8');
        },
        { timeout: 60_000 },
      )
      .toBe('laptop version\n');
  });

  it('explains a lost server in plain language and retries from the UI', async () => {
    const port = Number(new URL(proxy.url).port);
    await proxy.close();
    await fsp.writeFile(nodePath.join(folder, 'while-offline.txt'), 'written while the server was away\n');
    await expect.poll(state, { timeout: 60_000 }).toBe('Offline');
    const problem = page.getByRole('alert').filter({ hasText: 'Syncing stopped' });
    await expect.poll(() => problem.textContent(), POLL).toContain('Weft cannot reach the storage server.');
    await screenshot(page, 'status-offline');
    expect(await runAxe(page)).toEqual([]);
    proxy = await startTestProxy('fs', proxy.dataDir, port);
    await page.getByRole('button', { name: 'Retry now' }).click();
    await expect.poll(state, { timeout: 60_000 }).toBe('Up to date');
    await expect
      .poll(() => page.locator('#activity-list').textContent(), POLL)
      .toContain('while-offline.txt');
  });

  it('asks before a mass delete, and "restore" brings the files back', async () => {
    const names = Array.from({ length: 12 }, (_, i) => `batch/f${i}.txt`);
    await fsp.mkdir(nodePath.join(folder, 'batch'));
    for (const n of names) await fsp.writeFile(nodePath.join(folder, n), `${n}\n`);
    await expect
      .poll(() => page.locator('#activity-list').textContent(), { timeout: 60_000 })
      .toContain('batch/f11.txt');
    await expect.poll(state, { timeout: 60_000 }).toBe('Up to date');
    for (const n of names) await fsp.rm(nodePath.join(folder, n));
    const alert = page.getByRole('alert').filter({ hasText: 'Many files were deleted' });
    await alert.waitFor({ timeout: 60_000 });
    await screenshot(page, 'status-mass-delete');
    expect(await runAxe(page)).toEqual([]);
    await page.getByRole('button', { name: 'Restore the files' }).click();
    await expect
      .poll(async () => (await fsp.readdir(nodePath.join(folder, 'batch')).catch(() => [])).length, {
        timeout: 60_000,
      })
      .toBe(12);
    await expect.poll(state, { timeout: 60_000 }).toBe('Up to date');
  });

  it('connects a Dropbox account through the emulator’s OAuth page', async () => {
    await page.getByRole('link', { name: 'Accounts' }).click();
    await expect.poll(() => page.locator('#state-dropbox').textContent(), POLL).toBe('Not connected');
    const popup = context.waitForEvent('page');
    await page.getByRole('button', { name: 'Connect Dropbox' }).click();
    const signin = await popup;
    await signin.waitForLoadState();
    await expect.poll(() => signin.locator('body').textContent(), POLL).toContain('Signed in');
    expect(new URL(signin.url()).hostname).toBe('127.0.0.1');
    await signin.close();
    await expect.poll(() => page.locator('#state-dropbox').textContent(), POLL).toMatch(/^Connected since /);
    await expect(page.locator('#weft-account').textContent()).resolves.toContain(proxy.url);
  });

  it('shows sharing as not available yet and saves settings', async () => {
    await page.getByRole('link', { name: 'Sharing' }).click();
    await expect
      .poll(() => page.locator('#sharing-unavailable').textContent(), POLL)
      .toMatch(/^Not available yet/);
    expect(await page.getByRole('button', { name: 'Share and copy invite' }).isDisabled()).toBe(true);

    await page.getByRole('link', { name: 'Settings' }).click();
    await page.getByLabel('Upload limit (KiB/s)').fill('512');
    await page.getByLabel('Ignore patterns, one per line (gitignore style)').fill('*.tmp\nbuild/');
    await page.getByLabel('Ask before deleting more than this share of files (%)').fill('30');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await expect.poll(() => page.locator('#settings-saved').textContent(), POLL).toMatch(/^Saved/);
    const saved = JSON.parse(
      await fsp.readFile(nodePath.join(nodePath.dirname(folder), 'state', 'settings.json'), 'utf8'),
    );
    expect(saved).toMatchObject({
      uploadLimitKiBps: 512,
      ignorePatterns: ['*.tmp', 'build/'],
      massDeletePercent: 30,
    });
  });

  it('every screen passes axe, in light and dark, at 100 % and 200 % zoom (screenshots saved)', async () => {
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      for (const zoom of [1, 2]) {
        await page.setViewportSize({ width: zoom === 1 ? 1100 : 1280, height: 900 });
        for (const screen of SCREENS) {
          await page.goto(`${agent.statusUrl}#${screen}`);
          await page.evaluate(`document.documentElement.style.zoom = '${zoom}'`);
          await page.locator(`main[data-screen="${screen}"] h2`).waitFor();
          if (screen === 'status') await expect.poll(state, POLL).toBe('Up to date');
          if (screen === 'accounts')
            await expect.poll(() => page.locator('#state-dropbox').textContent(), POLL).toMatch(/^Connected/);
          await screenshot(page, `${screen}-${scheme}-${zoom * 100}`);
          expect(await runAxe(page), `${screen} ${scheme} ${zoom * 100}%`).toEqual([]);
          if (zoom === 2) expect(await overflowsHorizontally(page), `${screen} reflows at 200 %`).toBe(false);
        }
      }
    }
    // Keyboard: the skip link is the first stop, and the screens are reachable by Tab.
    await page.emulateMedia({ colorScheme: 'light' });
    await page.goto('about:blank');
    await page.goto(`${agent.statusUrl}#status`);
    await page.locator('main[data-screen="status"] h2').waitFor();
    await page.keyboard.press('Tab');
    await expect(page.evaluate('document.activeElement.textContent')).resolves.toBe('Skip to content');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('main').getAttribute('data-screen'), POLL).toBe('accounts');
  });
});

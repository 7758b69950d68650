/**
 * The compact tray popover (issue #19) in Chromium, as the browser fallback serves it
 * (`/tray.html`, opened from the full window's "Compact view" link): the state line with
 * files and storage, the transfers under way with progress bars, the last changes, pause and
 * resume, "Open Weft window" and "Open folder" (the agent's openFolder). What it shows is
 * the model the Electron tray menu is built from (trayMenu over the same status).
 * Axe-clean in light and dark at 100 % and 200 %, during a transfer; screenshots
 * test-artifacts/screenshots/tray-popover-*.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { RunningAgent } from '@weft/core';
import { type TrayMenuItem, trayMenu } from '@weft/desktop/common';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DesktopWorld, startDesktopWorld } from '../src/desktop-world.ts';
import { checkVariants, screenshot } from '../src/ui-browser.ts';

const POLL = { timeout: 60_000 };
/**
 * A large upload is listed from its start and reports its progress as its 4 MiB blocks
 * complete: slowed down, it is still under way while the popover is checked.
 */
const BIG = 16 * 1024 * 1024;

/** The menu's labels for one submenu, or the top level's plain labels. */
function submenu(items: readonly TrayMenuItem[], label: string): string[] {
  const sub = items.find((i) => i.kind === 'submenu' && i.label === label);
  return sub?.kind === 'submenu' ? sub.items.map((i) => (i.kind === 'separator' ? '—' : i.label)) : [];
}

describe('tray popover in Chromium (the browser fallback)', () => {
  let folder: string;
  let agent: RunningAgent;
  let context: BrowserContext;
  let window: Page;
  let popover: Page;
  /** Folders the agent was asked to show in the file manager, and whether that works here. */
  const shown: string[] = [];
  let canOpen = true;

  let world: DesktopWorld;

  beforeAll(async () => {
    world = await startDesktopWorld('tray-popover', {
      ui: {
        openPath: async (path) => {
          shown.push(path);
          return canOpen;
        },
      },
    });
    ({ folder, agent, context, page: window } = world);
  });

  afterAll(async () => {
    await world?.stop();
  });

  const stateText = (): Promise<string | null> => popover.locator('#tray-state').textContent();
  const changeTexts = async (): Promise<string[]> =>
    popover
      .locator('#tray-change-list li')
      .evaluateAll((lis) =>
        lis.map((li) => (li.firstChild?.textContent ?? '') + (li.children[0]?.textContent ?? '')),
      );

  it('opens from the full window and shows the state, the files and the last changes', async () => {
    await fsp.mkdir(nodePath.join(folder, 'notes'), { recursive: true });
    await fsp.writeFile(nodePath.join(folder, 'a.txt'), 'first\n');
    await fsp.writeFile(nodePath.join(folder, 'notes', 'b.txt'), 'second\n');
    await expect.poll(() => agent.engine.getStatus().files, POLL).toBe(2);
    await expect.poll(() => agent.engine.getStatus().state, POLL).toBe('idle');

    const opened = context.waitForEvent('page');
    await window.getByRole('link', { name: 'Compact view' }).click();
    popover = await opened;
    expect(new URL(popover.url()).pathname).toBe('/tray.html');
    await expect.poll(stateText, POLL).toBe('Up to date');
    expect(await popover.locator('#tray-detail').textContent()).toMatch(/^2 files/);
    expect(await popover.locator('#tray-transfers').textContent()).toContain('Nothing being transferred.');
    // The last changes are the tray menu's "Recent changes", in the same order.
    await expect.poll(changeTexts, POLL).toContain('Uploaded notes/b.txt');
    const menu = trayMenu(agent.ui.status(), Date.now());
    expect(await changeTexts()).toEqual(submenu(menu, 'Recent changes'));
    expect(menu[0]).toEqual({ kind: 'label', label: 'Weft — Up to date' });
    await screenshot(popover, 'tray-popover-idle');
  });

  it('shows a transfer under way with its progress bar, axe clean in every variant', async () => {
    // Slow uploads down (Settings apply at once) so the transfer is there to be seen.
    await agent.ui.handlers.setSettings({ uploadLimitKiBps: 512 });
    await fsp.writeFile(nodePath.join(folder, 'big.bin'), randomBytes(BIG));
    const bar = popover.locator('#tray-transfer-list progress').first();
    await bar.waitFor({ timeout: 180_000 });
    expect(await bar.getAttribute('aria-label')).toMatch(/^Uploading big\.bin, \d{1,3} %$/);
    const value = Number(await bar.getAttribute('value'));
    expect(value).toBeGreaterThanOrEqual(0);
    expect(value).toBeLessThanOrEqual(1);
    expect(await popover.locator('#tray-transfer-list').textContent()).toMatch(/of 16\.8 MB/);
    expect(await stateText()).toMatch(/^Syncing/);
    await checkVariants(popover, 'tray-popover', (what, violations, overflows) => {
      expect(violations, what).toEqual([]);
      expect(overflows, `${what} reflows`).toBe(false);
    });
    await agent.ui.handlers.setSettings({ uploadLimitKiBps: 0 });
    await expect
      .poll(() => popover.locator('#tray-transfers').textContent(), POLL)
      .toContain('Nothing being');
    await expect.poll(stateText, POLL).toBe('Up to date');
    await expect.poll(changeTexts, POLL).toContain('Uploaded big.bin');
  });

  it('pauses and resumes; the menu says the same', async () => {
    await popover.getByRole('button', { name: 'Pause for 1 hour' }).click();
    await expect.poll(stateText, POLL).toBe('Paused for 60 more min');
    expect(agent.engine.getStatus().state).toBe('paused');
    const menu = trayMenu(agent.ui.status(), Date.now());
    expect(menu[0]).toEqual({ kind: 'label', label: 'Weft — Paused for 60 more min' });
    expect(menu).toContainEqual({
      kind: 'item',
      label: 'Resume syncing',
      action: { type: 'resume' },
      enabled: true,
    });
    await screenshot(popover, 'tray-popover-paused');
    await popover.getByRole('button', { name: 'Resume syncing' }).click();
    await expect.poll(stateText, POLL).toBe('Up to date');
    expect(agent.engine.getStatus().state).not.toBe('paused');
    await popover.getByRole('button', { name: 'Pause for 1 hour' }).waitFor();
  });

  it('opens the full window and the folder (or, where it cannot, gives its path)', async () => {
    const opened = context.waitForEvent('page');
    await popover.getByRole('button', { name: 'Open Weft window' }).click();
    const full = await opened;
    await full.waitForLoadState();
    expect(new URL(full.url()).hash).toBe('#status');
    await full.locator('#nav').waitFor(POLL);
    await popover.getByRole('button', { name: 'Open folder' }).click();
    await expect.poll(() => shown, POLL).toEqual([folder]);
    expect(await popover.locator('#tray-said').textContent()).toBe('');
    // A machine without a desktop to open it on: the path instead.
    canOpen = false;
    await popover.getByRole('button', { name: 'Open folder' }).click();
    await expect.poll(() => popover.locator('#tray-said').textContent(), POLL).toContain(folder);
    expect(shown).toEqual([folder, folder]);
  });
});

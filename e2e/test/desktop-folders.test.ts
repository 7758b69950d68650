/**
 * Settings → Synced folders in Chromium (issue #19; docs/desktop.md "Several synced
 * folders"): the main folder is listed; a file's path is refused in words beside the field,
 * nothing added; a folder's path adds it, and its files reach Weft storage under its own
 * root; the status screen lists both folders and links the folder's activity to its History;
 * "Stop syncing" asks first (Cancel keeps it), then stops it and deletes nothing, here or in
 * Weft storage. Axe-clean in light and dark at 100 % and 200 % (screenshots
 * settings-folders-*, settings-folders-confirm-*, status-folders-*).
 */
import { createHash } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { ProxyClient, type RunningAgent } from '@weft/core';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DesktopWorld, startDesktopWorld } from '../src/desktop-world.ts';
import { checkVariants } from '../src/ui-browser.ts';

const POLL = { timeout: 60_000 };
const sha = (s: string): string => createHash('sha256').update(s).digest('hex');

describe('Settings → Synced folders in Chromium', () => {
  let world: DesktopWorld;
  let agent: RunningAgent;
  let page: Page;
  let probe: ProxyClient;

  beforeAll(async () => {
    world = await startDesktopWorld('desktop-folders');
    ({ agent, page } = world);
    probe = new ProxyClient({
      baseUrl: world.server.url,
      token: (await world.server.enrol('alice', 'probe')).token,
    });
  });

  afterAll(async () => {
    await world?.stop();
  });

  const clean = (what: string, violations: unknown[], overflows: boolean): void => {
    expect(violations, what).toEqual([]);
    expect(overflows, `${what} reflows`).toBe(false);
  };
  const listed = (): Promise<string[]> =>
    page.locator('#folder-list > li .name').evaluateAll((els) => els.map((e) => e.textContent ?? ''));

  it('adds a folder by its path, refuses a file, and stops syncing one after asking', async () => {
    const photos = nodePath.join(world.root, 'Photos');
    await fsp.mkdir(photos);
    await fsp.writeFile(nodePath.join(photos, 'beach.jpg'), 'sand');
    await fsp.writeFile(nodePath.join(world.root, 'list.txt'), 'a file');

    await page.goto(`${new URL(page.url()).origin}/#settings`);
    await page.locator('#folder-list').waitFor();
    expect(await listed()).toEqual(['Main Weft folder']);
    // The browser UI has no folder dialog: the path is typed.
    expect(await page.locator('#add-folder-choose').count()).toBe(0);

    // A file is refused beside the field; nothing is added.
    await page.getByLabel('Folder on this computer').fill(nodePath.join(world.root, 'list.txt'));
    await page.getByRole('button', { name: 'Add folder' }).click();
    await expect
      .poll(() => page.locator('#add-folder-error').textContent(), POLL)
      .toContain('is a file, not a folder');
    expect(await page.locator('#add-folder-path').getAttribute('aria-invalid')).toBe('true');
    expect(await listed()).toEqual(['Main Weft folder']);

    await page.getByLabel('Folder on this computer').fill(photos);
    await page.getByRole('button', { name: 'Add folder' }).click();
    await expect.poll(listed, POLL).toEqual(['Main Weft folder', 'Photos']);
    expect(await page.locator('#folders-note').textContent()).toContain('“Photos” is synced now');
    expect(await page.locator('#add-folder-error').textContent()).toBe('');
    await expect
      .poll(async () => (await probe.stat('.weft/folders/Photos/beach.jpg'))?.sha256, POLL)
      .toBe(sha('sand'));
    await expect
      .poll(
        () => page.locator('li[data-folder]:not([data-folder="main"]) .account-state').textContent(),
        POLL,
      )
      .toContain('Up to date · 1 file');
    await checkVariants(page, 'settings-folders', clean);

    // The status screen: one line per folder.
    await page.goto(`${new URL(page.url()).origin}/#status`);
    await expect.poll(() => page.locator('#folder-states li').count(), POLL).toBe(2);
    expect(await page.locator('#folder-states').textContent()).toContain('Photos: up to date, 1 file');
    await checkVariants(page, 'status-folders', clean);

    // The folder's activity links to a file's history in that folder (paths as in the folder).
    await page.getByRole('link', { name: 'Versions of Photos: beach.jpg' }).first().click();
    await expect.poll(() => page.locator('#version-list li').count(), POLL).toBe(1);
    expect(await page.locator('#h-versions').textContent()).toBe('Versions of beach.jpg');
    expect(new URL(page.url()).hash).toBe('#history?path=beach.jpg&in=Photos');

    // Stop syncing asks first; Cancel keeps the folder.
    await page.goto(`${new URL(page.url()).origin}/#settings`);
    await page.getByRole('button', { name: 'Stop syncing Photos' }).click();
    const confirm = page.getByRole('group', { name: /Stop syncing “Photos”\?/ });
    await confirm.waitFor();
    expect(await confirm.textContent()).toContain('Nothing is deleted');
    expect(await page.evaluate('document.activeElement?.id')).toBe('confirm-remove-folder');
    await checkVariants(page, 'settings-folders-confirm', clean);
    await page.getByRole('button', { name: 'Cancel' }).click();
    expect(await listed()).toEqual(['Main Weft folder', 'Photos']);
    expect(agent.folders.running().map((r) => r.folder.name)).toEqual(['Photos']);

    await page.getByRole('button', { name: 'Stop syncing Photos' }).click();
    await page.getByRole('button', { name: 'Stop syncing', exact: true }).click();
    await expect.poll(listed, POLL).toEqual(['Main Weft folder']);
    expect(await page.locator('#folders-note').textContent()).toContain('Its files are still in');
    expect(agent.folders.running()).toEqual([]);
    // Nothing deleted, here or in Weft storage.
    expect(await fsp.readFile(nodePath.join(photos, 'beach.jpg'), 'utf8')).toBe('sand');
    expect((await probe.stat('.weft/folders/Photos/beach.jpg'))?.sha256).toBe(sha('sand'));
  });
});

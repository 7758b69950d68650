/**
 * Version history and deleted files in Debian's Chromium (docs/desktop.md "Version history
 * and deleted files"): a laptop runs the agent and its UI, a second device ("desktop")
 * syncs the same account. A file deleted on the laptop is restored from the "Deleted files"
 * view and reappears on the desktop's disk; a file's versions (time, device, size) are
 * listed from its activity row, one is downloaded into the Downloads folder and restored,
 * and the desktop gets it. Axe-clean in light and dark at 100 % and 200 % (screenshots under
 * test-artifacts/screenshots/history-*).
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { RunningProxyServer } from '@weft/proxy-server';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DesktopWorld, startDesktopWorld } from '../src/desktop-world.ts';
import { type Device, startDevice } from '../src/harness.ts';
import { checkVariants } from '../src/ui-browser.ts';

const POLL = { timeout: 60_000, interval: 200 };

async function readOr(file: string): Promise<string | undefined> {
  return fsp.readFile(file, 'utf8').catch(() => undefined);
}

describe('desktop History screen in Chromium', () => {
  let root: string;
  let downloads: string;
  let server: RunningProxyServer;
  let desktop: Device;
  let page: Page;

  let world: DesktopWorld;

  beforeAll(async () => {
    world = await startDesktopWorld('desktop-history', {
      proxy: { versions: { retentionDays: 30 } },
      env: (dir) => ({ WEFT_DOWNLOADS_DIR: nodePath.join(dir, 'Downloads') }),
    });
    ({ root, server, page } = world);
    downloads = nodePath.join(root, 'Downloads');
    const proxy = {
      url: server.url,
      adminToken: server.adminToken,
      dataDir: '',
      s3Prefix: '',
      close: async () => {},
    };
    desktop = await startDevice(proxy, 'desktop', {
      user: 'alice',
      folder: nodePath.join(root, 'desktop', 'Weft'),
    });
  });

  afterAll(async () => {
    await desktop?.stop();
    await world?.stop();
  });

  const onDesktop = async (rel: string): Promise<string | undefined> => {
    await desktop.engine.syncNow();
    return readOr(nodePath.join(desktop.folder, rel));
  };

  it('restores a deleted file from the Deleted files view and it reappears on the other device', async () => {
    const folder = nodePath.join(root, 'Weft');
    await fsp.mkdir(nodePath.join(folder, 'plans'), { recursive: true });
    await fsp.writeFile(nodePath.join(folder, 'plans', 'trip.txt'), 'Lisbon in May\n');
    await expect.poll(() => onDesktop('plans/trip.txt'), POLL).toBe('Lisbon in May\n');
    await fsp.rm(nodePath.join(folder, 'plans', 'trip.txt'));
    await expect.poll(() => onDesktop('plans/trip.txt'), POLL).toBeUndefined();

    const origin = new URL(page.url()).origin;
    await page.goto(`${origin}/#status`);
    // From the activity list: its "Deleted files" link.
    await page.locator('#deleted-files-link').click();
    await expect.poll(() => page.locator('#h-deleted').textContent(), POLL).toBe('Deleted files');
    const row = page.locator('#deleted-list li[data-path="plans/trip.txt"]');
    await expect.poll(() => row.count(), POLL).toBe(1);
    expect(await row.textContent()).toContain('on laptop');
    await checkVariants(page, 'history-deleted', (what, violations, overflows) => {
      expect(violations, what).toEqual([]);
      expect(overflows, `${what} reflows`).toBe(false);
    });
    await page.getByRole('button', { name: 'Restore plans/trip.txt' }).click();
    await expect.poll(() => page.locator('#history-result').textContent(), POLL).toContain('Restored');
    await expect.poll(() => onDesktop('plans/trip.txt'), POLL).toBe('Lisbon in May\n');
    await expect.poll(() => readOr(nodePath.join(folder, 'plans', 'trip.txt')), POLL).toBe('Lisbon in May\n');
    await expect.poll(() => page.locator('#deleted-empty').count(), POLL).toBe(1);
  });

  it('lists a file’s versions from its activity row, downloads one and restores it everywhere', async () => {
    const folder = nodePath.join(root, 'Weft');
    const note = nodePath.join(folder, 'note.txt');
    await fsp.writeFile(note, 'first words\n');
    await expect.poll(() => onDesktop('note.txt'), POLL).toBe('first words\n');
    await fsp.writeFile(note, 'second, longer words\n');
    await expect.poll(() => onDesktop('note.txt'), POLL).toBe('second, longer words\n');

    const origin = new URL(page.url()).origin;
    await page.goto(`${origin}/#status`);
    const link = page.getByRole('link', { name: 'Versions of note.txt' }).first();
    await expect.poll(() => link.count(), POLL).toBeGreaterThan(0);
    await link.click();
    await expect.poll(() => page.locator('#version-list li').count(), POLL).toBe(2);
    const [current, old] = [page.locator('#version-list li').nth(0), page.locator('#version-list li').nth(1)];
    expect(await current.textContent()).toContain('Current version');
    expect(await current.textContent()).toContain('from laptop');
    expect(await current.textContent()).toContain('21 B');
    expect(await old.textContent()).toContain('Replaced');
    expect(await old.textContent()).toContain('12 B');
    await checkVariants(page, 'history-versions', (what, violations, overflows) => {
      expect(violations, what).toEqual([]);
      expect(overflows, `${what} reflows`).toBe(false);
    });

    await old.getByRole('button', { name: /^Download this version, saved/ }).click();
    await expect.poll(() => page.locator('#history-result').textContent(), POLL).toContain('Saved as');
    const saved = await fsp.readdir(downloads);
    expect(saved).toHaveLength(1);
    expect(saved[0]).toMatch(/^note \(version of \d{4}-\d{2}-\d{2} \d{6}\)\.txt$/);
    expect(await fsp.readFile(nodePath.join(downloads, saved[0]!), 'utf8')).toBe('first words\n');

    await old.getByRole('button', { name: /^Restore the version saved/ }).click();
    await expect.poll(() => page.locator('#history-result').textContent(), POLL).toContain('Restored');
    await expect.poll(() => onDesktop('note.txt'), POLL).toBe('first words\n');
    await expect.poll(() => readOr(note), POLL).toBe('first words\n');
    // The version restored over is kept in turn.
    await expect.poll(() => page.locator('#version-list li').count(), POLL).toBe(3);
  });

  it('answers hostile paths and wrong kinds in words, and never overwrites a download', async () => {
    const rpc = (
      method: string,
      input: unknown,
    ): Promise<{ ok: boolean; value?: unknown; error?: unknown }> =>
      page.evaluate(
        async ([m, i]) =>
          (
            await fetch(`/api/rpc/${m as string}`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify(i),
            })
          ).json() as Promise<{ ok: boolean; value?: unknown; error?: unknown }>,
        [method, input] as const,
      );
    expect(await rpc('fileHistory', { path: '../../etc/passwd' })).toMatchObject({
      ok: true,
      value: { available: false, reason: expect.stringMatching(/^Not a path in your Weft folder/) },
    });
    expect(await rpc('deletedFiles', { folder: 'note.txt' })).toMatchObject({
      ok: true,
      value: { available: false, reason: 'That is a file, not a folder.' },
    });
    expect(await rpc('restoreVersion', { path: 'note.txt', version: 999_999 })).toMatchObject({
      ok: false,
      error: { code: 'bad-request' },
    });
    const history = (await rpc('fileHistory', { path: 'note.txt' })).value as {
      versions: { id: number; current: boolean }[];
    };
    const old = history.versions.find((v) => !v.current)!;
    const before = await fsp.readdir(downloads);
    const first = (await rpc('downloadVersion', { path: 'note.txt', version: old.id })).value as {
      savedTo: string;
    };
    const second = (await rpc('downloadVersion', { path: 'note.txt', version: old.id })).value as {
      savedTo: string;
    };
    expect(second.savedTo).not.toBe(first.savedTo);
    // Same name taken: a number is added (names go to the second, so earlier ones may hold it too).
    expect(nodePath.basename(second.savedTo)).toMatch(/^note \(version of [^)]*\) \d+\.txt$/);
    expect(await fsp.readFile(second.savedTo, 'utf8')).toBe(await fsp.readFile(first.savedTo, 'utf8'));
    expect((await fsp.readdir(downloads)).length).toBe(before.length + 2);
  });
});

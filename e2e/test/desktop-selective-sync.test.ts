/**
 * Selective sync in Chromium (Settings → Choose folders; docs/desktop.md): an agent syncs
 * two folders to a real proxy; clearing one in the tree and applying removes it from this
 * computer — after the edit made there just before has reached Weft storage — while Weft
 * storage keeps every file; its subfolders are still listed, cleared; a file saved into its
 * place is kept as a selective-sync conflict. Ticking it again downloads it. Axe-clean in
 * light and dark at 100 % and 200 % (screenshots under test-artifacts/screenshots/
 * selective-sync-*).
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

describe('Settings → Choose folders (selective sync) in Chromium', () => {
  let folder: string;
  let server: RunningProxyServer;
  let agent: RunningAgent;
  let probe: ProxyClient;
  let page: Page;

  let world: DesktopWorld;

  beforeAll(async () => {
    world = await startDesktopWorld('selective-sync');
    ({ folder, server, agent, page } = world);
    // Another device of Alice's: sees what is in Weft storage.
    probe = new ProxyClient({ baseUrl: server.url, token: (await server.enrol('alice', 'probe')).token });
  });

  afterAll(async () => {
    await world?.stop();
  });

  const here = (p: string): Promise<boolean> =>
    fsp.lstat(nodePath.join(folder, ...p.split('/'))).then(
      () => true,
      () => false,
    );
  const write = async (p: string, content: string | Uint8Array): Promise<void> => {
    await fsp.mkdir(nodePath.dirname(nodePath.join(folder, ...p.split('/'))), { recursive: true });
    await fsp.writeFile(nodePath.join(folder, ...p.split('/')), content);
  };
  const serverSha = async (p: string): Promise<string | undefined> => (await probe.stat(p))?.sha256;
  const sha = async (s: string | Uint8Array): Promise<string> =>
    (await import('node:crypto')).createHash('sha256').update(s).digest('hex');
  const photos = (): ReturnType<Page['locator']> => page.locator('#selective-tree li[data-path="Photos"]');

  it('clears a folder: its edit is uploaded, then it leaves this computer; ticked again, it comes back', async () => {
    const big = randomBytes(3 * 1024 * 1024);
    await write('Photos/2019/beach.jpg', 'sand');
    await write('Photos/2020/snow.bin', big);
    await write('Docs/cv.txt', 'me');
    await expect.poll(() => serverSha('Photos/2020/snow.bin'), POLL).toBe(await sha(big));
    await expect.poll(() => serverSha('Docs/cv.txt'), POLL).toBe(await sha('me'));

    await page.goto(`${new URL(page.url()).origin}/#settings`);
    await photos().waitFor();
    expect(
      await page.locator('#selective-tree > ul > li').evaluateAll((els) => els.map((e) => e.dataset.path)),
    ).toEqual(['Docs', 'Photos']);
    const box = page.getByRole('checkbox', { name: 'Photos', exact: true });
    expect(await box.isChecked()).toBe(true);
    await box.uncheck();
    await expect
      .poll(() => photos().textContent(), POLL)
      .toContain('Will be removed from this computer when you apply');
    // Subfolders of a cleared folder are listed, cleared, and cannot be ticked alone.
    await page.getByRole('button', { name: 'Subfolders of Photos' }).click();
    const y2019 = page.getByRole('checkbox', { name: '2019', exact: true });
    await y2019.waitFor();
    expect(await y2019.isChecked()).toBe(false);
    expect(await y2019.isDisabled()).toBe(true);

    // An edit made in the folder just before: uploaded before the folder goes, never lost.
    await write('Photos/2019/beach.jpg', 'sand, edited just before');
    await page.getByRole('button', { name: 'Apply folder choice' }).click();
    await expect.poll(() => page.locator('#selective-saved').textContent(), POLL).toContain('Applied');
    await expect.poll(() => here('Photos'), POLL).toBe(false);
    expect(await serverSha('Photos/2019/beach.jpg')).toBe(await sha('sand, edited just before'));
    expect(await serverSha('Photos/2020/snow.bin')).toBe(await sha(big));
    expect(await here('Docs/cv.txt')).toBe(true);
    await expect.poll(() => photos().textContent(), POLL).toContain('Not on this computer');

    await checkVariants(page, 'selective-sync', (what, violations, overflows) => {
      expect(violations, what).toEqual([]);
      expect(overflows, `${what} reflows`).toBe(false);
    });

    // A file saved here into the cleared folder's place: kept as a selective-sync conflict
    // and synced under that name, never merged into the Photos this computer does not hold.
    await write('Photos/made-here.txt', 'made here');
    await expect
      .poll(() => serverSha('Photos (selective sync conflict)/made-here.txt'), POLL)
      .toBe(await sha('made here'));
    expect(await here('Photos')).toBe(false);
    expect(await serverSha('Photos/made-here.txt')).toBeUndefined();

    // A change elsewhere in the cleared folder is not downloaded here.
    await probe.ops([{ op: 'mkdir', path: 'Photos/2021' }]);
    await expect.poll(() => agent.engine.getStatus().state, POLL).toBe('idle');
    expect(await here('Photos')).toBe(false);

    // Ticked again: downloaded as Weft storage holds it.
    await box.check();
    await page.getByRole('button', { name: 'Apply folder choice' }).click();
    await expect.poll(() => here('Photos/2020/snow.bin'), POLL).toBe(true);
    await expect.poll(() => here('Photos/2021'), POLL).toBe(true);
    await expect
      .poll(
        () => fsp.readFile(nodePath.join(folder, 'Photos', '2019', 'beach.jpg'), 'utf8').catch(() => ''),
        POLL,
      )
      .toBe('sand, edited just before');
    await expect.poll(() => photos().textContent(), POLL).not.toContain('computer');
    await expect.poll(() => agent.engine.selective.current.entries(), POLL).toEqual([]);
  });

  it('a path that cannot be a folder is refused and changes nothing', async () => {
    const answer = await agent.ui.handlers.setSelectiveSync({ excluded: ['../outside'] }).then(
      () => 'applied',
      (e: Error) => e.message,
    );
    expect(answer).toMatch(/\.\.\/outside/);
    expect(agent.engine.selective.current.entries()).toEqual([]);
  });
});

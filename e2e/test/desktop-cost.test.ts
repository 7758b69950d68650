/**
 * The desktop Cost panel in Debian's Chromium (docs/cost.md): an agent syncs a small and a
 * large file to a real proxy, and the panel shows the bill the proxy's GET /v1/cost
 * answers — so far and projected, its parts, the price tables — and a chart of the bytes
 * held on each tier. Axe-clean in light and dark at 100 % and 200 % (screenshots under
 * test-artifacts/screenshots/cost-*). Its own small world (one proxy, one agent, one
 * Chromium, no emulators): desktop-ui.test.ts is already long and slow.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { RunningAgent } from '@weft/core';
import { formatBytes } from '@weft/desktop/common';
import type { RunningProxyServer } from '@weft/proxy-server';
import type { CostResponse } from '@weft/wire';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DesktopWorld, startDesktopWorld } from '../src/desktop-world.ts';
import { checkVariants } from '../src/ui-browser.ts';

const POLL = { timeout: 60_000 };
const LARGE = 3 * 1024 * 1024;

describe('desktop Cost panel in Chromium', () => {
  let root: string;
  let server: RunningProxyServer;
  let agent: RunningAgent;
  let page: Page;

  let world: DesktopWorld;

  beforeAll(async () => {
    world = await startDesktopWorld('desktop-cost', { proxy: { cost: { sampleIntervalMs: 0 } } });
    ({ root, server, agent, page } = world);
  });

  afterAll(async () => {
    await world?.stop();
  });

  it('shows the month’s bill and the bytes held per tier as the proxy counts them', async () => {
    const folder = nodePath.join(root, 'Weft');
    await fsp.writeFile(nodePath.join(folder, 'note.txt'), 'a small file\n');
    await fsp.writeFile(nodePath.join(folder, 'big.bin'), randomBytes(LARGE));
    await expect.poll(() => agent.engine.getStatus().state, POLL).toBe('idle');
    await expect.poll(() => agent.engine.getStatus().files, POLL).toBe(2);
    await server.cost.sample();
    const { token } = await server.enrol('alice', 'probe');
    const bill = (await (
      await fetch(`${server.url}/v1/cost`, { headers: { authorization: `Bearer ${token}` } })
    ).json()) as CostResponse;
    expect(bill.mine.objectsBytes).toBe(LARGE);
    expect(bill.mine.fsBytes).toBe(13);

    await page.goto(`${new URL(page.url()).origin}/#cost`);
    await expect.poll(() => page.locator('#h-bill').textContent(), POLL).toBe(`Your bill for ${bill.month}`);
    expect(await page.locator('#cost-so-far').textContent()).toMatch(/^(\$\d+\.\d+|< \$0\.000001)$/);
    expect(await page.locator('#cost-projected').textContent()).toMatch(/^(\$\d+\.\d+|< \$0\.000001)$/);
    expect(await page.locator('#cost-parts dt').allTextContents()).toEqual([
      'Storage',
      'Requests',
      'Transfer',
      'Sent to your devices',
    ]);
    const label = await page.locator('#cost-chart').getAttribute('aria-label');
    expect(label).toContain(`${formatBytes(13)} on the filesystem tier`);
    expect(label).toContain(`${formatBytes(LARGE)} on the object tier`);
    expect(await page.locator('#cost-chart circle').count()).toBe(2);
    expect(await page.locator('#cost').textContent()).toContain(
      'Priced as efs-standard (filesystem tier) and s3-standard',
    );
    await checkVariants(page, 'cost', (what, violations, overflows) => {
      expect(violations, what).toEqual([]);
      expect(overflows, `${what} reflows`).toBe(false);
    });
  });
});

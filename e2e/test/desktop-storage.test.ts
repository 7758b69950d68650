/**
 * The desktop Storage health screen in Debian's Chromium (issue #17, docs/desktop.md): a
 * proxy whose object tier is redundant over three directory backends (RS(2, 1), two
 * replicas), an agent syncing Alice's folder. The screen shows each backend's class and
 * state and, for Alice's own files, what one more failure would do; when one backend's
 * disk goes (its folder replaced by a file, so the next upload fails on it for real) it
 * shows that backend down since then and that losing either other backend would make
 * Alice's large files unreadable. It never shows the backends' folders (other users' files
 * left out: packages/proxy-server/test/storage-routes.test.ts). Axe-clean in light and dark at 100 % and 200 % (screenshots under
 * test-artifacts/screenshots/storage-*).
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { RunningAgent } from '@weft/core';
import type { RunningProxyServer } from '@weft/proxy-server';
import type { StorageHealthResponse } from '@weft/wire';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DesktopWorld, startDesktopWorld } from '../src/desktop-world.ts';
import { tempDir } from '../src/harness.ts';
import { checkVariants } from '../src/ui-browser.ts';

const POLL = { timeout: 60_000 };
const LARGE = 3 * 1024 * 1024;

describe('desktop Storage health screen in Chromium', () => {
  let world: DesktopWorld;
  let server: RunningProxyServer;
  let agent: RunningAgent;
  let page: Page;
  let folder: string;
  let backends: string;

  beforeAll(async () => {
    backends = await tempDir('storage-backends');
    world = await startDesktopWorld('desktop-storage', {
      proxy: {
        objectTier: {
          type: 'redundant',
          backends: ['d0', 'd1', 'd2'].map((id) => ({
            id,
            type: 'fs' as const,
            dir: nodePath.join(backends, id),
          })),
          thresholdBytes: 64 * 1024,
          k: 2,
          m: 1,
          probeIntervalMs: 0,
          scrub: { intervalMs: 0, bytesPerSecond: 0 },
        },
      },
    });
    ({ server, agent, page, folder } = world);
  });

  afterAll(async () => {
    await world?.stop();
    await fsp.rm(backends, { recursive: true, force: true });
  });

  async function synced(files: number): Promise<void> {
    await expect.poll(() => agent.engine.getStatus().files, POLL).toBe(files);
    await expect.poll(() => agent.engine.getStatus().state, POLL).toBe('idle');
  }

  async function openScreen(): Promise<void> {
    // Through another screen, so the storage screen loads afresh.
    await page.goto(`${new URL(page.url()).origin}/#status`);
    await page.goto(`${new URL(page.url()).origin}/#storage`);
    await page.locator('#storage-backends li').first().waitFor(POLL);
  }

  const risk = (id: string) => page.locator(`#storage-backends li[data-backend="${id}"] .backend-risk`);
  const state = (id: string) => page.locator(`#storage-backends li[data-backend="${id}"] .backend-state`);

  it('shows the backends, their state and what one more failure would do to Alice’s files', async () => {
    await fsp.writeFile(nodePath.join(folder, 'one.bin'), randomBytes(LARGE));
    await fsp.writeFile(nodePath.join(folder, 'note.txt'), 'small, on the filesystem tier\n');
    await synced(2);
    await openScreen();
    expect(await page.locator('#nav-storage').getAttribute('aria-current')).toBe('page');
    expect(await page.locator('#storage-backends li').count()).toBe(3);
    for (const id of ['d0', 'd1', 'd2']) {
      expect(await state(id).textContent()).toBe('Available');
      // RS(2, 1): one file, any one more failure leaves it with no spare.
      expect(await risk(id).textContent()).toBe(
        'If it fails too: every file of yours stays readable, but 1 file would have no spare copy left.',
      );
    }
    expect(await page.locator('#storage-state').textContent()).toBe('All your files are fully protected');
    expect(await page.locator('#storage-files dd').allTextContents()).toEqual([
      '1 file',
      '1 file',
      '0 files',
      '0 files',
      '0 files',
    ]);
    const classes = await page.locator('#storage-backends .backend-class').allTextContents();
    expect(new Set(classes)).toEqual(new Set(['Performance-oriented', 'Cost-oriented']));
  });

  it('shows a failed backend down since then and Alice’s files one failure from unreadable', async () => {
    // d2's disk goes: its folder becomes a file, so the next upload fails on it for real.
    await fsp.rm(nodePath.join(backends, 'd2'), { recursive: true, force: true });
    await fsp.writeFile(nodePath.join(backends, 'd2'), 'not a folder any more');
    const before = Date.now();
    await fsp.writeFile(nodePath.join(folder, 'two.bin'), randomBytes(LARGE));
    await synced(3);

    await openScreen();
    // The time shown is the proxy's "down since", in the page's locale.
    const { token } = await server.enrol('alice', 'probe');
    const health = (await (
      await fetch(`${server.url}/v1/storage/health`, { headers: { authorization: `Bearer ${token}` } })
    ).json()) as StorageHealthResponse;
    if (!health.redundant) throw new Error('the object tier should be redundant');
    const since = health.backends.find((b) => b.id === 'd2')!.since!;
    expect(since).toBeGreaterThanOrEqual(before - 1000);
    const words = await page.evaluate(
      `new Date(${since}).toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' })`,
    );
    expect(await state('d2').textContent()).toBe(`Down since ${String(words)}`);
    expect(await risk('d2').textContent()).toBe('Already down: your files are read from the other backends.');
    for (const id of ['d0', 'd1'])
      expect(await risk(id).textContent()).toBe(
        'If it fails too: 2 files of yours could not be read until a backend returns.',
      );
    expect(await page.locator('#storage-state').textContent()).toBe(
      'All your files can be read, with less protection than usual',
    );
    expect(await page.locator('#storage-files dd').allTextContents()).toEqual([
      '2 files',
      '0 files',
      '0 files',
      '2 files',
      '0 files',
    ]);
    // A user's screen names backends by id only: never their folders.
    expect(await page.locator('#storage-health').textContent()).not.toContain(backends);

    await checkVariants(page, 'storage', (what, violations, overflows) => {
      expect(violations, what).toEqual([]);
      expect(overflows, `${what} reflows`).toBe(false);
    });
  });
});

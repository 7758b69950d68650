/**
 * The desktop renderer, for real, in Debian's Chromium: served by an agent (engine + UI
 * server) against a real proxy (with its share API), with a second device of the same
 * person, the Dropbox and Google Drive emulators for the OAuth sign-ins and the shared
 * folder, and a second person whose agent starts unenrolled and enrols from the Accounts
 * screen. Screenshots of every screen go to test-artifacts/screenshots/, and axe-core
 * checks every screen. The browser signs in as a person's would: with a one-time login link
 * (the launcher page the agent writes, or agent.loginUrl()), never with the agent's secret.
 *
 * Over 600 lines on purpose: every test here walks the one world `beforeAll` builds (proxy,
 * two emulators, two agents, one Chromium) and the later screens depend on what earlier ones
 * did (enrolled, connected, shared). Split into files, each would build that world again
 * (~20 s of CI each, issue #15's CI-time goal); the screens' helpers are the other half.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { ProxyClient, type RunningAgent, keyFileSecretStore } from '@weft/core';
import { type OpenedUi, openDesktopUi } from '@weft/desktop';
import { DropboxEmulator, GDriveEmulator } from '@weft/cloud-emulators';
import { buildRenderer } from '@weft/desktop/build';
import { DropboxProvider, GDriveProvider, dropboxOAuth, googleOAuth } from '@weft/providers';
import { startProxyServer } from '@weft/proxy-server';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Device, type TestProxy, enrol, startDevice, tempDir } from '../src/harness.ts';
import {
  checkVariants as checkPageVariants,
  ensureChromium,
  launchChromium,
  overflowsHorizontally,
  runAxe,
  screenshot,
} from '../src/ui-browser.ts';

const SCREENS = ['status', 'accounts', 'sharing', 'settings'] as const;
/** Waits are about correctness, not speed: generous on a shared machine. */
const POLL = { timeout: 30_000 };
/** The emulators' long-lived test token (besides those their OAuth pages issue). */
const EMULATOR_TOKEN = 'weft-emulator-token';

/** A proxy with the share API pointed at the emulators (restartable on its data and port). */
async function startProxy(
  endpoints: { dropbox: string; gdrive: string },
  dataDir?: string,
  port = 0,
  adminToken = randomBytes(24).toString('hex'),
  /** Every user's storage quota in bytes (none: unlimited). */
  quotaBytes?: number,
): Promise<TestProxy> {
  const dir = dataDir ?? (await tempDir('proxy'));
  const server = await startProxyServer({
    dataDir: dir,
    port,
    adminToken,
    logLevel: 'warn',
    gcGraceMs: 0,
    objectTier: { type: 'fs' },
    // An unavailable replica (Bob's full Drive below) is tried again within a second, not
    // after the default backoff's minute or more: the test waits for it to come back.
    shares: { endpoints, pollIntervalMs: 200, probeBackoffMs: { first: 200, max: 1000 } },
    ...(quotaBytes === undefined ? {} : { quota: { defaultBytes: quotaBytes } }),
  });
  return { url: server.url, adminToken, dataDir: dir, s3Prefix: '', close: () => server.close() };
}

async function text(stream: AsyncIterable<Uint8Array>): Promise<string> {
  const parts: Uint8Array[] = [];
  for await (const p of stream) parts.push(p);
  return Buffer.concat(parts).toString('utf8');
}

/** Every file under dir, as latin1 text (to look for a secret in plain text). */
async function allBytes(dir: string): Promise<string> {
  let out = '';
  for (const e of await fsp.readdir(dir, { withFileTypes: true, recursive: true }))
    if (e.isFile()) out += (await fsp.readFile(nodePath.join(e.parentPath, e.name))).toString('latin1');
  return out;
}

/** The page in light and dark at 100 % and 200 %: screenshots, axe clean, reflows at 200 %. */
async function checkVariants(page: Page, name: string): Promise<void> {
  await checkPageVariants(page, name, (what, violations, overflows) => {
    expect(violations, what).toEqual([]);
    expect(overflows, `${what} reflows`).toBe(false);
  });
}

describe('desktop UI in Chromium', () => {
  let proxy: TestProxy;
  let dropbox: DropboxEmulator;
  let gdrive: GDriveEmulator;
  let root: string;
  let uiDir: string;
  let keyFile: string;
  let bob: OpenedUi | undefined;
  let bobPage: Page;
  let agent: RunningAgent;
  let other: Device;
  let folder: string;
  let context: BrowserContext;
  let page: Page;
  /** What the agent handed to the system opener (openInBrowser). */
  const opened: string[] = [];

  beforeAll(async () => {
    ensureChromium();
    root = await tempDir('desktop-ui');
    // The agents' secret-store key stays in this test's folder, not the user's config.
    keyFile = nodePath.join(root, 'config', 'secret.key');
    process.env.WEFT_SECRET_KEY_FILE = keyFile;
    uiDir = await buildRenderer(nodePath.join(root, 'renderer'));
    dropbox = await new DropboxEmulator().start();
    gdrive = await new GDriveEmulator().start();
    proxy = await startProxy({ dropbox: dropbox.url, gdrive: gdrive.url });
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
      openBrowser: (target) => void opened.push(target),
    });
    expect(ui.openedWith).toBe('none');
    if (!ui.agent) throw new Error('openDesktopUi with open: none serves the UI from this process');
    agent = ui.agent;
    other = await startDevice(proxy, 'phone', { user: 'alice' });
    context = await launchChromium(nodePath.join(root, 'chromium-profile'));
    page = await context.newPage();
    await page.goto(agent.loginUrl());
  });

  afterAll(async () => {
    await context?.close();
    await agent?.stop();
    await bob?.stop();
    await other?.stop();
    await dropbox?.close();
    await gdrive?.close();
    delete process.env.WEFT_SECRET_KEY_FILE;
    await proxy?.close();
  });

  const state = (): Promise<string | null> => page.locator('#folder-state').textContent();

  it('shows files written into the folder syncing, with progress, then up to date', async () => {
    await expect.poll(state, POLL).toBe('Up to date');
    // The server this computer talks to (several proxy instances: it moves when one stops).
    await expect.poll(() => page.locator('#server').textContent(), POLL).toContain(proxy.url);
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
    proxy = await startProxy(
      { dropbox: dropbox.url, gdrive: gdrive.url },
      proxy.dataDir,
      port,
      proxy.adminToken,
    );
    await page.getByRole('button', { name: 'Retry now' }).click();
    await expect.poll(state, { timeout: 60_000 }).toBe('Up to date');
    await expect
      .poll(() => page.locator('#activity-list').textContent(), POLL)
      .toContain('while-offline.txt');
  });

  it('shows Weft storage use, says plainly when it is full and what to do, and resumes when there is room', async () => {
    const restart = async (quotaBytes?: number): Promise<void> => {
      const port = Number(new URL(proxy.url).port);
      await proxy.close();
      proxy = await startProxy(
        { dropbox: dropbox.url, gdrive: gdrive.url },
        proxy.dataDir,
        port,
        proxy.adminToken,
        quotaBytes,
      );
    };
    const usage = (): Promise<string | null> => page.locator('#usage-text').textContent();
    // No quota: the bytes alone, no bar.
    await expect.poll(usage, POLL).toMatch(/^Weft storage: [\d.]+ [KMG]?B used$/);
    expect(await page.locator('#usage-bar').count()).toBe(0);

    // The operator sets a quota just above what is stored; a new file does not fit.
    const { usedBytes } = await other.client.usage();
    await restart(usedBytes + 10_000);
    await fsp.writeFile(nodePath.join(folder, 'too-big.bin'), randomBytes(300_000));
    await expect.poll(state, { timeout: 60_000 }).toBe('Weft storage is full');
    const notice = page.getByRole('alert').filter({ hasText: 'Weft storage is full' });
    await expect.poll(() => notice.textContent(), POLL).toMatch(/1 change waits to upload; nothing is lost/);
    const told = (await notice.textContent()) ?? '';
    expect(told).toMatch(/There is no room for new uploads \([\d.]+ [KMG]?B of [\d.]+ [KMG]?B used\)/);
    expect(told).toContain('Downloads and deletes go on');
    expect(told).toMatch(
      /delete files you no longer need .* or ask whoever runs your Weft server for more space/,
    );
    expect(told).toContain('Weft checks again by itself');
    await expect.poll(usage, POLL).toMatch(/^Weft storage: [\d.]+ [KMG]?B of [\d.]+ [KMG]?B used$/);
    expect(await page.locator('#usage-bar').getAttribute('max')).toBe(String(usedBytes + 10_000));
    expect(await page.locator('#headline').textContent()).toBe('Weft storage is full');
    expect(agent.engine.getStatus().state).toBe('full');
    await checkVariants(page, 'status-full');

    // The quota is lifted: "check again" finds room, the waiting upload goes, nothing lost.
    await restart();
    await page.getByRole('button', { name: 'Check again now' }).click();
    await expect.poll(state, { timeout: 60_000 }).toBe('Up to date');
    await expect.poll(() => page.locator('#activity-list').textContent(), POLL).toContain('too-big.bin');
    await expect.poll(usage, POLL).toMatch(/^Weft storage: [\d.]+ [KMG]?B used$/);
    expect(await page.getByRole('alert').filter({ hasText: 'Weft storage is full' }).count()).toBe(0);
    expect(await other.client.stat('too-big.bin')).toMatchObject({ size: 300_000 });
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

  it('Accounts lists this computer and the other devices, and removes one after a confirmation', async () => {
    const tabletToken = await enrol(proxy, 'alice', 'old tablet');
    const tablet = new ProxyClient({ baseUrl: proxy.url, token: tabletToken });
    // Open Accounts afresh (the page may already be on it, drawn before the tablet came).
    await page.goto(`${agent.statusUrl}#status`);
    await page.getByRole('link', { name: 'Accounts' }).click();
    const list = page.locator('#device-list');
    await expect
      .poll(() => list.locator('li .name').allTextContents(), POLL)
      .toEqual(['laptop (this computer)', 'phone', 'old tablet']);
    await expect(list.locator('li').first().textContent()).resolves.toContain('last seen now');
    await page.getByRole('button', { name: 'Remove old tablet' }).click();
    // Nothing happens before the confirmation; the confirmation has the focus.
    await expect(tablet.whoami()).resolves.toMatchObject({ deviceName: 'old tablet' });
    await expect
      .poll(() => page.evaluate('document.activeElement && document.activeElement.id'), POLL)
      .toBe('confirm-remove');
    await expect(page.locator('.confirm p').textContent()).resolves.toMatch(
      /Remove old tablet from your Weft account\?/,
    );
    await checkVariants(page, 'accounts-remove-device');
    // Cancel leaves it; confirming removes it.
    await page.getByRole('button', { name: 'Cancel' }).click();
    await expect(page.locator('.confirm').count()).resolves.toBe(0);
    await page.getByRole('button', { name: 'Remove old tablet' }).click();
    await page.locator('#confirm-remove').click();
    await expect
      .poll(() => list.locator('li .name').allTextContents(), POLL)
      .toEqual(['laptop (this computer)', 'phone']);
    await expect
      .poll(() => page.locator('#device-note').textContent(), POLL)
      .toBe('old tablet was removed from your Weft account.');
    await expect(tablet.whoami()).rejects.toMatchObject({ status: 401, code: 'DEVICE_REVOKED' });
    // This computer goes on syncing.
    expect(agent.engine.getStatus().state).not.toBe('removed');
  });

  it('a second person starts unenrolled, enrols from the Accounts screen, and connects Google Drive', async () => {
    const bobRoot = nodePath.join(root, 'bob');
    const bobState = nodePath.join(bobRoot, 'state');
    // No server and no credentials: the first run of the desktop app.
    bob = await openDesktopUi({
      open: 'none',
      folder: nodePath.join(bobRoot, 'Weft'),
      stateDir: bobState,
      deviceName: 'bob-laptop',
      settleMs: 50,
      uiDir,
      oauth: {
        gdrive: googleOAuth('weft-desktop-test', undefined, {
          accounts: gdrive.url,
          token: `${gdrive.url}/token`,
        }),
      },
    });
    expect(bob.agent?.enrolled).toBe(false);
    bobPage = await context.newPage();
    await bobPage.goto(bob.agent?.loginUrl() ?? '');
    const notice = bobPage.getByRole('alert').filter({ hasText: 'Syncing stopped' });
    await expect
      .poll(() => notice.textContent(), POLL)
      .toContain('This computer is not connected to Weft storage yet.');
    await checkVariants(bobPage, 'status-not-enrolled');

    await bobPage.getByRole('link', { name: 'Connect Weft storage' }).click();
    await bobPage.getByLabel('Server address').waitFor();
    await checkVariants(bobPage, 'accounts-weft-form');
    await bobPage.getByLabel('Server address').fill(proxy.url);
    await bobPage.getByLabel('I have').selectOption('adminToken');
    // A wrong code is refused with a message, and the form stays.
    await bobPage.getByLabel('Invite code or admin token').fill('not-the-token');
    await bobPage.getByLabel('Your user name (with an admin token)').fill('bob');
    await bobPage.getByRole('button', { name: 'Connect to Weft storage' }).click();
    await expect.poll(() => bobPage.locator('#errors').textContent(), POLL).toContain('Could not connect');
    expect(bob.agent?.enrolled).toBe(false);
    await bobPage.getByLabel('Invite code or admin token').fill(proxy.adminToken);
    await bobPage.getByRole('button', { name: 'Connect to Weft storage' }).click();
    await expect
      .poll(() => bobPage.locator('#weft-account').textContent(), POLL)
      .toContain(`bob on ${proxy.url}`);
    expect(bob.agent?.enrolled).toBe(true);
    await expect
      .poll(() => bobPage.locator('#headline').textContent(), { timeout: 60_000 })
      .toBe('Up to date');

    // The device token is in the secret store (encrypted), in no file as plain text.
    const device = JSON.parse(await fsp.readFile(nodePath.join(bobState, 'device.json'), 'utf8'));
    expect(device).toEqual({ server: proxy.url, user: 'bob', deviceName: 'bob-laptop' });
    const token = await keyFileSecretStore({ dir: nodePath.join(bobState, 'secrets'), keyFile }).get(
      'device-token',
    );
    expect(token).toMatch(/.{16,}/);
    expect(await allBytes(bobState)).not.toContain(token);

    const popup = context.waitForEvent('page');
    await bobPage.getByRole('button', { name: 'Connect Google Drive' }).click();
    const signin = await popup;
    await signin.waitForLoadState();
    await expect.poll(() => signin.locator('body').textContent(), POLL).toContain('Signed in');
    await signin.close();
    await expect
      .poll(() => bobPage.locator('#state-gdrive').textContent(), POLL)
      .toMatch(/^Connected since /);
    expect(await allBytes(bobState)).not.toMatch(/"accessToken"/);
  });

  it('a folder is shared from Dropbox and the invitation accepted by a second person on Google Drive', async () => {
    // Alice's Dropbox (connected above through the OAuth page) has a Team folder.
    const aliceDropbox = new DropboxProvider({ token: EMULATOR_TOKEN, baseUrl: dropbox.url });
    const bobDrive = new GDriveProvider({ token: EMULATOR_TOKEN, rootUrl: gdrive.url });
    await aliceDropbox.mkdir('Team');
    await aliceDropbox.write('Team/plan.txt', Buffer.from('the plan, from alice\n'));

    await page.getByRole('link', { name: 'Sharing' }).click();
    await page.getByLabel('Name of the shared folder').waitFor();
    expect(await page.locator('#sharing-unavailable').count()).toBe(0);
    await page.getByLabel('Name of the shared folder').fill('Team plans');
    await page.getByLabel('It is in').selectOption('dropbox');
    await page.getByLabel('Folder', { exact: true }).fill('/Team/');
    await page.getByRole('button', { name: 'Share and create invitation' }).click();
    const link = page.getByLabel('Send this link to your collaborator');
    await expect.poll(() => link.inputValue(), POLL).toMatch(/^weft:\/\/share\/[A-Za-z0-9_-]{43}$/);
    const invite = await link.inputValue();
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], {
      origin: new URL(agent.statusUrl).origin,
    });
    await page.getByRole('button', { name: 'Copy invitation' }).click();
    await expect.poll(() => page.locator('#sharing-status').textContent(), POLL).toBe('Invitation copied.');
    await expect(page.evaluate('navigator.clipboard.readText()')).resolves.toBe(invite);
    await checkVariants(page, 'sharing-invite');

    await bobPage.getByRole('link', { name: 'Sharing' }).click();
    await bobPage.getByLabel('Invitation link').fill('weft://share/not-a-real-invitation');
    await expect
      .poll(() => bobPage.locator('#invite-preview').textContent(), POLL)
      .toMatch(/^Cannot use this invitation: That is not a Weft invitation/);
    await bobPage.getByLabel('Invitation link').fill(invite);
    // Bob sees what he is joining before he accepts.
    await expect
      .poll(() => bobPage.locator('#invite-preview').textContent(), POLL)
      .toMatch(/^“Team plans”, shared by alice\. Members: alice on Dropbox\. Valid until /);
    await bobPage.getByLabel('Keep the files in').selectOption('gdrive');
    await bobPage.getByLabel('In the folder').fill('From Alice');
    await bobPage.getByRole('button', { name: 'Accept invitation' }).click();
    await expect
      .poll(() => bobPage.locator('#sharing-status').textContent(), POLL)
      .toMatch(/^Invitation accepted/);
    const rows = (p: Page) =>
      p
        .locator('#shares-list table.members tbody tr')
        .evaluateAll((trs) =>
          trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent).join(' | ')),
        );
    await expect
      .poll(() => rows(bobPage), POLL)
      .toEqual(['alice | Dropbox | Owner', 'bob (you) | Google Drive | Member']);
    await expect(bobPage.locator('#shares-list').textContent()).resolves.toContain(
      'You keep it in Google Drive',
    );

    // The mirror is real: Alice's file reaches Bob's Drive, and Bob's reply her Dropbox.
    await expect
      .poll(async () => text(await bobDrive.read('From Alice/plan.txt')).catch(() => ''), { timeout: 60_000 })
      .toBe('the plan, from alice\n');
    await bobDrive.write('From Alice/reply.txt', Buffer.from('ok, from bob\n'));
    await expect
      .poll(async () => text(await aliceDropbox.read('Team/reply.txt')).catch(() => ''), { timeout: 60_000 })
      .toBe('ok, from bob\n');

    // Bob's Drive is full (every write refused with storageQuotaExceeded; reads work): both
    // screens say so — the owner's too — with the reason and what waits; Alice's new file
    // waits for him, and reaches him when there is room again.
    const full = ['POST', 'PATCH', 'PUT', 'DELETE'].map((method) =>
      gdrive.faults.add({ method, action: { kind: 'status', status: 403, reason: 'storageQuotaExceeded' } }),
    );
    await aliceDropbox.write('Team/while-full.txt', Buffer.from('waits for room\n'));
    const unavailable = (p: Page) =>
      p.locator('#shares-list .replica-unavailable').evaluateAll((ps) => ps.map((x) => x.textContent));
    await expect
      .poll(() => unavailable(page), { timeout: 60_000 })
      .toEqual([
        expect.stringMatching(
          /^bob’s Google Drive: unavailable since [\d :-]+ — account full; \d+ changes? waiting$/,
        ),
      ]);
    await expect
      .poll(() => unavailable(bobPage), POLL)
      .toEqual([
        expect.stringMatching(
          /^Your Google Drive: unavailable since .* — account full; \d+ changes? waiting \(.+\)$/,
        ),
      ]);
    await checkVariants(page, 'sharing-member-unavailable');
    for (const heal of full) heal();
    await expect
      .poll(async () => text(await bobDrive.read('From Alice/while-full.txt')).catch(() => ''), {
        timeout: 60_000,
      })
      .toBe('waits for room\n');
    await expect.poll(() => unavailable(page), { timeout: 60_000 }).toEqual([]);

    // Alice's screen shows Bob and his cloud as they join (no reload).
    await expect
      .poll(() => rows(page), POLL)
      .toEqual(['alice (you) | Dropbox | Owner', 'bob | Google Drive | Member']);
    await checkVariants(page, 'sharing-members');

    // Bob leaves: his folder stays as it is; the share goes on without him.
    await bobPage.getByRole('button', { name: 'Leave Team plans' }).click();
    await expect.poll(() => bobPage.locator('#shares-none').textContent(), POLL).toBe('None yet.');
    expect(await text(await bobDrive.read('From Alice/plan.txt'))).toBe('the plan, from alice\n');
    await expect.poll(() => rows(page), POLL).toEqual(['alice (you) | Dropbox | Owner']);

    // Disconnecting a cloud also takes its tokens off the server — refused while it still
    // keeps a share's folder (Alice's Dropbox), done for Bob's Drive now that he left.
    await page.getByRole('link', { name: 'Accounts' }).click();
    await page.getByRole('button', { name: 'Disconnect Dropbox' }).click();
    await expect.poll(() => page.locator('#errors').textContent(), POLL).toContain('leave that share first');
    await expect.poll(() => page.locator('#state-dropbox').textContent(), POLL).toMatch(/^Connected/);
    await bobPage.getByRole('link', { name: 'Accounts' }).click();
    await bobPage.getByRole('button', { name: 'Disconnect Google Drive' }).click();
    await expect.poll(() => bobPage.locator('#state-gdrive').textContent(), POLL).toBe('Not connected');
    const bobToken = await keyFileSecretStore({
      dir: nodePath.join(root, 'bob', 'state', 'secrets'),
      keyFile,
    }).get('device-token');
    const held = await fetch(`${proxy.url}/v1/accounts`, {
      headers: { authorization: `Bearer ${bobToken}` },
    });
    expect(await held.json()).toEqual({ accounts: [] });
  });

  it('saves settings', async () => {
    await page.getByRole('link', { name: 'Settings' }).click();
    await page.getByLabel('Upload limit (KiB/s)').fill('512');
    await page.getByLabel('Ignore patterns, one per line (gitignore style)').fill('*.tmp\nbuild/');
    await page.getByLabel('Ask before deleting more than this share of files (%)').fill('30');
    await expect(page.getByLabel('Local trash size limit (MiB)').inputValue()).resolves.toBe('0');
    await page.getByLabel('Keep replaced and deleted files in the local trash for (days)').fill('14');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await expect.poll(() => page.locator('#settings-saved').textContent(), POLL).toMatch(/^Saved/);
    const saved = JSON.parse(
      await fsp.readFile(nodePath.join(nodePath.dirname(folder), 'state', 'settings.json'), 'utf8'),
    );
    expect(saved).toMatchObject({
      uploadLimitKiBps: 512,
      ignorePatterns: ['*.tmp', 'build/'],
      massDeletePercent: 30,
      trashKeepDays: 14,
      trashLimitMiB: 0,
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
  it('lets in only the browser the agent opened: launcher page → one-time link → cookie', async () => {
    // Another person's browser (or any program) that finds the port: a refusal, no UI, no secret.
    const stranger = await launchChromium(nodePath.join(root, 'chromium-stranger'));
    try {
      const strangerPage = await stranger.newPage();
      const refused = await strangerPage.goto(agent.statusUrl);
      expect(refused?.status()).toBe(401);
      expect(await strangerPage.content()).not.toContain(agent.secret);
      expect(await strangerPage.locator('#nav').count()).toBe(0);
      // What `npm start` / `weft agent --open` do: a 0600 launcher page in the state folder,
      // opened by its file address; the browser follows it to the link, then to the UI.
      await agent.openInBrowser();
      const launcher = opened.at(-1) ?? '';
      expect(launcher).toMatch(/^file:\/\/.*open-ui\.html$/);
      await strangerPage.goto(launcher);
      await strangerPage.locator('#nav').waitFor(POLL);
      await expect.poll(() => strangerPage.locator('#folder-state').textContent(), POLL).toBe('Up to date');
      expect(await strangerPage.content()).not.toContain(agent.secret);
      // The link is used up: opening the launcher again in a fresh browser gets a refusal.
      const again = await (await launchChromium(nodePath.join(root, 'chromium-late'))).newPage();
      try {
        await again.goto(launcher);
        await expect
          .poll(() => again.locator('h1 + p').textContent(), POLL)
          .toMatch(/expired or was already used/);
        expect(await again.locator('#nav').count()).toBe(0);
      } finally {
        await again.context().close();
      }
    } finally {
      await stranger.close();
    }
    // A page of another origin on the same machine (Bob's UI, another port) cannot drive
    // Alice's agent, although the browser sends her cookie along (cookies ignore ports).
    expect(agent.ui.status().state).not.toBe('paused');
    await bobPage.evaluate(
      `fetch('${agent.statusUrl}api/rpc/pause', { method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'content-type': 'text/plain' }, body: '{"duration":"1h"}' }).catch(() => undefined)`,
    );
    await new Promise((r) => setTimeout(r, 300));
    expect(agent.ui.status().state).not.toBe('paused');
    // The same request from Alice's own page does pause it (the check above can fail).
    await page.evaluate(
      `fetch('${agent.statusUrl}api/rpc/pause', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"duration":"1h"}' })`,
    );
    await expect.poll(() => agent.ui.status().state, POLL).toBe('paused');
    await agent.ui.handlers.resume({});
  });
});

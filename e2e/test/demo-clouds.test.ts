/**
 * `npm start -- --demo-clouds` (issue #19, "try it without accounts"): startDemo — the very
 * function scripts/start.ts runs for that flag — starts the pretend Dropbox, Drive and
 * OneDrive, a proxy whose share mirror reaches them, and two people (you and Bob) with their
 * own agents and folders. In Chromium, as a newcomer would: you connect "Dropbox" on the
 * Accounts screen (the emulator's sign-in page opens in a new tab and sends you back), share
 * the `Team plans` folder that waits there, and copy the invitation; in Bob's window Bob
 * connects "Google Drive" and accepts it into his Drive. The welcome file crosses to Bob's
 * Drive, and a file Bob adds in his Drive crosses back to your Dropbox. Each of the three
 * screens reached (your share's invitation, Bob's accepted share, you seeing Bob as a member)
 * is axe-clean in light and dark at 100 % and 200 % (screenshots under
 * test-artifacts/screenshots/demo-clouds-*).
 */
import { spawn } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { buildRenderer } from '@weft/desktop/build';
import { DropboxProvider, GDriveProvider, type Provider, collect } from '@weft/providers';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DEMO_SHARED_FOLDER,
  DEMO_WELCOME_FILE,
  type RunningDemo,
  startDemo,
} from '../../scripts/demo-clouds.ts';
import { tempDir } from '../src/harness.ts';
import { type AxeViolation, checkVariants, ensureChromium, launchChromium } from '../src/ui-browser.ts';

const POLL = { timeout: 120_000, interval: 250 };

const clean = (what: string, violations: AxeViolation[], overflows: boolean): void => {
  expect(violations, what).toEqual([]);
  expect(overflows, `${what} reflows`).toBe(false);
};

async function readText(p: Provider, path: string): Promise<string | undefined> {
  try {
    return Buffer.from(await collect(await p.read(path))).toString('utf8');
  } catch {
    return undefined;
  }
}

describe('npm start --demo-clouds: connect a pretend Dropbox, share with Bob on a pretend Drive', () => {
  let root: string;
  let demo: RunningDemo;
  let context: BrowserContext;

  beforeAll(async () => {
    ensureChromium();
    root = await tempDir('demo-clouds');
    process.env.WEFT_SECRET_KEY_FILE = nodePath.join(root, 'config', 'secret.key');
    const uiDir = await buildRenderer(nodePath.join(root, 'renderer'));
    demo = await startDemo({
      home: nodePath.join(root, 'home'),
      folder: nodePath.join(root, 'Weft-demo'),
      bobFolder: nodePath.join(root, 'Weft-demo-bob'),
      user: 'alice',
      deviceName: 'laptop',
      open: 'none',
      uiDir,
      openBrowser: () => undefined,
      settleMs: 50,
    });
    context = await launchChromium(nodePath.join(root, 'chromium-profile'));
  });

  afterAll(async () => {
    await context?.close();
    await demo?.stop();
    delete process.env.WEFT_SECRET_KEY_FILE;
  });

  /** Connect a cloud on the Accounts screen: its sign-in page opens in a tab and approves. */
  const connect = async (page: Page, cloud: 'dropbox' | 'gdrive', name: string): Promise<void> => {
    await page.goto(`${new URL(page.url()).origin}/#accounts`);
    const tab = context.waitForEvent('page');
    await page.getByRole('button', { name: `Connect ${name}` }).click();
    const signIn = await tab;
    await signIn.waitForLoadState();
    await expect.poll(() => page.locator(`#state-${cloud}`).textContent(), POLL).toMatch(/^Connected/);
    await signIn.close();
  };

  it('shares the pretend Dropbox folder with Bob, who keeps it in his pretend Drive; files cross both ways', async () => {
    const you = demo.you.agent;
    const bob = demo.bob.agent;
    if (!you || !bob) throw new Error('the demo serves both windows from this process');
    // Both people are on the demo's proxy, each with a device of their own.
    expect(you.engine.getStatus().folder).toBe(nodePath.join(root, 'Weft-demo'));
    expect(bob.engine.getStatus().folder).toBe(nodePath.join(root, 'Weft-demo-bob'));
    expect(Object.keys(demo.clouds.oauth).sort()).toEqual(['dropbox', 'gdrive', 'onedrive']);

    const mine = await context.newPage();
    await mine.goto(you.loginUrl());
    await connect(mine, 'dropbox', 'Dropbox');

    await mine.goto(`${new URL(mine.url()).origin}/#sharing`);
    await mine.locator('#share-cloud option[value="dropbox"]').waitFor({ state: 'attached' });
    await mine.fill('#share-name', DEMO_SHARED_FOLDER);
    await mine.selectOption('#share-cloud', 'dropbox');
    await mine.fill('#share-folder', DEMO_SHARED_FOLDER);
    await mine.getByRole('button', { name: 'Share and create invitation' }).click();
    await expect.poll(() => mine.locator('#invite-link').inputValue(), POLL).toMatch(/^weft:\/\/share\//);
    const invite = await mine.locator('#invite-link').inputValue();
    await checkVariants(mine, 'demo-clouds-you-shared', clean);

    const bobs = await context.newPage();
    await bobs.goto(bob.loginUrl());
    await connect(bobs, 'gdrive', 'Google Drive');
    await bobs.goto(`${new URL(bobs.url()).origin}/#sharing`);
    await bobs.locator('#accept-cloud option[value="gdrive"]').waitFor({ state: 'attached' });
    await bobs.fill('#accept-invite', invite);
    await expect
      .poll(() => bobs.locator('#invite-preview').textContent(), POLL)
      .toContain(`“${DEMO_SHARED_FOLDER}”, shared by alice`);
    await bobs.selectOption('#accept-cloud', 'gdrive');
    await bobs.fill('#accept-folder', DEMO_SHARED_FOLDER);
    await bobs.getByRole('button', { name: 'Accept invitation' }).click();
    await expect.poll(() => bobs.locator('#shares-list').textContent(), POLL).toContain('Google Drive');
    expect(await bobs.locator('#shares-list').textContent()).toContain('alice');
    await checkVariants(bobs, 'demo-clouds-bob-accepted', clean);

    // The files themselves, as each person would see them in their cloud's own app.
    const { dropbox, gdrive } = demo.emulators;
    const yourDropbox = new DropboxProvider({ token: dropbox.accessToken, baseUrl: dropbox.url });
    const bobsDrive = new GDriveProvider({ token: gdrive.accessToken, rootUrl: gdrive.url });
    const welcome = await readText(yourDropbox, `${DEMO_SHARED_FOLDER}/${DEMO_WELCOME_FILE}`);
    expect(welcome).toContain('pretend Dropbox');
    await expect
      .poll(() => readText(bobsDrive, `${DEMO_SHARED_FOLDER}/${DEMO_WELCOME_FILE}`), POLL)
      .toBe(welcome);
    await bobsDrive.write(`${DEMO_SHARED_FOLDER}/from-bob.txt`, Buffer.from('Hello from Bob’s Drive\n'));
    await expect
      .poll(() => readText(yourDropbox, `${DEMO_SHARED_FOLDER}/from-bob.txt`), POLL)
      .toBe('Hello from Bob’s Drive\n');

    // The clouds' access tokens expire (an hour, at the real ones): the proxy's mirror
    // refreshes them at the pretend clouds' token endpoints (npm start passes them on), and
    // files keep crossing.
    const refreshes = (e: typeof dropbox | typeof gdrive): number =>
      e.requestLog.filter((r) => r.endpoint === 'oauth.token' && r.status === 200).length;
    const [dropboxBefore, driveBefore] = [refreshes(dropbox), refreshes(gdrive)];
    dropbox.oauth.expireAccessTokens();
    gdrive.oauth.expireAccessTokens();
    await bobsDrive.write(`${DEMO_SHARED_FOLDER}/after-expiry.txt`, Buffer.from('still crossing\n'));
    await expect
      .poll(() => readText(yourDropbox, `${DEMO_SHARED_FOLDER}/after-expiry.txt`), POLL)
      .toBe('still crossing\n');
    expect(refreshes(dropbox)).toBeGreaterThan(dropboxBefore);
    expect(refreshes(gdrive)).toBeGreaterThan(driveBefore);

    // Your window lists Bob as a member on Google Drive.
    await mine.reload();
    await expect.poll(() => mine.locator('#shares-list').textContent(), POLL).toContain('bob');
    expect(await mine.locator('#shares-list').textContent()).toContain('Google Drive');
    await checkVariants(mine, 'demo-clouds-you-members', clean);
  });

  it('`npm start -- --demo-clouds` itself starts it, says where everything is, and stops cleanly', async () => {
    const home = await tempDir('demo-clouds-cli');
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('WEFT_')) env[k] = v;
    const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/start.ts', '--demo-clouds'], {
      cwd: nodePath.resolve(import.meta.dirname, '..', '..'),
      env: {
        ...env,
        WEFT_HOME: nodePath.join(home, 'home'),
        // Set, and not used by the demo: your real folder is never synced to its server.
        WEFT_FOLDER: nodePath.join(home, 'real-Weft'),
        WEFT_DEMO_FOLDER: nodePath.join(home, 'you'),
        WEFT_DEMO_BOB_FOLDER: nodePath.join(home, 'bob'),
        WEFT_NO_OPEN: '1',
        WEFT_SECRET_KEY_FILE: nodePath.join(home, 'secret.key'),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (out += d.toString('utf8')));
    const exited = new Promise<number | null>((r) => child.once('exit', r));
    try {
      await expect.poll(() => out, { timeout: 240_000, interval: 200 }).toContain('Press Ctrl+C to stop.');
      expect(out).toContain(`Your folder:   ${nodePath.join(home, 'you')}`);
      expect(out).toContain(`Bob's folder:  ${nodePath.join(home, 'bob')}`);
      expect(out).not.toContain('real-Weft');
      const links = [...out.matchAll(/window: +(http:\/\/127\.0\.0\.1:\d+\/login\?token=\S+)/g)].map(
        (m) => m[1],
      );
      expect(links).toHaveLength(2);
      // Each link signs a browser in to its own person's agent.
      for (const link of links) expect((await fetch(link ?? '', { redirect: 'manual' })).status).toBe(303);
      expect(out).toMatch(/Pretend clouds: Dropbox http:\/\/127\.0\.0\.1:\d+, Google Drive http:/);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
    await expect(fsp.stat(nodePath.join(home, 'real-Weft'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('refuses to clear a demo folder it did not make', async () => {
    const other = await tempDir('demo-clouds-foreign');
    await fsp.mkdir(nodePath.join(other, 'demo'), { recursive: true });
    await fsp.writeFile(nodePath.join(other, 'demo', 'precious.txt'), 'mine');
    await expect(
      startDemo({
        home: other,
        folder: nodePath.join(other, 'a'),
        bobFolder: nodePath.join(other, 'b'),
        user: 'alice',
        deviceName: 'laptop',
        open: 'none',
        openBrowser: () => undefined,
      }),
    ).rejects.toThrow(/was not made by the Weft demo/);
    expect(await fsp.readFile(nodePath.join(other, 'demo', 'precious.txt'), 'utf8')).toBe('mine');
  });
});

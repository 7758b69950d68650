/**
 * One small world for a desktop-screen scenario in Chromium: a real proxy (fs object tier,
 * sharing off), the renderer built into a temporary folder, an agent serving it as Alice's
 * "laptop" (openDesktopUi with open: none), and a headless Chromium signed in with the
 * agent's one-time login link. The Cost, History, Settings, Choose folders and tray popover
 * tests start it; desktop-ui.test.ts builds its larger world with emulators itself.
 */
import { randomBytes } from 'node:crypto';
import * as nodePath from 'node:path';
import type { RunningAgent } from '@weft/core';
import { openDesktopUi, type OpenUiOptions } from '@weft/desktop';
import { buildRenderer } from '@weft/desktop/build';
import { type ProxyConfigInput, type RunningProxyServer, startProxyServer } from '@weft/proxy-server';
import type { BrowserContext, Page } from 'playwright-core';
import { tempDir } from './harness.ts';
import { ensureChromium, launchChromium } from './ui-browser.ts';

export interface DesktopWorld {
  readonly root: string;
  /** The laptop's synced folder. */
  readonly folder: string;
  readonly server: RunningProxyServer;
  readonly agent: RunningAgent;
  readonly context: BrowserContext;
  /** A page signed in to the agent's UI. */
  readonly page: Page;
  stop(): Promise<void>;
}

export async function startDesktopWorld(
  name: string,
  options: {
    /** Proxy settings beside the world's defaults. */
    proxy?: ProxyConfigInput;
    /** Agent/UI options beside the world's defaults (e.g. openPath). */
    ui?: Partial<OpenUiOptions>;
    /** Environment variables set for the world's life, given paths under its root. */
    env?: (root: string) => Record<string, string>;
  } = {},
): Promise<DesktopWorld> {
  ensureChromium();
  const root = await tempDir(name);
  const folder = nodePath.join(root, 'Weft');
  const env = { WEFT_SECRET_KEY_FILE: nodePath.join(root, 'config', 'secret.key'), ...options.env?.(root) };
  Object.assign(process.env, env);
  const uiDir = await buildRenderer(nodePath.join(root, 'renderer'));
  const server = await startProxyServer({
    dataDir: await tempDir('proxy'),
    port: 0,
    adminToken: randomBytes(24).toString('hex'),
    logLevel: 'warn',
    objectTier: { type: 'fs' },
    shares: { enabled: false },
    ...options.proxy,
  });
  const ui = await openDesktopUi({
    open: 'none',
    folder,
    server: server.url,
    stateDir: nodePath.join(root, 'state'),
    deviceName: 'laptop',
    user: 'alice',
    adminToken: server.adminToken,
    settleMs: 50,
    uiDir,
    openBrowser: () => undefined,
    ...options.ui,
  });
  if (!ui.agent) throw new Error('openDesktopUi with open: none serves the UI from this process');
  const agent = ui.agent;
  const context = await launchChromium(nodePath.join(root, 'chromium-profile'));
  const page = await context.newPage();
  await page.goto(agent.loginUrl());
  return {
    root,
    folder,
    server,
    agent,
    context,
    page,
    async stop() {
      await context.close();
      await agent.stop();
      await server.close();
      for (const k of Object.keys(env)) delete process.env[k];
    },
  };
}

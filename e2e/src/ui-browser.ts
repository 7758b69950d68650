/**
 * Debian's Chromium under Playwright for the desktop UI scenarios: installed on demand
 * (scripts/ensure-chromium.sh), launched headless with a fresh profile, plus an axe-core
 * check and screenshots under test-artifacts/screenshots/.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { createRequire } from 'node:module';
import * as nodePath from 'node:path';
import { type BrowserContext, type Page, chromium } from 'playwright-core';

const repoRoot = nodePath.resolve(import.meta.dirname, '..', '..');
export const CHROMIUM = process.env.WEFT_CHROMIUM ?? '/usr/bin/chromium';
export const SCREENSHOT_DIR = nodePath.join(repoRoot, 'test-artifacts', 'screenshots');

/** apt-get install chromium when it is missing (root only; a no-op when present). */
export function ensureChromium(): void {
  execFileSync('sh', [nodePath.join(repoRoot, 'scripts', 'ensure-chromium.sh')], { stdio: 'inherit' });
}

export async function launchChromium(
  userDataDir: string,
  options: { colorScheme?: 'light' | 'dark' } = {},
): Promise<BrowserContext> {
  return chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: { width: 1100, height: 900 },
    colorScheme: options.colorScheme ?? 'light',
    // The page's CSP allows only its own scripts; axe-core is injected by the test.
    bypassCSP: true,
  });
}

let axeSource: string | undefined;

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  targets: string[];
}

/** Run axe-core (WCAG 2.1 A and AA rules) on the page; returns the violations. */
export async function runAxe(page: Page): Promise<AxeViolation[]> {
  axeSource ??= readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  const loaded = await page.evaluate('typeof window.axe === "object"');
  if (!loaded) await page.addScriptTag({ content: axeSource });
  const result = await page.evaluate(`(async () => {
    const r = await window.axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] }, resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => String(n.target)) }));
  })()`);
  return result as AxeViolation[];
}

export async function screenshot(page: Page, name: string): Promise<string> {
  await fsp.mkdir(SCREENSHOT_DIR, { recursive: true });
  const file = nodePath.join(SCREENSHOT_DIR, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

/** Whether the page scrolls sideways (it must not, even at 200 % zoom). */
export async function overflowsHorizontally(page: Page): Promise<boolean> {
  return (await page.evaluate(
    'document.documentElement.scrollWidth > document.documentElement.clientWidth + 1',
  )) as boolean;
}

/**
 * The page as it is now, in light and dark at 100 % and 200 %: a screenshot of each
 * (`<name>-<scheme>-<zoom>`) and no axe violations (`check` asserts on them), no
 * sideways scrolling at 200 %. Leaves the page light at 100 %.
 */
export async function checkVariants(
  page: Page,
  name: string,
  check: (what: string, violations: AxeViolation[], overflows: boolean) => void,
): Promise<void> {
  for (const scheme of ['light', 'dark'] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    for (const zoom of [1, 2]) {
      await page.setViewportSize({ width: zoom === 1 ? 1100 : 1280, height: 900 });
      await page.evaluate(`document.documentElement.style.zoom = '${zoom}'`);
      await screenshot(page, `${name}-${scheme}-${zoom * 100}`);
      check(
        `${name} ${scheme} ${zoom * 100}%`,
        await runAxe(page),
        zoom === 2 && (await overflowsHorizontally(page)),
      );
    }
  }
  await page.evaluate(`document.documentElement.style.zoom = '1'`);
  await page.emulateMedia({ colorScheme: 'light' });
  await page.setViewportSize({ width: 1100, height: 900 });
}

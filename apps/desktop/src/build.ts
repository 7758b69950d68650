/**
 * Builds the renderer (served by `weft agent` and loaded by Electron) and the Electron main
 * and preload bundles into apps/desktop/dist. `npm run build -w @weft/desktop`.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { writeIcons } from './icons.ts';

const here = import.meta.dirname;
export const DESKTOP_ROOT = nodePath.resolve(here, '..');
export const DEFAULT_RENDERER_DIR = nodePath.join(DESKTOP_ROOT, 'dist', 'renderer');

/** Bundle the renderer into `outDir` (index.html, app.js, app.css; tray.html, tray.js, tray.css); returns outDir. */
export async function buildRenderer(outDir = DEFAULT_RENDERER_DIR): Promise<string> {
  await fsp.mkdir(outDir, { recursive: true });
  await build({
    entryPoints: [nodePath.join(here, 'renderer', 'main.mts')],
    outfile: nodePath.join(outDir, 'app.js'),
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['chrome120'],
    sourcemap: true,
    minify: false,
    logLevel: 'silent',
  });
  // The tray popover page (renderer/tray.html): its own small bundle.
  await build({
    entryPoints: [nodePath.join(here, 'renderer', 'tray.mts')],
    outfile: nodePath.join(outDir, 'tray.js'),
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['chrome120'],
    sourcemap: true,
    minify: false,
    logLevel: 'silent',
  });
  for (const f of ['index.html', 'app.css', 'tray.html', 'tray.css'])
    await fsp.copyFile(nodePath.join(here, 'renderer', f), nodePath.join(outDir, f));
  return outDir;
}

/** Bundle Electron main and preload (CommonJS; electron and native modules stay external). */
export async function buildElectron(
  outDir = nodePath.join(DESKTOP_ROOT, 'dist', 'electron'),
): Promise<string> {
  const common = {
    bundle: true,
    platform: 'node' as const,
    format: 'cjs' as const,
    target: ['node20'],
    sourcemap: true,
    external: ['electron', 'better-sqlite3'],
    logLevel: 'silent' as const,
    // The engine's ESM code finds its WebAssembly next to itself through import.meta; in the
    // CommonJS bundle that becomes the bundle's own location (wasm copied to ../build/).
    banner: { js: "const __weftMetaUrl = require('node:url').pathToFileURL(__filename).href;" },
    define: { 'import.meta.url': '__weftMetaUrl', 'import.meta.dirname': '__dirname' },
  };
  await build({
    ...common,
    entryPoints: [nodePath.join(here, 'main', 'main.ts')],
    outfile: nodePath.join(outDir, 'main.cjs'),
  });
  await build({
    ...common,
    entryPoints: [nodePath.join(here, 'preload', 'preload.ts')],
    outfile: nodePath.join(outDir, 'preload.cjs'),
  });
  // Tray icons beside the bundle; the app icon where electron-builder looks (buildResources).
  await writeIcons(nodePath.join(outDir, '..', 'icons'), nodePath.join(DESKTOP_ROOT, 'build', 'icons'));
  const wasmDir = nodePath.join(outDir, '..', 'build');
  await fsp.mkdir(wasmDir, { recursive: true });
  const repo = nodePath.resolve(DESKTOP_ROOT, '..', '..');
  for (const w of ['rsync-wasm/build/rsync.wasm', 'reed-solomon-wasm/build/reed-solomon.wasm']) {
    const from = nodePath.join(repo, 'packages', w);
    await fsp.copyFile(from, nodePath.join(wasmDir, nodePath.basename(w))).catch(() => undefined);
  }
  return outDir;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await buildRenderer();
  await buildElectron();
}

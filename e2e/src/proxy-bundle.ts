/**
 * The proxy as one JavaScript file, for the scenarios that start `weft-proxy` processes again
 * and again (cluster, agent-failover, proxy-kill: src/proxy-process.ts). From TypeScript
 * through tsx a start costs about 2 CPU-seconds, most of it tsx's loader thread resolving and
 * transforming every module; from this bundle about 1 (measured on this machine: 1.8–2.4 vs
 * 0.9–1.1 CPU-s to the first /healthz answer). The cluster scenario starts instances while
 * its storm runs on the same two cores, so each start's CPU is the storm's.
 *
 * Built once per e2e run by the global setup, with esbuild (the desktop renderer's bundler).
 * Workspace modules are bundled; packages from node_modules stay imports, resolved from the
 * file's directory inside the repository. Each workspace module keeps its own
 * `import.meta.url` (replaced at build time by its source file's URL), so what it finds
 * beside itself (SQL migrations, wasm builds) is found where it is in the tree.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { workspaceOnlyPlugin } from '@weft/core/esbuild-workspace';
import { build } from 'esbuild';

const ROOT = nodePath.resolve(import.meta.dirname, '../..');
const ENTRY = nodePath.join(ROOT, 'packages/proxy-server/src/cli.ts');

/** Builds the bundle into a new file under e2e/node_modules/.cache; returns its path. */
export async function buildProxyBundle(): Promise<string> {
  // Inside the repository, so that its package imports resolve from the root node_modules;
  // one file per run, since several runs may share the tree.
  const dir = nodePath.join(ROOT, 'e2e/node_modules/.cache/weft-proxy');
  await fsp.mkdir(dir, { recursive: true });
  const outfile = nodePath.join(dir, `cli-${process.pid}-${Date.now()}.mjs`);
  await build({
    entryPoints: [ENTRY],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    logLevel: 'error',
    plugins: [workspaceOnlyPlugin()],
  });
  return outfile;
}

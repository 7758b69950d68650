/**
 * `npm run build -w @weft/core`: the `weft` command as one JavaScript file, dist/weft.mjs,
 * which bin/weft.js runs instead of the TypeScript sources when it is not older than any of
 * them (bin/entry.js). Through tsx every start resolves and transforms each module again:
 * about 1.2 CPU-seconds before the agent does anything, against about 0.35 from the bundle
 * (issue #16: a no-change restart of 100,000 files has a 3 s budget).
 *
 * Workspace modules (@weft/*) are bundled; packages from node_modules stay imports, resolved
 * from dist/ inside the repository. Each workspace module keeps its own `import.meta.url`
 * (replaced at build time by its source file's URL), so what it finds beside itself (SQL
 * migrations, wasm builds, the desktop renderer) is found where it is in the tree.
 * Beside the bundle, dist/weft.inputs.json lists every source it was built from and when the
 * build started: a source changed since then makes the bundle stale (bin/entry.js).
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { build } from 'esbuild';
import { workspaceOnlyPlugin } from './esbuild-workspace.ts';

const PACKAGE = nodePath.resolve(import.meta.dirname, '..');
/**
 * Packages from node_modules bundled too (plain JavaScript, no native parts): imported
 * from the bundle, node parsed each CommonJS one for its exports at every start — ws, zod
 * (twice: zod and zod/v4) and ignore were ~160 ms of a start's ~300 ms of module loading.
 * The others (better-sqlite3: native) stay imports.
 */
const BUNDLED = ['zod', 'ws', 'ignore'];

/** What bin/entry.js reads beside the bundle. */
export interface BundleInputs {
  /** When the build started (ms since the epoch): a source modified later makes it stale. */
  readonly builtFromMs: number;
  /** Every source file in the bundle, relative to the package directory. */
  readonly inputs: readonly string[];
  /**
   * Each input's [mtimeMs, size] once built: any other makes the bundle stale too (a package
   * installed again keeps its tarball's old dates; a checkout may date a file back).
   */
  readonly stamps: readonly (readonly [number, number])[];
}

/**
 * Build `entry` (default src/cli.ts) into `outDir` (default dist/): weft.mjs and
 * weft.inputs.json. Returns the bundle's path.
 */
export async function buildBundle(
  o: { entry?: string; outDir?: string } = {},
): Promise<{ bundle: string; inputs: BundleInputs }> {
  const outDir = o.outDir ?? nodePath.join(PACKAGE, 'dist');
  await fsp.mkdir(outDir, { recursive: true });
  const builtFromMs = Date.now();
  const bundle = nodePath.join(outDir, 'weft.mjs');
  // Written under another name and renamed: a `weft` starting meanwhile sees the old
  // bundle with its old list, or the new one with the new list (the list is renamed last).
  const tmp = `${bundle}.${process.pid}.tmp`;
  const result = await build({
    entryPoints: [o.entry ?? nodePath.join(PACKAGE, 'src/cli.ts')],
    outfile: tmp,
    absWorkingDir: PACKAGE,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    logLevel: 'error',
    metafile: true,
    banner: {
      js: [
        '// Built by packages/core/src/build-bundle.ts from the sources; do not edit.',
        // For the bundled CommonJS packages' require() of node's own modules.
        "import { createRequire as __weftCreateRequire } from 'node:module';",
        'const require = __weftCreateRequire(import.meta.url);',
      ].join('\n'),
    },
    plugins: [workspaceOnlyPlugin(BUNDLED)],
  });
  // The metafile's paths are relative to absWorkingDir: the package directory.
  const paths = Object.keys(result.metafile.inputs)
    .map((p) => nodePath.normalize(p))
    .sort();
  const stamps = await Promise.all(
    paths.map(async (p) => {
      const st = await fsp.stat(nodePath.resolve(PACKAGE, p));
      return [st.mtimeMs, st.size] as const;
    }),
  );
  const inputs: BundleInputs = { builtFromMs, inputs: paths, stamps };
  const list = nodePath.join(outDir, 'weft.inputs.json');
  await fsp.writeFile(`${list}.${process.pid}.tmp`, JSON.stringify(inputs, null, 1) + '\n');
  await fsp.rename(tmp, bundle);
  await fsp.rename(`${list}.${process.pid}.tmp`, list);
  return { bundle, inputs };
}

if (process.argv[1] && nodePath.resolve(process.argv[1]) === import.meta.filename) {
  const { bundle, inputs } = await buildBundle();
  process.stdout.write(`${nodePath.relative(process.cwd(), bundle)}: ${inputs.inputs.length} sources\n`);
}

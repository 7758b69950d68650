/**
 * `weft` runs the built bundle (dist/weft.mjs) only while it is up to date with every source
 * it was built from; a stale or half-written bundle never runs (issue #16: the bundle saves
 * about a CPU-second of module loading per start). The rule is checked on a package directory
 * made here; the build itself is checked by building the real sources into a temporary
 * directory and running the result.
 */
import { spawnSync } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BUNDLE, BUNDLE_INPUTS, bundleToRun } from '../bin/entry.js';
import { buildBundle } from '../src/build-bundle.ts';

const pick = bundleToRun;

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await fsp.rm(d, { recursive: true, force: true });
});

/** A package directory with two sources and a bundle built from them at `builtFromMs`. */
async function packageDir(builtFromMs: number): Promise<string> {
  const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-bundle-entry-'));
  dirs.push(dir);
  await fsp.mkdir(nodePath.join(dir, 'src'));
  await fsp.mkdir(nodePath.join(dir, 'dist'));
  const past = new Date(builtFromMs - 60_000);
  const inputs = ['src/agent.ts', 'src/cli.ts'];
  const stamps: [number, number][] = [];
  for (const f of inputs) {
    await fsp.writeFile(nodePath.join(dir, f), '// source\n');
    await fsp.utimes(nodePath.join(dir, f), past, past);
    const st = await fsp.stat(nodePath.join(dir, f));
    stamps.push([st.mtimeMs, st.size]);
  }
  await fsp.writeFile(nodePath.join(dir, BUNDLE), '// bundle\n');
  await fsp.writeFile(nodePath.join(dir, BUNDLE_INPUTS), JSON.stringify({ builtFromMs, inputs, stamps }));
  return dir;
}

describe('which code `weft` runs', () => {
  it('runs the bundle while no source changed after its build started', async () => {
    const dir = await packageDir(Date.now());
    expect(pick(dir, {})).toEqual({ bundle: nodePath.join(dir, BUNDLE) });
  });

  it('runs the sources, saying why, once a source changed after the build started', async () => {
    const built = Date.now() - 10_000;
    const dir = await packageDir(built);
    // Changed during the build (after it started, before the bundle was written): stale too.
    const during = new Date(built + 1);
    await fsp.utimes(nodePath.join(dir, 'src/agent.ts'), during, during);
    expect(pick(dir, {})).toEqual({ reason: 'src/agent.ts changed after it was built' });
  });

  it('runs the sources once a source is not the file it was built from (dated back, or another size)', async () => {
    // A package installed again keeps its tarball's dates; a checkout may date a file back.
    const dir = await packageDir(Date.now());
    const older = new Date(Date.now() - 3_600_000);
    await fsp.utimes(nodePath.join(dir, 'src/cli.ts'), older, older);
    expect(pick(dir, {})).toEqual({ reason: 'src/cli.ts changed after it was built' });
    const again = await packageDir(Date.now());
    const st = await fsp.stat(nodePath.join(again, 'src/agent.ts'));
    await fsp.writeFile(nodePath.join(again, 'src/agent.ts'), '// another source\n');
    await fsp.utimes(nodePath.join(again, 'src/agent.ts'), st.atime, st.mtime);
    expect(pick(again, {})).toEqual({ reason: 'src/agent.ts changed after it was built' });
  });

  it('runs the sources when a source it was built from is gone', async () => {
    const dir = await packageDir(Date.now());
    await fsp.rm(nodePath.join(dir, 'src/cli.ts'));
    expect(pick(dir, {}).reason).toBe('src/cli.ts, which it was built from, is gone');
  });

  it('runs the sources when the list of inputs is missing or malformed (a half-written build)', async () => {
    const dir = await packageDir(Date.now());
    await fsp.writeFile(nodePath.join(dir, BUNDLE_INPUTS), '{"builtFromMs":1,"inputs":["src/cli.ts"]}');
    expect(pick(dir, {}).reason).toBe(`${BUNDLE_INPUTS} is malformed`);
    await fsp.rm(nodePath.join(dir, BUNDLE_INPUTS));
    expect(pick(dir, {}).reason).toBe(`${BUNDLE_INPUTS} is missing or unreadable`);
  });

  it('runs the sources without a word when there is no bundle, or when WEFT_FROM_SOURCES=1', async () => {
    const dir = await packageDir(Date.now());
    expect(pick(dir, { WEFT_FROM_SOURCES: '1' })).toEqual({ reason: undefined });
    await fsp.rm(nodePath.join(dir, BUNDLE));
    expect(pick(dir, {})).toEqual({ reason: undefined });
  });

  it(
    'builds the real sources into a bundle that runs and lists every source',
    { timeout: 60_000 },
    async () => {
      const out = await fsp.mkdtemp(nodePath.join(import.meta.dirname, '../dist/test-'));
      dirs.push(out);
      const { bundle, inputs } = await buildBundle({ outDir: out });
      expect(inputs.inputs).toContain('src/cli.ts');
      expect(inputs.inputs).toContain('src/agent.ts');
      expect(inputs.inputs.some((p) => p.startsWith('../ui-contract/src/'))).toBe(true);
      // Workspace sources and the few pure-JavaScript packages bundled, never the native one.
      expect(inputs.inputs.some((p) => p.includes('node_modules/ws/'))).toBe(true);
      expect(inputs.inputs.some((p) => p.includes('better-sqlite3'))).toBe(false);
      expect(inputs.stamps).toHaveLength(inputs.inputs.length);
      const listed = JSON.parse(
        await fsp.readFile(nodePath.join(out, 'weft.inputs.json'), 'utf8'),
      ) as unknown;
      expect(listed).toEqual(inputs);
      // The bundle's own argument checks, as from the sources (cli.test.ts).
      const r = spawnSync(process.execPath, [bundle, 'agent'], { encoding: 'utf8', timeout: 60_000 });
      expect(r.status).toBe(2);
      expect(r.stderr).toContain('usage: weft agent');
    },
  );
});

/**
 * The process-folder rules (CONVENTIONS item 3), checked on the import graph: the renderer
 * imports only renderer and common files (never Node or Electron), and common imports only
 * common files, zod and the UI contract package (itself pure zod, checked in its own tests).
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { describe, expect, it } from 'vitest';

const src = nodePath.resolve(import.meta.dirname, '..', 'src');

async function files(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await fsp.readdir(dir, { withFileTypes: true })) {
    const p = nodePath.join(dir, e.name);
    if (e.isDirectory()) out.push(...(await files(p)));
    else if (/\.m?ts$/.test(e.name)) out.push(p);
  }
  return out;
}

async function imports(file: string): Promise<string[]> {
  const text = await fsp.readFile(file, 'utf8');
  return [
    ...text.matchAll(/(?:^|\n)\s*(?:import|export)[^'"]*?from\s+['"]([^'"]+)['"]/g),
    ...text.matchAll(/import\(\s*['"]([^'"]+)['"]\s*\)/g),
  ].map((m) => m[1] ?? '');
}

function inside(from: string, spec: string, folders: string[]): boolean {
  if (!spec.startsWith('.')) return false;
  const target = nodePath.resolve(nodePath.dirname(from), spec);
  return folders.some((f) => target.startsWith(nodePath.join(src, f) + nodePath.sep));
}

describe('process folders', () => {
  it('renderer imports only renderer and common', async () => {
    const bad: string[] = [];
    for (const f of await files(nodePath.join(src, 'renderer'))) {
      for (const spec of await imports(f)) {
        if (!inside(f, spec, ['renderer', 'common'])) bad.push(`${nodePath.relative(src, f)} → ${spec}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('common imports only common, zod and @weft/ui-contract', async () => {
    const bad: string[] = [];
    for (const f of await files(nodePath.join(src, 'common'))) {
      for (const spec of await imports(f)) {
        if (spec !== 'zod' && spec !== '@weft/ui-contract' && !inside(f, spec, ['common']))
          bad.push(`${nodePath.relative(src, f)} → ${spec}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('preload imports only electron, preload and common', async () => {
    const bad: string[] = [];
    for (const f of await files(nodePath.join(src, 'preload'))) {
      for (const spec of await imports(f)) {
        if (spec !== 'electron' && !inside(f, spec, ['preload', 'common'])) bad.push(spec);
      }
    }
    expect(bad).toEqual([]);
  });
});

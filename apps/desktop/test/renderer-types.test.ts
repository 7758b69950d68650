/**
 * The renderer is typechecked with the DOM library in its own program
 * (tsconfig.renderer.json); the root program has no DOM types, so this test runs it.
 */
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import * as nodePath from 'node:path';
import { describe, expect, it } from 'vitest';

describe('renderer', () => {
  it('typechecks against the DOM library', () => {
    const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
    const project = nodePath.resolve(import.meta.dirname, '..', 'tsconfig.renderer.json');
    let output = '';
    try {
      execFileSync(process.execPath, [tsc, '-p', project], { encoding: 'utf8', stdio: 'pipe' });
    } catch (e) {
      output = String((e as { stdout?: string }).stdout ?? e);
    }
    expect(output).toBe('');
  }, 120_000);
});

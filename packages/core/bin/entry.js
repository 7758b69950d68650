// Which code `weft` runs (issue #16): the built bundle dist/weft.mjs (src/build-bundle.ts)
// when it is there and no source it was built from has changed since its build started;
// otherwise the TypeScript sources through tsx. A stale bundle never runs: bin/weft.js says
// why it runs the sources instead. Plain JavaScript, run before any loader is registered.
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

export const BUNDLE = 'dist/weft.mjs';
export const BUNDLE_INPUTS = 'dist/weft.inputs.json';

/**
 * The bundle to run from the package directory `dir`, or why not: `{ bundle }` (an absolute
 * path) or `{ reason }` (undefined when there is simply no bundle: a checkout not built yet).
 * `WEFT_FROM_SOURCES=1` always takes the sources.
 */
export function bundleToRun(dir, env = process.env) {
  if (env.WEFT_FROM_SOURCES === '1') return { reason: undefined };
  const bundle = join(dir, BUNDLE);
  try {
    statSync(bundle);
  } catch {
    return { reason: undefined };
  }
  let list;
  try {
    list = JSON.parse(readFileSync(join(dir, BUNDLE_INPUTS), 'utf8'));
  } catch {
    return { reason: `${BUNDLE_INPUTS} is missing or unreadable` };
  }
  if (typeof list?.builtFromMs !== 'number' || !Array.isArray(list.inputs) || list.inputs.length === 0)
    return { reason: `${BUNDLE_INPUTS} is malformed` };
  for (const input of list.inputs) {
    let mtimeMs;
    try {
      mtimeMs = statSync(join(dir, input)).mtimeMs;
    } catch {
      return { reason: `${input}, which it was built from, is gone` };
    }
    if (mtimeMs > list.builtFromMs) return { reason: `${input} changed after it was built` };
  }
  return { bundle };
}

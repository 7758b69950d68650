// Which code `weft` runs (issue #16): the built bundle dist/weft.mjs (src/build-bundle.ts)
// when it is there and every source it was built from is as it was then (the same date and
// size, not modified since the build started);
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
  if (
    typeof list?.builtFromMs !== 'number' ||
    !Array.isArray(list.inputs) ||
    list.inputs.length === 0 ||
    !Array.isArray(list.stamps) ||
    list.stamps.length !== list.inputs.length
  )
    return { reason: `${BUNDLE_INPUTS} is malformed` };
  for (let i = 0; i < list.inputs.length; i++) {
    const input = list.inputs[i];
    let st;
    try {
      st = statSync(join(dir, input));
    } catch {
      return { reason: `${input}, which it was built from, is gone` };
    }
    // Modified after the build started, or not the file it was built from (other date or size).
    const [mtimeMs, size] = list.stamps[i] ?? [];
    if (st.mtimeMs > list.builtFromMs || st.mtimeMs !== mtimeMs || st.size !== size)
      return { reason: `${input} changed after it was built` };
  }
  return { bundle };
}

#!/usr/bin/env -S MALLOC_MMAP_THRESHOLD_=131072 node --max-semi-space-size=4
// Entry point of the `weft` command: the built bundle dist/weft.mjs when it is up to date
// with the sources (`npm run build -w @weft/core`; bin/entry.js decides), else the
// TypeScript sources through tsx — a start from the bundle costs about 0.35 CPU-seconds of
// module loading, through tsx about 1.2 (issue #16). A stale bundle never runs: the sources
// do, and a line on stderr says why.
//
// How the agent runs (issue #16, measured with bench/many-files.bench.ts at 100,000 files):
// - young generation of 4 MiB semi-spaces instead of V8's 16: the agent's live set is large
//   and long-lived (the queue, the scan's entries); with 16 MiB semi-spaces a first sync held
//   ~55 MiB more V8 heap and used ~17 % more CPU (more survivors copied per scavenge);
// - glibc's mmap threshold fixed at its default 128 KiB: once a freed 4 MiB bundle buffer
//   raised it (glibc's dynamic threshold), bundles came from the main heap, which only shrinks
//   from its top — 122 MiB of it by the end of an upload, 55 MiB with the threshold fixed
//   (other C libraries ignore the variable).
// Both are on the #! line, so `node bin/weft.js` (the tests) runs without them; the benches
// read them from here.
import { dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { bundleToRun } from './entry.js';

const run = bundleToRun(dirname(dirname(fileURLToPath(import.meta.url))));
if (run.bundle) await import(pathToFileURL(run.bundle).href);
else {
  if (run.reason)
    process.stderr.write(
      `weft: not running the built bundle (${run.reason}); running the sources instead — \`npm run build -w @weft/core\` builds it again\n`,
    );
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli.ts');
}

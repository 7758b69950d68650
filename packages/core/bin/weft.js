#!/usr/bin/env -S MALLOC_MMAP_THRESHOLD_=131072 node --max-semi-space-size=4 --heap-growing-percent=30
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
//   (other C libraries ignore the variable);
// - V8's old generation allowed to grow by 30 % over the live set before a full collection,
//   instead of V8's dynamic factor (up to 2× and more here): at 100,000 files the live heap is
//   ~55-65 MiB and the heap stood at 120-130 MiB at the end of the scan and through the upload,
//   the garbage in it most of the peak; with the flag 83-86 MiB at most (peak RSS 264 -> 192
//   MiB with the bundle buffers reused, restart 203 -> 147), for ~5-15 % more agent CPU at
//   10,000 files (7.4 and 6.7 vs 6.3 CPU-s, load ~20).
// All are on the #! line, so `node bin/weft.js` (the tests) runs without them; they are also
// in ./launch-settings.js (which this line must match), which the benches and the e2e harness
// read.
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

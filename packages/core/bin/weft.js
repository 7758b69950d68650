#!/usr/bin/env -S node --max-semi-space-size=4
// Entry point of the `weft` command: runs the TypeScript sources through tsx.
//
// Young generation of 4 MiB semi-spaces instead of V8's 16 (issue #16): the agent's live set
// is large and long-lived (the queue, the scan's entries), and with 16 MiB semi-spaces a
// 100,000-file first sync held ~55 MiB more of V8 heap and spent ~17 % more CPU (more
// survivors copied per scavenge); measured with bench/many-files.bench.ts. A flag, so it is
// on the #! line: `node bin/weft.js` (tests) runs without it; the benches pass it.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli.ts');

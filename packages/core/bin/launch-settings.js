// How the agent's node runs (issue #16; why each: bin/weft.js's comment): the environment and
// node flags of bin/weft.js's #! line, for whatever starts an agent as a process of its own
// (the benches, the e2e harness) — `node bin/weft.js` alone runs without them. The #! line
// must say the same (test/launch-settings.test.ts). Inside another program (the desktop app's
// Electron main process) they cannot apply: a C library reads its variables, and V8 its heap
// flags, when the process starts.

/** Environment variables the agent's process starts with. */
export const AGENT_ENV = Object.freeze({ MALLOC_MMAP_THRESHOLD_: '131072' });

/** Node flags the agent's process starts with. */
export const AGENT_NODE_FLAGS = Object.freeze(['--max-semi-space-size=4', '--heap-growing-percent=30']);

/** The #! line bin/weft.js must have. */
export function shebang() {
  const env = Object.entries(AGENT_ENV).map(([k, v]) => `${k}=${v}`);
  return `#!/usr/bin/env -S ${[...env, 'node', ...AGENT_NODE_FLAGS].join(' ')}`;
}

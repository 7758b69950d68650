// A no-change restart of the agent (issue #16: ≤ 3 s at 100,000 files): a `weft agent`
// process syncs the synthetic tree once (bench/agent-procs.ts, fs tier), then is started
// again on the same state K times from the built bundle (dist/weft.mjs, built when stale)
// and K times from the TypeScript sources (WEFT_FROM_SOURCES=1), alternating. Prints for each
// restart: start → idle (the full rescan of the unchanged folder), the agent's CPU-seconds
// (from /proc: comparable on a loaded machine, where wall times are not), the slowest status
// answer, and the load average. Figures are printed, never asserted.
//
//   npx tsx bench/agent-restart.bench.ts [files, default 100000] [K, default 3]
//
// WEFT_BENCH_WORK=DIR: the device is enrolled once; a kept DIR's proxy starts on another
// port, and the agent, given the same device token, records the new address (agent.ts).
//
// WEFT_LOOP_TRACE_MS=50 in the environment makes each agent log what held its event loop
// (packages/core/src/loop-trace.ts); WEFT_BENCH_AGENT_NODE_ARGS adds node flags
// ('--cpu-prof --cpu-prof-dir=/tmp/prof'), bench/loop-stalls.ts reads both.
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import { join } from 'node:path';
import { ProxyClient } from '@weft/core';
import { load, runAgent, startProxy, syntheticTree } from './agent-procs.ts';

const n = Number(process.argv[2] ?? 100_000);
const k = Number(process.argv[3] ?? 3);
const folder = await syntheticTree(n);
// WEFT_BENCH_WORK=DIR keeps the proxy's data and the agent's state there: a later run with the
// same DIR (and the same tree) skips the first sync and only restarts.
const kept = process.env.WEFT_BENCH_WORK;
const work = kept ?? (await fsp.mkdtemp(join(os.tmpdir(), 'weft-restart-')));
await fsp.mkdir(work, { recursive: true });
const synced = join(work, `synced-${n}`);
const admin = randomBytes(16).toString('hex');
const proxy = await startProxy(work, admin, { type: 'fs' });
try {
  const tokenFile = join(work, 'token');
  const again = kept !== undefined && (await fsp.stat(synced).catch(() => undefined)) !== undefined;
  if (!again) {
    const { token } = await ProxyClient.enrol(proxy.url, {
      user: 'bench',
      deviceName: 'bench',
      adminToken: admin,
    });
    await fsp.writeFile(tokenFile, token, { mode: 0o600 });
  }
  const agent = {
    folder,
    state: join(work, 'state'),
    server: proxy.url,
    tokenFile,
    files: n,
    limitMs: 3_600_000,
  };
  if (!again) {
    const first = await runAgent(agent);
    console.log(
      `${n.toLocaleString('en')} files, first sync: idle ${(first.idleMs / 1000).toFixed(1)} s, CPU ${first.cpuSeconds.toFixed(1)} s, load ${load()}`,
    );
    if (first.idleMs === 0) throw new Error('the first sync did not reach idle');
    await fsp.writeFile(synced, '');
  }
  console.log('restart  from     → idle (s)  agent CPU (s)  slowest status (ms)  load');
  for (let i = 0; i < 2 * k; i++) {
    const from = i % 2 === 0 ? 'bundle' : 'sources';
    process.env.WEFT_FROM_SOURCES = from === 'sources' ? '1' : '';
    const r = await runAgent(agent);
    console.log(
      `${String(Math.floor(i / 2) + 1).padStart(7)}  ${from.padEnd(7)}  ${(r.idleMs / 1000).toFixed(1).padStart(11)}  ${r.cpuSeconds.toFixed(2).padStart(13)}  ${r.slowestStatusMs.toFixed(0).padStart(19)}  ${load()}`,
    );
  }
} finally {
  await proxy.stop();
  if (!kept) await fsp.rm(work, { recursive: true, force: true });
}

/**
 * Failover time of the proxy cluster (issue #18): three instances on one PostgreSQL and
 * s3proxy; a client writes (one small file per request, the agent's ProxyClient) to the
 * controller instance without pause; the controller is `kill -9`ed; the client moves to
 * the next instance as soon as a request fails to connect. Measured per kill, from the
 * kill:
 *  - to the first write acknowledged by another instance (what a user waits for);
 *  - to another instance holding the controller lease (the lease row, PostgreSQL's clock;
 *    bounded by the lease TTL, cluster.leaseTtlMs, default 5 s).
 * The killed instance is restarted before the next kill. Printed, never asserted: median
 * and max over the kills.
 *
 *   npx tsx bench/cluster-failover.bench.ts [--kills 20]
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { ProxyClient } from '@weft/core';
import { startS3Proxy } from '@weft/providers/testing';
import { type ClusterInstance, startCluster } from '../e2e/src/cluster-harness.ts';
import { load } from './agent-procs.ts';

const { values } = parseArgs({ options: { kills: { type: 'string', default: '20' } } });
const KILLS = Number(values.kills);

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0
    ? 0
    : s.length % 2
      ? s[(s.length - 1) / 2]!
      : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

async function main(): Promise<void> {
  const s3 = await startS3Proxy({ bucket: 'weft-failover-bench' });
  const { stop: stopS3, ...endpoint } = s3;
  const cluster = await startCluster({ instances: 3, s3: endpoint, config: { opLogFile: undefined } });
  const loadBefore = load();
  const toWrite: number[] = [];
  const toLease: number[] = [];
  try {
    const first = await cluster.waitController();
    const { token } = await ProxyClient.enrol(first.url, {
      user: 'bench',
      deviceName: 'writer',
      adminToken: cluster.adminToken,
    });
    for (let k = 0; k < KILLS; k++) {
      const ctl = await cluster.waitController();
      // The writer is on the controller, writing without pause.
      let at: ClusterInstance = ctl;
      let killedAt = 0;
      let firstWriteAfter = 0;
      let n = 0;
      const writer = (async () => {
        while (firstWriteAfter === 0) {
          const client = new ProxyClient({ baseUrl: at.url, token });
          try {
            const [r] = await client.ops([
              { op: 'mkdir', path: `k${k}/w${n++}-${randomBytes(2).toString('hex')}` },
            ]);
            if (r?.status === 'applied' && killedAt > 0 && at !== ctl) firstWriteAfter = performance.now();
          } catch {
            // Not answering: the next instance alive (an agent's failover does the same).
            if (killedAt > 0) at = cluster.instances[(at.index + 1) % cluster.instances.length]!;
          }
        }
      })();
      await new Promise((r) => setTimeout(r, 300));
      killedAt = performance.now();
      await cluster.kill(ctl.index);
      const next = await cluster.waitController(ctl, 60_000);
      const leaseAt = performance.now();
      await writer;
      toWrite.push(firstWriteAfter - killedAt);
      toLease.push(leaseAt - killedAt);
      console.log(
        `kill ${k + 1}: ${ctl.id} → first write on another ${(firstWriteAfter - killedAt).toFixed(0)} ms, ` +
          `lease on ${next.id} ${(leaseAt - killedAt).toFixed(0)} ms`,
      );
      await cluster.start(ctl.index);
    }
  } finally {
    await cluster.stop();
    await stopS3();
  }
  console.log(
    `\ncluster failover — ${KILLS} kill -9 of the controller, 3 instances (load ${loadBefore} → ${load()})`,
  );
  console.log(
    `  kill → first write acknowledged by another instance: median ${median(toWrite).toFixed(0)} ms, max ${Math.max(...toWrite).toFixed(0)} ms`,
  );
  console.log(
    `  kill → another instance holds the controller lease:  median ${median(toLease).toFixed(0)} ms, max ${Math.max(...toLease).toFixed(0)} ms`,
  );
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});

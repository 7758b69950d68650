// What the cluster's shared apply slots (src/cluster/admission.ts, cluster.applySlots) cost per
// operation: two instances' ordering + admission layers (test/fop-instance.ts) on a throwaway
// PostgreSQL apply N no-op operations (one in ten "large", 1 MB, the rest 100 bytes, in four
// namespaces, every path distinct, `concurrency` 8 each), with no shared budget (0), a budget
// never full (16 = 2 × 8: the fast path only) and a budget always full (2: every operation
// queues in op_queue). Printed: this process's CPU ms per op, PostgreSQL's (every postgres
// process's utime + stime from /proc), wall seconds and the load average. Figures in
// docs/deployment.md ("One queue for every instance"); nothing is asserted.
//
//   N=2000 node --import tsx packages/proxy-server/test/cluster-fop.bench.ts
import * as fs from 'node:fs';
import { connect, migratePostgres } from '../src/store/postgres-db.ts';
import { startPostgres } from '../src/testing/postgres.ts';
import { fopInstance } from './fop-instance.ts';
import { adminSql } from './pg-admin.ts';

function pgCpuTicks(): number {
  let t = 0;
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (!name.startsWith('postgres')) continue;
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      t += Number(f[11]) + Number(f[12]);
    } catch {
      /* gone */
    }
  }
  return t;
}
const pg = await startPostgres(adminSql);
const N = Number(process.env.N ?? 2000);
try {
  for (const slots of [0, 16, 2, 16, 0]) {
    const url = await pg.createDatabase();
    const sql = connect(url, 1);
    await migratePostgres(sql);
    await sql.end();
    const a = await fopInstance(url, 'a', { slots, now: Date.now, aliveMs: 5000 });
    const b = await fopInstance(url, 'b', { slots, now: Date.now, aliveMs: 5000 });
    await Promise.all(
      [a, b].map((i) =>
        i.scheduler.submit({ namespace: 'w', paths: ['warm'], bytes: 0, run: async () => {} }),
      ),
    );
    const c0 = process.cpuUsage();
    const p0 = pgCpuTicks();
    const w0 = performance.now();
    await Promise.all(
      Array.from({ length: N }, (_, k) =>
        (k % 2 ? a : b).scheduler.submit({
          namespace: 'n' + (k % 4),
          paths: [`p${k}`],
          bytes: k % 10 === 0 ? 1e6 : 100,
          run: async () => {},
        }),
      ),
    );
    const wall = performance.now() - w0;
    const c = process.cpuUsage(c0);
    const pgs = (pgCpuTicks() - p0) / 100;
    process.stdout.write(
      JSON.stringify({
        slots,
        N,
        nodeCpuMsPerOp: +((c.user + c.system) / 1000 / N).toFixed(3),
        pgCpuMsPerOp: +((pgs * 1000) / N).toFixed(3),
        wallS: +(wall / 1000).toFixed(2),
        load: fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' '),
      }) + '\n',
    );
    await a.close();
    await b.close();
  }
} finally {
  await pg.stop();
}

// Where an agent's memory goes (issue #16): loaded into a node process with `--import`, it
// writes a JSON line every 100 ms to $WEFT_MEM_TRACE.<pid> — the resident set split as
// /proc/self/status splits it (RssAnon, RssFile, RssShmem, VmHWM) beside V8's view
// (process.memoryUsage(): heapUsed, heapTotal, external, arrayBuffers), MiB — with
// /proc/self/smaps_rollup at each new peak above 150 MiB. Nothing happens without the variable.
//
//   WEFT_MEM_TRACE=/tmp/agent WEFT_BENCH_AGENT_NODE_ARGS="--import $PWD/bench/mem-trace.mjs" \
//     WEFT_BENCH_TRACE=1 npx tsx bench/many-files.bench.ts 100000
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

const base = process.env.WEFT_MEM_TRACE;
if (base) {
  const out = `${base}.${process.pid}`;
  writeFileSync(out, '');
  const t0 = performance.now();
  const mib = (bytes) => Math.round(bytes / 104857.6) / 10;
  let peak = 0;
  const status = () => {
    const text = readFileSync('/proc/self/status', 'utf8');
    const kib = (key) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(text)?.[1] ?? 0);
    return {
      rss: mib(kib('VmRSS') * 1024),
      anon: mib(kib('RssAnon') * 1024),
      file: mib(kib('RssFile') * 1024),
      shmem: mib(kib('RssShmem') * 1024),
      hwm: mib(kib('VmHWM') * 1024),
    };
  };
  setInterval(() => {
    const s = status();
    const m = process.memoryUsage();
    const row = {
      t: Math.round(performance.now() - t0) / 1000,
      ...s,
      heapUsed: mib(m.heapUsed),
      heapTotal: mib(m.heapTotal),
      external: mib(m.external),
      arrayBuffers: mib(m.arrayBuffers),
    };
    if (s.rss > peak) {
      peak = s.rss;
      if (peak > 150)
        row.smaps = readFileSync('/proc/self/smaps_rollup', 'utf8')
          .split('\n')
          .filter((l) => /^(Rss|Anonymous|Private_Dirty|Shared_Clean|Private_Clean):/.test(l))
          .map((l) => l.replace(/\s+/g, ' '))
          .join('; ');
    }
    appendFileSync(out, `${JSON.stringify(row)}\n`);
  }, 100).unref();
}

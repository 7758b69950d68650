// What held the agent's event loop (issue #16): the stalls a `weft agent` run logged with
// WEFT_LOOP_TRACE_MS (packages/core/src/loop-trace.ts) named from a CPU profile of the same
// run (node --cpu-prof; same monotonic clock). For the stalls with the most CPU, prints the
// frames most of the stall's samples share and the functions the samples were in.
//
//   WEFT_LOOP_TRACE_MS=50 WEFT_BENCH_AGENT_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof' \
//     npx tsx bench/many-files.bench.ts 100000 2> /tmp/prof/stderr
//   npx tsx bench/loop-stalls.ts /tmp/prof/CPU.….cpuprofile /tmp/prof/stderr [how many]
//
// Run the agent from the bundle (`npm run build -w @weft/core`) for line numbers that mean
// something (dist/weft.mjs); through tsx they are the transformed modules'.
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

const [profileFile, stderrFile, howMany] = process.argv.slice(2);
if (!profileFile || !stderrFile) {
  console.error('usage: npx tsx bench/loop-stalls.ts PROFILE.cpuprofile AGENT-STDERR [how many]');
  process.exit(2);
}
const p = JSON.parse(readFileSync(profileFile, 'utf8')) as Profile;
const stalls = [
  ...readFileSync(stderrFile, 'utf8').matchAll(/weft: loop held (\d+) ms, CPU (\d+) ms, at (\d+)–(\d+) µs/g),
].map((m) => ({ held: Number(m[1]), cpu: Number(m[2]), from: Number(m[3]), to: Number(m[4]) }));
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const name = (n: Node): string => {
  const f = n.callFrame;
  const where = f.url.replace(/^.*\/(packages|node_modules)\//, '$1/').replace(/^file:\/\//, '');
  return `${f.functionName || '(anonymous)'} ${where}:${f.lineNumber + 1}`;
};
const times: number[] = [];
for (let i = 0, t = p.startTime; i < p.samples.length; i++) times.push((t += p.timeDeltas[i] ?? 0));
const inProfile = stalls.filter((s) => s.to >= p.startTime && s.from <= (times.at(-1) ?? 0));
console.log(
  `${stalls.length} stalls logged, ${inProfile.length} within the profile (${((times.length && (times.at(-1) ?? 0) - p.startTime) / 1e6).toFixed(1)} s)`,
);
for (const s of inProfile.sort((a, b) => b.cpu - a.cpu).slice(0, Number(howMany ?? 15))) {
  const incl = new Map<string, number>();
  const self = new Map<string, number>();
  let n = 0;
  for (let i = 0; i < times.length; i++) {
    if ((times[i] ?? 0) < s.from || (times[i] ?? 0) > s.to) continue;
    const leaf = byId.get(p.samples[i] ?? -1);
    if (!leaf || leaf.callFrame.functionName === '(idle)') continue;
    n += 1;
    self.set(name(leaf), (self.get(name(leaf)) ?? 0) + 1);
    const seen = new Set<string>();
    for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
      const node = byId.get(id);
      if (!node) break;
      const k = name(node);
      if (!seen.has(k)) incl.set(k, (incl.get(k) ?? 0) + 1);
      seen.add(k);
    }
  }
  const pct = (c: number): string => `${Math.round((100 * c) / Math.max(1, n))}%`;
  const shared = [...incl].filter(([k, c]) => c >= 0.5 * n && !k.startsWith('(root)')).slice(-8);
  const top = [...self].sort((a, b) => b[1] - a[1]).slice(0, 5);
  console.log(
    `\nheld ${s.held} ms, CPU ${s.cpu} ms, ${((s.from - p.startTime) / 1e6).toFixed(2)} s into the profile, ${n} samples` +
      `\n  shared by most: ${shared.map(([k, c]) => `${k} ${pct(c)}`).join('\n                  ') || '—'}` +
      `\n  in: ${top.map(([k, c]) => `${k} ${pct(c)}`).join('; ')}`,
  );
}

// The inter-proxy transfer protocol (CoCloud §III-C) beside an "IFTTT-like" baseline, in the
// same run over the same throttled link: proxy A near Dropbox, proxy B near Google Drive
// (both clouds are the emulators, through the official SDK adapters), joined by a user-space
// token-bucket link (default 20 Mbit/s each way, 25 ms one-way latency).
//
//   ours:      A reads the files from Dropbox, sends metadata, then bundles / blocks / deltas
//              over one persistent peer connection; B rebuilds and uploads them to Drive.
//   baseline:  at B, every file is downloaded whole through Dropbox's API over the link and
//              uploaded whole to Drive: "IFTTT-like" one file at a time (one applet run per
//              file event), and, for (a), also as a parallel forwarder 8 files at a time (as
//              many as B uploads at once in ours).
//
// Workloads: (a) 100 × 10 KB random files (fresh files each round), (b) 10 consecutive
// versions of the typescript npm tarball (uncompressed .tar, ../shared/corpus/npm-versions.sh,
// cached in .cache/corpus), each version sent after the previous one.
// Prints time and bytes on the link for both. Figures are printed, never asserted.
//
//   npx tsx bench/inter-proxy.bench.ts [--mbit 20] [--latency 25] [--rounds 3] [--versions 10]
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startInterProxyPair } from '../e2e/src/interproxy-harness.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SCRIPT = process.env.WEFT_CORPUS_SCRIPT ?? resolve(ROOT, '../shared/corpus/npm-versions.sh');
const VERSIONS = ['5.5.2', '5.5.3', '5.5.4', '5.6.2', '5.6.3', '5.7.2', '5.7.3', '5.8.2', '5.8.3', '5.9.2'];

const { values: args } = parseArgs({
  options: {
    mbit: { type: 'string', default: '20' },
    latency: { type: 'string', default: '25' },
    rounds: { type: 'string', default: '3' },
    files: { type: 'string', default: '100' },
    versions: { type: 'string', default: String(VERSIONS.length) },
  },
});
const mbit = Number(args.mbit);
const latencyMs = Number(args.latency);
const rounds = Number(args.rounds);
const nFiles = Number(args.files);
const versions = VERSIONS.slice(0, Number(args.versions));

const corpusDir = join(ROOT, '.cache', 'corpus');
execFileSync('bash', [SCRIPT, corpusDir, 'typescript', ...versions], { stdio: 'ignore' });

const pair = await startInterProxyPair({ bitsPerSecond: mbit * 1e6, latencyMs });
const { dropbox, link } = pair;

interface Measure {
  seconds: number;
  bytes: number;
}
async function measure(fn: () => Promise<unknown>): Promise<Measure> {
  const before = link.stats.bytesUp + link.stats.bytesDown;
  const t0 = performance.now();
  await fn();
  return {
    seconds: (performance.now() - t0) / 1000,
    bytes: link.stats.bytesUp + link.stats.bytesDown - before,
  };
}

const fmtBytes = (n: number): string =>
  n >= 1e6 ? `${(n / 1e6).toFixed(2)} MB` : n >= 1e3 ? `${(n / 1e3).toFixed(1)} KB` : `${n} B`;
const rows: string[][] = [];
/** One table row: ours beside the IFTTT-like baseline (1 file at a time) and a parallel forwarder (8). */
const row = (
  name: string,
  ours: Measure,
  ifttt: Measure,
  parallel: Measure | undefined,
  extra = '',
): void => {
  rows.push([
    name,
    `${ours.seconds.toFixed(2)} s`,
    fmtBytes(ours.bytes),
    `${ifttt.seconds.toFixed(2)} s`,
    fmtBytes(ifttt.bytes),
    `${(ifttt.seconds / ours.seconds).toFixed(2)}×`,
    `${(100 * (1 - ours.seconds / ifttt.seconds)).toFixed(1)} %`,
    parallel ? `${parallel.seconds.toFixed(2)} s` : '(same)',
    parallel ? `${(parallel.seconds / ours.seconds).toFixed(2)}×` : '',
    extra,
  ]);
};
const sum = (ms: Measure[]): Measure => ({
  seconds: ms.reduce((s, m) => s + m.seconds, 0),
  bytes: ms.reduce((s, m) => s + m.bytes, 0),
});

try {
  // (a) 100 × 10 KB random files, fresh each round.
  const oursA: Measure[] = [];
  const iftttA: Measure[] = [];
  const parallelA: Measure[] = [];
  for (let r = 0; r < rounds; r++) {
    const dir = `a${r}`;
    await dropbox.mkdir(dir);
    const paths = Array.from({ length: nFiles }, (_, i) => `${dir}/doc-${String(i).padStart(3, '0')}.bin`);
    for (const p of paths) await dropbox.write(p, randomBytes(10_000));
    const ours = await measure(async () => {
      const out = await pair.forward(paths);
      const bad = out.filter((o) => o.status !== 'committed');
      if (bad.length > 0)
        throw new Error(`ours: ${bad.length} files not committed: ${JSON.stringify(bad[0])}`);
    });
    const ifttt = await measure(() => pair.baseline(paths, 1));
    const parallel = await measure(() => pair.baseline(paths, 8));
    oursA.push(ours);
    iftttA.push(ifttt);
    parallelA.push(parallel);
    row(`(a) ${nFiles} × 10 KB, round ${r + 1}`, ours, ifttt, parallel);
  }
  row(`(a) total of ${rounds} rounds`, sum(oursA), sum(iftttA), sum(parallelA));

  // (b) consecutive typescript tarballs at one path (one file: both baselines are the same).
  const oursB: Measure[] = [];
  const baseB: Measure[] = [];
  await dropbox.mkdir('b');
  for (const v of versions) {
    const tar = await readFile(join(corpusDir, `typescript-${v}.tar`));
    await dropbox.write('b/typescript.tar', tar);
    let mode = '';
    const ours = await measure(async () => {
      const [o] = await pair.forward(['b/typescript.tar']);
      if (o?.status !== 'committed') throw new Error(`ours: ${JSON.stringify(o)}`);
      mode = `${o.mode}${o.compressed ? '+deflate' : ''}, ${(tar.byteLength / 1e6).toFixed(1)} MB`;
    });
    // Step 5 (block-size history) runs when B is idle: not on the clock, and not during the baseline.
    await pair.proxyB.peerLink?.receiver.whenIdle();
    const base = await measure(() => pair.baseline(['b/typescript.tar'], 1));
    oursB.push(ours);
    baseB.push(base);
    row(`(b) typescript ${v}`, ours, base, undefined, mode);
  }
  row(`(b) total of ${versions.length} versions`, sum(oursB), sum(baseB), undefined);
} finally {
  await pair.close();
}

const header = [
  'workload',
  'ours time',
  'ours bytes',
  'IFTTT-like time',
  'IFTTT-like bytes',
  'speed-up',
  'time saved',
  'parallel fwd (8) time',
  'speed-up vs it',
  'ours sent as',
];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
const line = (cells: string[]): string => `| ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(' | ')} |`;
console.log(
  `\ninter-proxy bench: link ${mbit} Mbit/s each way, ${latencyMs} ms one-way latency (token bucket, user space); ` +
    `bytes = both directions on the link; IFTTT-like = each file downloaded whole over the link and uploaded whole, ` +
    `one file at a time; parallel fwd = the same, 8 files at a time (B uploads 8 at a time in ours too)\n`,
);
console.log(line(header));
console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
for (const r of rows) console.log(line(r));
console.log('\ngoals: (a) ≥ 2× faster, (b) ≥ 60 % less time (CoCloud: 1.56× and 61.8 % on real WAN links)');

/**
 * The four-cloud shared-folder scenario (issue 7: "fixed seed in CI (shorter) and with a
 * random seed in bench/") with a random seed: Dropbox, Google Drive and OneDrive emulators
 * and Weft storage, served by the proxy's mirror, random direct operations on all four
 * under 5 % injected 429/503 and a proxy restart half-way (e2e/test/share-mirror.test.ts).
 *
 * Prints the seed (re-run a failure with WEFT_SEED=<seed>), the operations made, the faults
 * injected per cloud, the time from the end of activity until every replica converged,
 * and the API body bytes each cloud received and sent.
 *
 *   npx tsx bench/share-mirror.bench.ts [--seconds 60] [--seed n]   (or WEFT_SEED=n)
 *
 * Needs Java for s3proxy (Weft storage's object tier), as the e2e tests do.
 */
import { spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const seed = Number(arg('seed') ?? process.env.WEFT_SEED ?? randomInt(1, 2 ** 31 - 1));
const seconds = Number(arg('seconds') ?? 60);
const e2e = join(dirname(fileURLToPath(import.meta.url)), '..', 'e2e');

interface ShareResult {
  seed: number;
  operations: number;
  counts: Record<string, number>;
  operationsMs: number;
  convergeMs: number;
  files: number;
  faults: Record<string, number>;
  bytes: Record<string, { up: number; down: number }>;
  engine: Record<string, number>;
}

const mib = (n: number): string => `${(n / 1048576).toFixed(2)} MiB`;

console.log(`share-mirror bench: seed ${seed}, ${seconds} s of operations (WEFT_SEED=${seed} to repeat)`);
const child = spawn('npx', ['vitest', 'run', 'test/share-mirror.test.ts'], {
  cwd: e2e,
  env: { ...process.env, WEFT_SEED: String(seed), WEFT_SHARE_MS: String(seconds * 1000) },
  stdio: ['ignore', 'pipe', 'pipe'],
});
let output = '';
child.stdout.on('data', (d: Buffer) => (output += d.toString('utf8')));
child.stderr.on('data', (d: Buffer) => (output += d.toString('utf8')));
const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
const line = output.split('\n').find((l) => l.startsWith('SHARE_RESULT '));
if (!line) {
  console.log(output.slice(-6000));
  console.log(`FAILED before the trees were compared (exit ${code}); seed ${seed}`);
  process.exit(1);
}
const r = JSON.parse(line.slice('SHARE_RESULT '.length)) as ShareResult;
console.log(
  `operations   ${r.operations} in ${(r.operationsMs / 1000).toFixed(1)} s: ${JSON.stringify(r.counts)}`,
);
console.log(
  `faults       ${Object.entries(r.faults)
    .map(([c, n]) => `${c} ${n}`)
    .join(', ')} (injected 429/503)`,
);
console.log(`converged    ${(r.convergeMs / 1000).toFixed(1)} s after activity stopped; ${r.files} files`);
for (const [c, b] of Object.entries(r.bytes)) {
  console.log(`bytes ${c.padEnd(8)} ${mib(b.up)} up, ${mib(b.down)} down`);
}
console.log(`engine       ${JSON.stringify(r.engine)}`);
if (code !== 0) {
  console.log(
    output
      .split('\n')
      .filter((l) => /differing|lost:|AssertionError|Error:|^\w+ \(|^\{"seq/.test(l))
      .join('\n'),
  );
  console.log(`FAILED: replicas differ or a version was lost (exit ${code}); seed ${seed}`);
  process.exit(1);
}
console.log('OK: all four replicas identical, every version present');
